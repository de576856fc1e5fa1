package postgres

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
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
	v, err := inboxValuesOf(params)
	if err != nil {
		return store.InboxInsertResult{}, fmt.Errorf("inserting inbox row: %w", err)
	}
	var headers any
	if params.Headers != nil {
		headers = params.Headers
	}
	rows, err := s.pool.Query(ctx, s.sql.inboxInsert, params.Source, params.IdempotencyKey,
		params.AggregateID, params.EventType, params.Payload, headers, params.CorrelationID,
		v.consumption, v.state, v.lastError)
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

// inboxValues are the checked and defaulted values of an inbox insert.
type inboxValues struct {
	consumption, state, lastError string
}

// inboxValuesOf applies the defaults of InboxInsertParams and refuses a consumption other
// than push or pull and a state other than pending or dead. last_error is written with a
// dead state only.
func inboxValuesOf(p store.InboxInsertParams) (inboxValues, error) {
	v := inboxValues{consumption: p.Consumption, state: p.State}
	if v.consumption == "" {
		v.consumption = store.ConsumptionPush
	}
	if v.consumption != store.ConsumptionPush && v.consumption != store.ConsumptionPull {
		return inboxValues{}, fmt.Errorf("consumption %q is not %s or %s", v.consumption, store.ConsumptionPush, store.ConsumptionPull)
	}
	if v.state == "" {
		v.state = store.InboxPending
	}
	if v.state != store.InboxPending && v.state != store.InboxDead {
		return inboxValues{}, fmt.Errorf("state %q is not %s or %s", v.state, store.InboxPending, store.InboxDead)
	}
	if v.state == store.InboxDead {
		v.lastError = cleanText(p.LastError)
	}
	return v, nil
}

// inboxInsertBatchSQL stores many messages in one statement, and so in one transaction and
// one commit. Each of the ten arrays holds one value per message; an empty string writes
// null (the default '{}' for headers), as in inboxInsertSQL. The rows are inserted in array
// order (ORDER BY the ordinality): InboxInsertBatch sends them sorted by source and
// idempotency key, so two batches that share keys wait for each other's keys in the same
// order and never deadlock. ON CONFLICT skips a key that is stored or that a concurrent
// insert holds (after waiting for that insert to commit or roll back); RETURNING names the
// rows that were inserted.
const inboxInsertBatchSQL = `
INSERT INTO {table} ({source}, {idempotency_key}, {aggregate_id}, {event_type}, {payload},
    {headers}, {correlation_id}, {consumption}, {state}, {last_error})
SELECT r.qb_source, r.qb_key, NULLIF(r.qb_aggregate_id, ''), NULLIF(r.qb_event_type, ''),
    r.qb_payload::jsonb, COALESCE(NULLIF(r.qb_headers, '')::jsonb, '{}'::jsonb),
    NULLIF(r.qb_correlation_id, ''), r.qb_consumption, r.qb_state, NULLIF(r.qb_last_error, '')
FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[],
        $7::text[], $8::text[], $9::text[], $10::text[]) WITH ORDINALITY
    AS r(qb_source, qb_key, qb_aggregate_id, qb_event_type, qb_payload, qb_headers,
        qb_correlation_id, qb_consumption, qb_state, qb_last_error, qb_n)
ORDER BY r.qb_n
ON CONFLICT ({source}, {idempotency_key}) DO NOTHING
RETURNING {id}::text, {source}, {idempotency_key}`

// inboxKey is the deduplication identity of a message.
type inboxKey struct{ source, key string }

