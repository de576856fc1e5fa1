package postgres

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/alternayte/queuebox/shared/store"
)

// insertVariant selects the optional columns of an outbox insert, so that a zero field takes
// the column default of the table (which a custom table may define differently).
type insertVariant uint8

const (
	insertWithID insertVariant = 1 << iota
	insertWithMaxAttempts
	insertWithDelay

	insertVariants = 1 << iota
)

// outboxInsertSQL builds the insert of one variant. The parameters are $1 topic, $2 key,
// $3 aggregate type, $4 payload, $5 headers, then in this order and only when the variant has
// them: the id, max_attempts, and the delay in microseconds.
func outboxInsertSQL(v insertVariant) string {
	cols := []string{"{topic}", "{key}", "{aggregate_type}", "{payload}", "{headers}"}
	vals := []string{"$1", "NULLIF($2::text, '')", "NULLIF($3::text, '')", "$4::jsonb", "COALESCE($5::jsonb, '{}'::jsonb)"}
	next := 6
	if v&insertWithID != 0 {
		cols = append(cols, "{id}")
		vals = append(vals, fmt.Sprintf("$%d::uuid", next))
		next++
	}
	if v&insertWithMaxAttempts != 0 {
		cols = append(cols, "{max_attempts}")
		vals = append(vals, fmt.Sprintf("$%d::int", next))
		next++
	}
	if v&insertWithDelay != 0 {
		cols = append(cols, "{scheduled_at}")
		vals = append(vals, fmt.Sprintf("clock_timestamp() + $%d::bigint * interval '1 microsecond'", next))
	}
	return "INSERT INTO {table} (" + strings.Join(cols, ", ") + ")\nVALUES (" + strings.Join(vals, ", ") +
		")\nRETURNING {id}::text"
}

// insertArgs returns the variant of the outbox insert of p and its arguments, after first (the
// parameters that come before the insert's own in a larger statement): $1 topic, $2 key, $3
// aggregate type, $4 payload, $5 headers, then the id, max_attempts and the delay in
// microseconds when p has them, each numbered after first.
func insertArgs(p store.OutboxInsertParams, first []any) (insertVariant, []any, error) {
	if p.ID != "" && !isUUID(p.ID) {
		return 0, nil, fmt.Errorf("id %q is not a UUID", p.ID)
	}
	var headers any
	if p.Headers != nil {
		headers = p.Headers
	}
	var v insertVariant
	args := append(first, p.Topic, p.Key, p.AggregateType, p.Payload, headers)
	if p.ID != "" {
		v |= insertWithID
		args = append(args, p.ID)
	}
	if p.MaxAttempts > 0 {
		v |= insertWithMaxAttempts
		args = append(args, p.MaxAttempts)
	}
	if p.Delay > 0 {
		v |= insertWithDelay
		args = append(args, micros(p.Delay))
	}
	return v, args, nil
}

// querier is what an insert runs on: the pool or a transaction.
type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// OutboxInsert writes one outbox row and returns its id.
func (s *Store) OutboxInsert(ctx context.Context, params store.OutboxInsertParams) (string, error) {
	id, err := s.outboxInsert(ctx, s.pool, params)
	if err != nil {
		return "", wrapErr("inserting outbox row", err)
	}
	return id, nil
}

func (s *Store) outboxInsert(ctx context.Context, q querier, p store.OutboxInsertParams) (string, error) {
	v, args, err := insertArgs(p, nil)
	if err != nil {
		return "", err
	}
	var id string
	if err := q.QueryRow(ctx, s.sql.outboxInsert[v], args...).Scan(&id); err != nil {
		return "", err
	}
	return id, nil
}

