package service

import (
	"reflect"
	"slices"
	"testing"

	"github.com/alternayte/queuebox/shared/config"
	"github.com/alternayte/queuebox/shared/connect/webhook"
	"github.com/alternayte/queuebox/shared/kind"
)

// http.blockPrivateAddresses reaches the publisher, which checks every connection again
// when it is dialled.
func TestWebhookConfigCarriesBlockPrivateAddresses(t *testing.T) {
	t.Parallel()
	for _, block := range []bool{false, true} {
		cfg := &config.Config{HTTP: config.HTTP{BlockPrivateAddresses: block}}
		d := config.NewDestination("orders-api", kind.HTTP)
		d.HTTP.BaseURL = "https://orders.example.com"
		if got := webhookConfig(cfg, d).BlockPrivateAddresses; got != block {
			t.Errorf("blockPrivateAddresses %v: the publisher got %v", block, got)
		}
	}
}

// destinations.<name>.signing reaches the publisher, both kinds with every key.
func TestWebhookConfigCarriesSigning(t *testing.T) {
	t.Parallel()
	cfg := &config.Config{}
	d := config.NewDestination("orders-api", kind.HTTP)
	d.HTTP.BaseURL = "https://orders.example.com"
	if got := webhookConfig(cfg, d).Signing; got.Kind != webhook.SigningNone {
		t.Errorf("no signing block: the publisher got %v", got)
	}

	d.Signing = config.NewSigning(config.SigningStandardWebhooks)
	d.Signing.StandardWebhooks.Secrets = []config.Secret{config.NewSecret("whsec_a"), config.NewSecret("whsec_b")}
	got := webhookConfig(cfg, d).Signing
	if got.Kind != webhook.SigningStandardWebhooks || !slices.Equal(got.Secrets, []string{"whsec_a", "whsec_b"}) {
		t.Errorf("standard-webhooks: the publisher got %v (secrets %d)", got, len(got.Secrets))
	}

	d.Signing = config.NewSigning(config.SigningHMAC)
	d.Signing.HMAC.Secret = config.NewSecret("key")
	d.Signing.HMAC.HeaderName = "X-Hub-Signature-256"
	d.Signing.HMAC.Algorithm = config.HmacSHA512
	got = webhookConfig(cfg, d).Signing
	want := webhook.Signing{Kind: webhook.SigningHMAC, Secret: "key", HeaderName: "X-Hub-Signature-256", Algorithm: "HmacSHA512", Prefix: "sha256="}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("hmac: the publisher got %v, want %v", got, want)
	}
}
