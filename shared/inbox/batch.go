package inbox

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/alternayte/queuebox/shared/store"
)

// Defaults of the storage batching (Options.MaxBatch, Options.Writers and
// Options.BatchTimeout).
const (
	// DefaultMaxBatch is the largest number of messages written in one statement.
	DefaultMaxBatch = 200
	// DefaultWriters is the largest number of batches written at the same time. One writer
	// makes the largest batches, and so the least CPU per message in QueueBox and in the
	// database: on the 2-core bench machine it spent less per request than two or four
	// writers (bench/README.md); the next batch forms while the current one commits.
	DefaultWriters = 1
	// DefaultBatchTimeout bounds the write of a batch of two or more messages, which no
	// single request's context may cancel.
	DefaultBatchTimeout = 30 * time.Second
)

// batcher groups the store writes of concurrent requests: each request that reaches the store
// step queues its row and waits; a writer takes whatever is queued (up to max rows, without
// waiting for more) and writes it with one InboxInsertBatch, one statement and one commit,
// then answers every request of the batch. While a writer commits, the next batch forms in
// the queue.
//
// There is no background goroutine while nothing is queued. A request that finds fewer than
// writers batches in flight writes the batch itself (its own row and whatever else is
// queued), so a lone request (a Lambda invocation) is one statement on its own goroutine, with
// no hand-off and no linger. When that batch is written and rows have queued meanwhile, a
// goroutine takes over the writer's place and writes batches until the queue is empty, then
// ends. Nothing needs closing: the last writer ends with the last queued row, and every
// request is answered before its handler returns.
type batcher struct {
	store   Inserter
	max     int
	writers int
	timeout time.Duration

	mu     sync.Mutex
	queue  []*pendingRow
	active int // writers running
}

// pendingRow is one request's row waiting for its batch.
type pendingRow struct {
	ctx    context.Context
	params store.InboxInsertParams
	// done receives the outcome once; it is buffered, so a writer never blocks on a request
	// that stopped waiting.
	done chan rowResult
}

type rowResult struct {
	res store.InboxInsertResult
	err error
}

func newBatcher(st Inserter, max, writers int, timeout time.Duration) *batcher {
	return &batcher{store: st, max: max, writers: writers, timeout: timeout}
}

// insert stores one row through a batch and returns its result. It returns when the row's
// batch is written, or with ctx's error when ctx ends first (the row may then still be
// written, as when a client goes away during a single insert).
func (b *batcher) insert(ctx context.Context, p store.InboxInsertParams) (store.InboxInsertResult, error) {
	if err := ctx.Err(); err != nil {
		return store.InboxInsertResult{}, fmt.Errorf("inserting inbox row: %w", err)
	}
	row := &pendingRow{ctx: ctx, params: p, done: make(chan rowResult, 1)}
	b.mu.Lock()
	b.queue = append(b.queue, row)
	lead := b.active < b.writers
	if lead {
		b.active++
	}
	b.mu.Unlock()
	if lead {
		// This request writes one batch (which holds its own row, unless a writer that was
		// finishing took it first), then hands the writer's place on.
		if b.writeOne() {
			go b.drain()
		}
	}
	select {
	case r := <-row.done:
		return r.res, r.err
	case <-ctx.Done():
		return store.InboxInsertResult{}, fmt.Errorf("inserting inbox row: %w", ctx.Err())
	}
}

// drain writes batches until the queue is empty.
func (b *batcher) drain() {
	for b.writeOne() {
	}
}

// writeOne takes one batch from the queue and writes it. It reports whether rows are left for
// the calling writer; when none are, the writer's place is released. A panic of the store is
// turned into an error for each request of the batch, and the writer's place is handed on, so
// that one bug fails one batch and never leaves requests waiting for a writer that is gone.
func (b *batcher) writeOne() (more bool) {
	b.mu.Lock()
	n := min(len(b.queue), b.max)
	batch := make([]*pendingRow, n)
	copy(batch, b.queue)
	rest := copy(b.queue, b.queue[n:])
	clear(b.queue[rest:])
	b.queue = b.queue[:rest]
	b.mu.Unlock()

	defer func() {
		if p := recover(); p != nil {
			err := fmt.Errorf("inserting inbox rows: the store panicked: %v", p)
			for _, r := range batch {
				r.answer(rowResult{err: err})
			}
			more = false
			b.mu.Lock()
			if len(b.queue) > 0 {
				go b.drain() // the new writer takes this writer's place
			} else {
				b.active--
			}
			b.mu.Unlock()
		}
	}()
	b.write(batch)

	b.mu.Lock()
	more = len(b.queue) > 0
	if !more {
		b.active--
	}
	b.mu.Unlock()
	return more
}

