package sqlserver

import (
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/alternayte/queuebox/shared/store"
)

// The application locks of the claims (spec/02-claims-and-leases.md, "The claim locks"), and
// how long a claim waits for its lock.
const (
	outboxLockPrefix = "queuebox_outbox_claim_"
	inboxLockPrefix  = "queuebox_inbox_claim_"
	lockTimeoutMS    = 10000
)

// statements holds every SQL statement of the store, built once from the names.
type statements struct {
	// outboxInsert holds one statement per combination of the optional insert columns,
	// indexed by insertColumns.
	outboxInsert [insertVariants]string

	outboxClaim          string
	outboxRenew          string
	outboxMarkSent       string
	outboxRetry          string
	outboxDefer          string
	outboxMarkDead       string
	outboxReclaim        string
	outboxReplay         string
	outboxReplayNoGen    string
	outboxStats          string
	outboxTopics         string
	outboxDeleteFinished string
	outboxDeleteExcess   string

	inboxInsert         string
	inboxRelayClaim     string
	inboxRelayProcessed string
	inboxRelayDead      string
	inboxRelayRenew     string
	inboxRelayReclaim   string
	inboxStats          string
	inboxDeleteFinished string

	checkSchema string

	replay replayStatements
}

// insertColumns is a bit set of the optional columns of an outbox insert. A column that is
// not in the set is left out of the statement, so that the table default applies.
type insertColumns uint8

const (
	insertID insertColumns = 1 << iota
	insertHeaders
	insertMaxAttempts
	insertScheduledAt

	insertVariants = 1 << iota
)

// The statement templates. {outbox} and {inbox} are the quoted table names, {o.column} and
// {i.column} the quoted configured name of an outbox or inbox column, given by its default
// name. {outbox_lock} and {inbox_lock} are the lock names and {outbox_lock_failed} and
// {inbox_lock_failed} the messages of Msg 51000, as N'...' literals; {lock_timeout_ms} is the
// lock wait.

// outboxClaimSQL: @p1 limit, @p2 lease in milliseconds. The clock is read once, after the
// lock is granted, for claimed_at, updated_at and the lease of every row.
//
// The NOT EXISTS keeps one row per non-empty key: only the earliest pending or processing row
// of a key (by sequence) qualifies, and only when it is pending and due. It reads without
// READPAST, so a locked earlier row of the key is waited for, never skipped.
const outboxClaimSQL = `DECLARE @qb_lock_result INT;
EXEC @qb_lock_result = sp_getapplock @Resource = {outbox_lock}, @LockMode = 'Exclusive', @LockOwner = 'Transaction', @LockTimeout = {lock_timeout_ms};
IF @qb_lock_result < 0
BEGIN
    THROW 51000, {outbox_lock_failed}, 1;
END;
DECLARE @qb_now DATETIME2 = SYSUTCDATETIME();
WITH candidates AS (
    SELECT TOP (@p1) o.*
    FROM {outbox} AS o WITH (UPDLOCK, READPAST, ROWLOCK)
    WHERE o.{o.state} = N'pending'
      AND o.{o.scheduled_at} <= @qb_now
      AND (o.{o.key} IS NULL
           OR o.{o.key} = N''
           OR NOT EXISTS (
               SELECT 1
               FROM {outbox} AS earlier
               WHERE earlier.{o.key} = o.{o.key}
                 AND earlier.{o.sequence} < o.{o.sequence}
                 AND earlier.{o.state} IN (N'pending', N'processing')))
    ORDER BY o.{o.scheduled_at}, o.{o.sequence}
)
UPDATE candidates
SET {o.state} = N'processing',
    {o.claim_token} = NEWID(),
    {o.claimed_at} = @qb_now,
    {o.lease_expires_at} = DATEADD(millisecond, @p2, @qb_now),
    {o.updated_at} = @qb_now
OUTPUT inserted.{o.id}, inserted.{o.topic}, inserted.{o.key}, inserted.{o.aggregate_type},
    inserted.{o.payload}, inserted.{o.headers}, inserted.{o.attempt}, inserted.{o.max_attempts},
    inserted.{o.scheduled_at}, inserted.{o.created_at}, inserted.{o.sequence},
    inserted.{o.claim_token}, inserted.{o.lease_expires_at};`

