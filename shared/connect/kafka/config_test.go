//go:build !queuebox_no_kafka

package kafka_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/alternayte/queuebox/shared/connect/kafka"
)

// WithDefaults fills the defaults of spec/23 and keeps what is set.
func TestConfigWithDefaults(t *testing.T) {
	t.Parallel()
	got := kafka.Config{Brokers: []string{"k:9092"}, Topic: "t"}.WithDefaults()
	if got.KeyTemplate != "{{ key }}" || got.Timeout != 30*time.Second || got.SecurityProtocol != kafka.SecurityPlaintext {
		t.Errorf("WithDefaults = %v, want keyTemplate {{ key }}, 30s, PLAINTEXT", got)
	}
	set := kafka.Config{KeyTemplate: "k", Timeout: 5 * time.Second, SecurityProtocol: kafka.SecuritySSL}
	if got := set.WithDefaults(); fmt.Sprint(got) != fmt.Sprint(set) {
		t.Errorf("WithDefaults = %v, want %v unchanged", got, set)
	}
}

// A Config prints without its SASL password or the values of its static headers.
func TestConfigPrintsNoSecret(t *testing.T) {
	t.Parallel()
	c := kafka.Config{Brokers: []string{"k:9092"}, Topic: "t", SecurityProtocol: kafka.SecuritySASLSSL,
		SASLMechanism: kafka.SASLPlain, SASLUsername: "qb", SASLPassword: "s3cr3t-pa55",
		Headers: map[string]string{"x-token": "header-s3cr3t"}}
	for _, verb := range []string{"%v", "%+v", "%#v", "%s"} {
		text := fmt.Sprintf(verb, c)
		if strings.Contains(text, "s3cr3t") {
			t.Errorf("%s prints %s", verb, text)
		}
		if !strings.Contains(text, "Secret(***)") || !strings.Contains(text, "x-token") {
			t.Errorf("%s prints %s, want the masked password and the header name", verb, text)
		}
	}
}
