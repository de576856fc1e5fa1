package consumetest_test

import (
	"context"
	"encoding/json"
	"strconv"
	"sync"
	"testing"

	"github.com/alternayte/queuebox/shared/connect/consumetest"
	"github.com/alternayte/queuebox/shared/store"
)

// The suite runs, and passes, against a reference source over an in-memory queue with the
// acknowledgement semantics of a broker (an unacknowledged message goes back to the queue
// when its consumer stops) and an in-memory inbox with the unique (source, idempotency_key)
// constraint. It checks the suite itself; the broker sources run it against their systems
// and the database.
func TestSuiteAgainstReferenceSource(t *testing.T) {
	consumetest.Run(t, consumetest.Features{}, func(t *testing.T) consumetest.Target {
		q := &queue{wake: make(chan struct{}, 1)}
		in := &inbox{rows: map[string]consumetest.Row{}}
		return consumetest.Target{
			NewSource: func(*testing.T) consumetest.Source { return &source{q: q} },
			Produce:   func(_ *testing.T, m consumetest.Message) { q.put(m) },
			Sink:      in,
			Rows:      func(*testing.T) []consumetest.Row { return in.all() },
		}
	})
}

type queue struct {
	mu    sync.Mutex
	ready []consumetest.Message
	wake  chan struct{}
}

func (q *queue) put(m consumetest.Message) {
	q.mu.Lock()
	q.ready = append(q.ready, m)
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

func (q *queue) take(ctx context.Context) (consumetest.Message, bool) {
	for {
		q.mu.Lock()
		if len(q.ready) > 0 {
			m := q.ready[0]
			q.ready = q.ready[1:]
			q.mu.Unlock()
			return m, true
		}
		q.mu.Unlock()
		select {
		case <-q.wake:
		case <-ctx.Done():
			return consumetest.Message{}, false
		}
	}
}

// source takes one message at a time, stores it, and acknowledges it; a message it could
// not store, or held when it stopped, goes back to the queue.
type source struct{ q *queue }

func (s *source) Run(ctx context.Context, sink consumetest.Sink) error {
	for {
		m, ok := s.q.take(ctx)
		if !ok {
			return ctx.Err()
		}
		p := store.InboxInsertParams{Source: "ref", IdempotencyKey: m.Headers["x-idempotency-key"], Payload: m.Body}
		if !json.Valid(m.Body) {
			p.Payload, p.State, p.LastError = json.RawMessage(`{}`), "dead", "the body is not JSON"
		}
		if _, err := sink.InboxInsert(ctx, p); err != nil || ctx.Err() != nil {
			s.q.put(m) // not acknowledged: delivered again
			if ctx.Err() != nil {
				return ctx.Err()
			}
		}
	}
}

type inbox struct {
	mu   sync.Mutex
	rows map[string]consumetest.Row
	n    int
}

func (in *inbox) InboxInsert(ctx context.Context, p store.InboxInsertParams) (store.InboxInsertResult, error) {
	res, err := in.InboxInsertBatch(ctx, []store.InboxInsertParams{p})
	if err != nil {
		return store.InboxInsertResult{}, err
	}
	return res[0], nil
}

func (in *inbox) InboxInsertBatch(_ context.Context, ps []store.InboxInsertParams) ([]store.InboxInsertResult, error) {
	in.mu.Lock()
	defer in.mu.Unlock()
	out := make([]store.InboxInsertResult, len(ps))
	for i, p := range ps {
		if _, dup := in.rows[p.IdempotencyKey]; dup {
			out[i] = store.InboxInsertResult{Duplicate: true}
			continue
		}
		state := p.State
		if state == "" {
			state = "pending"
		}
		in.n++
		in.rows[p.IdempotencyKey] = consumetest.Row{IdempotencyKey: p.IdempotencyKey, State: state, Payload: p.Payload}
		out[i] = store.InboxInsertResult{ID: strconv.Itoa(in.n)}
	}
	return out, nil
}

func (in *inbox) all() []consumetest.Row {
	in.mu.Lock()
	defer in.mu.Unlock()
	out := make([]consumetest.Row, 0, len(in.rows))
	for _, r := range in.rows {
		out = append(out, r)
	}
	return out
}
