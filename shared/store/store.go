// Package store is the database seam of QueueBox: the rows that the workers read, the
// parameters of every statement, and the Store interface that each SQL dialect implements
// (shared/store/postgres with pgx, shared/store/sqlserver with go-mssqldb).
//
// Every guarantee of QueueBox lives in these statements: the claim (one row of a key or an
// aggregate in flight), the lease (computed by the database clock), the fence (a write that
// finishes a claim matches the id, the state processing, the claim token and a live lease) and
// deduplication (the unique constraint on source and idempotency key). The domain packages
// never see SQL; they call these methods.
package store

import (
	"context"
	"encoding/json"
	"errors"
	"time"
)

// Outbox states, as written in the state column.
const (
	OutboxPending    = "pending"
	OutboxProcessing = "processing"
	OutboxSent       = "sent"
	OutboxDead       = "dead"
)

// Inbox states, as written in the state column.
const (
	InboxPending    = "pending"
	InboxProcessing = "processing"
	InboxProcessed  = "processed"
	InboxDead       = "dead"
)

// Inbox consumption modes, as written in the consumption column.
const (
	ConsumptionPush = "push"
	ConsumptionPull = "pull"
)

// ErrConflict reports a write that a unique constraint refused.
var ErrConflict = errors.New("store: conflict")

// ErrInvalidValue reports a value that the database refuses to store: a data exception such
// as a text too long for its column, or a JSON document that the column type cannot hold (a
// \u0000 escape or a lone surrogate in PostgreSQL's jsonb). Writing it again fails again, so
// a caller refuses the message (the inbox answers 400) or dead-letters it (the relay).
var ErrInvalidValue = errors.New("store: invalid value")

// Claim identifies one claimed row: its id and the claim token that the claim issued.
// Every fenced write takes a Claim.
type Claim struct {
	// ID is the row identifier (a UUID in its canonical text form).
	ID string
	// Token is the claim token (a UUID in its canonical text form).
	Token string
}

// OutboxMessage is one claimed outbox row.
type OutboxMessage struct {
	ID            string
	Topic         string
	Key           string // empty when the column is null or empty
	AggregateType string // empty when the column is null
	Payload       json.RawMessage
	Headers       json.RawMessage // a JSON object; "{}" when empty
	Attempt       int
	MaxAttempts   int
	ScheduledAt   time.Time
	CreatedAt     time.Time
	Sequence      int64
	// ClaimToken is the token of this claim.
	ClaimToken string
	// LeaseExpiresAt is the end of the lease, by the database clock.
	LeaseExpiresAt time.Time
	// ReplayGeneration is how many times a replay moved the row back to pending
	// (ReplayGenerationTable). OutboxClaim does not read it: the outbox poller fills it, with
	// one OutboxReplayGenerations per claimed batch, for the rows routed to a destination that
	// sends a deduplication id. 0 otherwise, and for a row never replayed.
	ReplayGeneration int64
}

// Claim returns the fence identity of the message.
func (m OutboxMessage) Claim() Claim { return Claim{ID: m.ID, Token: m.ClaimToken} }

// OutboxClaimParams are the parameters of OutboxClaim.
type OutboxClaimParams struct {
	// Limit is the largest number of rows to claim. It must be above 0.
	Limit int
	// Lease is the lease duration; lease_expires_at = database clock + Lease.
	Lease time.Duration
	// Window, when above 0, bounds the due pending rows that the claim examines in order to
	// Window; when they hold fewer than Limit rows that their keys let go, the claim also
	// takes the first row of each of at most Window keys and up to Window rows without a key
	// from past the window. The poller sets it on the claim after one that came back short
	// or took a row with a key, when the rows ahead may be held by their keys. A store may
	// ignore it: the rows claimed qualify either way.
	Window int
	// Skip lists the ids of rows that the caller holds under lock claims of its own: the
	// window of OutboxLockClaim passes over them, as they are still pending. OutboxClaim
	// does not read it.
	Skip []string
}

// OutboxRenewParams are the parameters of OutboxRenew.
type OutboxRenewParams struct {
	Claims []Claim
	Lease  time.Duration
}

