package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/alternayte/queuebox/shared/store"
)

// replayStatements are the statements of store.ReplayStore.
type replayStatements struct {
	outboxCount, outboxScan, outboxBatch string
	// outboxBatchNoGen is outboxBatch without the generation bump (store.TrackTables).
	outboxBatchNoGen                  string
	inboxCount, inboxScan, inboxBatch string
}

var _ store.ReplayStore = (*Store)(nil)

// outboxSelectionWhere is the selection of store.OutboxSelection: $1 states, $2 ids (null:
// no filter), $3 topics (null: no filter), $4 created after, $5 created before, $6 the id
// that the page starts after (null: from the first row).
const outboxSelectionWhere = `
WHERE o.{state} = ANY ($1::text[])
  AND ($2::uuid[] IS NULL OR o.{id} = ANY ($2::uuid[]))
  AND ($3::text[] IS NULL OR o.{topic} = ANY ($3::text[]))
  AND ($4::timestamptz IS NULL OR o.{created_at} > $4::timestamptz)
  AND ($5::timestamptz IS NULL OR o.{created_at} < $5::timestamptz)
  AND ($6::uuid IS NULL OR o.{id} > $6::uuid)`

const outboxSelectionCountSQL = `SELECT count(*) FROM {table} o` + outboxSelectionWhere

// outboxSelectionScanSQL: $7 the page size, $8 whether to read the bodies.
const outboxSelectionScanSQL = `
SELECT o.{id}::text, o.{topic}, coalesce(o.{key}, ''), o.{state}, o.{attempt},
       coalesce(o.{last_error}, ''), o.{created_at}, o.{updated_at},
       CASE WHEN $8::boolean THEN o.{payload}::text END,
       CASE WHEN $8::boolean THEN o.{headers}::text END
FROM {table} o` + outboxSelectionWhere + `
ORDER BY o.{id}
LIMIT $7`

// outboxReplayBatchSQL moves at most $7 rows of the selection, in id order, that are sent or
// dead, and raises their replay generation. The rows are locked by the select, so every
// picked row moves; the answer is the count and the greatest id.
const outboxReplayBatchSQL = `
WITH picked AS (
    SELECT o.{id} FROM {table} o` + outboxSelectionWhere + `
      AND o.{state} IN ('sent', 'dead')
    ORDER BY o.{id}
    LIMIT $7
    FOR UPDATE),
moved AS (
    UPDATE {table} o
    SET {state} = 'pending',
        {attempt} = 0,
        {scheduled_at} = clock_timestamp(),
        {last_error} = NULL,
        {claimed_at} = NULL,
        {claim_token} = NULL,
        {lease_expires_at} = NULL,
        {updated_at} = clock_timestamp()
    FROM picked p
    WHERE o.{id} = p.{id}
    RETURNING o.{id})` + bumpGenerations + `
SELECT (SELECT count(*) FROM moved), (SELECT m.{id}::text FROM moved m ORDER BY m.{id} DESC LIMIT 1)`

// inboxSelectionWhere is the selection of store.InboxSelection: $1 states, $2 ids, $3
// sources, $4 created after, $5 created before, $6 the id that the page starts after, $7
// the consumption (null: both).
const inboxSelectionWhere = `
WHERE i.{state} = ANY ($1::text[])
  AND ($2::uuid[] IS NULL OR i.{id} = ANY ($2::uuid[]))
  AND ($3::text[] IS NULL OR i.{source} = ANY ($3::text[]))
  AND ($4::timestamptz IS NULL OR i.{created_at} > $4::timestamptz)
  AND ($5::timestamptz IS NULL OR i.{created_at} < $5::timestamptz)
  AND ($6::uuid IS NULL OR i.{id} > $6::uuid)
  AND ($7::text IS NULL OR i.{consumption} = $7::text)`

const inboxSelectionCountSQL = `SELECT count(*) FROM {table} i` + inboxSelectionWhere