// InboxInsertBatch stores the messages in one statement (one transaction): one result per
// message, in order. A message whose key is stored, or that repeats an earlier message of the
// batch, is a Duplicate. A batch of one runs InboxInsert.
func (s *Store) InboxInsertBatch(ctx context.Context, params []store.InboxInsertParams) ([]store.InboxInsertResult, error) {
	if len(params) == 0 {
		return nil, nil
	}
	if len(params) == 1 {
		res, err := s.InboxInsert(ctx, params[0])
		if err != nil {
			return nil, err
		}
		return []store.InboxInsertResult{res}, nil
	}
	results := make([]store.InboxInsertResult, len(params))
	// The first message of each key is written; a later one of the same key is a duplicate
	// whatever happens to the first.
	first := make(map[inboxKey]int, len(params))
	order := make([]int, 0, len(params))
	for i, p := range params {
		if len(p.Payload) == 0 {
			return nil, fmt.Errorf("inserting inbox rows: message %d has no payload", i)
		}
		k := inboxKey{p.Source, p.IdempotencyKey}
		if _, ok := first[k]; ok {
			results[i].Duplicate = true
			continue
		}
		first[k] = i
		order = append(order, i)
	}
	slices.SortFunc(order, func(a, b int) int {
		if c := cmp.Compare(params[a].Source, params[b].Source); c != 0 {
			return c
		}
		return cmp.Compare(params[a].IdempotencyKey, params[b].IdempotencyKey)
	})
	n := len(order)
	cols := make([][]string, 10)
	for c := range cols {
		cols[c] = make([]string, n)
	}
	for j, i := range order {
		p := params[i]
		v, err := inboxValuesOf(p)
		if err != nil {
			return nil, fmt.Errorf("inserting inbox rows: message %d: %w", i, err)
		}
		cols[0][j], cols[1][j], cols[2][j], cols[3][j] = p.Source, p.IdempotencyKey, p.AggregateID, p.EventType
		cols[4][j], cols[5][j], cols[6][j] = string(p.Payload), string(p.Headers), p.CorrelationID
		cols[7][j], cols[8][j], cols[9][j] = v.consumption, v.state, v.lastError
	}
	rows, err := s.pool.Query(ctx, s.sql.inboxInsertBatch, cols[0], cols[1], cols[2], cols[3],
		cols[4], cols[5], cols[6], cols[7], cols[8], cols[9])
	if err != nil {
		return nil, wrapErr("inserting inbox rows", err)
	}
	inserted := make(map[inboxKey]string, n)
	var id string
	var k inboxKey
	_, err = pgx.ForEachRow(rows, []any{&id, &k.source, &k.key}, func() error {
		inserted[k] = id
		return nil
	})
	if err != nil {
		return nil, wrapErr("inserting inbox rows", err)
	}
	for _, i := range order {
		if id, ok := inserted[inboxKey{params[i].Source, params[i].IdempotencyKey}]; ok {
			results[i].ID = id
		} else {
			results[i].Duplicate = true
		}
	}
	return results, nil
}

// inboxRelayLockSQL serializes relay claims across every replica. The lock is keyed on the
// inbox table name and released when the claim transaction ends. The same statement sets the
// planner settings of the claim for that transaction (relayClaimPlan).
const inboxRelayLockSQL = `SELECT pg_advisory_xact_lock(hashtext($1::text)), ` + relayClaimPlan

// inboxRelayClaimSQL runs after the relay lock, so its snapshot holds every earlier claim. It
// takes pending push rows whose aggregate has no processing push row and no earlier pending
// push row, across every push source: at most one row per aggregate, the earliest by
// created_at, id. A row without an aggregate takes part in no ordering. Pull rows are never
// read or written. The update finds the candidates by primary key, as the outbox claim does
// (outboxClaimSQL says why).
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
    FROM qb_clock
    WHERE i.{id} = ANY (ARRAY(SELECT c.{id} FROM qb_candidates c))
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
	// The limit goes into the statement's text (limitTexts), or past its bound as a parameter.
	sql, args := s.sql.inboxRelayClaim, []any{params.Limit, micros(params.Lease)}
	if text, ok := s.relayTexts.text(sql, params.Limit, 0); ok {
		sql, args = text, args[1:]
	}
	rows, err := tx.Query(ctx, sql, args...)
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

const inboxRelayDeadSQL = `
UPDATE {table} i
SET {state} = 'dead',
    {last_error} = $3::text,
    {claim_token} = NULL,
    {lease_expires_at} = NULL` + inboxFence

const inboxRelayRenewSQL = `
UPDATE {table} i
SET {lease_expires_at} = clock_timestamp() + $3::bigint * interval '1 microsecond'` + inboxFence

// inboxRelayForwardFence is the first half of the forward statement (inboxRelayForwardSQL):
// the fenced update that marks the claimed row processed, $1 id and $2 token.
const inboxRelayForwardFence = `
WITH qb_fenced AS (
UPDATE {table} i
SET {state} = 'processed',
    {processed_at} = clock_timestamp(),
    {claim_token} = NULL,
    {lease_expires_at} = NULL` + inboxFence + `
RETURNING i.{id}
)`

