// Package replay runs a safe replay: it moves the selected finished rows back to pending in
// batches, each batch one short statement in its own transaction, up to a limit and at most at
// a rate, so that a replay of a million rows never holds one long transaction or floods the
// destinations. The admin routes (POST /admin/replay with the fields of docs/replay.md, POST
// /admin/inbox/replay) and `queuebox replay` use it; the store's ReplayBatch statements do the
// moving.
package replay

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/alternayte/queuebox/shared/store"
)

// Bounds of the options, which the admin routes enforce (400) before a replay starts.
const (
	DefaultBatchSize = 1000
	MaxBatchSize     = 10000
	// MaxRowsPerSecond bounds the rate cap; zero means no cap.
	MaxRowsPerSecond = 1_000_000
)

// Batch moves at most limit rows of the selection whose id comes after cursor and returns how
// many it moved and the greatest id it moved ("" when none).
type Batch func(ctx context.Context, cursor string, limit int) (moved int64, last string, err error)

// Options shape a run.
type Options struct {
	// Limit is the most rows the run moves; zero means no limit.
	Limit int64
	// BatchSize is the most rows of one batch; zero means DefaultBatchSize.
	BatchSize int
	// RowsPerSecond caps the rate: after each batch the run waits until the rows moved so far
	// fit the rate. Zero means no cap.
	RowsPerSecond float64
	// Progress, when set, is called after every batch with the rows moved so far.
	Progress func(moved int64, batches int)
	// Sleep waits for d or the end of ctx; nil uses a timer.
	Sleep func(ctx context.Context, d time.Duration) error
	// Now is the clock of the rate; nil means time.Now.
	Now func() time.Time
}

// Check refuses options outside their bounds, with a text for the caller.
func (o Options) Check() error {
	switch {
	case o.Limit < 0:
		return errors.New("limit must be above 0")
	case o.BatchSize < 0 || o.BatchSize > MaxBatchSize:
		return fmt.Errorf("batchSize must be between 1 and %d", MaxBatchSize)
	case o.RowsPerSecond < 0 || o.RowsPerSecond > MaxRowsPerSecond:
		return fmt.Errorf("rowsPerSecond must be between 1 and %d", MaxRowsPerSecond)
	}
	return nil
}

// Result is what a run moved.
type Result struct {
	Moved   int64
	Batches int
}

// Run moves the selection batch by batch in id order until a batch moves fewer rows than it
// asked for (the selection is exhausted), the limit is reached, or ctx ends. A row that a batch
// moved is behind the cursor, so it is not moved twice by the same run even when it is sent
// again meanwhile. On an error it returns what moved before it.
func Run(ctx context.Context, batch Batch, o Options) (Result, error) {
	if err := o.Check(); err != nil {
		return Result{}, err
	}
	if o.BatchSize == 0 {
		o.BatchSize = DefaultBatchSize
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Sleep == nil {
		o.Sleep = sleep
	}
	var res Result
	start, cursor := o.Now(), ""
	for o.Limit == 0 || res.Moved < o.Limit {
		n := o.BatchSize
		if o.Limit > 0 && o.Limit-res.Moved < int64(n) {
			n = int(o.Limit - res.Moved)
		}
		moved, last, err := batch(ctx, cursor, n)
		if err != nil {
			return res, fmt.Errorf("replay batch %d: %w", res.Batches+1, err)
		}
		res.Moved += moved
		res.Batches++
		if o.Progress != nil {
			o.Progress(res.Moved, res.Batches)
		}
		if moved < int64(n) || last == "" {
			break
		}
		cursor = last
		if o.RowsPerSecond > 0 {
			due := start.Add(time.Duration(float64(res.Moved) / o.RowsPerSecond * float64(time.Second)))
			if wait := due.Sub(o.Now()); wait > 0 {
				if err := o.Sleep(ctx, wait); err != nil {
					return res, fmt.Errorf("replay paused for its rate: %w", err)
				}
			}
		}
	}
	return res, nil
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Selection is one table's side of a replay over a store.ReplayStore: the count and a page of
// the selected rows (for a dry run), and the batch that moves them.
type Selection struct {
	Count func(ctx context.Context) (int64, error)
	Scan  func(ctx context.Context, limit int) ([]store.FinishedRow, error)
	Batch Batch
}

// Outbox is the Selection of sel in the outbox.
func Outbox(rs store.ReplayStore, sel store.OutboxSelection) Selection {
	return Selection{
		Count: func(ctx context.Context) (int64, error) { return rs.OutboxSelectionCount(ctx, sel) },
		Scan: func(ctx context.Context, limit int) ([]store.FinishedRow, error) {
			return rs.OutboxSelectionScan(ctx, sel, store.ScanParams{Limit: limit})
		},
		Batch: func(ctx context.Context, cursor string, limit int) (int64, string, error) {
			b, err := rs.OutboxReplayBatch(ctx, sel, cursor, limit)
			return b.Moved, b.Last, err
		},
	}
}

// Inbox is the Selection of sel in the inbox.
func Inbox(rs store.ReplayStore, sel store.InboxSelection) Selection {
	return Selection{
		Count: func(ctx context.Context) (int64, error) { return rs.InboxSelectionCount(ctx, sel) },
		Scan: func(ctx context.Context, limit int) ([]store.FinishedRow, error) {
			return rs.InboxSelectionScan(ctx, sel, store.ScanParams{Limit: limit})
		},
		Batch: func(ctx context.Context, cursor string, limit int) (int64, string, error) {
			b, err := rs.InboxReplayBatch(ctx, sel, cursor, limit)
			return b.Moved, b.Last, err
		},
	}
}
