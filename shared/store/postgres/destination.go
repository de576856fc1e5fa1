package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/alternayte/queuebox/shared/store"
)

// outboxDeferSQL returns fenced claims to pending after their delays: OutboxRetry's statement
// without the attempt and the last error.
const outboxDeferSQL = `
UPDATE {table} o
SET {state} = 'pending',
    {scheduled_at} = clock_timestamp() + f.delay_us * interval '1 microsecond',
    {claim_token} = NULL,
    {lease_expires_at} = NULL,
    {updated_at} = clock_timestamp()
FROM unnest($1::uuid[], $2::uuid[], $3::bigint[]) AS f(id, token, delay_us)
WHERE o.{id} = f.id` + fence + `
RETURNING o.{id}::text`

// OutboxDefer returns the fenced claims to pending after their delays, attempt and last_error
// unchanged, and returns the ids it changed.
func (s *Store) OutboxDefer(ctx context.Context, defers []store.OutboxDeferParams) ([]string, error) {
	fs := prepareFenced(defersOf(defers))
	if len(fs) == 0 {
		return nil, nil
	}
	ids, tokens := idsAndTokens(fs)
	delays, _ := delaysAndErrors(fs)
	return s.collectIDs(ctx, "deferring outbox rows", s.sql.outboxDefer, ids, tokens, delays)
}

// stateColumns are the columns of a DestinationState, in scan order; remaining and half_open
// are computed on the database clock.
const stateColumns = `destination, paused, paused_at, open_until,
    GREATEST(EXTRACT(EPOCH FROM (open_until - clock_timestamp())) * 1000000, 0)::bigint,
    (open_until IS NOT NULL AND open_until <= clock_timestamp()),
    failures, updated_at`

const destinationStatesSQL = `SELECT ` + stateColumns + ` FROM queuebox_destination_state ORDER BY destination`

// $1 destination, $2 paused.
const destinationSetPausedSQL = `
INSERT INTO queuebox_destination_state AS d (destination, paused, paused_at, updated_at)
VALUES ($1, $2, CASE WHEN $2 THEN clock_timestamp() END, clock_timestamp())
ON CONFLICT (destination) DO UPDATE
SET paused = EXCLUDED.paused,
    paused_at = CASE WHEN EXCLUDED.paused THEN COALESCE(CASE WHEN d.paused THEN d.paused_at END, clock_timestamp()) END,
    updated_at = clock_timestamp()
RETURNING ` + stateColumns

// $1 destination, $2 threshold, $3 window (µs), $4 cool-down (µs). A failure of a half-open
// breaker opens it again at once; otherwise the count grows within the window (a window that
// has passed starts anew) and opens the breaker at the threshold. An open breaker's failures
// (publishes that began before it opened) are not counted.
const destinationRecordFailureSQL = `
INSERT INTO queuebox_destination_state AS d (destination, failures, window_started_at, open_until, updated_at)
VALUES ($1, CASE WHEN $2 <= 1 THEN 0 ELSE 1 END, CASE WHEN $2 > 1 THEN clock_timestamp() END,
        CASE WHEN $2 <= 1 THEN clock_timestamp() + $4 * interval '1 microsecond' END, clock_timestamp())
ON CONFLICT (destination) DO UPDATE
SET failures = CASE
        WHEN d.open_until > clock_timestamp() THEN d.failures
        WHEN d.open_until IS NOT NULL THEN 0
        WHEN d.window_started_at IS NULL OR d.window_started_at + $3 * interval '1 microsecond' <= clock_timestamp() THEN
            CASE WHEN $2 <= 1 THEN 0 ELSE 1 END
        WHEN d.failures + 1 >= $2 THEN 0
        ELSE d.failures + 1 END,
    window_started_at = CASE
        WHEN d.open_until > clock_timestamp() THEN d.window_started_at
        WHEN d.open_until IS NOT NULL THEN NULL
        WHEN d.window_started_at IS NULL OR d.window_started_at + $3 * interval '1 microsecond' <= clock_timestamp() THEN
            CASE WHEN $2 <= 1 THEN NULL ELSE clock_timestamp() END
        WHEN d.failures + 1 >= $2 THEN NULL
        ELSE d.window_started_at END,
    open_until = CASE
        WHEN d.open_until > clock_timestamp() THEN d.open_until
        WHEN d.open_until IS NOT NULL THEN clock_timestamp() + $4 * interval '1 microsecond'
        WHEN d.window_started_at IS NULL OR d.window_started_at + $3 * interval '1 microsecond' <= clock_timestamp() THEN
            CASE WHEN $2 <= 1 THEN clock_timestamp() + $4 * interval '1 microsecond' END
        WHEN d.failures + 1 >= $2 THEN clock_timestamp() + $4 * interval '1 microsecond'
        ELSE NULL END,
    updated_at = clock_timestamp()
RETURNING ` + stateColumns

// $1 destination. Closes a breaker whose cool-down has passed.
const destinationRecordSuccessSQL = `
INSERT INTO queuebox_destination_state AS d (destination, updated_at)
VALUES ($1, clock_timestamp())
ON CONFLICT (destination) DO UPDATE
SET open_until = CASE WHEN d.open_until > clock_timestamp() THEN d.open_until END,
    failures = CASE WHEN d.open_until > clock_timestamp() THEN d.failures ELSE 0 END,
    window_started_at = CASE WHEN d.open_until > clock_timestamp() THEN d.window_started_at END,
    updated_at = clock_timestamp()
RETURNING ` + stateColumns