// outboxClaimSQL claims due pending rows. A row of a non-empty key qualifies only when no
// earlier row of its key (by sequence) is pending or processing, so at most one row of a key
// qualifies and a row that waits for a retry holds its key; a dead or sent row releases it.
// The NOT EXISTS probe uses the partial index on (key, sequence). Rows that another claim has
// locked are skipped; the later rows of their key still see them pending and stay back.
//
// The order of one key comes from that predicate, not from the ORDER BY. The scan walks the
// partial index on (state, scheduled_at) in scheduled_at order and stops at the limit; within
// one scheduled_at (rows of one transaction) it takes the index order, which follows the
// insert order. Ordering the scan by sequence as well would make PostgreSQL sort every due
// row on each claim when a bulk insert gives many rows one scheduled_at. The claimed batch
// is returned in scheduled_at, sequence order.
//
// One clock reading decides which rows are due and gives claimed_at, updated_at and the lease
// of every row. The due test reads it through a subquery, so it is a parameter that bounds
// the index scan (Index Cond: scheduled_at <= $n) and the scan stops at the first row that is
// not due. Written as scheduled_at <= clock_timestamp(), a volatile call, it was a filter
// instead: every claim read each pending row scheduled in the future (rows waiting for a
// retry while a destination is down) before it could stop, 19-20 ms per claim for 100 000
// such rows on a quiet machine against 0.2-0.6 ms now, and a poll every pollIntervalMs.
//
// The update finds the candidates by primary key (id = ANY of their array). Joined to the
// candidates instead, it was planned, from a limit of a few hundred rows, as a hash join over
// a sequential scan of the whole table: on a table of 50 000 rows that doubled the time of a
// claim of 500 (8 ms of its 16 in EXPLAIN ANALYZE), and the scan grows with the table.
const outboxClaimSQL = `
WITH qb_clock AS (
    SELECT clock_timestamp() AS now
),
qb_candidates AS (
    SELECT o.{id}
    FROM {table} o
    WHERE o.{state} = 'pending'
      AND o.{scheduled_at} <= (SELECT qb_clock.now FROM qb_clock)
      AND (o.{key} IS NULL OR o.{key} = '' OR NOT EXISTS (
          SELECT 1
          FROM {table} e
          WHERE e.{key} = o.{key}
            AND e.{sequence} < o.{sequence}
            AND e.{state} IN ('pending', 'processing')))
    ORDER BY o.{scheduled_at}
    LIMIT $1
    FOR UPDATE OF o SKIP LOCKED
),` + outboxClaimTail

