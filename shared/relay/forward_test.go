package relay_test

import (
	"reflect"
	"testing"

	"github.com/alternayte/queuebox/shared/kind"
	"github.com/alternayte/queuebox/shared/relay"
)

// TestRelayDropsHopByHopAndHonoursForwardHeaders: the relay never copies a hop-by-hop or
// framing header onto the outbox row, and a source with forwardHeaders copies only the listed
// headers, in any letter case; the four relay headers are always set.
func TestRelayDropsHopByHopAndHonoursForwardHeaders(t *testing.T) {
	t.Parallel()
	fx := newFixture(t)
	received := `{"host":"evil.example","content-length":"12","transfer-encoding":"chunked","connection":"close",` +
		`"te":"trailers","upgrade":"h2c","keep-alive":"timeout=5","trailer":"x-late","proxy-authorization":"Basic x",` +
		`"x-github-event":"push","X-GitHub-Delivery":"d-1","x-api-key":"FORGED","x-inbox-id":"spoof"}`
	all := insertInbox(t, fx.store, inboxRow{Source: "open", Key: "k-1", Correlation: "c-1", Headers: received})
	listed := insertInbox(t, fx.store, inboxRow{Source: "listed", Key: "k-2", Correlation: "c-2", Headers: received})
	r, err := relay.New(relay.Options{Store: fx.store, Logger: testLogger(), Sources: map[string]relay.Source{
		"open":   {Kind: kind.HTTP, Topic: "hooks"},
		"listed": {Kind: kind.HTTP, Topic: "hooks", ForwardHeaders: []string{"X-Github-Event", "x-github-delivery", "X-Inbox-Id"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if sum := drain(t, r); sum.Forwarded != 2 {
		t.Fatalf("summary = %+v, want 2 forwarded", sum)
	}
	tests := []struct {
		name, inboxID string
		want          map[string]any
	}{
		{name: "no forwardHeaders", inboxID: all, want: map[string]any{
			"x-github-event": "push", "X-GitHub-Delivery": "d-1", "x-api-key": "FORGED",
			"x-inbox-id": all, "x-source": "open", "x-idempotency-key": "k-1", "X-Correlation-Id": "c-1",
		}},
		{name: "forwardHeaders", inboxID: listed, want: map[string]any{
			"x-github-event": "push", "X-GitHub-Delivery": "d-1",
			"x-inbox-id": listed, "x-source": "listed", "x-idempotency-key": "k-2", "X-Correlation-Id": "c-2",
		}},
	}
	for _, tt := range tests {
		rows := outboxRowsOf(t, fx.pool, tt.inboxID)
		if len(rows) != 1 {
			t.Fatalf("%s: outbox rows = %d, want 1", tt.name, len(rows))
		}
		if !reflect.DeepEqual(rows[0].Headers, tt.want) {
			t.Errorf("%s: headers = %v, want %v", tt.name, rows[0].Headers, tt.want)
		}
	}
}
