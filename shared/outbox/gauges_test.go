package outbox_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/alternayte/queuebox/shared/outbox"
	"github.com/alternayte/queuebox/shared/store"
)

// blockedStats holds every query of the pending gauges until release is closed.
type blockedStats struct {
	store.OutboxStore
	entered chan struct{}
	release chan struct{}
}

func (b *blockedStats) OutboxStats(ctx context.Context) (store.OutboxStats, error) {
	select {
	case b.entered <- struct{}{}:
	default:
	}
	select {
	case <-b.release:
	case <-ctx.Done():
		return store.OutboxStats{}, ctx.Err()
	}
	return b.OutboxStore.OutboxStats(ctx)
}

// TestTheGaugeQueryDoesNotHoldTheClaims: the query of the pending gauges reads every pending
// row, so it runs beside the claims. While it hangs, every row is still delivered; the run's
// stop waits for it.
func TestTheGaugeQueryDoesNotHoldTheClaims(t *testing.T) {
	t.Parallel()
	fx := newFixture(t)
	rc := newReceiver(t, nil)
	const rows = 50
	for i := range rows {
		insert(t, fx.store, store.OutboxInsertParams{Topic: "order.gauged", Payload: json.RawMessage(fmt.Sprintf(`{"n":%d}`, i))})
	}
	st := &blockedStats{OutboxStore: fx.store, entered: make(chan struct{}, 1), release: make(chan struct{})}
	p := newPoller(t, st, outbox.Config{BatchSize: 10, PollInterval: 20 * time.Millisecond}, rc, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	done := make(chan outbox.Summary, 1)
	go func() { done <- p.Run(ctx, outbox.RunOptions{StopWhenIdle: true}) }()

	select {
	case <-st.entered:
	case <-ctx.Done():
		t.Fatal("the run never queried the pending gauges")
	}
	for rc.count() < rows {
		select {
		case <-ctx.Done():
			t.Fatalf("%d of %d rows delivered while the gauge query hung", rc.count(), rows)
		case <-time.After(10 * time.Millisecond):
		}
	}
	select {
	case sum := <-done:
		t.Fatalf("the run ended (%+v) while its gauge query still ran", sum)
	default:
	}
	close(st.release)
	if sum := <-done; sum.Sent != rows {
		t.Errorf("summary %+v; want %d sent", sum, rows)
	}
}
