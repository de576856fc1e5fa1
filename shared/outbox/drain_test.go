package outbox_test

import (
	"context"
	"encoding/json"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/alternayte/queuebox/shared/connect/webhook"
	"github.com/alternayte/queuebox/shared/outbox"
	"github.com/alternayte/queuebox/shared/route"
	"github.com/alternayte/queuebox/shared/store"
)

// finishDuringClaim makes a claim that comes back empty while rows are still in flight
// return only after every row claimed so far has finished (its finishing write and its
// removal from the run), as happens when the finisher is quicker than the claim on a loaded
// machine. processed counts the rows whose run ended, through the ProcessingDuration
// measurement that the poller takes in the same critical section that forgets the row.
type finishDuringClaim struct {
	store.OutboxStore
	metrics *processedCounter
	release func() // lets the held deliveries go

	mu      sync.Mutex
	claimed int
}

func (s *finishDuringClaim) OutboxClaim(ctx context.Context, p store.OutboxClaimParams) ([]store.OutboxMessage, error) {
	rows, err := s.OutboxStore.OutboxClaim(ctx, p)
	s.mu.Lock()
	s.claimed += len(rows)
	claimed := s.claimed
	s.mu.Unlock()
	if err != nil || len(rows) > 0 || s.metrics.count() >= claimed {
		return rows, err
	}
	s.release()
	if !s.metrics.waitFor(ctx, claimed) {
		return nil, ctx.Err()
	}
	return rows, nil
}

type processedCounter struct {
	outbox.NopMetrics
	mu      sync.Mutex
	n       int
	changed chan struct{}
}

func (m *processedCounter) ProcessingDuration(time.Duration) {
	m.mu.Lock()
	m.n++
	m.mu.Unlock()
	select {
	case m.changed <- struct{}{}:
	default:
	}
}

func (m *processedCounter) count() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.n
}

func (m *processedCounter) waitFor(ctx context.Context, n int) bool {
	for m.count() < n {
		select {
		case <-ctx.Done():
			return false
		case <-m.changed:
		case <-time.After(50 * time.Millisecond):
		}
	}
	return true
}

// A claim that finds nothing while rows are in flight, and during which those rows finish,
// must not send the loop into a whole poll interval: the finished rows free the next row of
// their keys. With a one-hour poll interval the old loop waited that hour (here, until the
// test's deadline) with b-2 still pending.
func TestRowsFinishingDuringAnEmptyClaimDoNotStallTheLoop(t *testing.T) {
	t.Parallel()
	fx := newFixture(t)
	holdB := make(chan struct{})
	var once sync.Once
	release := func() { once.Do(func() { close(holdB) }) }
	t.Cleanup(release)
	rc := newReceiver(t, func(r *http.Request, _ int) int {
		if r.Header.Get("X-Message-Key") == "b" {
			<-holdB
		}
		return http.StatusOK
	})
	for _, key := range []string{"a", "b", "a", "b"} {
		insert(t, fx.store, store.OutboxInsertParams{Topic: "order.drain", Key: key, Payload: json.RawMessage(`{}`)})
	}
	// A generous publish timeout: key b is held until the claim that comes back empty.
	pub, err := webhook.New(webhook.Config{Name: "receiver", BaseURL: rc.srv.URL, Path: "/events", Timeout: 2 * time.Minute}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pub.Close() })
	metrics := &processedCounter{changed: make(chan struct{}, 1)}
	st := &finishDuringClaim{OutboxStore: fx.store, metrics: metrics, release: release}
	p, err := outbox.New(outbox.Options{
		Store:        st,
		Config:       outbox.Config{BatchSize: 50, PollInterval: time.Hour},
		Routes:       route.NewTable([]route.Route{{Pattern: route.MustCompile("order.**"), Destination: "receiver"}}),
		Destinations: []outbox.Destination{{Name: "receiver", Publisher: pub}},
		Metrics:      metrics,
		Logger:       testLogger(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	sum := p.Run(ctx, outbox.RunOptions{StopWhenIdle: true})
	if ctx.Err() != nil {
		t.Errorf("the drain did not end before its deadline: %+v", sum)
	}
	if sum.Sent != 4 || rc.count() != 4 {
		t.Errorf("summary = %+v, deliveries = %d; want 4 rows sent", sum, rc.count())
	}
}
