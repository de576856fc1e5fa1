//go:build !queuebox_no_nats

package nats_test

import (
	"testing"
	"time"

	qbnats "github.com/alternayte/queuebox/shared/connect/nats"
	"github.com/alternayte/queuebox/shared/outbox"
)

// TestRelayedRowCannotForgeHeaders: the headers of a relayed row (it carries the relay's
// x-inbox-id and x-source) came from outside, so one named like a standard header in any
// letter case, any Nats- header (which the server reads: deduplication, expected sequence,
// rollup), and any hop-by-hop header is dropped. An application row keeps spec/25: a row
// header of a standard name is a second value.
func TestRelayedRowCannotForgeHeaders(t *testing.T) {
	f := newFixture(t)
	p := newPublisher(t, qbnats.Config{Subject: f.prefix + ".{{ topic }}", Timeout: 30 * time.Second})

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

// TestStaticHeaders: a NATS delivery carries the destination's static headers (spec/25). A
// row header of the same name, in any letter case, replaces one on an application row; on
// a relayed row the received header is dropped and the static one stays.
func TestStaticHeaders(t *testing.T) {
	f := newFixture(t)
	p := newPublisherWithHeaders(t, qbnats.Config{Subject: f.prefix + ".{{ topic }}", Timeout: 30 * time.Second},
		map[string]string{"X-Team": "orders", "X-Region": "eu"})

	plain := message("0b7f9a4e-1111-4c3a-9d55-000000000021")
	app := message("0b7f9a4e-1111-4c3a-9d55-000000000022")
	app.Headers = map[string]string{"x-team": "payments"}
	relayed := message("0b7f9a4e-1111-4c3a-9d55-000000000023")
	relayed.Headers = map[string]string{"x-inbox-id": "i-2", "x-source": "hooks", "x-team": "forged"}
	for _, m := range []outbox.Message{plain, app, relayed} {
		if err := publish(t, p, m); err != nil {
			t.Fatalf("Publish %s: %v", m.ID, err)
		}
	}
	got := f.msgs(t, 3)
	standard := func(id string, extra map[string][]string) map[string][]string {
		h := map[string][]string{
			"x-message-id": {id}, "x-topic": {"order.created"}, "x-attempt": {"3"},
			"x-message-key": {"customer-7"}, "Nats-Msg-Id": {id},
		}
		for k, v := range extra {
			h[k] = v
		}
		return h
	}
	assertHeaders(t, got[0].Header, standard(plain.ID, map[string][]string{"X-Team": {"orders"}, "X-Region": {"eu"}}))
	assertHeaders(t, got[1].Header, standard(app.ID, map[string][]string{"x-team": {"payments"}, "X-Region": {"eu"}}))
	assertHeaders(t, got[2].Header, standard(relayed.ID, map[string][]string{
		"X-Team": {"orders"}, "X-Region": {"eu"}, "x-inbox-id": {"i-2"}, "x-source": {"hooks"},
	}))
}
