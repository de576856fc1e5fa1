package sqlserver

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/alternayte/queuebox/shared/store"
)

var _ store.ReplayStore = (*Store)(nil)

// replayStatements are the statements of store.ReplayStore.
type replayStatements struct {
	outboxCount, outboxScan, outboxBatch string
	// outboxBatchNoGen is outboxBatch without the generation bump (store.TrackTables).
	outboxBatchNoGen                  string
	inboxCount, inboxScan, inboxBatch string
}

// outboxSelectionWhere: @p1 states JSON array, @p2 ids JSON array or NULL, @p3 topics JSON
// array or NULL, @p4 created after or NULL, @p5 created before or NULL, @p6 the id that the
// page starts after or NULL. Ids compare in SQL Server's uniqueidentifier order, the order of
// the pages.
const outboxSelectionWhere = `
WHERE {o.state} IN (SELECT sel.value FROM OPENJSON(@p1) AS sel)
  AND (@p2 IS NULL OR {o.id} IN (
        SELECT CONVERT(UNIQUEIDENTIFIER, sel.value) FROM OPENJSON(@p2) AS sel))
  AND (@p3 IS NULL OR {o.topic} IN (SELECT sel.value FROM OPENJSON(@p3) AS sel))
  AND (@p4 IS NULL OR {o.created_at} > CAST(@p4 AS DATETIME2))
  AND (@p5 IS NULL OR {o.created_at} < CAST(@p5 AS DATETIME2))
  AND (@p6 IS NULL OR {o.id} > CONVERT(UNIQUEIDENTIFIER, @p6))`

const outboxSelectionCountSQL = `SELECT COUNT_BIG(*) FROM {outbox}` + outboxSelectionWhere + `
OPTION (RECOMPILE);`

// outboxSelectionScanSQL: @p7 the page size, @p8 1 to read the bodies.
const outboxSelectionScanSQL = `SELECT TOP (@p7) LOWER(CONVERT(NVARCHAR(36), {o.id})), {o.topic},
       COALESCE({o.key}, N''), {o.state}, {o.attempt}, COALESCE({o.last_error}, N''),
       {o.created_at}, {o.updated_at},
       CASE WHEN @p8 = 1 THEN {o.payload} END, CASE WHEN @p8 = 1 THEN {o.headers} END
FROM {outbox}` + outboxSelectionWhere + `
ORDER BY {o.id}
OPTION (RECOMPILE);`

// outboxReplayBatchSQL moves at most @p7 sent or dead rows of the selection, in id order, in
// one statement; the subquery takes update locks, so every picked row moves. It raises the
// replay generation of the moved rows (bumpGenerationsSQL; the caller runs the batch in a
// transaction) and answers the count and the greatest id of the batch in uniqueidentifier
// order.
const outboxReplayBatchSQL = `SET NOCOUNT ON;
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
WHERE {o.id} IN (
    SELECT TOP (@p7) {o.id} FROM {outbox} WITH (UPDLOCK, ROWLOCK)` + outboxSelectionWhere + `
      AND {o.state} IN (N'sent', N'dead')
    ORDER BY {o.id})
OPTION (RECOMPILE);
` + bumpGenerationsSQL + `
SELECT COUNT_BIG(*), (SELECT TOP (1) LOWER(CONVERT(NVARCHAR(36), m.moved_id)) FROM @moved AS m ORDER BY m.moved_id DESC)
FROM @moved;`

// inboxSelectionWhere: the parameters of outboxSelectionWhere with sources for topics, and
// @p7 the consumption or NULL.
const inboxSelectionWhere = `
WHERE {i.state} IN (SELECT sel.value FROM OPENJSON(@p1) AS sel)
  AND (@p2 IS NULL OR {i.id} IN (
        SELECT CONVERT(UNIQUEIDENTIFIER, sel.value) FROM OPENJSON(@p2) AS sel))
  AND (@p3 IS NULL OR {i.source} IN (SELECT sel.value FROM OPENJSON(@p3) AS sel))
  AND (@p4 IS NULL OR {i.created_at} > CAST(@p4 AS DATETIME2))
  AND (@p5 IS NULL OR {i.created_at} < CAST(@p5 AS DATETIME2))
  AND (@p6 IS NULL OR {i.id} > CONVERT(UNIQUEIDENTIFIER, @p6))
  AND (@p7 IS NULL OR {i.consumption} = @p7)`