// outboxFence joins the claims of a batch (alias batch) to the outbox (alias o) and keeps the
// rows whose fence holds: the id, the state processing, the claim token and a live lease.
const outboxFence = `FROM {outbox} AS o
JOIN OPENJSON(@p1) WITH (
    batch_id UNIQUEIDENTIFIER '$.id',
    batch_token UNIQUEIDENTIFIER '$.token'%s
) AS batch
    ON o.{o.id} = batch.batch_id
   AND o.{o.claim_token} = batch.batch_token
WHERE o.{o.state} = N'processing'
  AND o.{o.lease_expires_at} > SYSUTCDATETIME();`

// outboxRenewSQL: @p1 claims JSON [{"id","token"}], @p2 lease in milliseconds.
const outboxRenewSQL = `UPDATE o
SET o.{o.lease_expires_at} = DATEADD(millisecond, @p2, SYSUTCDATETIME())
OUTPUT inserted.{o.id}, inserted.{o.claim_token}
`

// outboxMarkSentSQL: @p1 claims JSON [{"id","token"}].
const outboxMarkSentSQL = `UPDATE o
SET o.{o.state} = N'sent',
    o.{o.claim_token} = NULL,
    o.{o.lease_expires_at} = NULL,
    o.{o.updated_at} = SYSUTCDATETIME()
OUTPUT inserted.{o.id}
`

// outboxRetrySQL: @p1 retries JSON [{"id","token","delay_ms","last_error"}].
const outboxRetrySQL = `UPDATE o
SET o.{o.state} = N'pending',
    o.{o.attempt} = o.{o.attempt} + 1,
    o.{o.scheduled_at} = DATEADD(millisecond, batch.batch_delay_ms, SYSUTCDATETIME()),
    o.{o.last_error} = batch.batch_last_error,
    o.{o.claim_token} = NULL,
    o.{o.lease_expires_at} = NULL,
    o.{o.updated_at} = SYSUTCDATETIME()
OUTPUT inserted.{o.id}
`

// outboxMarkDeadSQL: @p1 deads JSON [{"id","token","last_error"}].
const outboxMarkDeadSQL = `UPDATE o
SET o.{o.state} = N'dead',
    o.{o.last_error} = batch.batch_last_error,
    o.{o.claim_token} = NULL,
    o.{o.lease_expires_at} = NULL,
    o.{o.updated_at} = SYSUTCDATETIME()
OUTPUT inserted.{o.id}
`

const (
	retryColumns = `,
    batch_delay_ms INT '$.delay_ms',
    batch_last_error NVARCHAR(MAX) '$.last_error'`
	deadColumns = `,
    batch_last_error NVARCHAR(MAX) '$.last_error'`
)

// outboxReclaimSQL: no parameters. A processing row without a lease can never pass the fence,
// so it is returned as well.
const outboxReclaimSQL = `UPDATE {outbox}
SET {o.state} = N'pending',
    {o.claim_token} = NULL,
    {o.lease_expires_at} = NULL,
    {o.updated_at} = SYSUTCDATETIME()
WHERE {o.state} = N'processing'
  AND ({o.lease_expires_at} <= SYSUTCDATETIME() OR {o.lease_expires_at} IS NULL);`