// OutboxRetryParams is one fenced retry: attempt + 1, state pending, scheduled_at = clock + Delay,
// last_error = LastError, token and lease cleared.
type OutboxRetryParams struct {
	Claim
	Delay     time.Duration
	LastError string
}

// OutboxDeadParams is one fenced dead letter: state dead, last_error = LastError, token and lease
// cleared, attempt unchanged.
type OutboxDeadParams struct {
	Claim
	LastError string
}

// OutboxInsertParams describe a new outbox row. Zero values take the column defaults.
type OutboxInsertParams struct {
	// ID, when not empty, is the row identifier; otherwise the database generates one.
	ID            string
	Topic         string
	Key           string // empty writes null
	AggregateType string // empty writes null
	Payload       json.RawMessage
	Headers       json.RawMessage // nil writes the default '{}'
	// MaxAttempts, when above 0, is written into max_attempts; otherwise the column default.
	MaxAttempts int
	// Delay, when above 0, sets scheduled_at = database clock + Delay.
	Delay time.Duration
}

// OutboxReplayParams select sent and dead outbox rows to move back to pending.
// Every set filter narrows the selection; a zero field does not filter.
type OutboxReplayParams struct {
	IDs    []string
	Topics []string
	// CreatedFrom and CreatedTo bound created_at strictly (created_at > CreatedFrom and
	// created_at < CreatedTo), as the createdAfter and createdBefore filters of the admin
	// replay route say.
	CreatedFrom *time.Time
	CreatedTo   *time.Time
}

// OutboxStats feed the pending gauges.
type OutboxStats struct {
	// Pending counts rows in state pending.
	Pending int64
	// OldestPendingAge is the age of the oldest pending row by the database clock; zero
	// when no row is pending.
	OldestPendingAge time.Duration
	// PendingByTopic counts pending rows per topic (the domain maps topics to destinations).
	PendingByTopic map[string]int64
}

// OutboxLocker is the claim mode lock (docs/claim-modes.md), which a dialect may offer: the
// claim locks its rows in a transaction that stays open while they are delivered, and writes
// nothing to them until their outcomes, so a row is written once instead of twice (processing,
// then its outcome). The rows stay pending while they are locked, and the later rows of their
// keys stay back as they do behind a processing row.
type OutboxLocker interface {
	// OutboxLockClaim claims like OutboxClaim, with the same rows qualifying, in the same
	// order and skipping the same locked rows, but locks them (FOR UPDATE) in a transaction
	// that it leaves open, on a connection of its own, instead of moving them to processing.
	// The rows carry no claim token; LeaseExpiresAt is the end of Lease by the database
	// clock, after which the database ends the transaction if it was left idle. It returns a
	// nil OutboxLock with no rows.
	OutboxLockClaim(ctx context.Context, params OutboxClaimParams) (OutboxLock, []OutboxMessage, error)
}

// OutboxLock is the open transaction of one OutboxLockClaim, which holds the locks of its rows.
// Exactly one of Finish and Release must be called, once.
type OutboxLock interface {
	// Finish writes the outcomes of the claimed rows in the transaction and commits it, in
	// one round trip, and returns the ids that each outcome changed; a row given no outcome
	// stays pending as it was. With an error nothing was written: every row stays pending, and
	// the delivered ones are delivered again.
	Finish(ctx context.Context, outcomes OutboxOutcomes) (OutboxOutcomeIDs, error)
	// Release rolls the transaction back: every row stays pending as it was.
	Release()
}

// OutboxOutcomes are the outcomes of the rows of an OutboxLock. The Token of each Claim is
// not read.
type OutboxOutcomes struct {
	Sent    []Claim
	Retries []OutboxRetryParams
	Deads   []OutboxDeadParams
	Defers  []OutboxDeferParams
}

// OutboxOutcomeIDs are the ids that each kind of outcome changed.
type OutboxOutcomeIDs struct {
	Sent, Retried, Dead, Deferred []string
}

