//go:build !queuebox_no_kafka

package kafka_test

import (
	"fmt"
	"testing"
)

// TestRelayedRowCannotForgeHeaders: the headers of a relayed row (it carries the relay's
// x-inbox-id and x-source) came from outside, so one named like a static or a standard header
// in any letter case, or like a hop-by-hop header, is dropped. The same headers on an
// application row keep spec/25: a row header replaces a static one and adds a second value to
// a standard one.
func TestRelayedRowCannotForgeHeaders(t *testing.T) {
	c := newCluster(t, 1, []string{"events.Order"})
	p := newPublisher(t, destination(c, "events.{{ aggregateType }}"), map[string]string{"X-Team": "orders"})
	forged := map[string]string{
		"x-team": "forged", "X-Message-Id": "forged", "x-attempt": "99", "x-topic": "forged.topic",
		"connection": "close", "content-length": "3", "x-github-event": "push",
	}

	relayed := message("0d4c6a2e-0000-4000-8000-000000000011")
	relayed.Headers = map[string]string{"x-inbox-id": "i-1", "x-source": "hooks"}
	for k, v := range forged {
		relayed.Headers[k] = v
	}
	publish(t, p, relayed)
	app := message("0d4c6a2e-0000-4000-8000-000000000012")
	app.Headers = map[string]string{"x-team": "row-team", "x-attempt": "99"}
	publish(t, p, app)

	recs := consumeExactly(t, c, "events.Order", 2)
	want := map[string][][2]string{
		relayed.ID: {
			{"x-message-id", relayed.ID}, {"x-topic", "order.created"}, {"x-attempt", "3"}, {"X-Team", "orders"},
			{"x-github-event", "push"}, {"x-inbox-id", "i-1"}, {"x-source", "hooks"},
		},
		app.ID: {
			{"x-message-id", app.ID}, {"x-topic", "order.created"}, {"x-attempt", "3"},
			{"x-attempt", "99"}, {"x-team", "row-team"},
		},
	}
	for _, r := range recs {
		id := string(r.Headers[0].Value)
		if got := headerList(r); fmt.Sprint(got) != fmt.Sprint(want[id]) {
			t.Errorf("record %s headers =\n%v\nwant\n%v", id, got, want[id])
		}
	}
}
