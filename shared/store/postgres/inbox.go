package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/alternayte/queuebox/shared/store"
)

// inboxInsertSQL stores a message once per source and idempotency key. A duplicate inserts
// nothing and returns no row; ON CONFLICT waits for a concurrent insert of the same key to
// commit or roll back, so a storm of duplicates stores exactly one row.
const inboxInsertSQL = `
INSERT INTO {table} ({source}, {idempotency_key}, {aggregate_id}, {event_type}, {payload},
    {headers}, {correlation_id}, {consumption}, {state}, {last_error})
VALUES ($1, $2, NULLIF($3::text, ''), NULLIF($4::text, ''), $5::jsonb,
    COALESCE($6::jsonb, '{}'::jsonb), NULLIF($7::text, ''), $8, $9, NULLIF($10::text, ''))
ON CONFLICT ({source}, {idempotency_key}) DO NOTHING
RETURNING {id}::text`

// InboxInsert stores a message once per source and idempotency key. A duplicate is not an
// error: the result says Duplicate and nothing is written.
func (s *Store) InboxInsert(ctx context.Context, params store.InboxInsertParams) (store.InboxInsertResult, error) {
	consumption := params.Consumption
	if consumption == "" {
		consumption = store.ConsumptionPush
	}
	if consumption != store.ConsumptionPush && consumption != store.ConsumptionPull {
		return store.InboxInsertResult{}, fmt.Errorf("inserting inbox row: consumption %q is not %s or %s", consumption, store.ConsumptionPush, store.ConsumptionPull)
	}
	state := params.State
	if state == "" {
		state = store.InboxPending
	}
	if state != store.InboxPending && state != store.InboxDead {
		return store.InboxInsertResult{}, fmt.Errorf("inserting inbox row: state %q is not %s or %s", state, store.InboxPending, store.InboxDead)
	}
	lastError := ""
	if state == store.InboxDead {
		lastError = cleanText(params.LastError)
	}
	var headers any
	if params.Headers != nil {
		headers = params.Headers
	}
	rows, err := s.pool.Query(ctx, s.sql.inboxInsert, params.Source, params.IdempotencyKey,
		params.AggregateID, params.EventType, params.Payload, headers, params.CorrelationID,
		consumption, state, lastError)
	if err != nil {
		return store.InboxInsertResult{}, wrapErr("inserting inbox row", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return store.InboxInsertResult{}, wrapErr("inserting inbox row", err)
	}
	if len(ids) == 0 {
		return store.InboxInsertResult{Duplicate: true}, nil
	}
	return store.InboxInsertResult{ID: ids[0]}, nil
}

// inboxRelayLockSQL serializes relay claims across every replica. The lock is keyed on the
// inbox table name and released when the claim transaction ends.
const inboxRelayLockSQL = `SELECT pg_advisory_xact_lock(hashtext($1::text))`

// inboxRelayClaimSQL runs after the relay lock, so its snapshot holds every earlier claim. It
// takes pending push rows whose aggregate has no processing push row and no earlier pending
// push row, across every push source: at most one row per aggregate, the earliest by
// created_at, id. A row without an aggregate takes part in no ordering. Pull rows are never
// read or written.
const inboxRelayClaimSQL = `
WITH qb_clock AS (
    SELECT clock_timestamp() AS now
),
qb_candidates AS (
    SELECT i.{id}
    FROM {table} i
    WHERE i.{consumption} = 'push'
      AND i.{state} = 'pending'
      AND (i.{aggregate_id} IS NULL OR i.{aggregate_id} = '' OR (
          NOT EXISTS (
              SELECT 1
              FROM {table} p
              WHERE p.{aggregate_id} = i.{aggregate_id}
                AND p.{state} = 'processing'
                AND p.{consumption} = 'push')
          AND NOT EXISTS (
              SELECT 1
              FROM {table} e
              WHERE e.{aggregate_id} = i.{aggregate_id}
                AND e.{state} = 'pending'
                AND e.{consumption} = 'push'
                AND (e.{created_at}, e.{id}) < (i.{created_at}, i.{id}))))
    ORDER BY i.{created_at}, i.{id}
    LIMIT $1
    FOR UPDATE OF i SKIP LOCKED
),
qb_claimed AS (
    UPDATE {table} i
    SET {state} = 'processing',
        {claim_token} = gen_random_uuid(),
        {claimed_at} = qb_clock.now,
        {lease_expires_at} = qb_clock.now + $2::bigint * interval '1 microsecond'
    FROM qb_candidates c, qb_clock
    WHERE i.{id} = c.{id}
    RETURNING i.{id}::text AS id, i.{source} AS source, i.{idempotency_key} AS idempotency_key,
        COALESCE(i.{aggregate_id}, '') AS aggregate_id, COALESCE(i.{event_type}, '') AS event_type,
        i.{payload} AS payload, i.{headers} AS headers,
        COALESCE(i.{correlation_id}, '') AS correlation_id, i.{consumption} AS consumption,
        i.{attempt}::int AS attempt, i.{created_at} AS created_at,
        i.{claim_token}::text AS claim_token, i.{lease_expires_at} AS lease_expires_at
)
SELECT id, source, idempotency_key, aggregate_id, event_type, payload, headers, correlation_id,
    consumption, attempt, created_at, claim_token, lease_expires_at
FROM qb_claimed
ORDER BY created_at, id`

// InboxRelayClaim claims up to Limit pending push rows under the relay lock, at most one per
// aggregate across every push source, in created_at order.
func (s *Store) InboxRelayClaim(ctx context.Context, params store.InboxRelayClaimParams) ([]store.InboxMessage, error) {
	if params.Limit <= 0 {
		return nil, fmt.Errorf("claiming inbox relay batch: limit %d is not above 0", params.Limit)
	}
	if params.Lease <= 0 {
		return nil, fmt.Errorf("claiming inbox relay batch: lease %s is not above 0", params.Lease)
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return nil, wrapErr("claiming inbox relay batch: beginning transaction", err)
	}
	defer func() { _ = tx.Rollback(ctx) }()

	if _, err := tx.Exec(ctx, s.sql.inboxRelayLock, s.names.InboxTable); err != nil {
		return nil, wrapErr("claiming inbox relay batch: taking relay lock", err)
	}
	rows, err := tx.Query(ctx, s.sql.inboxRelayClaim, params.Limit, micros(params.Lease))
	if err != nil {
		return nil, wrapErr("claiming inbox relay batch", err)
	}
	msgs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.InboxMessage, error) {
		var m store.InboxMessage
		var payload, headers []byte
		err := r.Scan(&m.ID, &m.Source, &m.IdempotencyKey, &m.AggregateID, &m.EventType,
			&payload, &headers, &m.CorrelationID, &m.Consumption, &m.Attempt, &m.CreatedAt,
			&m.ClaimToken, &m.LeaseExpiresAt)
		m.Payload, m.Headers = payload, headers
		return m, err
	})
	if err != nil {
		return nil, wrapErr("claiming inbox relay batch", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, wrapErr("claiming inbox relay batch: committing", err)
	}
	return msgs, nil
}

