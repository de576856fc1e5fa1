//go:build !queuebox_no_nats

package nats_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	qbnats "github.com/alternayte/queuebox/shared/connect/nats"
)

// WithDefaults fills the defaults of spec/23 (JetStream, 30 s) and keeps what is set.
func TestConfigWithDefaults(t *testing.T) {
	t.Parallel()
	got := qbnats.Config{Servers: []string{natsURL}, Subject: "s"}.WithDefaults()
	if got.Mode != qbnats.ModeJetStream || got.Timeout != 30*time.Second {
		t.Errorf("WithDefaults = %v, want JetStream and 30s", got)
	}
	set := qbnats.Config{Mode: qbnats.ModeCore, Timeout: 5 * time.Second}
	if got := set.WithDefaults(); fmt.Sprint(got) != fmt.Sprint(set) {
		t.Errorf("WithDefaults = %v, want %v unchanged", got, set)
	}
}

// New refuses a mode that is neither JetStream nor core, naming the destination.
func TestNewRefusesUnknownMode(t *testing.T) {
	t.Parallel()
	_, err := qbnats.New("x", qbnats.Config{Servers: []string{natsURL}, Subject: "s", Mode: "sometimes"})
	if err == nil || !strings.Contains(err.Error(), "destination x: mode") {
		t.Fatalf("New with an unknown mode = %v, want an error naming the destination and mode", err)
	}
}

// A Config prints without its credentials, the user information of its server URLs, or the
// values of its static headers.
func TestConfigPrintsNoSecret(t *testing.T) {
	t.Parallel()
	c := qbnats.Config{Servers: []string{"nats://bob:url-s3cr3t@n:4222"}, Subject: "s",
		Username: "bob", Password: "s3cr3t-pa55", Token: "tok-s3cr3t",
		Headers: map[string]string{"x-token": "header-s3cr3t"}}
	for _, verb := range []string{"%v", "%+v", "%#v", "%s"} {
		text := fmt.Sprintf(verb, c)
		if strings.Contains(text, "s3cr3t") {
			t.Errorf("%s prints %s", verb, text)
		}
		if !strings.Contains(text, "n:4222") || !strings.Contains(text, "x-token") {
			t.Errorf("%s prints %s, want the server and the header name", verb, text)
		}
	}
}