// outboxClaimWindowSQL claims like outboxClaimSQL, but examines at most $3 due pending rows
// in scheduled_at order. It is for the claim after one that came back short or took a row
// with a key: when the rows ahead are held by their keys (few keys with deep backlogs, or
// every key in flight), outboxClaimSQL walks past every one of them on each claim. On 20 000
// due rows over 10 keys a claim took 205-235 ms for its 10 rows; this one 4-6 ms.
//
// When the $3 rows of the window hold fewer than $1 free rows, the claim also looks past it:
//   - qb_heads walks the partial index on (key, sequence) one key at a time (a loose index
//     scan), at most $3 keys in key order: the first pending or processing row of each key,
//     which qualifies when it is pending and due. That is the NOT EXISTS predicate itself,
//     read per key instead of per row, one index descent per key;
//   - qb_unkeyed reads rows without a key from the same index, at most $3 pending and
//     processing rows of a null and $3 of an empty key, in sequence order.
//
// qb_picked keeps the pending, due rows of both, beside the free rows of the window.
//
// qb_heads and qb_unkeyed are skipped (a one-time filter on qb_gate) when the window found
// $1 free rows or held every due pending row. Every part is bounded by $3, so a claim costs
// O($3) whatever the backlog: unbounded, the walk of keys took 1.5-1.7 s per claim on
// 100 000 keys with two rows each. A row that none of them reaches (at least $3 due rows
// ahead of it, held, and its key past the first $3 keys) waits until the rows ahead of it
// are delivered.
//
// The picked rows are locked in a separate step, FOR UPDATE SKIP LOCKED with the limit after
// the skip, so a row that another claim holds is passed over as in outboxClaimSQL; a row that
// another claim took since this statement's snapshot fails the state test on its new version.
// That step finds the picked rows by their tuple address (ctid, a TID scan), which the parts
// above read with each row: the statement's snapshot keeps those row versions in place, and a
// version that another transaction replaced since is followed to its newest version by the
// lock, whose state test then decides (or the row is passed over), as after a lookup by
// primary key. By primary key the step cost about 8 buffer reads per row, over a quarter of
// a 500-row windowed claim's reads on 100 000 keyed rows (bench/README.md). The state test is
// IS NOT DISTINCT FROM so that it matches no partial index's predicate. The update of the
// tail still finds the locked rows by primary key: a row locked on its newest version has a
// tuple address that the statement's snapshot does not see.
const outboxClaimWindowSQL = `
WITH RECURSIVE qb_clock AS (
    SELECT clock_timestamp() AS now
),
qb_window AS (
    SELECT o.ctid AS qb_tid, o.{key}, o.{sequence}
    FROM {table} o
    WHERE o.{state} = 'pending'
      AND o.{scheduled_at} <= (SELECT qb_clock.now FROM qb_clock)
    ORDER BY o.{scheduled_at}
    LIMIT $3
),
qb_free AS (
    SELECT w.qb_tid
    FROM qb_window w
    WHERE w.{key} IS NULL OR w.{key} = '' OR NOT EXISTS (
          SELECT 1
          FROM {table} e
          WHERE e.{key} = w.{key}
            AND e.{sequence} < w.{sequence}
            AND e.{state} IN ('pending', 'processing'))
    LIMIT $1
),
qb_gate AS (
    SELECT (SELECT count(*) FROM qb_free) < $1 AND (SELECT count(*) FROM qb_window) >= $3 AS more
),
qb_heads AS (
    (SELECT o.{key}, o.ctid AS qb_tid, o.{state}, o.{scheduled_at}, 1 AS n
     FROM {table} o
     WHERE o.{state} IN ('pending', 'processing')
       AND o.{key} > ''
       AND (SELECT g.more FROM qb_gate g)
     ORDER BY o.{key}, o.{sequence}
     LIMIT 1)
    UNION ALL
    SELECT x.{key}, x.qb_tid, x.{state}, x.{scheduled_at}, h.n + 1
    FROM qb_heads h
    CROSS JOIN LATERAL (
        SELECT o.{key}, o.ctid AS qb_tid, o.{state}, o.{scheduled_at}
        FROM {table} o
        WHERE o.{state} IN ('pending', 'processing')
          AND o.{key} > h.{key}
        ORDER BY o.{key}, o.{sequence}
        LIMIT 1) x
    WHERE h.n < $3
),
qb_unkeyed AS (
    (SELECT o.ctid AS qb_tid, o.{state}, o.{scheduled_at}
     FROM {table} o
     WHERE o.{key} IS NULL
       AND o.{state} IN ('pending', 'processing')
       AND (SELECT g.more FROM qb_gate g)
     ORDER BY o.{key}, o.{sequence}
     LIMIT $3)
    UNION ALL
    (SELECT o.ctid AS qb_tid, o.{state}, o.{scheduled_at}
     FROM {table} o
     WHERE o.{key} = ''
       AND o.{state} IN ('pending', 'processing')
       AND (SELECT g.more FROM qb_gate g)
     ORDER BY o.{key}, o.{sequence}
     LIMIT $3)
),
qb_picked AS (
    SELECT f.qb_tid FROM qb_free f
    UNION
    SELECT p.qb_tid
    FROM (SELECT h.qb_tid, h.{state}, h.{scheduled_at} FROM qb_heads h
          UNION ALL
          SELECT u.qb_tid, u.{state}, u.{scheduled_at} FROM qb_unkeyed u) p
    WHERE p.{state} = 'pending'
      AND p.{scheduled_at} <= (SELECT qb_clock.now FROM qb_clock)
),
qb_candidates AS (
    SELECT o.{id}
    FROM {table} o
    WHERE o.ctid = ANY (ARRAY(SELECT p.qb_tid FROM qb_picked p))
      AND o.{state} IS NOT DISTINCT FROM 'pending'
    ORDER BY o.{scheduled_at}, o.{sequence}
    LIMIT $1
    FOR UPDATE OF o SKIP LOCKED
),` + outboxClaimTail

// outboxClaimTail is the end of both claims: it marks the candidates claimed, with one clock
// reading for claimed_at, updated_at and the lease, and returns them in scheduled_at,
// sequence order.
const outboxClaimTail = `
qb_claimed AS (
    UPDATE {table} o
    SET {state} = 'processing',
        {claim_token} = gen_random_uuid(),
        {claimed_at} = qb_clock.now,
        {lease_expires_at} = qb_clock.now + $2::bigint * interval '1 microsecond',
        {updated_at} = qb_clock.now
    FROM qb_clock
    WHERE o.{id} = ANY (ARRAY(SELECT c.{id} FROM qb_candidates c))
    RETURNING o.{id}::text AS id, o.{topic} AS topic, COALESCE(o.{key}, '') AS msg_key,
        COALESCE(o.{aggregate_type}, '') AS aggregate_type, o.{payload} AS payload,
        o.{headers} AS headers, o.{attempt}::int AS attempt, o.{max_attempts}::int AS max_attempts,
        o.{scheduled_at} AS scheduled_at, o.{created_at} AS created_at,
        o.{sequence}::bigint AS seq, o.{claim_token}::text AS claim_token,
        o.{lease_expires_at} AS lease_expires_at
)
SELECT id, topic, msg_key, aggregate_type, payload, headers, attempt, max_attempts,
    scheduled_at, created_at, seq, claim_token, lease_expires_at
FROM qb_claimed
ORDER BY scheduled_at, seq`

