package nats_test

import (
	"testing"

	"github.com/alternayte/queuebox/shared/config"
)

// TestRelayedRowCannotForgeHeaders: the headers of a relayed row (it carries the relay's
// x-inbox-id and x-source) came from outside, so one named like a standard header in any
// letter case, any Nats- header (which the server reads: deduplication, expected sequence,
// rollup), and any hop-by-hop header is dropped. An application row keeps spec/25: a row
// header of a standard name is a second value.
func TestRelayedRowCannotForgeHeaders(t *testing.T) {
	f := newFixture(t)
	p := newPublisher(t, config.NATSDestination{Subject: f.prefix + ".{{ topic }}", JetStream: true, TimeoutMs: 30000})

	relayed := message("0b7f9a4e-1111-4c3a-9d55-000000000011")
	relayed.Headers = map[string]string{
		"x-inbox-id": "i-1", "x-source": "hooks",
		"X-Message-Id": "forged", "x-attempt": "99", "x-message-key": "forged-key", "X-Topic": "forged.topic",
		"Nats-Msg-Id": "forged-dedup", "nats-expected-last-sequence": "999", "Nats-Rollup": "all",
		"connection": "close", "x-github-event": "push",
	}
	if err := publish(t, p, relayed); err != nil {
		t.Fatalf("Publish of the relayed row: %v", err)
	}
	app := message("0b7f9a4e-1111-4c3a-9d55-000000000012")
	app.Headers = map[string]string{"x-attempt": "99", "connection": "close"}
	if err := publish(t, p, app); err != nil {
		t.Fatalf("Publish of the application row: %v", err)
	}

	got := f.msgs(t, 2)
	assertHeaders(t, got[0].Header, map[string][]string{
		"x-message-id":   {relayed.ID},
		"x-topic":        {"order.created"},
		"x-attempt":      {"3"},
		"x-message-key":  {"customer-7"},
		"Nats-Msg-Id":    {relayed.ID},
		"x-inbox-id":     {"i-1"},
		"x-source":       {"hooks"},
		"x-github-event": {"push"},
	})
	assertHeaders(t, got[1].Header, map[string][]string{
		"x-message-id":  {app.ID},
		"x-topic":       {"order.created"},
		"x-attempt":     {"3", "99"},
		"x-message-key": {"customer-7"},
		"Nats-Msg-Id":   {app.ID},
		"connection":    {"close"},
	})
}
