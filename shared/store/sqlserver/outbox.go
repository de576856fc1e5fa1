package sqlserver

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	mssql "github.com/microsoft/go-mssqldb"

	"github.com/alternayte/queuebox/shared/store"
	"github.com/alternayte/queuebox/shared/store/sqlpool"
)

// rowScanner is the one-row result of a statement: a *sqlpool.Row or a *sql.Row.
type rowScanner interface{ Scan(dest ...any) error }

// queryRower runs a statement that returns one row, outside a transaction (poolRower) or
// inside one (txRower).
type queryRower func(ctx context.Context, query string, args ...any) rowScanner

func poolRower(p *sqlpool.Pool) queryRower {
	return func(ctx context.Context, query string, args ...any) rowScanner {
		return p.QueryRowContext(ctx, query, args...)
	}
}

func txRower(tx *sql.Tx) queryRower {
	return func(ctx context.Context, query string, args ...any) rowScanner {
		return tx.QueryRowContext(ctx, query, args...)
	}
}

// OutboxInsert writes one outbox row and returns its id. A duplicate id is store.ErrConflict.
func (s *Store) OutboxInsert(ctx context.Context, params store.OutboxInsertParams) (string, error) {
	id, err := retryDeadlock(ctx, func() (string, error) { return s.outboxInsert(ctx, poolRower(s.db), params) })
	if err != nil {
		return "", fmt.Errorf("inserting outbox row: %w", err)
	}
	return id, nil
}

func (s *Store) outboxInsert(ctx context.Context, q queryRower, params store.OutboxInsertParams) (string, error) {
	set, args, err := outboxInsertArgs(params)
	if err != nil {
		return "", err
	}
	var id mssql.UniqueIdentifier
	if err := q(ctx, s.stmt.outboxInsert[set], args...).Scan(&id); err != nil {
		return "", translate(err)
	}
	return uuidString(id), nil
}

// outboxInsertArgs picks the insert variant for params and returns its arguments in the order
// of outboxInsertSQL.
func outboxInsertArgs(p store.OutboxInsertParams) (insertColumns, []any, error) {
	args := []any{p.Topic, nullIfEmpty(p.Key), nullIfEmpty(p.AggregateType), string(p.Payload)}
	var set insertColumns
	if p.ID != "" {
		id, ok := canonicalUUID(p.ID)
		if !ok {
			return 0, nil, fmt.Errorf("id %q is not a UUID", p.ID)
		}
		set |= insertID
		args = append(args, id)
	}
	if p.Headers != nil {
		set |= insertHeaders
		args = append(args, string(p.Headers))
	}
	if p.MaxAttempts > 0 {
		if p.MaxAttempts > math.MaxInt32 {
			return 0, nil, fmt.Errorf("max attempts %d is out of range", p.MaxAttempts)
		}
		set |= insertMaxAttempts
		args = append(args, int32(p.MaxAttempts))
	}
	if p.Delay > 0 {
		seconds, millis, err := splitDuration(p.Delay)
		if err != nil {
			return 0, nil, fmt.Errorf("delay: %w", err)
		}
		set |= insertScheduledAt
		args = append(args, seconds, millis)
	}
	return set, args, nil
}

// OutboxClaim claims up to Limit due pending rows under the outbox claim lock, at most one
// per non-empty key, and returns them in scheduled_at, sequence order.
func (s *Store) OutboxClaim(ctx context.Context, params store.OutboxClaimParams) ([]store.OutboxMessage, error) {
	args, err := claimArgs(params.Limit, params.Lease)
	if err != nil {
		return nil, fmt.Errorf("claiming outbox batch: %w", err)
	}
	msgs, err := retryDeadlock(ctx, func() ([]store.OutboxMessage, error) {
		return claimInTx(ctx, s.db, s.stmt.outboxClaim, args, scanOutboxMessage)
	})
	if err != nil {
		return nil, fmt.Errorf("claiming outbox batch: %w", err)
	}
	// OUTPUT returns the rows in no particular order.
	slices.SortFunc(msgs, func(a, b store.OutboxMessage) int {
		if c := a.ScheduledAt.Compare(b.ScheduledAt); c != 0 {
			return c
		}
		return cmp.Compare(a.Sequence, b.Sequence)
	})
	return msgs, nil
}

