package sqlserver

import (
	"context"
	"fmt"

	"github.com/alternayte/queuebox/shared/store"
)

// errDestinationStateNotBuilt is the answer of the destination state methods on SQL Server,
// whose statements are not written yet (issue 16): it wraps store.ErrNoDestinationState, so the
// outbox warns once and delivers without pause, circuit breaking and rate limits, as it does on
// a PostgreSQL database without migration V12.
var errDestinationStateNotBuilt = fmt.Errorf("sqlserver: the delivery controls are not built for SQL Server yet: %w", store.ErrNoDestinationState)

// OutboxDefer returns the fenced claims to pending after their delays.
func (s *Store) OutboxDefer(ctx context.Context, defers []store.OutboxDeferParams) ([]string, error) {
	return nil, errDestinationStateNotBuilt
}

// DestinationStates returns the row of every destination that has one.
func (s *Store) DestinationStates(ctx context.Context) ([]store.DestinationState, error) {
	return nil, errDestinationStateNotBuilt
}

// DestinationSetPaused pauses or resumes a destination.
func (s *Store) DestinationSetPaused(ctx context.Context, destination string, paused bool) (store.DestinationState, error) {
	return store.DestinationState{}, errDestinationStateNotBuilt
}

// DestinationRecordFailure counts one failure in the breaker window.
func (s *Store) DestinationRecordFailure(ctx context.Context, params store.BreakerFailureParams) (store.DestinationState, error) {
	return store.DestinationState{}, errDestinationStateNotBuilt
}

// DestinationRecordSuccess closes a breaker whose cool-down has passed.
func (s *Store) DestinationRecordSuccess(ctx context.Context, destination string) (store.DestinationState, error) {
	return store.DestinationState{}, errDestinationStateNotBuilt
}

// DestinationReserve takes one request slot of the destination's rate limit.
func (s *Store) DestinationReserve(ctx context.Context, params store.RateReserveParams) (store.RateReservation, error) {
	return store.RateReservation{}, errDestinationStateNotBuilt
}