// outboxReplaySQL: @p1 ids JSON array or NULL, @p2 topics JSON array or NULL, @p3 created
// after (exclusive) or NULL, @p4 created before (exclusive) or NULL. A NULL parameter does not
// filter; the caller refuses a replay without any filter. OPENJSON without a WITH clause
// returns each array element in its value column. RECOMPILE plans each call for the filters
// it actually sets. It raises the replay generation of the moved rows (bumpGenerationsSQL)
// and answers their count; the caller runs it in a transaction.
const outboxReplaySQL = `SET NOCOUNT ON;
DECLARE @moved TABLE (moved_id UNIQUEIDENTIFIER NOT NULL);
UPDATE {outbox}
SET {o.state} = N'pending',
    {o.attempt} = 0,
    {o.scheduled_at} = SYSUTCDATETIME(),
    {o.last_error} = NULL,
    {o.claimed_at} = NULL,
    {o.claim_token} = NULL,
    {o.lease_expires_at} = NULL,
    {o.updated_at} = SYSUTCDATETIME()
OUTPUT inserted.{o.id} INTO @moved (moved_id)
WHERE {o.state} IN (N'sent', N'dead')
  AND (@p1 IS NULL OR {o.id} IN (
        SELECT CONVERT(UNIQUEIDENTIFIER, replay.value) FROM OPENJSON(@p1) AS replay))
  AND (@p2 IS NULL OR {o.topic} IN (
        SELECT replay.value FROM OPENJSON(@p2) AS replay))
  AND (@p3 IS NULL OR {o.created_at} > CAST(@p3 AS DATETIME2))
  AND (@p4 IS NULL OR {o.created_at} < CAST(@p4 AS DATETIME2))
OPTION (RECOMPILE);
` + bumpGenerationsSQL + `
SELECT COUNT_BIG(*) FROM @moved;`

// outboxStatsSQL: no parameters. One row per topic with pending rows: the topic, the count
// and the age in milliseconds of its oldest pending row.
// outboxTopicsSQL lists the distinct topics of the finished rows.
const outboxTopicsSQL = `SELECT DISTINCT {o.topic} FROM {outbox} WHERE {o.state} IN (N'sent', N'dead') ORDER BY 1;`

const outboxStatsSQL = `SELECT {o.topic}, COUNT_BIG(*), DATEDIFF_BIG(millisecond, MIN({o.created_at}), SYSUTCDATETIME())
FROM {outbox}
WHERE {o.state} = N'pending'
GROUP BY {o.topic};`

// outboxDeleteFinishedSQL: @p1 limit, @p2 and @p3 the negated maximum age in seconds and
// milliseconds.
const outboxDeleteFinishedSQL = `DELETE TOP (@p1)
FROM {outbox}
WHERE {o.state} IN (N'sent', N'dead')
  AND {o.updated_at} < DATEADD(millisecond, @p3, DATEADD(second, @p2, SYSUTCDATETIME()));`

// outboxDeleteExcessSQL: @p1 limit, @p2 state (sent or dead), @p3 the number of newest rows
// of the state to keep.
const outboxDeleteExcessSQL = `WITH ranked AS (
    SELECT ROW_NUMBER() OVER (ORDER BY o.{o.updated_at} DESC, o.{o.sequence} DESC) AS qb_rank
    FROM {outbox} AS o
    WHERE o.{o.state} = @p2
)
DELETE TOP (@p1)
FROM ranked
WHERE qb_rank > @p3;`

// inboxInsertSQL: @p1 source, @p2 idempotency key, @p3 aggregate id, @p4 event type, @p5
// payload, @p6 headers, @p7 correlation id, @p8 consumption, @p9 state, @p10 last error.
// UPDLOCK and HOLDLOCK lock the key range of the duplicate check until the insert commits, so
// a duplicate writes nothing and raises nothing; a racing insert that still hits the unique
// constraint (2627 or 2601) is a duplicate too.
const inboxInsertSQL = `INSERT INTO {inbox} ({i.source}, {i.idempotency_key}, {i.aggregate_id}, {i.event_type},
    {i.payload}, {i.headers}, {i.correlation_id}, {i.consumption}, {i.state}, {i.last_error})
OUTPUT inserted.{i.id}
SELECT @p1, @p2, @p3, @p4, @p5, @p6, @p7, @p8, @p9, @p10
WHERE NOT EXISTS (
    SELECT 1
    FROM {inbox} AS existing WITH (UPDLOCK, HOLDLOCK)
    WHERE existing.{i.source} = @p1
      AND existing.{i.idempotency_key} = @p2);`

