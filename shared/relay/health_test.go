package relay_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alternayte/queuebox/shared/relay"
	"github.com/alternayte/queuebox/shared/store"
)

// TestRelayThatFailsEveryRowIsDown runs the relay with a max_attempts that the outbox column
// (int4) cannot hold, the value that outbox.maxAttempts: 2147483648 gave before it had a bound:
// every forward fails and the row stays processing, and the health check must say so instead of
// reporting the relay up.
func TestRelayThatFailsEveryRowIsDown(t *testing.T) {
	t.Parallel()
	fx := newFixture(t)
	r := newRelay(t, fx.store, relay.Config{MaxAttempts: 1 << 31}, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := runAsync(ctx, r, relay.RunOptions{})
	defer func() { cancel(); await(t, done, 30*time.Second) }()

	id := insertInbox(t, fx.store, inboxRow{Source: "orders-queue", Key: "k1", Aggregate: "order-1"})
	r.Wake()
	waitFor(t, 30*time.Second, "the relay check to fail", func() bool { return r.Check(context.Background()) != nil })
	err := r.Check(context.Background())
	if !strings.Contains(err.Error(), "forwarded none") || !strings.Contains(err.Error(), "int4") {
		t.Errorf("check = %q, want the cycle that forwarded none and the int4 cause", err)
	}
	if in := readInbox(t, fx.pool, id); in.State != store.InboxProcessing {
		t.Errorf("row = %+v, want processing", in)
	}
}

// TestRelayHealthRecoversAfterAForward fails every forward while a switch is on: the check is
// down with a redacted reason, and once a later row is forwarded it is up again.
func TestRelayHealthRecoversAfterAForward(t *testing.T) {
	t.Parallel()
	fx := newFixture(t)
	var failing atomic.Bool
	failing.Store(true)
	h := &hookStore{InboxStore: fx.store}
	h.beforeForward = func(context.Context, store.InboxForwardParams) error {
		if failing.Load() {
			return errors.New("outbox insert refused: password=hunter2-do-not-print")
		}
		return nil
	}
	r := newRelay(t, h, relay.Config{}, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := runAsync(ctx, r, relay.RunOptions{})
	defer func() { cancel(); await(t, done, 30*time.Second) }()

	waitFor(t, 30*time.Second, "the relay to run", func() bool { return r.Check(context.Background()) == nil })
	bad := insertInbox(t, fx.store, inboxRow{Source: "orders-queue", Key: "bad", Aggregate: "order-1"})
	r.Wake()
	waitFor(t, 30*time.Second, "the relay check to fail", func() bool { return r.Check(context.Background()) != nil })
	err := r.Check(context.Background())
	if strings.Contains(err.Error(), "hunter2") || !strings.Contains(err.Error(), "outbox insert refused") {
		t.Errorf("check = %q, want the cause without the secret", err)
	}

	failing.Store(false)
	good := insertInbox(t, fx.store, inboxRow{Source: "orders-queue", Key: "good", Aggregate: "order-2"})
	r.Wake()
	waitFor(t, 30*time.Second, "the later row to be forwarded", func() bool { return len(outboxRowsOf(t, fx.pool, good)) == 1 })
	waitFor(t, 30*time.Second, "the relay check to pass again", func() bool { return r.Check(context.Background()) == nil })
	if in := readInbox(t, fx.pool, bad); in.State != store.InboxProcessing {
		t.Errorf("failed row = %+v, want processing until its lease expires", in)
	}
}