const inboxSelectionCountSQL = `SELECT COUNT_BIG(*) FROM {inbox}` + inboxSelectionWhere + `
OPTION (RECOMPILE);`

// inboxSelectionScanSQL: @p8 the page size, @p9 1 to read the bodies.
const inboxSelectionScanSQL = `SELECT TOP (@p8) LOWER(CONVERT(NVARCHAR(36), {i.id})), {i.source},
       {i.consumption}, {i.idempotency_key}, {i.state}, {i.attempt},
       COALESCE({i.last_error}, N''), {i.created_at}, COALESCE({i.processed_at}, {i.created_at}),
       CASE WHEN @p9 = 1 THEN {i.payload} END, CASE WHEN @p9 = 1 THEN {i.headers} END
FROM {inbox}` + inboxSelectionWhere + `
ORDER BY {i.id}
OPTION (RECOMPILE);`

// inboxReplayBatchSQL moves at most @p8 processed or dead rows of the selection back to
// pending, as the requeue of spec/18 does.
const inboxReplayBatchSQL = `SET NOCOUNT ON;
DECLARE @moved TABLE (moved_id UNIQUEIDENTIFIER NOT NULL);
UPDATE {inbox}
SET {i.state} = N'pending',
    {i.attempt} = 0,
    {i.scheduled_at} = SYSUTCDATETIME(),
    {i.last_error} = NULL,
    {i.claimed_at} = NULL,
    {i.processed_at} = NULL,
    {i.claim_token} = NULL,
    {i.lease_expires_at} = NULL
OUTPUT inserted.{i.id} INTO @moved (moved_id)
WHERE {i.id} IN (
    SELECT TOP (@p8) {i.id} FROM {inbox} WITH (UPDLOCK, ROWLOCK)` + inboxSelectionWhere + `
      AND {i.state} IN (N'processed', N'dead')
    ORDER BY {i.id})
OPTION (RECOMPILE);
SELECT COUNT_BIG(*), (SELECT TOP (1) LOWER(CONVERT(NVARCHAR(36), m.moved_id)) FROM @moved AS m ORDER BY m.moved_id DESC)
FROM @moved;`

func buildReplayStatements(e *expander) replayStatements {
	return replayStatements{
		outboxCount:      e.expand(outboxSelectionCountSQL),
		outboxScan:       e.expand(outboxSelectionScanSQL),
		outboxBatch:      e.expand(outboxReplayBatchSQL),
		outboxBatchNoGen: e.expand(withoutGenerations(outboxReplayBatchSQL)),
		inboxCount:       e.expand(inboxSelectionCountSQL),
		inboxScan:        e.expand(inboxSelectionScanSQL),
		inboxBatch:       e.expand(inboxReplayBatchSQL),
	}
}

// jsonArray encodes a filter list as a JSON array, or nil (no filter) when it is empty.
func jsonArray(list []string) (any, error) {
	if len(list) == 0 {
		return nil, nil
	}
	b, err := json.Marshal(list)
	if err != nil {
		return nil, fmt.Errorf("encoding a filter: %w", err)
	}
	return string(b), nil
}

// idFilter keeps the UUIDs of ids: an id that is not one matches no row and must not widen
// the selection, so the filter stays set (an empty array) when none is left.
func idFilter(ids []string) (any, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	valid := make([]string, 0, len(ids))
	for _, raw := range ids {
		if id, ok := canonicalUUID(raw); ok {
			valid = append(valid, id)
		}
	}
	b, err := json.Marshal(valid)
	if err != nil {
		return nil, fmt.Errorf("encoding ids: %w", err)
	}
	return string(b), nil
}

// cursorArg is the page cursor: nil from the first row. A cursor that is not a UUID starts
// after the greatest uniqueidentifier, so it selects nothing.
func cursorArg(id string) any {
	if id == "" {
		return nil
	}
	if c, ok := canonicalUUID(id); ok {
		return c
	}
	return "ffffffff-ffff-ffff-ffff-ffffffffffff"
}