// claimArgs returns @p1 limit and @p2 lease in milliseconds of a claim statement.
func claimArgs(limit int, lease time.Duration) ([]any, error) {
	if limit <= 0 {
		return nil, fmt.Errorf("limit %d is not above 0", limit)
	}
	if lease <= 0 {
		return nil, fmt.Errorf("lease %s is not above 0", lease)
	}
	leaseMS, err := durationMS(lease)
	if err != nil {
		return nil, fmt.Errorf("lease: %w", err)
	}
	return []any{int64(limit), leaseMS}, nil
}

// claimInTx runs a claim statement in its own transaction, so that the application lock that
// the statement takes (owner Transaction) is released by the commit, or by the rollback when
// anything fails, including a cancelled context.
func claimInTx[T any](ctx context.Context, db *sqlpool.Pool, query string, args []any, scan func(*sql.Rows) (T, error)) ([]T, error) {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("beginning transaction: %w", err)
	}
	out, err := queryAll(ctx, tx, query, args, scan)
	if err != nil {
		rollback(tx)
		return nil, err
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("committing claim: %w", translate(err))
	}
	return out, nil
}

// querier runs a statement that returns rows, outside or inside a transaction.
type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

func queryAll[T any](ctx context.Context, q querier, query string, args []any, scan func(*sql.Rows) (T, error)) ([]T, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, translate(err)
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, translate(err)
	}
	if err := rows.Close(); err != nil {
		return nil, translate(err)
	}
	return out, nil
}

func scanOutboxMessage(rows *sql.Rows) (store.OutboxMessage, error) {
	var (
		id, token              mssql.UniqueIdentifier
		key, aggregateType     sql.NullString
		payload, headers       string
		m                      store.OutboxMessage
		scheduledAt, createdAt time.Time
		leaseExpiresAt         time.Time
	)
	err := rows.Scan(&id, &m.Topic, &key, &aggregateType, &payload, &headers, &m.Attempt,
		&m.MaxAttempts, &scheduledAt, &createdAt, &m.Sequence, &token, &leaseExpiresAt)
	if err != nil {
		return store.OutboxMessage{}, fmt.Errorf("scanning outbox row: %w", err)
	}
	m.ID = uuidString(id)
	m.Key = key.String
	m.AggregateType = aggregateType.String
	m.Payload = json.RawMessage(payload)
	m.Headers = jsonObject(headers)
	m.ScheduledAt = scheduledAt.UTC()
	m.CreatedAt = createdAt.UTC()
	m.ClaimToken = uuidString(token)
	m.LeaseExpiresAt = leaseExpiresAt.UTC()
	return m, nil
}

// claimDoc is one element of the JSON document of a batched fenced write; OPENJSON reads it
// with the paths $.id, $.token, $.delay_ms and $.last_error.
type claimDoc struct {
	ID        string  `json:"id"`
	Token     string  `json:"token"`
	DelayMS   *int32  `json:"delay_ms,omitempty"`
	LastError *string `json:"last_error,omitempty"`
}

// fenceBatch is the JSON document of a batched fenced write and the claims it carries, in
// the caller's order.
type fenceBatch struct {
	doc    string
	claims []store.Claim
}