// inboxSelectionScanSQL: $8 the page size, $9 whether to read the bodies.
const inboxSelectionScanSQL = `
SELECT i.{id}::text, i.{source}, i.{consumption}, i.{idempotency_key}, i.{state}, i.{attempt},
       coalesce(i.{last_error}, ''), i.{created_at}, coalesce(i.{processed_at}, i.{created_at}),
       CASE WHEN $9::boolean THEN i.{payload}::text END,
       CASE WHEN $9::boolean THEN i.{headers}::text END
FROM {table} i` + inboxSelectionWhere + `
ORDER BY i.{id}
LIMIT $8`

// inboxReplayBatchSQL moves at most $8 processed or dead rows of the selection back to
// pending, as the requeue of spec/18 does.
const inboxReplayBatchSQL = `
WITH picked AS (
    SELECT i.{id} FROM {table} i` + inboxSelectionWhere + `
      AND i.{state} IN ('processed', 'dead')
    ORDER BY i.{id}
    LIMIT $8
    FOR UPDATE),
moved AS (
    UPDATE {table} i
    SET {state} = 'pending',
        {attempt} = 0,
        {scheduled_at} = clock_timestamp(),
        {last_error} = NULL,
        {claimed_at} = NULL,
        {processed_at} = NULL,
        {claim_token} = NULL,
        {lease_expires_at} = NULL
    FROM picked p
    WHERE i.{id} = p.{id}
    RETURNING i.{id})
SELECT (SELECT count(*) FROM moved), (SELECT m.{id}::text FROM moved m ORDER BY m.{id} DESC LIMIT 1)`

func buildReplayStatements(n store.Names) (replayStatements, error) {
	var st replayStatements
	var errs []error
	r := func(dst *string, sql, table string, cols map[string]string) {
		s, err := render(sql, table, cols)
		errs = append(errs, err)
		*dst = s
	}
	r(&st.outboxCount, outboxSelectionCountSQL, n.OutboxTable, outboxColumns(n))
	r(&st.outboxScan, outboxSelectionScanSQL, n.OutboxTable, outboxColumns(n))
	r(&st.outboxBatch, outboxReplayBatchSQL, n.OutboxTable, outboxColumns(n))
	noGen, err := withoutGenerations(outboxReplayBatchSQL)
	errs = append(errs, err)
	r(&st.outboxBatchNoGen, noGen, n.OutboxTable, outboxColumns(n))
	r(&st.inboxCount, inboxSelectionCountSQL, n.InboxTable, inboxColumns(n))
	r(&st.inboxScan, inboxSelectionScanSQL, n.InboxTable, inboxColumns(n))
	r(&st.inboxBatch, inboxReplayBatchSQL, n.InboxTable, inboxColumns(n))
	return st, errors.Join(errs...)
}

// validIDs keeps the UUIDs of ids: an id that is not one matches no row and must not widen
// the selection, so the filter stays set (an empty array) when none is left. nil when ids
// is empty (no filter).
func validIDs(ids []string) any {
	if len(ids) == 0 {
		return nil
	}
	valid := make([]string, 0, len(ids))
	for _, id := range ids {
		if isUUID(id) {
			valid = append(valid, id)
		}
	}
	return valid
}

func orNil[T any](s []T) any {
	if len(s) == 0 {
		return nil
	}
	return s
}

// after is the page cursor: nil from the first row. A cursor that is not a UUID starts
// after the greatest UUID, so it selects nothing.
func after(id string) any {
	switch {
	case id == "":
		return nil
	case isUUID(id):
		return id
	}
	return "ffffffff-ffff-ffff-ffff-ffffffffffff"
}

func outboxArgs(sel store.OutboxSelection, cursor string) []any {
	states := sel.States
	if len(states) == 0 {
		states = []string{store.OutboxSent, store.OutboxDead}
	}
	return []any{states, validIDs(sel.IDs), orNil(sel.Topics), sel.CreatedFrom, sel.CreatedTo, after(cursor)}
}