func selectionArgs(states, defaults, ids, names []string, sel timeBounds, cursor string) ([]any, error) {
	if len(states) == 0 {
		states = defaults
	}
	st, err := jsonArray(states)
	if err != nil {
		return nil, err
	}
	idArg, err := idFilter(ids)
	if err != nil {
		return nil, err
	}
	nameArg, err := jsonArray(names)
	if err != nil {
		return nil, err
	}
	args := []any{st, idArg, nameArg, nil, nil, cursorArg(cursor)}
	// The columns hold UTC; the statement casts the UTC instant to DATETIME2.
	if sel.from != nil {
		args[3] = sel.from.UTC()
	}
	if sel.to != nil {
		args[4] = sel.to.UTC()
	}
	return args, nil
}

func outboxSelArgs(sel store.OutboxSelection, cursor string) ([]any, error) {
	return selectionArgs(sel.States, []string{store.OutboxSent, store.OutboxDead}, sel.IDs, sel.Topics,
		timeBounds{sel.CreatedFrom, sel.CreatedTo}, cursor)
}

func inboxSelArgs(sel store.InboxSelection, cursor string) ([]any, error) {
	args, err := selectionArgs(sel.States, []string{store.InboxDead}, sel.IDs, sel.Sources,
		timeBounds{sel.CreatedFrom, sel.CreatedTo}, cursor)
	if err != nil {
		return nil, err
	}
	var consumption any
	if sel.Consumption != "" {
		consumption = sel.Consumption
	}
	return append(args, consumption), nil
}

// OutboxSelectionCount counts the rows of the selection.
func (s *Store) OutboxSelectionCount(ctx context.Context, sel store.OutboxSelection) (int64, error) {
	args, err := outboxSelArgs(sel, "")
	if err != nil {
		return 0, fmt.Errorf("counting outbox rows: %w", err)
	}
	n, err := s.queryCount(ctx, s.stmt.replay.outboxCount, args)
	if err != nil {
		return 0, fmt.Errorf("counting outbox rows: %w", err)
	}
	return n, nil
}

// OutboxSelectionScan returns one page of the selection in id order.
func (s *Store) OutboxSelectionScan(ctx context.Context, sel store.OutboxSelection, page store.ScanParams) ([]store.FinishedRow, error) {
	if page.Limit <= 0 {
		return nil, errors.New("listing outbox rows: the page size must be above 0")
	}
	args, err := outboxSelArgs(sel, page.After)
	if err != nil {
		return nil, fmt.Errorf("listing outbox rows: %w", err)
	}
	args = append(args, int64(page.Limit), bit(page.Bodies))
	rows, err := retryDeadlock(ctx, func() ([]store.FinishedRow, error) {
		return queryAll(ctx, s.db, s.stmt.replay.outboxScan, args, func(rows *sql.Rows) (store.FinishedRow, error) {
			var r store.FinishedRow
			var payload, headers sql.NullString
			err := rows.Scan(&r.ID, &r.Topic, &r.Key, &r.State, &r.Attempt, &r.LastError, &r.CreatedAt, &r.UpdatedAt, &payload, &headers)
			setBodies(&r, payload, headers)
			return r, err
		})
	})
	if err != nil {
		return nil, fmt.Errorf("listing outbox rows: %w", err)
	}
	return rows, nil
}

// OutboxReplayBatch moves one batch of the selection back to pending.
func (s *Store) OutboxReplayBatch(ctx context.Context, sel store.OutboxSelection, cursor string, limit int) (store.ReplayBatchResult, error) {
	if limit <= 0 {
		return store.ReplayBatchResult{}, errors.New("replaying outbox rows: the batch size must be above 0")
	}
	args, err := outboxSelArgs(sel, cursor)
	if err != nil {
		return store.ReplayBatchResult{}, fmt.Errorf("replaying outbox rows: %w", err)
	}
	var res store.ReplayBatchResult
	query := s.stmt.replay.outboxBatch
	if s.noGenerations.Load() {
		query = s.stmt.replay.outboxBatchNoGen
	}
	err = s.inReplayTx(ctx, query, append(args, int64(limit)), func(row *sql.Row) error {
		var last sql.NullString
		if err := row.Scan(&res.Moved, &last); err != nil {
			return err
		}
		res.Last = last.String
		return nil
	})
	if err != nil {
		return store.ReplayBatchResult{}, missingGenerations("replaying outbox rows", err)
	}
	return res, nil
}