// newFenceBatch builds the document of the claims. A claim whose id or token is not a UUID
// cannot hold a fence and is left out; a repeated id keeps its first claim.
func newFenceBatch(claims []store.Claim, extra func(i int, d *claimDoc) error) (fenceBatch, error) {
	docs := make([]claimDoc, 0, len(claims))
	kept := make([]store.Claim, 0, len(claims))
	seen := make(map[string]bool, len(claims))
	for i, c := range claims {
		id, okID := canonicalUUID(c.ID)
		token, okToken := canonicalUUID(c.Token)
		if !okID || !okToken || seen[id] {
			continue
		}
		seen[id] = true
		d := claimDoc{ID: id, Token: token}
		if extra != nil {
			if err := extra(i, &d); err != nil {
				return fenceBatch{}, err
			}
		}
		docs = append(docs, d)
		kept = append(kept, store.Claim{ID: id, Token: token})
	}
	if len(docs) == 0 {
		return fenceBatch{}, nil
	}
	b, err := json.Marshal(docs)
	if err != nil {
		return fenceBatch{}, fmt.Errorf("encoding claims: %w", err)
	}
	return fenceBatch{doc: string(b), claims: kept}, nil
}

// runFenced runs a batched fenced write and returns the claims it changed, in the order of
// the batch. withToken scans the claim token that the statement outputs after the id.
func (s *Store) runFenced(ctx context.Context, query string, batch fenceBatch, withToken bool, extra ...any) ([]store.Claim, error) {
	if len(batch.claims) == 0 {
		return nil, nil
	}
	args := append([]any{batch.doc}, extra...)
	changed, err := retryDeadlock(ctx, func() ([]store.Claim, error) {
		return queryAll(ctx, s.db, query, args, scanChanged(withToken))
	})
	if err != nil {
		return nil, err
	}
	return inBatchOrder(batch.claims, changed), nil
}

// scanChanged scans the id, and the claim token when withToken, that a fenced write outputs.
func scanChanged(withToken bool) func(rows *sql.Rows) (store.Claim, error) {
	return func(rows *sql.Rows) (store.Claim, error) {
		var id, token mssql.UniqueIdentifier
		dest := []any{&id}
		if withToken {
			dest = append(dest, &token)
		}
		if err := rows.Scan(dest...); err != nil {
			return store.Claim{}, fmt.Errorf("scanning changed row: %w", err)
		}
		c := store.Claim{ID: uuidString(id)}
		if withToken {
			c.Token = uuidString(token)
		}
		return c, nil
	}
}

// inBatchOrder returns the changed claims in the order of the batch.
func inBatchOrder(batch, changed []store.Claim) []store.Claim {
	byID := make(map[string]store.Claim, len(changed))
	for _, c := range changed {
		byID[c.ID] = c
	}
	out := make([]store.Claim, 0, len(changed))
	for _, c := range batch {
		if got, ok := byID[c.ID]; ok {
			out = append(out, got)
		}
	}
	return out
}

func claimIDs(claims []store.Claim) []string {
	ids := make([]string, len(claims))
	for i, c := range claims {
		ids[i] = c.ID
	}
	return ids
}

// OutboxRenew extends the leases of the claims whose fence holds and returns them.
func (s *Store) OutboxRenew(ctx context.Context, params store.OutboxRenewParams) ([]store.Claim, error) {
	if params.Lease <= 0 {
		return nil, fmt.Errorf("renewing outbox leases: lease %s is not above 0", params.Lease)
	}
	leaseMS, err := durationMS(params.Lease)
	if err != nil {
		return nil, fmt.Errorf("renewing outbox leases: lease: %w", err)
	}
	batch, err := newFenceBatch(params.Claims, nil)
	if err != nil {
		return nil, fmt.Errorf("renewing outbox leases: %w", err)
	}
	renewed, err := s.runFenced(ctx, s.stmt.outboxRenew, batch, true, leaseMS)
	if err != nil {
		return nil, fmt.Errorf("renewing outbox leases: %w", err)
	}
	return renewed, nil
}

// OutboxMarkSent marks the fenced claims sent and returns the ids it changed.
func (s *Store) OutboxMarkSent(ctx context.Context, claims []store.Claim) ([]string, error) {
	batch, err := newFenceBatch(claims, nil)
	if err != nil {
		return nil, fmt.Errorf("marking outbox rows sent: %w", err)
	}
	changed, err := s.runFenced(ctx, s.stmt.outboxMarkSent, batch, false)
	if err != nil {
		return nil, fmt.Errorf("marking outbox rows sent: %w", err)
	}
	return claimIDs(changed), nil
}