// The fenced writes of the relay: id, state processing, token and a live lease.
const inboxFence = `
WHERE i.{id} = $1::uuid
  AND i.{state} = 'processing'
  AND i.{claim_token} = $2::uuid
  AND i.{lease_expires_at} > clock_timestamp()`

const inboxRelayProcessedSQL = `
UPDATE {table} i
SET {state} = 'processed',
    {processed_at} = clock_timestamp(),
    {claim_token} = NULL,
    {lease_expires_at} = NULL` + inboxFence

const inboxRelayDeadSQL = `
UPDATE {table} i
SET {state} = 'dead',
    {last_error} = $3::text,
    {claim_token} = NULL,
    {lease_expires_at} = NULL` + inboxFence

const inboxRelayRenewSQL = `
UPDATE {table} i
SET {lease_expires_at} = clock_timestamp() + $3::bigint * interval '1 microsecond'` + inboxFence

// InboxRelayForward inserts the outbox row and marks the inbox row processed through the
// fence, in one transaction. When the fence fails, the transaction rolls back (the outbox row
// never existed) and the result is false.
func (s *Store) InboxRelayForward(ctx context.Context, params store.InboxForwardParams) (bool, error) {
	if !isUUID(params.Claim.ID) || !isUUID(params.Claim.Token) {
		return false, nil
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return false, wrapErr("forwarding inbox row: beginning transaction", err)
	}
	defer func() { _ = tx.Rollback(ctx) }()

	if _, err := s.outboxInsert(ctx, tx, params.Outbox); err != nil {
		return false, wrapErr("forwarding inbox row: inserting outbox row", err)
	}
	tag, err := tx.Exec(ctx, s.sql.inboxRelayProcessed, params.Claim.ID, params.Claim.Token)
	if err != nil {
		return false, wrapErr("forwarding inbox row: marking processed", err)
	}
	if tag.RowsAffected() == 0 {
		if err := tx.Rollback(ctx); err != nil {
			return false, wrapErr("forwarding inbox row: rolling back after a lost claim", err)
		}
		return false, nil
	}
	if err := tx.Commit(ctx); err != nil {
		return false, wrapErr("forwarding inbox row: committing", err)
	}
	return true, nil
}

