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

// A batch with a row that the outbox refuses: the relay writes the batch in one transaction,
// which fails as a whole; it then forwards the rows one by one, so the refused row goes dead
// and the rows of the other aggregates are forwarded, each once.
func TestARefusedRowInABatchDeadLettersOnlyThatRow(t *testing.T) {
	t.Parallel()
	fx := newFixture(t)
	long := insertInbox(t, fx.store, inboxRow{Source: "stripe", Key: "long-1", Aggregate: "a", EventType: strings.Repeat("e", 250)})
	ok1 := insertInbox(t, fx.store, inboxRow{Source: "stripe", Key: "ok-1", Aggregate: "b", EventType: "paid"})
	ok2 := insertInbox(t, fx.store, inboxRow{Source: "stripe", Key: "ok-2", Aggregate: "c", EventType: "paid"})
	m := &countMetrics{}
	r := newRelay(t, fx.store, relay.Config{}, m)
	sum := r.Run(context.Background(), relay.RunOptions{StopWhenIdle: true})
	if sum.Claimed != 3 || sum.Dead != 1 || sum.Forwarded != 2 || sum.Failed+sum.ClaimsLost+sum.Abandoned != 0 {
		t.Errorf("summary = %+v, want 3 claimed in one batch, one dead and two forwarded", sum)
	}
	if s := readInbox(t, fx.pool, long); s.State != "dead" || !strings.Contains(s.LastError, "The outbox cannot store the forwarded row") {
		t.Errorf("long row = %+v", s)
	}
	for _, id := range []string{ok1, ok2} {
		if s := readInbox(t, fx.pool, id); s.State != "processed" {
			t.Errorf("row %s = %+v, want processed", id, s)
		}
	}
	if got := m.forwarded.Load(); got != 2 {
		t.Errorf("forwarded metric = %d, want 2", got)
	}
}