// OutboxRetry schedules the fenced retries and returns the ids it changed.
func (s *Store) OutboxRetry(ctx context.Context, retries []store.OutboxRetryParams) ([]string, error) {
	batch, err := retryBatch(retries)
	if err != nil {
		return nil, fmt.Errorf("scheduling outbox retries: %w", err)
	}
	changed, err := s.runFenced(ctx, s.stmt.outboxRetry, batch, false)
	if err != nil {
		return nil, fmt.Errorf("scheduling outbox retries: %w", err)
	}
	return claimIDs(changed), nil
}

func retryBatch(retries []store.OutboxRetryParams) (fenceBatch, error) {
	claims := make([]store.Claim, len(retries))
	for i, r := range retries {
		claims[i] = r.Claim
	}
	return newFenceBatch(claims, func(i int, d *claimDoc) error {
		delay, err := durationMS(max(retries[i].Delay, 0))
		if err != nil {
			return fmt.Errorf("delay of %s: %w", d.ID, err)
		}
		lastError := retries[i].LastError
		d.DelayMS, d.LastError = &delay, &lastError
		return nil
	})
}

// OutboxMarkDead marks the fenced claims dead and returns the ids it changed.
func (s *Store) OutboxMarkDead(ctx context.Context, deads []store.OutboxDeadParams) ([]string, error) {
	batch, err := deadBatch(deads)
	if err != nil {
		return nil, fmt.Errorf("marking outbox rows dead: %w", err)
	}
	changed, err := s.runFenced(ctx, s.stmt.outboxMarkDead, batch, false)
	if err != nil {
		return nil, fmt.Errorf("marking outbox rows dead: %w", err)
	}
	return claimIDs(changed), nil
}

func deadBatch(deads []store.OutboxDeadParams) (fenceBatch, error) {
	claims := make([]store.Claim, len(deads))
	for i, d := range deads {
		claims[i] = d.Claim
	}
	return newFenceBatch(claims, func(i int, d *claimDoc) error {
		lastError := deads[i].LastError
		d.LastError = &lastError
		return nil
	})
}

// OutboxReclaim returns every processing row whose lease expired to pending and returns the
// count.
func (s *Store) OutboxReclaim(ctx context.Context) (int64, error) {
	n, err := s.execCount(ctx, s.stmt.outboxReclaim)
	if err != nil {
		return 0, fmt.Errorf("reclaiming outbox rows: %w", err)
	}
	return n, nil
}

// errReplayWithoutFilter refuses a replay that would move every sent and dead row.
var errReplayWithoutFilter = errors.New("a replay needs at least one filter")

// OutboxReplay moves the selected sent and dead rows to pending and returns the count. It
// refuses a replay without any filter.
func (s *Store) OutboxReplay(ctx context.Context, params store.OutboxReplayParams) (int64, error) {
	args, err := replayArgs(params)
	if err != nil {
		return 0, fmt.Errorf("replaying outbox rows: %w", err)
	}
	query := s.stmt.outboxReplay
	if s.noGenerations.Load() {
		query = s.stmt.outboxReplayNoGen
	}
	var n int64
	if err := s.inReplayTx(ctx, query, args, func(row *sql.Row) error { return row.Scan(&n) }); err != nil {
		return 0, missingGenerations("replaying outbox rows", err)
	}
	return n, nil
}