// inboxRelayClaimSQL: @p1 limit, @p2 lease in milliseconds. The clock is read once, after
// the lock is granted.
//
// A pending push row qualifies when it has no aggregate, or when no push row of its aggregate
// is processing and no pending push row of its aggregate comes before it by created_at, id.
// The checks read without READPAST, so a locked row of the aggregate is waited for, never
// skipped. Pull rows are never read for update.
const inboxRelayClaimSQL = `DECLARE @qb_lock_result INT;
EXEC @qb_lock_result = sp_getapplock @Resource = {inbox_lock}, @LockMode = 'Exclusive', @LockOwner = 'Transaction', @LockTimeout = {lock_timeout_ms};
IF @qb_lock_result < 0
BEGIN
    THROW 51000, {inbox_lock_failed}, 1;
END;
DECLARE @qb_now DATETIME2 = SYSUTCDATETIME();
WITH candidates AS (
    SELECT TOP (@p1) i.*
    FROM {inbox} AS i WITH (UPDLOCK, READPAST, ROWLOCK)
    WHERE i.{i.state} = N'pending'
      AND i.{i.consumption} = N'push'
      AND (i.{i.aggregate_id} IS NULL
           OR i.{i.aggregate_id} = N''
           OR (NOT EXISTS (
                   SELECT 1
                   FROM {inbox} AS busy
                   WHERE busy.{i.aggregate_id} = i.{i.aggregate_id}
                     AND busy.{i.consumption} = N'push'
                     AND busy.{i.state} = N'processing')
               AND NOT EXISTS (
                   SELECT 1
                   FROM {inbox} AS earlier
                   WHERE earlier.{i.aggregate_id} = i.{i.aggregate_id}
                     AND earlier.{i.consumption} = N'push'
                     AND earlier.{i.state} = N'pending'
                     AND (earlier.{i.created_at} < i.{i.created_at}
                          OR (earlier.{i.created_at} = i.{i.created_at} AND earlier.{i.id} < i.{i.id})))))
    ORDER BY i.{i.created_at}, i.{i.id}
)
UPDATE candidates
SET {i.state} = N'processing',
    {i.claim_token} = NEWID(),
    {i.claimed_at} = @qb_now,
    {i.lease_expires_at} = DATEADD(millisecond, @p2, @qb_now)
OUTPUT inserted.{i.id}, inserted.{i.source}, inserted.{i.idempotency_key}, inserted.{i.aggregate_id},
    inserted.{i.event_type}, inserted.{i.payload}, inserted.{i.headers}, inserted.{i.correlation_id},
    inserted.{i.consumption}, inserted.{i.attempt}, inserted.{i.created_at},
    inserted.{i.claim_token}, inserted.{i.lease_expires_at};`

// inboxFence is the fence of a single relay write: @p1 id, @p2 claim token.
const inboxFence = `
WHERE {i.id} = @p1
  AND {i.state} = N'processing'
  AND {i.claim_token} = @p2
  AND {i.lease_expires_at} > SYSUTCDATETIME();`

// inboxRelayProcessedSQL: @p1 id, @p2 token.
const inboxRelayProcessedSQL = `UPDATE {inbox}
SET {i.state} = N'processed',
    {i.processed_at} = SYSUTCDATETIME(),
    {i.claim_token} = NULL,
    {i.lease_expires_at} = NULL` + inboxFence

// inboxRelayDeadSQL: @p1 id, @p2 token, @p3 last error.
const inboxRelayDeadSQL = `UPDATE {inbox}
SET {i.state} = N'dead',
    {i.last_error} = @p3,
    {i.claim_token} = NULL,
    {i.lease_expires_at} = NULL` + inboxFence

// inboxRelayRenewSQL: @p1 id, @p2 token, @p3 lease in milliseconds.
const inboxRelayRenewSQL = `UPDATE {inbox}
SET {i.lease_expires_at} = DATEADD(millisecond, @p3, SYSUTCDATETIME())` + inboxFence