// answer gives the request its outcome, unless it already has one.
func (r *pendingRow) answer(res rowResult) {
	select {
	case r.done <- res:
	default:
	}
}

// write writes one batch and answers each of its requests.
func (b *batcher) write(batch []*pendingRow) {
	// A request that went away before its batch was written is answered with its error and
	// left out, so that the batch writes only rows that someone waits for.
	live := make([]*pendingRow, 0, len(batch))
	for _, r := range batch {
		if err := r.ctx.Err(); err != nil {
			r.answer(rowResult{err: fmt.Errorf("inserting inbox row: %w", err)})
			continue
		}
		live = append(live, r)
	}
	switch len(live) {
	case 0:
		return
	case 1:
		// One row: its own request's context, as a single insert has.
		r := live[0]
		r.answer(writeRow(r.ctx, b.store, &r.params, nil))
		return
	}
	// Two or more rows: no single request's context may cancel the write of the others.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(live[0].ctx), b.timeout)
	defer cancel()
	params := make([]store.InboxInsertParams, len(live))
	for i, r := range live {
		params[i] = r.params
	}
	// A row that the database refuses is answered with store.ErrInvalidValue (400).
	results := writeRows(ctx, b.store, params, func(i int) context.Context { return live[i].ctx }, nil)
	for i, r := range live {
		r.answer(results[i])
	}
}

// writeRows is the one write of inbox rows, for the HTTP batcher and the broker intake. It
// writes the rows in one statement and one commit under ctx (a single row with InboxInsert)
// and returns one result per row; a failed batch gives its error to every row. When the
// database refuses a value of one row (store.ErrInvalidValue: the statement does not say
// which and writes nothing), each row is written alone, under rowCtx(i) when rowCtx is set,
// so that only the refused row fails. refused, when set, is given a refused row and its
// error: when it returns true, the row as it changed it (a dead row) is written in its place
// at once, before the next row, so that the order of the writes, and so which of two rows
// with one key is the duplicate, stays that of the rows.
func writeRows(ctx context.Context, st Inserter, rows []store.InboxInsertParams,
	rowCtx func(i int) context.Context, refused func(ctx context.Context, p *store.InboxInsertParams, err error) bool,
) []rowResult {
	if len(rows) == 1 {
		return []rowResult{writeRow(ctx, st, &rows[0], refused)}
	}
	out := make([]rowResult, len(rows))
	results, err := st.InboxInsertBatch(ctx, rows)
	if err == nil && len(results) != len(rows) {
		err = fmt.Errorf("inserting inbox rows: the store returned %d results for %d rows", len(results), len(rows))
	}
	if err == nil {
		for i := range out {
			out[i].res = results[i]
		}
		return out
	}
	if !errors.Is(err, store.ErrInvalidValue) {
		for i := range out {
			out[i].err = err
		}
		return out
	}
	for i := range rows {
		c := ctx
		if rowCtx != nil {
			c = rowCtx(i)
		}
		out[i] = writeRow(c, st, &rows[i], refused)
	}
	return out
}

// writeRow writes one row with InboxInsert. When the database refuses a value of it and
// refused (when set) returns true, the row as refused changed it is written instead.
func writeRow(ctx context.Context, st Inserter, p *store.InboxInsertParams,
	refused func(ctx context.Context, p *store.InboxInsertParams, err error) bool,
) rowResult {
	res, err := st.InboxInsert(ctx, *p)
	if errors.Is(err, store.ErrInvalidValue) && refused != nil && refused(ctx, p, err) {
		res, err = st.InboxInsert(ctx, *p)
	}
	return rowResult{res: res, err: err}
}

// idle reports whether no writer runs and no row is queued.
func (b *batcher) idle() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.active == 0 && len(b.queue) == 0
}