// replayArgs returns @p1 ids, @p2 topics, @p3 created from and @p4 created to of the replay,
// each nil when it does not filter.
func replayArgs(p store.OutboxReplayParams) ([]any, error) {
	if len(p.IDs) == 0 && len(p.Topics) == 0 && p.CreatedFrom == nil && p.CreatedTo == nil {
		return nil, errReplayWithoutFilter
	}
	args := []any{nil, nil, nil, nil}
	if len(p.IDs) > 0 {
		// An id that is not a UUID matches no row; it must not widen the selection, so the
		// filter stays set (an empty array matches nothing) when no valid id is left.
		ids := make([]string, 0, len(p.IDs))
		for _, raw := range p.IDs {
			if id, ok := canonicalUUID(raw); ok {
				ids = append(ids, id)
			}
		}
		b, err := json.Marshal(ids)
		if err != nil {
			return nil, fmt.Errorf("encoding ids: %w", err)
		}
		args[0] = string(b)
	}
	if len(p.Topics) > 0 {
		b, err := json.Marshal(p.Topics)
		if err != nil {
			return nil, fmt.Errorf("encoding topics: %w", err)
		}
		args[1] = string(b)
	}
	// The columns hold UTC; the statement casts the UTC instant to DATETIME2.
	if p.CreatedFrom != nil {
		args[2] = p.CreatedFrom.UTC()
	}
	if p.CreatedTo != nil {
		args[3] = p.CreatedTo.UTC()
	}
	return args, nil
}

// OutboxFinishedTopics returns the distinct topics of the sent and dead rows.
func (s *Store) OutboxFinishedTopics(ctx context.Context) ([]string, error) {
	scan := func(rows *sql.Rows) (string, error) {
		var t string
		err := rows.Scan(&t)
		return t, err
	}
	topics, err := retryDeadlock(ctx, func() ([]string, error) {
		return queryAll(ctx, s.db, s.stmt.outboxTopics, nil, scan)
	})
	if err != nil {
		return nil, fmt.Errorf("listing outbox topics: %w", err)
	}
	return topics, nil
}

// OutboxStats returns the figures of the pending gauges.
func (s *Store) OutboxStats(ctx context.Context) (store.OutboxStats, error) {
	type topicStats struct {
		topic string
		count int64
		age   time.Duration
	}
	scan := func(rows *sql.Rows) (topicStats, error) {
		var t topicStats
		var ageMS sql.NullInt64
		if err := rows.Scan(&t.topic, &t.count, &ageMS); err != nil {
			return t, fmt.Errorf("scanning outbox stats: %w", err)
		}
		t.age = ageFromMS(ageMS)
		return t, nil
	}
	rows, err := retryDeadlock(ctx, func() ([]topicStats, error) {
		return queryAll(ctx, s.db, s.stmt.outboxStats, nil, scan)
	})
	if err != nil {
		return store.OutboxStats{}, fmt.Errorf("reading outbox stats: %w", err)
	}
	stats := store.OutboxStats{PendingByTopic: make(map[string]int64, len(rows))}
	for _, t := range rows {
		stats.Pending += t.count
		stats.PendingByTopic[t.topic] += t.count
		stats.OldestPendingAge = max(stats.OldestPendingAge, t.age)
	}
	return stats, nil
}

// OutboxDeleteFinished deletes at most Limit sent or dead rows whose updated_at is older than
// MaxAge by the database clock, and returns the count.
func (s *Store) OutboxDeleteFinished(ctx context.Context, params store.DeleteFinishedParams) (int64, error) {
	args, err := deleteFinishedArgs(params)
	if err != nil {
		return 0, fmt.Errorf("deleting finished outbox rows: %w", err)
	}
	n, err := s.execCount(ctx, s.stmt.outboxDeleteFinished, args...)
	if err != nil {
		return 0, fmt.Errorf("deleting finished outbox rows: %w", err)
	}
	return n, nil
}

// deleteFinishedArgs returns @p1 limit and @p2, @p3 the negated age in seconds and
// milliseconds.
func deleteFinishedArgs(p store.DeleteFinishedParams) ([]any, error) {
	if p.Limit <= 0 {
		return nil, fmt.Errorf("limit %d is not above 0", p.Limit)
	}
	if p.MaxAge < 0 {
		return nil, fmt.Errorf("max age %s is negative", p.MaxAge)
	}
	seconds, millis, err := splitDuration(-p.MaxAge)
	if err != nil {
		return nil, fmt.Errorf("max age: %w", err)
	}
	return []any{int64(p.Limit), seconds, millis}, nil
}