// OutboxStore holds the statements of the outbox.
//
// Every method is safe for concurrent use by many goroutines and many processes: the
// database is the only coordination point.
type OutboxStore interface {
	// OutboxInsert writes one outbox row and returns its id.
	OutboxInsert(ctx context.Context, params OutboxInsertParams) (string, error)
	// OutboxClaim claims up to Limit due pending rows: scheduled_at has passed, and the key is
	// null or empty or no earlier row of the key (by sequence) is pending or processing. It
	// returns at most one row per non-empty key, in scheduled_at, sequence order, skipping
	// rows that another claim has locked. Each row moves to processing with a new token,
	// claimed_at and a lease from the database clock. It never takes processing rows.
	OutboxClaim(ctx context.Context, params OutboxClaimParams) ([]OutboxMessage, error)
	// OutboxRenew extends the leases of claims whose fence still holds and returns those.
	OutboxRenew(ctx context.Context, params OutboxRenewParams) ([]Claim, error)
	// OutboxMarkSent marks the fenced claims sent and returns the ids it changed; a claim
	// missing from the result lost its fence.
	OutboxMarkSent(ctx context.Context, claims []Claim) ([]string, error)
	// OutboxRetry schedules the fenced retries and returns the ids it changed.
	OutboxRetry(ctx context.Context, retries []OutboxRetryParams) ([]string, error)
	// OutboxMarkDead marks the fenced claims dead and returns the ids it changed.
	OutboxMarkDead(ctx context.Context, deads []OutboxDeadParams) ([]string, error)
	// OutboxDefer returns the fenced claims to pending after their delays, attempt and
	// last_error unchanged, and returns the ids it changed.
	OutboxDefer(ctx context.Context, defers []OutboxDeferParams) ([]string, error)
	// OutboxReclaim returns every processing row whose lease expired to pending, attempt
	// unchanged, token and lease cleared, and returns the count.
	OutboxReclaim(ctx context.Context) (int64, error)
	// OutboxReplay moves the selected sent and dead rows to pending with attempt 0,
	// scheduled_at now and last_error cleared, raises the replay generation of each
	// (ReplayGenerationTable) in the same statement, and returns the count.
	OutboxReplay(ctx context.Context, params OutboxReplayParams) (int64, error)
	// OutboxStats returns the figures of the pending gauges.
	OutboxStats(ctx context.Context) (OutboxStats, error)
	// OutboxFinishedTopics returns the distinct topics of the sent and dead rows: the admin
	// replay resolves a destination to the topics that route to it from them.
	OutboxFinishedTopics(ctx context.Context) ([]string, error)
	// OutboxDeleteFinished deletes at most Limit sent or dead rows whose updated_at is older
	// than MaxAge by the database clock, and returns the count.
	OutboxDeleteFinished(ctx context.Context, params DeleteFinishedParams) (int64, error)
	// OutboxDeleteExcess deletes at most Limit rows of State (sent or dead) beyond the Keep
	// newest rows of that state (by updated_at), and returns the count.
	OutboxDeleteExcess(ctx context.Context, params DeleteExcessParams) (int64, error)
}

// DeleteFinishedParams are the parameters of the age retention deletes.
type DeleteFinishedParams struct {
	MaxAge time.Duration
	Limit  int
}

// DeleteExcessParams are the parameters of the outbox count retention delete.
type DeleteExcessParams struct {
	State string
	Keep  int64
	Limit int
}

// InboxMessage is one inbox row as the relay claims it.
type InboxMessage struct {
	ID             string
	Source         string
	IdempotencyKey string
	AggregateID    string // empty when null
	EventType      string // empty when null
	Payload        json.RawMessage
	Headers        json.RawMessage
	CorrelationID  string // empty when null
	Consumption    string
	Attempt        int
	CreatedAt      time.Time
	ClaimToken     string
	LeaseExpiresAt time.Time
}

// Claim returns the fence identity of the message.
func (m InboxMessage) Claim() Claim { return Claim{ID: m.ID, Token: m.ClaimToken} }

// InboxInsertParams describe a received message.
type InboxInsertParams struct {
	Source         string
	IdempotencyKey string
	AggregateID    string // empty writes null
	EventType      string // empty writes null
	Payload        json.RawMessage
	Headers        json.RawMessage // nil writes '{}'
	CorrelationID  string          // empty writes null
	// Consumption is push or pull; empty means push.
	Consumption string
	// State is pending or dead (a broker message that cannot be stored as pending); empty
	// means pending.
	State string
	// LastError is written with a dead state.
	LastError string
}