// OutboxClaim claims up to Limit due pending rows, at most one per non-empty key; with a
// Window, through outboxClaimWindowSQL.
func (s *Store) OutboxClaim(ctx context.Context, params store.OutboxClaimParams) ([]store.OutboxMessage, error) {
	if params.Limit <= 0 {
		return nil, fmt.Errorf("claiming outbox batch: limit %d is not above 0", params.Limit)
	}
	if params.Lease <= 0 {
		return nil, fmt.Errorf("claiming outbox batch: lease %s is not above 0", params.Lease)
	}
	if params.Window < 0 {
		return nil, fmt.Errorf("claiming outbox batch: window %d is below 0", params.Window)
	}
	rows, err := s.queryClaim(ctx, "", params)
	if err != nil {
		return nil, wrapErr("claiming outbox batch", err)
	}
	msgs, err := scanClaimed(rows, params.Limit)
	if err != nil {
		return nil, wrapErr("claiming outbox batch", err)
	}
	return msgs, nil
}

// scanClaimed reads the rows of a claim (the lease mode's or the lock mode's) and closes them.
func scanClaimed(rows pgx.Rows, limit int) ([]store.OutboxMessage, error) {
	defer rows.Close()
	msgs := make([]store.OutboxMessage, 0, limit)
	for rows.Next() {
		var m store.OutboxMessage
		var payload, headers []byte
		if err := rows.Scan(&m.ID, &m.Topic, &m.Key, &m.AggregateType, &payload, &headers,
			&m.Attempt, &m.MaxAttempts, &m.ScheduledAt, &m.CreatedAt, &m.Sequence,
			&m.ClaimToken, &m.LeaseExpiresAt); err != nil {
			return nil, fmt.Errorf("reading row: %w", err)
		}
		m.Payload = payload
		m.Headers = headers
		msgs = append(msgs, m)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return msgs, nil
}

// queryClaim runs the claim of params after its planner settings (claimPlanSQL), with
// prefix before the statement: "" for the claim, an EXPLAIN for the tests of its plan.
func (s *Store) queryClaim(ctx context.Context, prefix string, params store.OutboxClaimParams) (pgx.Rows, error) {
	// The limits go into the statement's text (limitTexts), or past its bound as parameters.
	sql, texts, args := s.sql.outboxClaim, &s.claimTexts, []any{params.Limit, micros(params.Lease)}
	window := 0
	if params.Window > 0 {
		window = max(params.Window, params.Limit)
		sql, texts, args = s.sql.outboxClaimWindow, &s.windowTexts, append(args, window)
	}
	if text, ok := texts.text(sql, params.Limit, window); ok {
		sql, args = text, args[1:2]
	}
	return s.pool.QueryAfter(ctx, claimPlanSQL, prefix+sql, args...)
}

// The fenced writes take their claims as parallel arrays ($1 ids, $2 tokens). A row changes
// only when it is processing, carries the caller's token and its lease has not passed by the
// database clock. A null claim token never equals anything.
//
// The plan must walk the claims and look each row up by primary key (a nested loop over
// unnest with an index scan of outbox_pkey): 3 ms for 340 claims in EXPLAIN ANALYZE on a
// table of 50 000 rows. Two forms of the fence led the planner elsewhere, and both cost
// time in proportion to the claims times the rows:
//   - an "id = ANY ($1)" test made it fetch the rows through that array and then compare each
//     with every claim of unnest, run again for each row: 21 ms for the same 340 claims;
//   - "state = 'processing'" matches the predicate of the partial index of processing rows,
//     which it took whenever its statistics said there were few (after every vacuum of a
//     drained table), reading every processing row for each statement. IS NOT DISTINCT FROM
//     is the same test for the NOT NULL state column and matches no index predicate.
const fence = `
  AND o.{state} IS NOT DISTINCT FROM 'processing'
  AND o.{claim_token} = f.token
  AND o.{lease_expires_at} > clock_timestamp()`

const outboxRenewSQL = `
UPDATE {table} o
SET {lease_expires_at} = clock_timestamp() + $3::bigint * interval '1 microsecond'
FROM unnest($1::uuid[], $2::uuid[]) AS f(id, token)
WHERE o.{id} = f.id` + fence + `
RETURNING o.{id}::text, o.{claim_token}::text`

const outboxMarkSentSQL = `
UPDATE {table} o
SET {state} = 'sent',
    {claim_token} = NULL,
    {lease_expires_at} = NULL,
    {updated_at} = clock_timestamp()
FROM unnest($1::uuid[], $2::uuid[]) AS f(id, token)
WHERE o.{id} = f.id` + fence + `
RETURNING o.{id}::text`

const outboxRetrySQL = `
UPDATE {table} o
SET {state} = 'pending',
    {attempt} = o.{attempt} + 1,
    {scheduled_at} = clock_timestamp() + f.delay_us * interval '1 microsecond',
    {last_error} = f.last_error,
    {claim_token} = NULL,
    {lease_expires_at} = NULL,
    {updated_at} = clock_timestamp()
FROM unnest($1::uuid[], $2::uuid[], $3::bigint[], $4::text[]) AS f(id, token, delay_us, last_error)
WHERE o.{id} = f.id` + fence + `
RETURNING o.{id}::text`

const outboxMarkDeadSQL = `
UPDATE {table} o
SET {state} = 'dead',
    {last_error} = f.last_error,
    {claim_token} = NULL,
    {lease_expires_at} = NULL,
    {updated_at} = clock_timestamp()
FROM unnest($1::uuid[], $2::uuid[], $3::text[]) AS f(id, token, last_error)
WHERE o.{id} = f.id` + fence + `
RETURNING o.{id}::text`

// fenced is one claim of a batch with its extra values, kept together while the batch is
// filtered and sorted.
type fenced struct {
	store.Claim
	delay     time.Duration
	lastError string
}

// prepareFenced drops the claims whose id or token is not a UUID (they can match no row) and
// sorts the rest by id, so that concurrent batches lock shared rows in one order.
func prepareFenced(in []fenced) []fenced {
	out := make([]fenced, 0, len(in))
	for _, f := range in {
		if isUUID(f.ID) && isUUID(f.Token) {
			f.ID = strings.ToLower(f.ID)
			f.Token = strings.ToLower(f.Token)
			out = append(out, f)
		}
	}
	slices.SortFunc(out, func(a, b fenced) int { return strings.Compare(a.ID, b.ID) })
	return out
}

func claimsOf(in []store.Claim) []fenced {
	out := make([]fenced, len(in))
	for i, c := range in {
		out[i] = fenced{Claim: c}
	}
	return out
}

// retriesOf, deadsOf and defersOf turn the outcomes of both claim modes into fenced claims
// with their values; a negative delay is 0.
func retriesOf(in []store.OutboxRetryParams) []fenced {
	out := make([]fenced, len(in))
	for i, r := range in {
		out[i] = fenced{Claim: r.Claim, delay: max(r.Delay, 0), lastError: r.LastError}
	}
	return out
}

func deadsOf(in []store.OutboxDeadParams) []fenced {
	out := make([]fenced, len(in))
	for i, d := range in {
		out[i] = fenced{Claim: d.Claim, lastError: d.LastError}
	}
	return out
}

func defersOf(in []store.OutboxDeferParams) []fenced {
	out := make([]fenced, len(in))
	for i, d := range in {
		out[i] = fenced{Claim: d.Claim, delay: max(d.Delay, 0)}
	}
	return out
}

// delaysAndErrors returns the delays (in microseconds) and the cleaned last errors of fs.
func delaysAndErrors(fs []fenced) (delays []int64, errs []string) {
	delays = make([]int64, len(fs))
	errs = make([]string, len(fs))
	for i, f := range fs {
		delays[i] = micros(f.delay)
		errs[i] = cleanText(f.lastError)
	}
	return delays, errs
}

// idsAndTokens returns the ids and tokens of fs as 16-byte UUIDs, which pgx sends in the
// binary format (the text form costs an encoding attempt and a parse per element). The
// claims passed prepareFenced, so every id and token parses.
func idsAndTokens(fs []fenced) (ids, tokens [][16]byte) {
	ids = make([][16]byte, len(fs))
	tokens = make([][16]byte, len(fs))
	for i, f := range fs {
		ids[i], tokens[i] = [16]byte(uuid.MustParse(f.ID)), [16]byte(uuid.MustParse(f.Token))
	}
	return ids, tokens
}

// OutboxRenew extends the leases of the claims whose fence holds and returns them.
func (s *Store) OutboxRenew(ctx context.Context, params store.OutboxRenewParams) ([]store.Claim, error) {
	if params.Lease <= 0 {
		return nil, fmt.Errorf("renewing outbox leases: lease %s is not above 0", params.Lease)
	}
	fs := prepareFenced(claimsOf(params.Claims))
	if len(fs) == 0 {
		return nil, nil
	}
	ids, tokens := idsAndTokens(fs)
	rows, err := s.pool.Query(ctx, s.sql.outboxRenew, ids, tokens, micros(params.Lease))
	if err != nil {
		return nil, wrapErr("renewing outbox leases", err)
	}
	renewed, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.Claim, error) {
		var c store.Claim
		err := r.Scan(&c.ID, &c.Token)
		return c, err
	})
	if err != nil {
		return nil, wrapErr("renewing outbox leases", err)
	}
	return renewed, nil
}