// inboxRelayReclaimSQL: no parameters. Push rows only: a pull claim takes over an expired
// pull row itself.
const inboxRelayReclaimSQL = `UPDATE {inbox}
SET {i.state} = N'pending',
    {i.claim_token} = NULL,
    {i.lease_expires_at} = NULL
WHERE {i.state} = N'processing'
  AND {i.consumption} = N'push'
  AND ({i.lease_expires_at} <= SYSUTCDATETIME() OR {i.lease_expires_at} IS NULL);`

// inboxStatsSQL: no parameters. The count of pending rows (push and pull) and the age in
// milliseconds of the oldest.
const inboxStatsSQL = `SELECT COUNT_BIG(*), DATEDIFF_BIG(millisecond, MIN({i.created_at}), SYSUTCDATETIME())
FROM {inbox}
WHERE {i.state} = N'pending';`

// inboxDeleteFinishedSQL: @p1 limit, @p2 and @p3 the negated maximum age in seconds and
// milliseconds.
const inboxDeleteFinishedSQL = `DELETE TOP (@p1)
FROM {inbox}
WHERE {i.state} IN (N'processed', N'dead')
  AND {i.created_at} < DATEADD(millisecond, @p3, DATEADD(second, @p2, SYSUTCDATETIME()));`

// checkSchemaSQL: @p1 quoted outbox table, @p2 sequence column, @p3 quoted inbox table, @p4
// headers column. A NULL names what is missing.
const checkSchemaSQL = `SELECT OBJECT_ID(@p1), COL_LENGTH(@p1, @p2), OBJECT_ID(@p3), COL_LENGTH(@p3, @p4);`

// outboxInsertSQL returns the insert of the columns in set: @p1 topic, @p2 key, @p3
// aggregate type, @p4 payload, then in this order when present: id, headers, max attempts,
// and the delay as seconds and milliseconds.
func outboxInsertSQL(set insertColumns) string {
	cols := []string{"{o.topic}", "{o.key}", "{o.aggregate_type}", "{o.payload}"}
	vals := []string{"@p1", "@p2", "@p3", "@p4"}
	next := 5
	param := func() string {
		p := fmt.Sprintf("@p%d", next)
		next++
		return p
	}
	if set&insertID != 0 {
		cols = append(cols, "{o.id}")
		vals = append(vals, param())
	}
	if set&insertHeaders != 0 {
		cols = append(cols, "{o.headers}")
		vals = append(vals, param())
	}
	if set&insertMaxAttempts != 0 {
		cols = append(cols, "{o.max_attempts}")
		vals = append(vals, param())
	}
	if set&insertScheduledAt != 0 {
		cols = append(cols, "{o.scheduled_at}")
		seconds := param()
		vals = append(vals, fmt.Sprintf("DATEADD(millisecond, %s, DATEADD(second, %s, SYSUTCDATETIME()))", param(), seconds))
	}
	return fmt.Sprintf("INSERT INTO {outbox} (%s)\nOUTPUT inserted.{o.id}\nVALUES (%s);",
		strings.Join(cols, ", "), strings.Join(vals, ", "))
}

