//go:build !queuebox_no_rabbitmq

package rabbitmq_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/alternayte/queuebox/shared/connect"
	"github.com/alternayte/queuebox/shared/connect/consumetest"
	"github.com/alternayte/queuebox/shared/connect/rabbitmq"
	"github.com/alternayte/queuebox/shared/store"
	"github.com/alternayte/queuebox/shared/store/postgres/dbtest"
	"github.com/alternayte/queuebox/shared/store/postgres/dbtest/dbstore"
)

// holdingSink is a Sink over next whose inserts wait, while it holds, until it is released.
type holdingSink struct {
	next    consumetest.Sink
	holding atomic.Bool
	release chan struct{}
	once    sync.Once
}

func newHoldingSink(next consumetest.Sink) *holdingSink {
	return &holdingSink{next: next, release: make(chan struct{})}
}

// Release lets every held insert and every later one through.
func (h *holdingSink) Release() { h.once.Do(func() { close(h.release) }) }

func (h *holdingSink) wait(ctx context.Context) error {
	if !h.holding.Load() {
		return nil
	}
	select {
	case <-h.release:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("holding sink: %w", ctx.Err())
	}
}

func (h *holdingSink) InboxInsert(ctx context.Context, p store.InboxInsertParams) (store.InboxInsertResult, error) {
	if err := h.wait(ctx); err != nil {
		return store.InboxInsertResult{}, err
	}
	return h.next.InboxInsert(ctx, p)
}

func (h *holdingSink) InboxInsertBatch(ctx context.Context, ps []store.InboxInsertParams) ([]store.InboxInsertResult, error) {
	if err := h.wait(ctx); err != nil {
		return nil, err
	}
	return h.next.InboxInsertBatch(ctx, ps)
}

// TestPrefetchComesBackAfterAnUndecodableMessage: after an undecodable message the source
// consumes one message at a time; once it has acknowledged prefetchCount messages, the broker
// must again hand it up to prefetchCount unacknowledged deliveries. The test holds the store
// of the next batch and waits until the broker has handed the consumer at least two of the
// messages published meanwhile (the queue's ready count drops by two or more), which a
// consumer still at a prefetch of one never reaches. Every message is stored once.
func TestPrefetchComesBackAfterAnUndecodableMessage(t *testing.T) {
	pool, st := dbstore.New(t)
	q := newQueue(t)
	ch := testConn(t)
	var logs syncBuffer
	const prefetch = 3
	sink := newHoldingSink(st)
	s := newSource(t, rabbitmq.SourceConfig{Queue: q, PrefetchCount: prefetch,
		Backoff: connect.Backoff{Min: 20 * time.Millisecond, Max: 200 * time.Millisecond},
		Logger:  slog.New(slog.NewJSONHandler(&logs, nil))})
	produce(t, ch, q, amqp.Publishing{Body: []byte(`{"id":"poison"}`), Headers: amqp.Table{"deep": deepTable(40)}})
	// More than prefetchCount messages wait behind it, so that the consumer may hold the next
	// one when the prefetch goes up.
	const careful = prefetch + 2
	for i := range careful {
		produce(t, ch, q, amqp.Publishing{Body: []byte(fmt.Sprintf(`{"id":"careful-%d"}`, i))})
	}
	consumetest.Start(t, s, sink)
	t.Cleanup(sink.Release) // before the source stops
	dbtest.WaitInboxRows(t, pool, s.Name(), 1+careful, waitLimit)
	deadline := time.Now().Add(waitLimit)
	for !strings.Contains(logs.String(), "consuming at the full prefetch count again") {
		if time.Now().After(deadline) {
			t.Fatalf("the source did not leave the one-at-a-time mode:\n%s", logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}

	sink.holding.Store(true)
	const n = 4
	confirming := testConn(t)
	if err := confirming.Confirm(false); err != nil {
		t.Fatalf("confirm mode: %v", err)
	}
	for i := range n { // each in the queue before the next
		dc, err := confirming.PublishWithDeferredConfirmWithContext(context.Background(), "", q, true, false,
			amqp.Publishing{Body: []byte(fmt.Sprintf(`{"id":"after-%d"}`, i))})
		if err != nil {
			t.Fatalf("publishing to %s: %v", q, err)
		}
		if ok, err := dc.WaitContext(context.Background()); !ok || err != nil {
			t.Fatalf("the broker did not confirm message %d: %v", i, err)
		}
	}
	deadline = time.Now().Add(waitLimit)
	for {
		info, err := ch.QueueDeclarePassive(q, true, false, false, false, nil)
		if err != nil {
			t.Fatalf("inspecting queue %s: %v", q, err)
		}
		if info.Messages <= n-2 { // ready messages: two or more of the n are with the consumer
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the consumer holds at most %d of %d messages unacknowledged while its store waits: "+
				"its prefetch did not come back to %d", n-info.Messages, n, prefetch)
		}
		time.Sleep(20 * time.Millisecond)
	}
	sink.Release()
	rows := dbtest.WaitInboxRows(t, pool, s.Name(), 1+careful+n, waitLimit)
	waitQueueEmpty(t, ch, q)
	seen := map[string]bool{}
	for _, r := range dbtest.InboxRows(t, pool, s.Name()) {
		if seen[r.IdempotencyKey] {
			t.Errorf("two rows of %s", r.IdempotencyKey)
		}
		seen[r.IdempotencyKey] = true
	}
	if len(rows) != 1+careful+n {
		t.Errorf("%d rows, want %d", len(rows), 1+careful+n)
	}
}
