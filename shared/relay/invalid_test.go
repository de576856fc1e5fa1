package relay_test

import (
	"context"
	"strings"
	"testing"

	"github.com/alternayte/queuebox/shared/relay"
)

// A topic longer than the outbox topic column can never be forwarded: the row goes dead with
// the reason instead of returning to pending after every lease.
func TestTopicTooLongForTheOutboxGoesDead(t *testing.T) {
	t.Parallel()
	fx := newFixture(t)
	long := insertInbox(t, fx.store, inboxRow{Source: "stripe", Key: "long-1", Aggregate: "a", EventType: strings.Repeat("e", 250)})
	next := insertInbox(t, fx.store, inboxRow{Source: "stripe", Key: "next-1", Aggregate: "a", EventType: "paid"})
	m := &countMetrics{}
	r := newRelay(t, fx.store, relay.Config{}, m)
	sum := r.Run(context.Background(), relay.RunOptions{StopWhenIdle: true})
	if sum.Dead != 1 || sum.Forwarded != 1 {
		t.Errorf("summary = %+v, want one dead and one forwarded", sum)
	}
	s := readInbox(t, fx.pool, long)
	if s.State != "dead" || !strings.Contains(s.LastError, "The outbox cannot store the forwarded row") {
		t.Errorf("long row = %+v", s)
	}
	if s := readInbox(t, fx.pool, next); s.State != "processed" {
		t.Errorf("the next row of the aggregate = %+v, want processed", s)
	}
}