// buildStatements expands every template with the quoted names.
func buildStatements(n store.Names) (statements, error) {
	e := newExpander(n)
	var st statements
	for set := insertColumns(0); set < insertVariants; set++ {
		st.outboxInsert[set] = e.expand(outboxInsertSQL(set))
	}
	st.outboxClaim = e.expand(outboxClaimSQL)
	st.outboxRenew = e.expand(outboxRenewSQL + fmt.Sprintf(outboxFence, ""))
	st.outboxMarkSent = e.expand(outboxMarkSentSQL + fmt.Sprintf(outboxFence, ""))
	st.outboxRetry = e.expand(outboxRetrySQL + fmt.Sprintf(outboxFence, retryColumns))
	st.outboxDefer = e.expand(outboxDeferSQL + fmt.Sprintf(outboxFence, deferColumns))
	st.outboxMarkDead = e.expand(outboxMarkDeadSQL + fmt.Sprintf(outboxFence, deadColumns))
	st.outboxReclaim = e.expand(outboxReclaimSQL)
	st.outboxReplay = e.expand(outboxReplaySQL)
	st.outboxReplayNoGen = e.expand(withoutGenerations(outboxReplaySQL))
	st.outboxStats = e.expand(outboxStatsSQL)
	st.outboxTopics = e.expand(outboxTopicsSQL)
	st.outboxDeleteFinished = e.expand(outboxDeleteFinishedSQL)
	st.outboxDeleteExcess = e.expand(outboxDeleteExcessSQL)
	st.inboxInsert = e.expand(inboxInsertSQL)
	st.inboxRelayClaim = e.expand(inboxRelayClaimSQL)
	st.inboxRelayProcessed = e.expand(inboxRelayProcessedSQL)
	st.inboxRelayDead = e.expand(inboxRelayDeadSQL)
	st.inboxRelayRenew = e.expand(inboxRelayRenewSQL)
	st.inboxRelayReclaim = e.expand(inboxRelayReclaimSQL)
	st.inboxStats = e.expand(inboxStatsSQL)
	st.inboxDeleteFinished = e.expand(inboxDeleteFinishedSQL)
	st.checkSchema = e.expand(checkSchemaSQL)
	st.replay = buildReplayStatements(e)
	if len(e.unknown) > 0 {
		sort.Strings(e.unknown)
		return statements{}, fmt.Errorf("building statements: unknown template names %s", strings.Join(e.unknown, ", "))
	}
	return st, nil
}

// expander replaces the {name} markers of the templates.
type expander struct {
	vars    map[string]string
	unknown []string
}

var marker = regexp.MustCompile(`\{[a-z_.]+\}`)

func newExpander(n store.Names) *expander {
	o, i := n.Outbox, n.Inbox
	vars := map[string]string{
		"outbox": quote(n.OutboxTable),
		"inbox":  quote(n.InboxTable),

		"lock_timeout_ms":    strconv.Itoa(lockTimeoutMS),
		"outbox_lock":        unicodeLiteral(outboxLockPrefix + n.OutboxTable),
		"inbox_lock":         unicodeLiteral(inboxLockPrefix + n.InboxTable),
		"outbox_lock_failed": unicodeLiteral("outbox claim: sp_getapplock did not acquire the claim lock " + outboxLockPrefix + n.OutboxTable),
		"inbox_lock_failed":  unicodeLiteral("inbox relay claim: sp_getapplock did not acquire the claim lock " + inboxLockPrefix + n.InboxTable),
	}
	for def, name := range map[string]string{
		"id": o.ID, "topic": o.Topic, "key": o.Key, "aggregate_type": o.AggregateType,
		"payload": o.Payload, "headers": o.Headers, "state": o.State, "attempt": o.Attempt,
		"max_attempts": o.MaxAttempts, "scheduled_at": o.ScheduledAt, "created_at": o.CreatedAt,
		"updated_at": o.UpdatedAt, "claimed_at": o.ClaimedAt, "claim_token": o.ClaimToken,
		"lease_expires_at": o.LeaseExpiresAt, "last_error": o.LastError, "sequence": o.Sequence,
	} {
		vars["o."+def] = quote(name)
	}
	for def, name := range map[string]string{
		"id": i.ID, "source": i.Source, "idempotency_key": i.IdempotencyKey,
		"aggregate_id": i.AggregateID, "event_type": i.EventType, "payload": i.Payload,
		"headers": i.Headers, "state": i.State, "consumption": i.Consumption, "attempt": i.Attempt,
		"last_error": i.LastError, "scheduled_at": i.ScheduledAt, "created_at": i.CreatedAt,
		"processed_at": i.ProcessedAt, "claimed_at": i.ClaimedAt, "claim_token": i.ClaimToken,
		"lease_expires_at": i.LeaseExpiresAt, "correlation_id": i.CorrelationID,
	} {
		vars["i."+def] = quote(name)
	}
	return &expander{vars: vars}
}

func (e *expander) expand(tmpl string) string {
	return marker.ReplaceAllStringFunc(tmpl, func(m string) string {
		v, ok := e.vars[m[1:len(m)-1]]
		if !ok {
			e.unknown = append(e.unknown, m)
			return m
		}
		return v
	})
}