func inboxArgs(sel store.InboxSelection, cursor string) []any {
	states := sel.States
	if len(states) == 0 {
		states = []string{store.InboxDead}
	}
	var consumption any
	if sel.Consumption != "" {
		consumption = sel.Consumption
	}
	return []any{states, validIDs(sel.IDs), orNil(sel.Sources), sel.CreatedFrom, sel.CreatedTo, after(cursor), consumption}
}

// OutboxSelectionCount counts the rows of the selection.
func (s *Store) OutboxSelectionCount(ctx context.Context, sel store.OutboxSelection) (int64, error) {
	var n int64
	if err := s.pool.QueryRow(ctx, s.sql.replay.outboxCount, outboxArgs(sel, "")...).Scan(&n); err != nil {
		return 0, wrapErr("counting outbox rows", err)
	}
	return n, nil
}

// OutboxSelectionScan returns one page of the selection in id order.
func (s *Store) OutboxSelectionScan(ctx context.Context, sel store.OutboxSelection, page store.ScanParams) ([]store.FinishedRow, error) {
	if page.Limit <= 0 {
		return nil, errors.New("listing outbox rows: the page size must be above 0")
	}
	args := append(outboxArgs(sel, page.After), page.Limit, page.Bodies)
	rows, err := s.pool.Query(ctx, s.sql.replay.outboxScan, args...)
	if err != nil {
		return nil, wrapErr("listing outbox rows", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.FinishedRow, error) {
		var r store.FinishedRow
		var payload, headers *string
		err := row.Scan(&r.ID, &r.Topic, &r.Key, &r.State, &r.Attempt, &r.LastError, &r.CreatedAt, &r.UpdatedAt, &payload, &headers)
		setBodies(&r, payload, headers)
		return r, err
	})
	if err != nil {
		return nil, wrapErr("listing outbox rows", err)
	}
	return out, nil
}

// OutboxReplayBatch moves one batch of the selection back to pending.
func (s *Store) OutboxReplayBatch(ctx context.Context, sel store.OutboxSelection, cursor string, limit int) (store.ReplayBatchResult, error) {
	if limit <= 0 {
		return store.ReplayBatchResult{}, errors.New("replaying outbox rows: the batch size must be above 0")
	}
	sql := s.sql.replay.outboxBatch
	if s.noGenerations.Load() {
		sql = s.sql.replay.outboxBatchNoGen
	}
	return s.replayBatch(ctx, "replaying outbox rows", sql, append(outboxArgs(sel, cursor), limit))
}

// InboxSelectionCount counts the rows of the selection.
func (s *Store) InboxSelectionCount(ctx context.Context, sel store.InboxSelection) (int64, error) {
	var n int64
	if err := s.pool.QueryRow(ctx, s.sql.replay.inboxCount, inboxArgs(sel, "")...).Scan(&n); err != nil {
		return 0, wrapErr("counting inbox rows", err)
	}
	return n, nil
}

// InboxSelectionScan returns one page of the selection in id order.
func (s *Store) InboxSelectionScan(ctx context.Context, sel store.InboxSelection, page store.ScanParams) ([]store.FinishedRow, error) {
	if page.Limit <= 0 {
		return nil, errors.New("listing inbox rows: the page size must be above 0")
	}
	args := append(inboxArgs(sel, page.After), page.Limit, page.Bodies)
	rows, err := s.pool.Query(ctx, s.sql.replay.inboxScan, args...)
	if err != nil {
		return nil, wrapErr("listing inbox rows", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.FinishedRow, error) {
		var r store.FinishedRow
		var payload, headers *string
		err := row.Scan(&r.ID, &r.Source, &r.Consumption, &r.Key, &r.State, &r.Attempt, &r.LastError, &r.CreatedAt, &r.UpdatedAt, &payload, &headers)
		setBodies(&r, payload, headers)
		return r, err
	})
	if err != nil {
		return nil, wrapErr("listing inbox rows", err)
	}
	return out, nil
}

