package store

import (
	"context"
	"encoding/json"
	"time"
)

// OutboxSelection selects finished outbox rows for a batched replay, a dry run or a listing
// (docs/replay.md). Every set filter narrows the selection; a zero field does not filter.
type OutboxSelection struct {
	// States are the states to select; a batched replay moves only sent and dead rows
	// whatever States says. Empty means sent and dead.
	States []string
	IDs    []string
	Topics []string
	// CreatedFrom and CreatedTo bound created_at strictly.
	CreatedFrom *time.Time
	CreatedTo   *time.Time
}

// InboxSelection selects finished inbox rows for a batched replay, a dry run or a listing.
// Every set filter narrows the selection; a zero field does not filter.
type InboxSelection struct {
	// States are the states to select; a batched replay moves only processed and dead rows
	// whatever States says. Empty means dead.
	States  []string
	IDs     []string
	Sources []string
	// Consumption, when set, selects push or pull rows only.
	Consumption string
	CreatedFrom *time.Time
	CreatedTo   *time.Time
}

// ReplayBatchResult is the outcome of one batch of a replay.
type ReplayBatchResult struct {
	// Moved is the number of rows that the batch moved back to pending.
	Moved int64
	// Last is the greatest id of the batch in the database's id order: the next batch starts
	// after it. Empty when the batch moved nothing.
	Last string
}

// FinishedRow is one outbox or inbox row as a listing shows it. Topic is the outbox topic;
// Source and Consumption are the inbox's.
type FinishedRow struct {
	ID          string
	Topic       string
	Source      string
	Consumption string
	Key         string
	State       string
	Attempt     int
	LastError   string
	CreatedAt   time.Time
	// UpdatedAt is the outbox updated_at; on the inbox it is processed_at, or created_at
	// when processed_at is null.
	UpdatedAt time.Time
	// Payload and Headers are read only when the scan asks for the bodies.
	Payload json.RawMessage
	Headers json.RawMessage
}

// ScanParams page through a selection in id order.
type ScanParams struct {
	// After is the id that the page starts after; empty starts at the first row.
	After string
	// Limit is the largest number of rows of the page; it must be above 0.
	Limit int
	// Bodies also reads the payload and the headers.
	Bodies bool
}

// ReplayStore holds the statements of the safe replay and of the dead-letter listings
// (docs/replay.md). Every batch is one short statement in its own transaction: a replay of a
// million rows is many batches, never one long transaction. The batches walk the selection in
// the database's id order, so a row that a batch moved and that was delivered again meanwhile
// is not moved twice by the same replay.
type ReplayStore interface {
	// OutboxSelectionCount counts the rows of the selection.
	OutboxSelectionCount(ctx context.Context, sel OutboxSelection) (int64, error)
	// OutboxSelectionScan returns one page of the selection.
	OutboxSelectionScan(ctx context.Context, sel OutboxSelection, page ScanParams) ([]FinishedRow, error)
	// OutboxReplayBatch moves at most Limit sent or dead rows of the selection whose id
	// comes after After back to pending (attempt 0, scheduled_at now, last_error and the
	// claim cleared) and raises the replay generation of each (ReplayGenerationTable), in one
	// transaction.
	OutboxReplayBatch(ctx context.Context, sel OutboxSelection, after string, limit int) (ReplayBatchResult, error)
	// InboxSelectionCount counts the rows of the selection.
	InboxSelectionCount(ctx context.Context, sel InboxSelection) (int64, error)
	// InboxSelectionScan returns one page of the selection.
	InboxSelectionScan(ctx context.Context, sel InboxSelection, page ScanParams) ([]FinishedRow, error)
	// InboxReplayBatch moves at most Limit processed or dead rows of the selection whose id
	// comes after After back to pending (attempt 0, scheduled_at now, last_error,
	// processed_at and the claim cleared), in one statement: the relay forwards a push row
	// again, a pull worker claims a pull row again.
	InboxReplayBatch(ctx context.Context, sel InboxSelection, after string, limit int) (ReplayBatchResult, error)
}