// inboxRelayForwardInsertSQL is the second half of the forward statement: the outbox insert of
// variant v, which reads the fence's RETURNING, so that the row is inserted only when the
// fence held. Rendered with the outbox's names after inboxRelayForwardFence with the
// inbox's, the two make one statement, so one round trip and one commit. It takes $3 topic,
// $4 key, $5 aggregate type, $6 payload, $7 headers, then in this order and only when v has
// them: the id, max_attempts and the delay in microseconds.
func inboxRelayForwardInsertSQL(v insertVariant) (string, error) {
	insert := outboxInsertSQL(v)
	// The single-row insert's VALUES list becomes a SELECT of the fenced row, with every
	// parameter moved up by the two of the fence.
	cols, vals, ok := strings.Cut(strings.TrimPrefix(insert, "INSERT INTO {table} ("), ")\nVALUES (")
	if !ok {
		return "", fmt.Errorf("building the relay forward: unexpected insert %q", insert)
	}
	vals, returning, ok := strings.Cut(vals, ")\nRETURNING ")
	if !ok {
		return "", fmt.Errorf("building the relay forward: unexpected insert %q", insert)
	}
	vals = placeholderNumber.ReplaceAllStringFunc(vals, func(m string) string {
		n, _ := strconv.Atoi(m[1:])
		return "$" + strconv.Itoa(n+2)
	})
	return "INSERT INTO {table} (" + cols + ")\nSELECT " + vals + "\nFROM qb_fenced\nRETURNING " + returning, nil
}

// placeholderNumber matches a positional parameter.
var placeholderNumber = regexp.MustCompile(`\$[0-9]+`)

// inboxRelayProcessedUpdate marks processed, each through its fence, the claimed rows of the
// arrays $1 ids and $2 tokens. Its state test is written as the outbox fence's is, so that the
// plan looks each claim up by primary key instead of reading the partial index of processing
// rows (the comment on fence says why).
const inboxRelayProcessedUpdate = `
UPDATE {table} i
SET {state} = 'processed',
    {processed_at} = clock_timestamp(),
    {claim_token} = NULL,
    {lease_expires_at} = NULL
FROM unnest($1::uuid[], $2::uuid[]) AS f(id, token)
WHERE i.{id} = f.id
  AND i.{state} IS NOT DISTINCT FROM 'processing'
  AND i.{claim_token} = f.token
  AND i.{lease_expires_at} > clock_timestamp()`

// inboxRelayProcessedBatchSQL is inboxRelayProcessedUpdate returning the ids of the rows it
// changed.
const inboxRelayProcessedBatchSQL = inboxRelayProcessedUpdate + `
RETURNING i.{id}::text`

// inboxRelayForwardBatchFence is the first half of the one-statement batch forward
// (inboxRelayForwardBatchInsert): inboxRelayProcessedUpdate as a CTE, returning the ids under
// a name that the outbox half can read whatever the inbox's column names are.
const inboxRelayForwardBatchFence = `
WITH qb_fenced AS (` + inboxRelayProcessedUpdate + `
RETURNING i.{id} AS qb_inbox_id
),`

// inboxRelayForwardBatchInsert is the second half, rendered with the outbox's names: the
// outbox rows of the claims whose fence held, one per element of the arrays $1 inbox ids,
// $3 topics, $4 keys, $5 aggregate types, $6 payloads and $7 headers (as text: an empty
// payload is NULL, which the column refuses as the single-row insert's does, and empty
// headers are the empty object), $8 max_attempts, inserted in array order; and the ids of
// the fenced inbox rows. The insert is
// a data-modifying CTE, so it runs to completion although the final SELECT does not read it;
// the two halves are one statement, so one round trip and one commit, and all or nothing.
const inboxRelayForwardBatchInsert = `
qb_inserted AS (
INSERT INTO {table} ({topic}, {key}, {aggregate_type}, {payload}, {headers}, {max_attempts})
SELECT r.topic, NULLIF(r.msg_key, ''), NULLIF(r.aggregate_type, ''), NULLIF(r.payload, '')::jsonb,
    COALESCE(NULLIF(r.headers, '')::jsonb, '{}'::jsonb), r.max_attempts
FROM unnest($1::uuid[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::int[])
    WITH ORDINALITY AS r(inbox_id, topic, msg_key, aggregate_type, payload, headers, max_attempts, n)
JOIN qb_fenced q ON q.qb_inbox_id = r.inbox_id
ORDER BY r.n
RETURNING 1
)
SELECT q.qb_inbox_id::text FROM qb_fenced q`

