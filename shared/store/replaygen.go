package store

import (
	"context"
	"errors"
)

// ReplayGenerationTable counts the replays of each outbox row (V3 of the QueueBox track,
// migrations/queuebox): the row's id and how many times a replay moved it back to pending. It
// is kept outside the outbox table, whose columns are documented. A destination that drops a
// message whose deduplication id it has seen (a JetStream stream's Nats-Msg-Id) gets an id of
// its own for each replay of a row, and one id for all the retries of one delivery
// (outbox.Message.DedupID). An extension of QueueBox's documented schema: see docs/headers.md.
const ReplayGenerationTable = "queuebox_replay_generation"

// ErrNoReplayGenerations is returned (wrapped) when ReplayGenerationTable does not exist: V3
// of the QueueBox track has not been applied.
var ErrNoReplayGenerations = errors.New("the table " + ReplayGenerationTable +
	" does not exist: apply QueueBox's own migration V3__add_replay_generation.sql")

// ReplayGenerationStore reads ReplayGenerationTable. The replay statements write it:
// OutboxStore.OutboxReplay and ReplayStore.OutboxReplayBatch raise the generation of every
// row that they move, in the statement (and so the transaction) that moves it.
type ReplayGenerationStore interface {
	// OutboxReplayGenerations returns the generation of each of ids that a replay moved at
	// least once, keyed by the id as OutboxClaim returns it; an id that is missing was never
	// replayed (generation 0). One statement for all of ids.
	OutboxReplayGenerations(ctx context.Context, ids []string) (map[string]int64, error)
}
