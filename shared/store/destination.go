package store

import (
	"context"
	"errors"
	"time"
)

// DestinationStateTable is the table that holds the operator and circuit-breaker state of each
// destination and its rate-limit clock (V1 of the QueueBox track, migrations/queuebox). It is an extension of QueueBox's
// documented schema: see docs/delivery-controls.md.
const DestinationStateTable = "queuebox_destination_state"

// ErrNoDestinationState is returned (wrapped) by a DestinationStateStore method when
// DestinationStateTable does not exist: V1 of the QueueBox track has not been applied.
var ErrNoDestinationState = errors.New("the table " + DestinationStateTable + " does not exist: apply QueueBox's own migration V1__add_destination_state.sql")

// DestinationState is the row of DestinationStateTable of one destination. A destination
// without a row is resumed, closed and has never been rate limited.
type DestinationState struct {
	// Destination is the destination name.
	Destination string
	// Paused is true from an operator's pause until the resume.
	Paused bool
	// PausedAt is the time of the pause by the database clock; zero when not paused.
	PausedAt time.Time
	// OpenUntil is the end of the cool-down of an open circuit breaker, by the database
	// clock; zero when the breaker is closed.
	OpenUntil time.Time
	// OpenRemaining is what is left of the cool-down (OpenUntil minus the database clock's
	// now when the row was read); zero when the breaker is closed or the cool-down has passed.
	OpenRemaining time.Duration
	// HalfOpen is true when OpenUntil is set and has passed: the next outcome closes the
	// breaker (a success) or opens it again at once (a failure).
	HalfOpen bool
	// Failures counts the failed deliveries of the current breaker window.
	Failures int
	// UpdatedAt is the time of the last change, by the database clock.
	UpdatedAt time.Time
}

// Open reports whether the breaker is open: its cool-down has not passed.
func (s DestinationState) Open() bool { return s.OpenRemaining > 0 }

// BreakerFailureParams describe one failed delivery counted by a circuit breaker.
type BreakerFailureParams struct {
	Destination string
	// Threshold is the number of failures within Window that opens the breaker. At least 1.
	Threshold int
	// Window is the length of a counting window, which starts at its first failure.
	Window time.Duration
	// CoolDown is how long an opened breaker stays open.
	CoolDown time.Duration
}

// RateReserveParams ask for one request slot of a destination's rate limit.
//
// The limit is the generic cell rate algorithm: the row keeps a theoretical arrival time
// (TAT). A request at database time now may go at max(now, TAT - (Burst-1)*Interval); taking the
// slot moves TAT to max(TAT, now) + Interval.
type RateReserveParams struct {
	Destination string
	// Interval is the time per request: one second divided by the requests per second.
	Interval time.Duration
	// Burst is the number of requests that may go at once after an idle time. At least 1.
	Burst int
	// MaxWait is the longest wait that a reservation takes: a slot further away is not taken.
	MaxWait time.Duration
}

// RateReservation is the answer of DestinationReserve.
type RateReservation struct {
	// Reserved is true when the slot was taken: the request may go after Wait.
	Reserved bool
	// Wait is the time from the database clock's now to the slot, zero when it may go at
	// once. When Reserved is false, it is the time until a slot within MaxWait is expected.
	Wait time.Duration
}

// DestinationStateStore reads and writes DestinationStateTable. Every method is safe for
// concurrent use by many goroutines and many processes; each change is one statement.
type DestinationStateStore interface {
	// DestinationStates returns the row of every destination that has one, by name.
	DestinationStates(ctx context.Context) ([]DestinationState, error)
	// DestinationSetPaused pauses (true) or resumes (false) a destination, creating its row,
	// and returns the row afterwards. Pausing a paused destination keeps its PausedAt.
	DestinationSetPaused(ctx context.Context, destination string, paused bool) (DestinationState, error)
	// DestinationRecordFailure counts one failure in the breaker window (a window older than
	// Window starts anew at this failure). When the count reaches Threshold, or the breaker
	// is half-open, it opens the breaker (OpenUntil = now + CoolDown) and clears the count.
	// It returns the row afterwards.
	DestinationRecordFailure(ctx context.Context, params BreakerFailureParams) (DestinationState, error)
	// DestinationRecordSuccess closes a breaker whose cool-down has passed (it clears
	// OpenUntil and the count) and returns the row afterwards. A breaker still in its
	// cool-down stays open.
	DestinationRecordSuccess(ctx context.Context, destination string) (DestinationState, error)
	// DestinationReserve takes one request slot of the destination's rate limit when it is
	// at most MaxWait away, creating the row.
	DestinationReserve(ctx context.Context, params RateReserveParams) (RateReservation, error)
}

// OutboxDeferParams is one fenced deferral: state pending, scheduled_at = clock + Delay, token
// and lease cleared; attempt and last_error unchanged. A row is deferred when its destination is
// paused, its breaker is open or its rate limit has no slot: the delivery was not attempted.
type OutboxDeferParams struct {
	Claim
	Delay time.Duration
}