// OutboxMarkSent marks the fenced claims sent and returns the ids it changed.
func (s *Store) OutboxMarkSent(ctx context.Context, claims []store.Claim) ([]string, error) {
	fs := prepareFenced(claimsOf(claims))
	if len(fs) == 0 {
		return nil, nil
	}
	ids, tokens := idsAndTokens(fs)
	return s.collectIDs(ctx, "marking outbox rows sent", s.sql.outboxMarkSent, ids, tokens)
}

// OutboxRetry schedules the fenced retries and returns the ids it changed.
func (s *Store) OutboxRetry(ctx context.Context, retries []store.OutboxRetryParams) ([]string, error) {
	fs := prepareFenced(retriesOf(retries))
	if len(fs) == 0 {
		return nil, nil
	}
	ids, tokens := idsAndTokens(fs)
	delays, errs := delaysAndErrors(fs)
	return s.collectIDs(ctx, "scheduling outbox retries", s.sql.outboxRetry, ids, tokens, delays, errs)
}

// OutboxMarkDead marks the fenced claims dead and returns the ids it changed.
func (s *Store) OutboxMarkDead(ctx context.Context, deads []store.OutboxDeadParams) ([]string, error) {
	fs := prepareFenced(deadsOf(deads))
	if len(fs) == 0 {
		return nil, nil
	}
	ids, tokens := idsAndTokens(fs)
	_, errs := delaysAndErrors(fs)
	return s.collectIDs(ctx, "marking outbox rows dead", s.sql.outboxMarkDead, ids, tokens, errs)
}