// $1 destination, $2 interval (µs), $3 tolerance (µs), $4 max wait (µs). The generic cell rate
// algorithm: the slot of a request at now is max(now, tat - tolerance); it is taken (tat moves
// to max(tat, now) + interval) when it is at most the max wait away. The answer is the wait in
// µs and whether the slot was taken. The row is created first, so the update always finds it.
const destinationReserveSQL = `
WITH ensure AS (
    INSERT INTO queuebox_destination_state (destination) VALUES ($1)
    ON CONFLICT (destination) DO NOTHING
), cur AS (
    SELECT GREATEST(COALESCE(rate_tat, clock_timestamp()), clock_timestamp()) AS tat, clock_timestamp() AS now
    FROM queuebox_destination_state WHERE destination = $1 FOR UPDATE
), upd AS (
    UPDATE queuebox_destination_state d
    SET rate_tat = cur.tat + $2 * interval '1 microsecond'
    FROM cur
    WHERE d.destination = $1
      AND cur.tat - $3 * interval '1 microsecond' <= cur.now + $4 * interval '1 microsecond'
    RETURNING 1
)
SELECT GREATEST(EXTRACT(EPOCH FROM (cur.tat - $3 * interval '1 microsecond' - cur.now)) * 1000000, 0)::bigint,
       EXISTS (SELECT 1 FROM upd)
FROM cur`

// missingState wraps an undefined-table error in store.ErrNoDestinationState.
func missingState(op string, err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "42P01" {
		return fmt.Errorf("%s: %w", op, store.ErrNoDestinationState)
	}
	return wrapErr(op, err)
}

func scanState(row pgx.Row) (store.DestinationState, error) {
	var s store.DestinationState
	var pausedAt, openUntil *time.Time
	var remainingUS int64
	err := row.Scan(&s.Destination, &s.Paused, &pausedAt, &openUntil, &remainingUS, &s.HalfOpen, &s.Failures, &s.UpdatedAt)
	if pausedAt != nil {
		s.PausedAt = *pausedAt
	}
	if openUntil != nil {
		s.OpenUntil = *openUntil
	}
	s.OpenRemaining = time.Duration(remainingUS) * time.Microsecond
	return s, err
}

// DestinationStates returns the row of every destination that has one, by name.
func (s *Store) DestinationStates(ctx context.Context) ([]store.DestinationState, error) {
	const op = "reading the destination state"
	rows, err := s.pool.Query(ctx, destinationStatesSQL)
	if err != nil {
		return nil, missingState(op, err)
	}
	defer rows.Close()
	var out []store.DestinationState
	for rows.Next() {
		st, err := scanState(rows)
		if err != nil {
			return nil, missingState(op, err)
		}
		out = append(out, st)
	}
	if err := rows.Err(); err != nil {
		return nil, missingState(op, err)
	}
	return out, nil
}

func (s *Store) oneState(ctx context.Context, op, sql string, args ...any) (store.DestinationState, error) {
	st, err := scanState(s.pool.QueryRow(ctx, sql, args...))
	if err != nil {
		return store.DestinationState{}, missingState(op, err)
	}
	return st, nil
}

// DestinationSetPaused pauses or resumes a destination and returns its row.
func (s *Store) DestinationSetPaused(ctx context.Context, destination string, paused bool) (store.DestinationState, error) {
	return s.oneState(ctx, "setting the pause of destination "+destination, destinationSetPausedSQL, destination, paused)
}

// DestinationRecordFailure counts one failure in the breaker window and returns the row.
func (s *Store) DestinationRecordFailure(ctx context.Context, p store.BreakerFailureParams) (store.DestinationState, error) {
	return s.oneState(ctx, "counting a failure of destination "+p.Destination, destinationRecordFailureSQL,
		p.Destination, max(p.Threshold, 1), micros(p.Window), micros(p.CoolDown))
}

// DestinationRecordSuccess closes a breaker whose cool-down has passed and returns the row.
func (s *Store) DestinationRecordSuccess(ctx context.Context, destination string) (store.DestinationState, error) {
	return s.oneState(ctx, "closing the breaker of destination "+destination, destinationRecordSuccessSQL, destination)
}

// DestinationReserve takes one request slot of the destination's rate limit when it is at
// most MaxWait away.
func (s *Store) DestinationReserve(ctx context.Context, p store.RateReserveParams) (store.RateReservation, error) {
	const op = "taking a rate-limit slot"
	tolerance := time.Duration(max(p.Burst, 1)-1) * p.Interval
	var waitUS int64
	var res store.RateReservation
	err := s.pool.QueryRow(ctx, destinationReserveSQL, p.Destination, micros(p.Interval), micros(tolerance), micros(p.MaxWait)).
		Scan(&waitUS, &res.Reserved)
	if errors.Is(err, pgx.ErrNoRows) {
		// The row was created by this statement: its snapshot could not see it. Ask again.
		err = s.pool.QueryRow(ctx, destinationReserveSQL, p.Destination, micros(p.Interval), micros(tolerance), micros(p.MaxWait)).
			Scan(&waitUS, &res.Reserved)
	}
	if err != nil {
		return store.RateReservation{}, missingState(op, err)
	}
	res.Wait = time.Duration(waitUS) * time.Microsecond
	if !res.Reserved {
		// The time until the slot is within MaxWait.
		res.Wait = max(res.Wait-p.MaxWait, time.Millisecond)
	}
	return res, nil
}