// OutboxDeleteExcess deletes at most Limit rows of State beyond the Keep newest rows of that
// state, and returns the count.
func (s *Store) OutboxDeleteExcess(ctx context.Context, params store.DeleteExcessParams) (int64, error) {
	args, err := deleteExcessArgs(params)
	if err != nil {
		return 0, fmt.Errorf("deleting excess outbox rows: %w", err)
	}
	n, err := s.execCount(ctx, s.stmt.outboxDeleteExcess, args...)
	if err != nil {
		return 0, fmt.Errorf("deleting excess outbox rows: %w", err)
	}
	return n, nil
}

// deleteExcessArgs returns @p1 limit, @p2 state and @p3 keep.
func deleteExcessArgs(p store.DeleteExcessParams) ([]any, error) {
	if p.State != store.OutboxSent && p.State != store.OutboxDead {
		return nil, fmt.Errorf("state %q is not %s or %s", p.State, store.OutboxSent, store.OutboxDead)
	}
	if p.Limit <= 0 {
		return nil, fmt.Errorf("limit %d is not above 0", p.Limit)
	}
	if p.Keep < 0 {
		return nil, fmt.Errorf("keep %d is below 0", p.Keep)
	}
	return []any{int64(p.Limit), p.State, p.Keep}, nil
}

// execCount runs a statement and returns the number of rows it changed.
func (s *Store) execCount(ctx context.Context, query string, args ...any) (int64, error) {
	return retryDeadlock(ctx, func() (int64, error) {
		res, err := s.db.ExecContext(ctx, query, args...)
		if err != nil {
			return 0, translate(err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return 0, fmt.Errorf("reading the row count: %w", err)
		}
		return n, nil
	})
}

// canonicalUUID reports whether s is a UUID in its canonical text form (either letter case)
// and returns it in lower case. A claim whose id or token is not one matches no row, so the
// fenced writes leave it out rather than fail the batch on a conversion error.
func canonicalUUID(s string) (string, bool) {
	if len(s) != 36 {
		return "", false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return "", false
			}
		default:
			if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
				return "", false
			}
		}
	}
	return strings.ToLower(s), true
}

// uuidString formats a scanned UNIQUEIDENTIFIER in the canonical lower-case form. The driver
// has already put its bytes in RFC 4122 (text) order.
func uuidString(u mssql.UniqueIdentifier) string {
	return fmt.Sprintf("%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:])
}

// durationMS returns d in whole milliseconds as an INT parameter.
func durationMS(d time.Duration) (int32, error) {
	ms := d.Milliseconds()
	if ms > math.MaxInt32 || ms < math.MinInt32 {
		return 0, fmt.Errorf("%s is out of range (at most %d ms)", d, math.MaxInt32)
	}
	return int32(ms), nil
}

// splitDuration returns d as whole seconds and the remaining milliseconds, both INT
// parameters, so that durations longer than 24 days (the INT range of milliseconds) work.
func splitDuration(d time.Duration) (seconds, millis int32, err error) {
	s := int64(d / time.Second)
	if s > math.MaxInt32 || s < math.MinInt32 {
		return 0, 0, fmt.Errorf("%s is out of range", d)
	}
	return int32(s), int32((d % time.Second).Milliseconds()), nil
}

// ageFromMS converts an age in milliseconds from DATEDIFF_BIG; a null (no row) or a negative
// value (a default of a coarser clock) is zero.
func ageFromMS(ms sql.NullInt64) time.Duration {
	if !ms.Valid || ms.Int64 <= 0 {
		return 0
	}
	return time.Duration(ms.Int64) * time.Millisecond
}

// jsonObject returns a stored JSON object, "{}" when the column is empty.
func jsonObject(s string) json.RawMessage {
	if s == "" {
		return json.RawMessage("{}")
	}
	return json.RawMessage(s)
}

// nullIfEmpty returns nil (NULL) for an empty string.
func nullIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}
