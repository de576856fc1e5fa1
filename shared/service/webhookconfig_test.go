package service

import (
	"testing"

	"github.com/alternayte/queuebox/shared/config"
)

// http.blockPrivateAddresses reaches the publisher, which checks every connection again
// when it is dialled.
func TestWebhookConfigCarriesBlockPrivateAddresses(t *testing.T) {
	t.Parallel()
	for _, block := range []bool{false, true} {
		cfg := &config.Config{HTTP: config.HTTP{BlockPrivateAddresses: block}}
		d := config.NewDestination("orders-api", config.DestinationHTTP)
		d.HTTP.BaseURL = "https://orders.example.com"
		if got := webhookConfig(cfg, d).BlockPrivateAddresses; got != block {
			t.Errorf("blockPrivateAddresses %v: the publisher got %v", block, got)
		}
	}
}