// InboxRelayForwardBatch forwards the claimed rows atomically, the fenced update of every
// claim and the outbox inserts of the rows whose fence held, in the order given. When every
// row sets MaxAttempts and none sets an ID or a Delay (the relay's rows) that is one statement
// (inboxRelayForwardBatchFence and inboxRelayForwardBatchInsert); otherwise one transaction:
// the fenced update, then the single-row inserts sent together in one round trip.
func (s *Store) InboxRelayForwardBatch(ctx context.Context, params []store.InboxForwardParams) ([]bool, error) {
	out := make([]bool, len(params))
	ids := make([]string, 0, len(params))
	tokens := make([]string, 0, len(params))
	valid := make([]store.OutboxInsertParams, 0, len(params))
	oneStatement := true
	for _, p := range params {
		if isUUID(p.Claim.ID) && isUUID(p.Claim.Token) {
			ids, tokens = append(ids, p.Claim.ID), append(tokens, p.Claim.Token)
			valid = append(valid, p.Outbox)
			if p.Outbox.ID != "" || p.Outbox.Delay > 0 || p.Outbox.MaxAttempts <= 0 {
				oneStatement = false
			}
		}
	}
	if len(ids) == 0 {
		return out, nil
	}
	if oneStatement {
		return s.inboxRelayForwardOne(ctx, params, ids, tokens, valid)
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return nil, wrapErr("forwarding inbox rows: beginning transaction", err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	rows, err := tx.Query(ctx, s.sql.inboxRelayProcessedBatch, ids, tokens)
	if err != nil {
		return nil, wrapErr("forwarding inbox rows: marking processed", err)
	}
	held, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, wrapErr("forwarding inbox rows: marking processed", err)
	}
	if len(held) == 0 {
		return out, nil
	}
	fenced := heldClaims(held)
	batch := &pgx.Batch{}
	for i, p := range params {
		if !fenced[strings.ToLower(p.Claim.ID)] {
			continue
		}
		v, args, err := insertArgs(p.Outbox, nil)
		if err != nil {
			return nil, wrapErr("forwarding inbox rows", err)
		}
		batch.Queue(s.sql.outboxInsert[v], args...)
		out[i] = true
	}
	br := tx.SendBatch(ctx, batch)
	for range batch.Len() {
		if _, err := br.Exec(); err != nil {
			_ = br.Close()
			return nil, wrapErr("forwarding inbox rows: inserting outbox rows", err)
		}
	}
	if err := br.Close(); err != nil {
		return nil, wrapErr("forwarding inbox rows: inserting outbox rows", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, wrapErr("forwarding inbox rows: committing", err)
	}
	return out, nil
}

// inboxRelayForwardOne is InboxRelayForwardBatch in one statement, for params whose valid
// claims are ids and tokens, with their outbox rows in rows (in params' order), each setting
// MaxAttempts and no ID or Delay.
func (s *Store) inboxRelayForwardOne(ctx context.Context, params []store.InboxForwardParams, ids, tokens []string, rows []store.OutboxInsertParams) ([]bool, error) {
	n := len(rows)
	topics, keys, types := make([]string, 0, n), make([]string, 0, n), make([]string, 0, n)
	payloads, headers := make([]string, 0, n), make([]string, 0, n)
	attempts := make([]int32, 0, n)
	for _, o := range rows {
		if o.MaxAttempts > math.MaxInt32 {
			return nil, wrapErr("forwarding inbox rows", fmt.Errorf("%w: max_attempts %d is out of range", store.ErrInvalidValue, o.MaxAttempts))
		}
		topics, keys, types = append(topics, o.Topic), append(keys, o.Key), append(types, o.AggregateType)
		payloads, headers = append(payloads, string(o.Payload)), append(headers, string(o.Headers))
		attempts = append(attempts, int32(o.MaxAttempts))
	}
	result, err := s.pool.Query(ctx, s.sql.inboxRelayForwardBatch, ids, tokens, topics, keys, types, payloads, headers, attempts)
	if err != nil {
		return nil, wrapErr("forwarding inbox rows", err)
	}
	held, err := pgx.CollectRows(result, pgx.RowTo[string])
	if err != nil {
		return nil, wrapErr("forwarding inbox rows", err)
	}
	fenced := heldClaims(held)
	out := make([]bool, len(params))
	for i, p := range params {
		out[i] = fenced[strings.ToLower(p.Claim.ID)]
	}
	return out, nil
}

// heldClaims is the set of the inbox ids whose fence held, as the database prints them
// (lower case): a caller's claim id is looked up in lower case, as isUUID takes either.
func heldClaims(held []string) map[string]bool {
	fenced := make(map[string]bool, len(held))
	for _, id := range held {
		fenced[id] = true
	}
	return fenced
}

var _ store.InboxBatchForwarder = (*Store)(nil)

// InboxRelayForward marks the inbox row processed through the fence and inserts its outbox
// row, in one statement (one round trip, one commit). When the fence fails, nothing is
// written and the result is false.
func (s *Store) InboxRelayForward(ctx context.Context, params store.InboxForwardParams) (bool, error) {
	if !isUUID(params.Claim.ID) || !isUUID(params.Claim.Token) {
		return false, nil
	}
	v, args, err := insertArgs(params.Outbox, []any{params.Claim.ID, params.Claim.Token})
	if err != nil {
		return false, wrapErr("forwarding inbox row", err)
	}
	var id string
	err = s.pool.QueryRow(ctx, s.sql.inboxRelayForward[v], args...).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, wrapErr("forwarding inbox row", err)
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
