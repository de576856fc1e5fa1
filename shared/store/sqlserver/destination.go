package sqlserver

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/alternayte/queuebox/shared/store"
)

// errInvalidObjectName is Msg 208, "Invalid object name": the table does not exist.
const errInvalidObjectName = 208

// outboxDeferSQL: @p1 defers JSON [{"id","token","delay_ms"}]. OutboxRetry's statement without
// the attempt and the last error.
const outboxDeferSQL = `UPDATE o
SET o.{o.state} = N'pending',
    o.{o.scheduled_at} = DATEADD(millisecond, batch.batch_delay_ms, SYSUTCDATETIME()),
    o.{o.claim_token} = NULL,
    o.{o.lease_expires_at} = NULL,
    o.{o.updated_at} = SYSUTCDATETIME()
OUTPUT inserted.{o.id}
`

// maxDeferral is the longest deferral of one statement: INT milliseconds.
const maxDeferral = math.MaxInt32 * time.Millisecond

const deferColumns = `,
    batch_delay_ms INT '$.delay_ms'`

// OutboxDefer returns the fenced claims to pending after their delays, attempt and last_error
// unchanged, and returns the ids it changed.
func (s *Store) OutboxDefer(ctx context.Context, defers []store.OutboxDeferParams) ([]string, error) {
	claims := make([]store.Claim, len(defers))
	for i, d := range defers {
		claims[i] = d.Claim
	}
	batch, err := newFenceBatch(claims, func(i int, d *claimDoc) error {
		// A deferral longer than INT milliseconds (24.8 days) waits that long and is then
		// claimed and deferred again: its row is not attempted either way.
		delay, err := durationMS(min(max(defers[i].Delay, 0), maxDeferral))
		if err != nil {
			return fmt.Errorf("delay of %s: %w", d.ID, err)
		}
		d.DelayMS = &delay
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("deferring outbox rows: %w", err)
	}
	changed, err := s.runFenced(ctx, s.stmt.outboxDefer, batch, false)
	if err != nil {
		return nil, fmt.Errorf("deferring outbox rows: %w", err)
	}
	return claimIDs(changed), nil
}

// The statements of queuebox_destination_state (V1 of the QueueBox track), whose name and columns are
// fixed. Each reads the database clock once, into @qb_now, and changes the row with one MERGE
// WITH (HOLDLOCK): the key-range lock makes the insert of a missing row and the update of an
// existing one atomic against every other session. A duration is a BIGINT of microseconds,
// added with addMicros, so that a duration beyond INT's 35 minutes of microseconds works.

// stateNow declares the clock of a destination state statement.
const stateNow = "DECLARE @qb_now DATETIME2 = SYSUTCDATETIME();\n"

// stateColumns are the columns of a DestinationState, in scan order, as {r}.column: the
// remaining cool-down (µs) and the half-open flag are computed on @qb_now.
const stateColumns = `{r}.destination, {r}.paused, {r}.paused_at, {r}.open_until,
    CASE WHEN {r}.open_until > @qb_now THEN DATEDIFF_BIG(microsecond, @qb_now, {r}.open_until) ELSE 0 END,
    CASE WHEN {r}.open_until IS NOT NULL AND {r}.open_until <= @qb_now THEN CAST(1 AS BIT) ELSE CAST(0 AS BIT) END,
    {r}.failures, {r}.updated_at`

// addMicros returns the T-SQL that adds the BIGINT microseconds of param to the DATETIME2
// base: whole seconds first, then the rest, each within INT.
func addMicros(param, base string) string {
	return fmt.Sprintf("DATEADD(microsecond, CAST(%[1]s %% 1000000 AS INT), DATEADD(second, CAST(%[1]s / 1000000 AS INT), %[2]s))", param, base)
}

// subMicros returns the T-SQL that subtracts the BIGINT microseconds of param from base.
func subMicros(param, base string) string {
	return fmt.Sprintf("DATEADD(microsecond, -CAST(%[1]s %% 1000000 AS INT), DATEADD(second, -CAST(%[1]s / 1000000 AS INT), %[2]s))", param, base)
}

func columnsOf(alias string) string {
	return strings.ReplaceAll(stateColumns, "{r}", alias)
}

// mergeOne is the MERGE head of the row of destination @p1.
const mergeOne = `MERGE queuebox_destination_state WITH (HOLDLOCK) AS d
USING (SELECT @p1 AS destination) AS src
    ON d.destination = src.destination
`

// destinationStatesSQL reads every row, by name.
var destinationStatesSQL = stateNow + `SELECT ` + columnsOf("s") + `
FROM queuebox_destination_state AS s
ORDER BY s.destination;`

// destinationSetPausedSQL: @p1 destination, @p2 paused (BIT). A second pause keeps paused_at.
var destinationSetPausedSQL = stateNow + mergeOne + `WHEN MATCHED THEN UPDATE SET
    paused_at = CASE WHEN @p2 = 1 THEN COALESCE(CASE WHEN d.paused = 1 THEN d.paused_at END, @qb_now) END,
    paused = @p2,
    updated_at = @qb_now
WHEN NOT MATCHED THEN INSERT (destination, paused, paused_at, updated_at)
    VALUES (src.destination, @p2, CASE WHEN @p2 = 1 THEN @qb_now END, @qb_now)
OUTPUT ` + columnsOf("inserted") + `;`

// destinationRecordFailureSQL: @p1 destination, @p2 threshold (INT), @p3 window (µs), @p4
// cool-down (µs). The cases of PostgreSQL's statement: a failure while open is not counted; a
// failure of a half-open breaker opens it again at once; otherwise the count grows within the
// window (a window that has passed starts anew at this failure) and opens the breaker at the
// threshold. In an UPDATE every d.column is the value before the update.
var destinationRecordFailureSQL = stateNow +
	"DECLARE @qb_open_until DATETIME2 = " + addMicros("@p4", "@qb_now") + ";\n" +
	"DECLARE @qb_window_floor DATETIME2 = " + subMicros("@p3", "@qb_now") + ";\n" +
	mergeOne + `WHEN MATCHED THEN UPDATE SET
    failures = CASE
        WHEN d.open_until > @qb_now THEN d.failures
        WHEN d.open_until IS NOT NULL THEN 0
        WHEN d.window_started_at IS NULL OR d.window_started_at <= @qb_window_floor THEN
            CASE WHEN @p2 <= 1 THEN 0 ELSE 1 END
        WHEN d.failures + 1 >= @p2 THEN 0
        ELSE d.failures + 1 END,
    window_started_at = CASE
        WHEN d.open_until > @qb_now THEN d.window_started_at
        WHEN d.open_until IS NOT NULL THEN NULL
        WHEN d.window_started_at IS NULL OR d.window_started_at <= @qb_window_floor THEN
            CASE WHEN @p2 <= 1 THEN NULL ELSE @qb_now END
        WHEN d.failures + 1 >= @p2 THEN NULL
        ELSE d.window_started_at END,
    open_until = CASE
        WHEN d.open_until > @qb_now THEN d.open_until
        WHEN d.open_until IS NOT NULL THEN @qb_open_until
        WHEN d.window_started_at IS NULL OR d.window_started_at <= @qb_window_floor THEN
            CASE WHEN @p2 <= 1 THEN @qb_open_until END
        WHEN d.failures + 1 >= @p2 THEN @qb_open_until
        ELSE NULL END,
    updated_at = @qb_now
WHEN NOT MATCHED THEN INSERT (destination, failures, window_started_at, open_until, updated_at)
    VALUES (src.destination, CASE WHEN @p2 <= 1 THEN 0 ELSE 1 END, CASE WHEN @p2 > 1 THEN @qb_now END,
            CASE WHEN @p2 <= 1 THEN @qb_open_until END, @qb_now)
OUTPUT ` + columnsOf("inserted") + `;`

// destinationRecordSuccessSQL: @p1 destination. Closes a breaker whose cool-down has passed.
var destinationRecordSuccessSQL = stateNow + mergeOne + `WHEN MATCHED THEN UPDATE SET
    open_until = CASE WHEN d.open_until > @qb_now THEN d.open_until END,
    failures = CASE WHEN d.open_until > @qb_now THEN d.failures ELSE 0 END,
    window_started_at = CASE WHEN d.open_until > @qb_now THEN d.window_started_at END,
    updated_at = @qb_now
WHEN NOT MATCHED THEN INSERT (destination, updated_at)
    VALUES (src.destination, @qb_now)
OUTPUT ` + columnsOf("inserted") + `;`

// destinationReserveSQL: @p1 destination, @p2 interval (µs), @p3 tolerance (µs), @p4 max wait
// (µs). The generic cell rate algorithm of PostgreSQL's statement: tat = max(rate_tat, now);
// the slot is tat - tolerance, taken (rate_tat = tat + interval) when it is at most the max
// wait away, that is when tat - now <= tolerance + max wait. A missing row is created with the
// first slot taken. The answer is tat - now in µs (the caller subtracts the tolerance) and
// whether the slot was taken, both computed from the row before the change.
var destinationReserveSQL = stateNow + mergeOne + `WHEN MATCHED THEN UPDATE SET
    rate_tat = CASE
        WHEN d.rate_tat IS NULL OR d.rate_tat <= @qb_now THEN ` + addMicros("@p2", "@qb_now") + `
        WHEN DATEDIFF_BIG(microsecond, @qb_now, d.rate_tat) <= @p3 + @p4 THEN ` + addMicros("@p2", "d.rate_tat") + `
        ELSE d.rate_tat END
WHEN NOT MATCHED THEN INSERT (destination, rate_tat, updated_at)
    VALUES (src.destination, ` + addMicros("@p2", "@qb_now") + `, @qb_now)
OUTPUT
    CASE WHEN deleted.rate_tat IS NULL OR deleted.rate_tat <= @qb_now THEN CAST(0 AS BIGINT)
         ELSE DATEDIFF_BIG(microsecond, @qb_now, deleted.rate_tat) END,
    CASE WHEN deleted.rate_tat IS NULL OR deleted.rate_tat <= @qb_now
              OR DATEDIFF_BIG(microsecond, @qb_now, deleted.rate_tat) <= @p3 + @p4 THEN CAST(1 AS BIT)
         ELSE CAST(0 AS BIT) END;`

// missingState wraps Msg 208 (the table does not exist) in store.ErrNoDestinationState.
func missingState(op string, err error) error {
	if hasErrorNumber(err, errInvalidObjectName) {
		return fmt.Errorf("%s: %w: %w", op, store.ErrNoDestinationState, err)
	}
	return fmt.Errorf("%s: %w", op, translate(err))
}

// microsParam returns d in whole microseconds, at least 0, as a BIGINT parameter.
func microsParam(d time.Duration) int64 { return max(d, 0).Microseconds() }

func scanState(sc interface{ Scan(...any) error }) (store.DestinationState, error) {
	var s store.DestinationState
	var pausedAt, openUntil sql.NullTime
	var remainingUS int64
	if err := sc.Scan(&s.Destination, &s.Paused, &pausedAt, &openUntil, &remainingUS, &s.HalfOpen, &s.Failures, &s.UpdatedAt); err != nil {
		return store.DestinationState{}, err
	}
	if pausedAt.Valid {
		s.PausedAt = pausedAt.Time.UTC()
	}
	if openUntil.Valid {
		s.OpenUntil = openUntil.Time.UTC()
	}
	s.UpdatedAt = s.UpdatedAt.UTC()
	s.OpenRemaining = time.Duration(remainingUS) * time.Microsecond
	return s, nil
}

// DestinationStates returns the row of every destination that has one, by name.
func (s *Store) DestinationStates(ctx context.Context) ([]store.DestinationState, error) {
	const op = "reading the destination state"
	out, err := queryAll(ctx, s.db, destinationStatesSQL, nil, func(rows *sql.Rows) (store.DestinationState, error) {
		st, err := scanState(rows)
		if err != nil {
			return st, fmt.Errorf("scanning a destination state: %w", err)
		}
		return st, nil
	})
	if err != nil {
		return nil, missingState(op, err)
	}
	return out, nil
}

// oneState runs a MERGE of one destination's row and scans the row it outputs.
func (s *Store) oneState(ctx context.Context, op, query string, args ...any) (store.DestinationState, error) {
	st, err := retryDeadlock(ctx, func() (store.DestinationState, error) {
		return scanState(s.db.QueryRowContext(ctx, query, args...))
	})
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
	threshold := int32(min(max(p.Threshold, 1), 1<<30))
	return s.oneState(ctx, "counting a failure of destination "+p.Destination, destinationRecordFailureSQL,
		p.Destination, threshold, microsParam(p.Window), microsParam(p.CoolDown))
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
	type answer struct {
		aheadUS  int64
		reserved bool
	}
	a, err := retryDeadlock(ctx, func() (answer, error) {
		var a answer
		err := s.db.QueryRowContext(ctx, destinationReserveSQL, p.Destination,
			microsParam(p.Interval), microsParam(tolerance), microsParam(p.MaxWait)).Scan(&a.aheadUS, &a.reserved)
		return a, err
	})
	if err != nil {
		return store.RateReservation{}, missingState(op, err)
	}
	res := store.RateReservation{Reserved: a.reserved, Wait: max(time.Duration(a.aheadUS)*time.Microsecond-tolerance, 0)}
	if !res.Reserved {
		// The time until the slot is within MaxWait.
		res.Wait = max(res.Wait-p.MaxWait, time.Millisecond)
	}
	return res, nil
}