// InboxInsertResult tells a new row from a duplicate.
type InboxInsertResult struct {
	// ID is the id of the new row; empty for a duplicate.
	ID string
	// Duplicate is true when a row with the same source and idempotency key exists.
	Duplicate bool
}

// InboxRelayClaimParams are the parameters of InboxRelayClaim.
type InboxRelayClaimParams struct {
	Limit int
	Lease time.Duration
}

// InboxForwardParams are the parameters of InboxRelayForward.
type InboxForwardParams struct {
	Claim  Claim
	Outbox OutboxInsertParams
}

// InboxBatchForwarder is a store that forwards many claimed relay rows in one transaction
// (PostgreSQL); the relay forwards row by row through InboxRelayForward with a store that is
// not one.
type InboxBatchForwarder interface {
	// InboxRelayForwardBatch marks processed, through the fence of each claim, every row whose
	// claim still holds, and inserts the outbox rows of exactly those rows in the order given,
	// all in one transaction. It returns, per entry, whether its row was forwarded. An error
	// means that nothing was written (a store.ErrInvalidValue does not say which entry the
	// database refused).
	InboxRelayForwardBatch(ctx context.Context, params []InboxForwardParams) ([]bool, error)
}

// InboxStats feed the inbox gauges.
type InboxStats struct {
	Pending          int64
	OldestPendingAge time.Duration
}

// InboxStore holds the statements of the inbox and the relay.
//
// Every method is safe for concurrent use by many goroutines and many processes.
type InboxStore interface {
	// InboxInsert stores a message once per source and idempotency key. A duplicate is not
	// an error: the result says Duplicate and nothing is written.
	InboxInsert(ctx context.Context, params InboxInsertParams) (InboxInsertResult, error)
	// InboxInsertBatch stores many messages in one transaction, with the deduplication of
	// InboxInsert: the result holds one entry per params entry, in the same order. A message
	// whose source and idempotency key are already stored, or that repeats an earlier entry of
	// the same batch, is a Duplicate. The batch is written entirely or not at all: on an error
	// nothing of it is stored (and a store.ErrInvalidValue does not say which entry the
	// database refused).
	InboxInsertBatch(ctx context.Context, params []InboxInsertParams) ([]InboxInsertResult, error)
	// InboxRelayClaim claims up to Limit pending push rows under the relay lock, at most one
	// per aggregate across every push source and none of an aggregate that has a processing
	// row, in created_at order. Pull rows are never touched.
	InboxRelayClaim(ctx context.Context, params InboxRelayClaimParams) ([]InboxMessage, error)
	// InboxRelayForward inserts the outbox row and marks the inbox row processed through the
	// fence, in one transaction. When the fence fails it rolls the insert back and returns
	// false.
	InboxRelayForward(ctx context.Context, params InboxForwardParams) (bool, error)
	// InboxRelayDead marks a claimed row dead through the fence and reports whether it did.
	InboxRelayDead(ctx context.Context, claim Claim, lastError string) (bool, error)
	// InboxRelayRenew extends the lease of a claim whose fence still holds.
	InboxRelayRenew(ctx context.Context, claim Claim, lease time.Duration) (bool, error)
	// InboxRelayReclaim returns every processing push row whose lease expired to pending and
	// returns the count.
	InboxRelayReclaim(ctx context.Context) (int64, error)
	// InboxStats returns the figures of the inbox gauges (pending push and pull rows).
	InboxStats(ctx context.Context) (InboxStats, error)
	// InboxDeleteFinished deletes at most Limit processed or dead rows whose created_at is
	// older than MaxAge by the database clock, and returns the count.
	InboxDeleteFinished(ctx context.Context, params DeleteFinishedParams) (int64, error)
}

// Store is everything QueueBox asks of a database.
type Store interface {
	OutboxStore
	InboxStore
	DestinationStateStore
	SessionRevocationStore
	ReplayGenerationStore
	// Ping checks that the database answers.
	Ping(ctx context.Context) error
	// CheckSchema verifies at start that the inbox headers column and the outbox sequence
	// column exist. Its error names the table and the column and carries the dialect's
	// ALTER TABLE statements.
	CheckSchema(ctx context.Context) error
	// Close releases the connections.
	Close()
}