func (s *Store) collectIDs(ctx context.Context, op, sql string, args ...any) ([]string, error) {
	rows, err := s.pool.Query(ctx, sql, args...)
	if err != nil {
		return nil, wrapErr(op, err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, wrapErr(op, err)
	}
	return ids, nil
}

// outboxReclaimSQL returns processing rows whose lease passed (or that have none) to pending,
// with attempt unchanged. A live fenced write and the reclaim exclude each other: one needs
// lease_expires_at > clock, the other lease_expires_at <= clock, and the row lock orders them.
const outboxReclaimSQL = `
UPDATE {table} o
SET {state} = 'pending',
    {claim_token} = NULL,
    {lease_expires_at} = NULL,
    {updated_at} = clock_timestamp()
WHERE o.{state} = 'processing'
  AND (o.{lease_expires_at} IS NULL OR o.{lease_expires_at} <= clock_timestamp())`

// OutboxReclaim returns every processing row whose lease expired to pending.
func (s *Store) OutboxReclaim(ctx context.Context) (int64, error) {
	tag, err := s.pool.Exec(ctx, s.sql.outboxReclaim)
	if err != nil {
		return 0, wrapErr("reclaiming expired outbox claims", err)
	}
	return tag.RowsAffected(), nil
}

// outboxTopicsSQL lists the distinct topics of the finished rows.
const outboxTopicsSQL = `
SELECT DISTINCT o.{topic} FROM {table} o WHERE o.{state} IN ('sent', 'dead') ORDER BY 1`

// OutboxFinishedTopics returns the distinct topics of the sent and dead rows.
func (s *Store) OutboxFinishedTopics(ctx context.Context) ([]string, error) {
	rows, err := s.pool.Query(ctx, s.sql.outboxTopics)
	if err != nil {
		return nil, wrapErr("listing outbox topics", err)
	}
	topics, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, wrapErr("listing outbox topics", err)
	}
	return topics, nil
}