// InboxSelectionCount counts the rows of the selection.
func (s *Store) InboxSelectionCount(ctx context.Context, sel store.InboxSelection) (int64, error) {
	args, err := inboxSelArgs(sel, "")
	if err != nil {
		return 0, fmt.Errorf("counting inbox rows: %w", err)
	}
	n, err := s.queryCount(ctx, s.stmt.replay.inboxCount, args)
	if err != nil {
		return 0, fmt.Errorf("counting inbox rows: %w", err)
	}
	return n, nil
}

// InboxSelectionScan returns one page of the selection in id order.
func (s *Store) InboxSelectionScan(ctx context.Context, sel store.InboxSelection, page store.ScanParams) ([]store.FinishedRow, error) {
	if page.Limit <= 0 {
		return nil, errors.New("listing inbox rows: the page size must be above 0")
	}
	args, err := inboxSelArgs(sel, page.After)
	if err != nil {
		return nil, fmt.Errorf("listing inbox rows: %w", err)
	}
	args = append(args, int64(page.Limit), bit(page.Bodies))
	rows, err := retryDeadlock(ctx, func() ([]store.FinishedRow, error) {
		return queryAll(ctx, s.db, s.stmt.replay.inboxScan, args, func(rows *sql.Rows) (store.FinishedRow, error) {
			var r store.FinishedRow
			var payload, headers sql.NullString
			err := rows.Scan(&r.ID, &r.Source, &r.Consumption, &r.Key, &r.State, &r.Attempt, &r.LastError, &r.CreatedAt, &r.UpdatedAt, &payload, &headers)
			setBodies(&r, payload, headers)
			return r, err
		})
	})
	if err != nil {
		return nil, fmt.Errorf("listing inbox rows: %w", err)
	}
	return rows, nil
}

// InboxReplayBatch moves one batch of the selection back to pending.
func (s *Store) InboxReplayBatch(ctx context.Context, sel store.InboxSelection, cursor string, limit int) (store.ReplayBatchResult, error) {
	if limit <= 0 {
		return store.ReplayBatchResult{}, errors.New("replaying inbox rows: the batch size must be above 0")
	}
	args, err := inboxSelArgs(sel, cursor)
	if err != nil {
		return store.ReplayBatchResult{}, fmt.Errorf("replaying inbox rows: %w", err)
	}
	res, err := s.replayBatch(ctx, s.stmt.replay.inboxBatch, append(args, int64(limit)))
	if err != nil {
		return store.ReplayBatchResult{}, fmt.Errorf("replaying inbox rows: %w", err)
	}
	return res, nil
}

// queryCount runs a statement that answers one count.
func (s *Store) queryCount(ctx context.Context, query string, args []any) (int64, error) {
	return retryDeadlock(ctx, func() (int64, error) {
		var n int64
		if err := s.db.QueryRowContext(ctx, query, args...).Scan(&n); err != nil {
			return 0, translate(err)
		}
		return n, nil
	})
}

// replayBatch runs one batch statement: a single UPDATE, committed on its own.
func (s *Store) replayBatch(ctx context.Context, query string, args []any) (store.ReplayBatchResult, error) {
	return retryDeadlock(ctx, func() (store.ReplayBatchResult, error) {
		var res store.ReplayBatchResult
		var last sql.NullString
		if err := s.db.QueryRowContext(ctx, query, args...).Scan(&res.Moved, &last); err != nil {
			return store.ReplayBatchResult{}, translate(err)
		}
		res.Last = last.String
		return res, nil
	})
}

type timeBounds struct{ from, to *time.Time }

func bit(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

func setBodies(r *store.FinishedRow, payload, headers sql.NullString) {
	if payload.Valid {
		r.Payload = []byte(payload.String)
	}
	if headers.Valid {
		r.Headers = []byte(headers.String)
	}
}