// InboxReplayBatch moves one batch of the selection back to pending.
func (s *Store) InboxReplayBatch(ctx context.Context, sel store.InboxSelection, cursor string, limit int) (store.ReplayBatchResult, error) {
	if limit <= 0 {
		return store.ReplayBatchResult{}, errors.New("replaying inbox rows: the batch size must be above 0")
	}
	return s.replayBatch(ctx, "replaying inbox rows", s.sql.replay.inboxBatch, append(inboxArgs(sel, cursor), limit))
}

func (s *Store) replayBatch(ctx context.Context, op, sql string, args []any) (store.ReplayBatchResult, error) {
	var res store.ReplayBatchResult
	var last *string
	if err := s.pool.QueryRow(ctx, sql, args...).Scan(&res.Moved, &last); err != nil {
		return store.ReplayBatchResult{}, missingGenerations(op, err)
	}
	if last != nil {
		res.Last = *last
	}
	return res, nil
}

func setBodies(r *store.FinishedRow, payload, headers *string) {
	if payload != nil {
		r.Payload = []byte(*payload)
	}
	if headers != nil {
		r.Headers = []byte(*headers)
	}
}

// outboxReplaySQL moves sent and dead rows that match every given filter back to pending,
// raises their replay generation, and answers the count. A null parameter does not filter.
const outboxReplaySQL = `
WITH moved AS (
    UPDATE {table} o
    SET {state} = 'pending',
        {attempt} = 0,
        {scheduled_at} = clock_timestamp(),
        {last_error} = NULL,
        {claimed_at} = NULL,
        {claim_token} = NULL,
        {lease_expires_at} = NULL,
        {updated_at} = clock_timestamp()
    WHERE o.{state} IN ('sent', 'dead')
      AND ($1::uuid[] IS NULL OR o.{id} = ANY ($1::uuid[]))
      AND ($2::text[] IS NULL OR o.{topic} = ANY ($2::text[]))
      AND ($3::timestamptz IS NULL OR o.{created_at} > $3::timestamptz)
      AND ($4::timestamptz IS NULL OR o.{created_at} < $4::timestamptz)
    RETURNING o.{id})` + bumpGenerations + `
SELECT count(*) FROM moved`

// ErrNoReplayFilter reports a replay without any filter, which would move every sent and dead
// row of the outbox.
var ErrNoReplayFilter = errors.New("postgres: a replay needs at least one filter")

// OutboxReplay moves the selected sent and dead rows to pending and returns the count. A call
// without any filter is refused with ErrNoReplayFilter.
func (s *Store) OutboxReplay(ctx context.Context, params store.OutboxReplayParams) (int64, error) {
	if len(params.IDs) == 0 && len(params.Topics) == 0 && params.CreatedFrom == nil && params.CreatedTo == nil {
		return 0, fmt.Errorf("replaying outbox rows: %w", ErrNoReplayFilter)
	}
	var ids, topics any
	if len(params.IDs) > 0 {
		// An id that is not a UUID matches no row; it must not widen the selection, so the
		// filter stays set even when no valid id is left.
		valid := make([]string, 0, len(params.IDs))
		for _, id := range params.IDs {
			if isUUID(id) {
				valid = append(valid, id)
			}
		}
		ids = valid
	}
	if len(params.Topics) > 0 {
		topics = params.Topics
	}
	sql := s.sql.outboxReplay
	if s.noGenerations.Load() {
		sql = s.sql.outboxReplayNoGen
	}
	var n int64
	if err := s.pool.QueryRow(ctx, sql, ids, topics, params.CreatedFrom, params.CreatedTo).Scan(&n); err != nil {
		return 0, missingGenerations("replaying outbox rows", err)
	}
	return n, nil
}