const outboxStatsSQL = `
SELECT o.{topic},
       count(*),
       (EXTRACT(EPOCH FROM clock_timestamp() - min(o.{created_at})) * 1000000)::bigint
FROM {table} o
WHERE o.{state} = 'pending'
GROUP BY o.{topic}`

// OutboxStats returns the pending count, the age of the oldest pending row and the pending
// count per topic.
func (s *Store) OutboxStats(ctx context.Context) (store.OutboxStats, error) {
	stats := store.OutboxStats{PendingByTopic: map[string]int64{}}
	rows, err := s.pool.Query(ctx, s.sql.outboxStats)
	if err != nil {
		return store.OutboxStats{}, wrapErr("reading outbox stats", err)
	}
	var topic string
	var count, ageMicros int64
	_, err = pgx.ForEachRow(rows, []any{&topic, &count, &ageMicros}, func() error {
		stats.Pending += count
		stats.PendingByTopic[topic] = count
		if age := time.Duration(ageMicros) * time.Microsecond; age > stats.OldestPendingAge {
			stats.OldestPendingAge = age
		}
		return nil
	})
	if err != nil {
		return store.OutboxStats{}, wrapErr("reading outbox stats", err)
	}
	return stats, nil
}

// outboxDeleteFinishedSQL deletes a batch of old sent and dead rows. The outer WHERE repeats
// the state and age tests, so a row that a replay moved back to pending between the subquery
// and the delete is rechecked on its new version and kept.
const outboxDeleteFinishedSQL = `
DELETE FROM {table} o
WHERE o.{id} IN (
        SELECT d.{id}
        FROM {table} d
        WHERE d.{state} IN ('sent', 'dead')
          AND d.{updated_at} < clock_timestamp() - $1::bigint * interval '1 microsecond'
        LIMIT $2)
  AND o.{state} IN ('sent', 'dead')
  AND o.{updated_at} < clock_timestamp() - $1::bigint * interval '1 microsecond'`

// outboxDeleteExcessSQL deletes a batch of the rows of one final state beyond the newest $2.
const outboxDeleteExcessSQL = `
DELETE FROM {table} o
WHERE o.{id} IN (
        SELECT d.{id}
        FROM {table} d
        WHERE d.{state} = $1::text
        ORDER BY d.{updated_at} DESC, d.{sequence} DESC
        OFFSET $2
        LIMIT $3)
  AND o.{state} = $1::text`

// OutboxDeleteFinished deletes at most Limit sent or dead rows older than MaxAge.
func (s *Store) OutboxDeleteFinished(ctx context.Context, params store.DeleteFinishedParams) (int64, error) {
	if params.Limit <= 0 {
		return 0, fmt.Errorf("deleting finished outbox rows: limit %d is not above 0", params.Limit)
	}
	if params.MaxAge < 0 {
		return 0, fmt.Errorf("deleting finished outbox rows: max age %s is negative", params.MaxAge)
	}
	tag, err := s.pool.Exec(ctx, s.sql.outboxDeleteFinished, micros(params.MaxAge), params.Limit)
	if err != nil {
		return 0, wrapErr("deleting finished outbox rows", err)
	}
	return tag.RowsAffected(), nil
}

// OutboxDeleteExcess deletes at most Limit rows of State beyond the Keep newest of that state.
func (s *Store) OutboxDeleteExcess(ctx context.Context, params store.DeleteExcessParams) (int64, error) {
	if params.State != store.OutboxSent && params.State != store.OutboxDead {
		return 0, fmt.Errorf("deleting excess outbox rows: state %q is not %s or %s", params.State, store.OutboxSent, store.OutboxDead)
	}
	if params.Limit <= 0 {
		return 0, fmt.Errorf("deleting excess outbox rows: limit %d is not above 0", params.Limit)
	}
	if params.Keep < 0 {
		return 0, fmt.Errorf("deleting excess outbox rows: keep %d is negative", params.Keep)
	}
	tag, err := s.pool.Exec(ctx, s.sql.outboxDeleteExcess, params.State, params.Keep, params.Limit)
	if err != nil {
		return 0, wrapErr("deleting excess outbox rows", err)
	}
	return tag.RowsAffected(), nil
}