// InboxRelayDead marks a claimed row dead through the fence and reports whether it did.
func (s *Store) InboxRelayDead(ctx context.Context, claim store.Claim, lastError string) (bool, error) {
	if !isUUID(claim.ID) || !isUUID(claim.Token) {
		return false, nil
	}
	tag, err := s.pool.Exec(ctx, s.sql.inboxRelayDead, claim.ID, claim.Token, cleanText(lastError))
	if err != nil {
		return false, wrapErr("marking inbox row dead", err)
	}
	return tag.RowsAffected() == 1, nil
}

// InboxRelayRenew extends the lease of a claim whose fence still holds.
func (s *Store) InboxRelayRenew(ctx context.Context, claim store.Claim, lease time.Duration) (bool, error) {
	if lease <= 0 {
		return false, fmt.Errorf("renewing inbox relay lease: lease %s is not above 0", lease)
	}
	if !isUUID(claim.ID) || !isUUID(claim.Token) {
		return false, nil
	}
	tag, err := s.pool.Exec(ctx, s.sql.inboxRelayRenew, claim.ID, claim.Token, micros(lease))
	if err != nil {
		return false, wrapErr("renewing inbox relay lease", err)
	}
	return tag.RowsAffected() == 1, nil
}

const inboxRelayReclaimSQL = `
UPDATE {table} i
SET {state} = 'pending',
    {claim_token} = NULL,
    {lease_expires_at} = NULL
WHERE i.{consumption} = 'push'
  AND i.{state} = 'processing'
  AND (i.{lease_expires_at} IS NULL OR i.{lease_expires_at} <= clock_timestamp())`

// InboxRelayReclaim returns every processing push row whose lease expired to pending.
func (s *Store) InboxRelayReclaim(ctx context.Context) (int64, error) {
	tag, err := s.pool.Exec(ctx, s.sql.inboxRelayReclaim)
	if err != nil {
		return 0, wrapErr("reclaiming expired inbox relay claims", err)
	}
	return tag.RowsAffected(), nil
}

const inboxStatsSQL = `
SELECT count(*),
       COALESCE((EXTRACT(EPOCH FROM clock_timestamp() - min(i.{created_at})) * 1000000)::bigint, 0)
FROM {table} i
WHERE i.{state} = 'pending'`

// InboxStats returns the count of pending rows (push and pull) and the age of the oldest.
func (s *Store) InboxStats(ctx context.Context) (store.InboxStats, error) {
	var stats store.InboxStats
	var ageMicros int64
	if err := s.pool.QueryRow(ctx, s.sql.inboxStats).Scan(&stats.Pending, &ageMicros); err != nil {
		return store.InboxStats{}, wrapErr("reading inbox stats", err)
	}
	if ageMicros > 0 {
		stats.OldestPendingAge = time.Duration(ageMicros) * time.Microsecond
	}
	return stats, nil
}

// inboxDeleteFinishedSQL deletes a batch of old processed and dead rows; the outer WHERE
// rechecks the state on the newest version of each row.
const inboxDeleteFinishedSQL = `
DELETE FROM {table} i
WHERE i.{id} IN (
        SELECT d.{id}
        FROM {table} d
        WHERE d.{state} IN ('processed', 'dead')
          AND d.{created_at} < clock_timestamp() - $1::bigint * interval '1 microsecond'
        LIMIT $2)
  AND i.{state} IN ('processed', 'dead')`

// InboxDeleteFinished deletes at most Limit processed or dead rows older than MaxAge.
func (s *Store) InboxDeleteFinished(ctx context.Context, params store.DeleteFinishedParams) (int64, error) {
	if params.Limit <= 0 {
		return 0, fmt.Errorf("deleting finished inbox rows: limit %d is not above 0", params.Limit)
	}
	if params.MaxAge < 0 {
		return 0, fmt.Errorf("deleting finished inbox rows: max age %s is negative", params.MaxAge)
	}
	tag, err := s.pool.Exec(ctx, s.sql.inboxDeleteFinished, micros(params.MaxAge), params.Limit)
	if err != nil {
		return 0, wrapErr("deleting finished inbox rows", err)
	}
	return tag.RowsAffected(), nil
}
