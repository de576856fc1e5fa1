//go:build !queuebox_no_rabbitmq

package rabbitmq_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/alternayte/queuebox/shared/connect/rabbitmq"
)

// WithDefaults fills the defaults of spec/23 and keeps what is set.
func TestConfigWithDefaults(t *testing.T) {
	t.Parallel()
	got := rabbitmq.Config{URL: brokerURL, Exchange: "x"}.WithDefaults()
	if got.ExchangeType != rabbitmq.ExchangeTopic || got.RoutingKeyTemplate != "{{ topic }}" || got.DeliveryMode != rabbitmq.DeliveryPersistent {
		t.Errorf("WithDefaults = %v, want exchangeType topic, routing key {{ topic }}, persistent", got)
	}
	set := rabbitmq.Config{ExchangeType: rabbitmq.ExchangeFanout, RoutingKeyTemplate: "k", DeliveryMode: rabbitmq.DeliveryTransient}
	if got := set.WithDefaults(); fmt.Sprint(got) != fmt.Sprint(set) {
		t.Errorf("WithDefaults = %v, want %v unchanged", got, set)
	}
}

// A Config prints without the password of its URL or the values of its static headers.
func TestConfigPrintsNoSecret(t *testing.T) {
	t.Parallel()
	c := rabbitmq.Config{URL: "amqp://guest:s3cr3t-pa55@host/", Exchange: "x", Headers: map[string]string{"x-token": "header-s3cr3t"}}
	for _, verb := range []string{"%v", "%+v", "%#v", "%s"} {
		text := fmt.Sprintf(verb, c)
		if strings.Contains(text, "s3cr3t") {
			t.Errorf("%s prints %s", verb, text)
		}
		if !strings.Contains(text, "host") || !strings.Contains(text, "x-token") {
			t.Errorf("%s prints %s, want the host and the header name", verb, text)
		}
	}
}
