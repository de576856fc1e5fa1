package outbox_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alternayte/queuebox/shared/outbox"
	"github.com/alternayte/queuebox/shared/route"
	"github.com/alternayte/queuebox/shared/store"
)

// dedupRecorder is a publisher that records what it receives; dedup makes it a
// DedupPublisher that uses the deduplication id. fail makes its next publishes fail.
type dedupRecorder struct {
	dedup bool
	fail  atomic.Int32
	mu    sync.Mutex
	got   []outbox.Message
}

func (p *dedupRecorder) Publish(_ context.Context, m outbox.Message) error {
	p.mu.Lock()
	p.got = append(p.got, m)
	p.mu.Unlock()
	if p.fail.Add(-1) >= 0 {
		return errors.New("HTTP 503")
	}
	return nil
}

func (p *dedupRecorder) Type() string      { return "nats" }
func (p *dedupRecorder) UsesDedupID() bool { return p.dedup }

// dedupIDs returns the DedupID of every message received, in order.
func (p *dedupRecorder) dedupIDs() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for _, m := range p.got {
		out = append(out, m.DedupID())
	}
	return out
}

// countingGenerations counts the reads of the replay generations; err makes them fail.
type countingGenerations struct {
	store.Store
	reads atomic.Int32
	err   error
}

func (s *countingGenerations) OutboxReplayGenerations(ctx context.Context, ids []string) (map[string]int64, error) {
	s.reads.Add(1)
	if s.err != nil {
		return nil, s.err
	}
	return s.Store.OutboxReplayGenerations(ctx, ids)
}

func dedupPoller(t *testing.T, st store.OutboxStore, js, web *dedupRecorder) *outbox.Poller {
	t.Helper()
	p, err := outbox.New(outbox.Options{
		Store:  st,
		Config: outbox.Config{BatchSize: 10, Concurrency: 2, RetryBaseDelay: time.Millisecond, ClaimTimeout: time.Minute},
		Routes: route.NewTable([]route.Route{
			{Pattern: route.MustCompile("js.*"), Destination: "js"},
			{Pattern: route.MustCompile("web.*"), Destination: "web"},
		}),
		Destinations: []outbox.Destination{{Name: "js", Publisher: js}, {Name: "web", Publisher: web}},
		Logger:       testLogger(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestDedupIDFollowsTheReplayGeneration: a destination with a deduplication id gets the row id
// on the first delivery and its retries, and "<id>:<n>" after the n-th replay, the same on
// the retries of that delivery; a batch without such a row reads no generation, and a
// destination without a deduplication id never causes a read.
func TestDedupIDFollowsTheReplayGeneration(t *testing.T) {
	t.Parallel()
	fx := newFixture(t)
	st := &countingGenerations{Store: fx.store}
	js, web := &dedupRecorder{dedup: true}, &dedupRecorder{}
	p := dedupPoller(t, st, js, web)
	ctx := context.Background()

	for range 3 {
		insert(t, fx.store, store.OutboxInsertParams{Topic: "web.created", Payload: []byte(`{}`)})
	}
	p.RunOnce(ctx)
	if len(web.dedupIDs()) != 3 || st.reads.Load() != 0 {
		t.Fatalf("a batch of rows for a destination without a deduplication id: %d published, %d reads of the generations; want 3 and 0",
			len(web.dedupIDs()), st.reads.Load())
	}

	id := insert(t, fx.store, store.OutboxInsertParams{Topic: "js.created", Payload: []byte(`{}`)})
	js.fail.Store(1)
	waitFor(t, 30*time.Second, "the first delivery and its retry", func() bool {
		p.RunOnce(ctx)
		return readRow(t, fx.pool, id).State == store.OutboxSent
	})
	replay := func() {
		t.Helper()
		if n, err := fx.store.OutboxReplay(ctx, store.OutboxReplayParams{IDs: []string{id}}); err != nil || n != 1 {
			t.Fatalf("replaying: %d, %v", n, err)
		}
	}
	replay()
	js.fail.Store(1)
	waitFor(t, 30*time.Second, "the replay and its retry", func() bool {
		p.RunOnce(ctx)
		return readRow(t, fx.pool, id).State == store.OutboxSent
	})
	replay()
	waitFor(t, 30*time.Second, "the second replay", func() bool {
		p.RunOnce(ctx)
		return readRow(t, fx.pool, id).State == store.OutboxSent
	})
	want := []string{id, id, id + ":1", id + ":1", id + ":2"}
	if got := js.dedupIDs(); !slices.Equal(got, want) {
		t.Fatalf("deduplication ids: got %v, want %v", got, want)
	}
	for _, m := range js.got {
		if m.ID != id {
			t.Fatalf("a replay changed the message id to %s", m.ID)
		}
	}
	if len(web.dedupIDs()) != 3 {
		t.Fatalf("the rows of the other destination were published again: %d", len(web.dedupIDs()))
	}
}

// TestUnreadableGenerationsHoldTheRowsThatNeedThem: when the generations cannot be read, the
// claimed rows for a destination with a deduplication id go back to pending without an
// attempt (they are not published with an id that the destination may drop); the other rows
// of the batch are published.
func TestUnreadableGenerationsHoldTheRowsThatNeedThem(t *testing.T) {
	t.Parallel()
	fx := newFixture(t)
	st := &countingGenerations{Store: fx.store, err: errors.New("connection reset by peer")}
	js, web := &dedupRecorder{dedup: true}, &dedupRecorder{}
	p := dedupPoller(t, st, js, web)
	jsID := insert(t, fx.store, store.OutboxInsertParams{Topic: "js.created", Payload: []byte(`{}`)})
	webID := insert(t, fx.store, store.OutboxInsertParams{Topic: "web.created", Payload: []byte(`{}`)})

	sum := p.RunOnce(context.Background())
	if len(js.dedupIDs()) != 0 || len(web.dedupIDs()) != 1 {
		t.Fatalf("published %d rows to the destination with a deduplication id and %d to the other; want 0 and 1",
			len(js.dedupIDs()), len(web.dedupIDs()))
	}
	if r := readRow(t, fx.pool, jsID); r.State != store.OutboxPending || r.Attempt != 0 {
		t.Fatalf("the held row: %+v; want pending with no attempt spent", r)
	}
	if r := readRow(t, fx.pool, webID); r.State != store.OutboxSent {
		t.Fatalf("the other row: %+v; want sent", r)
	}
	if sum.Deferred != 1 {
		t.Fatalf("summary: %+v; want one deferred row", sum)
	}
}
