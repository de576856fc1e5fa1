package sqlserver

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/alternayte/queuebox/shared/store"
)

// bumpGenerationsSQL raises the replay generation (queuebox_replay_generation, V3 of the
// QueueBox track) of every row in the table variable @moved of the outbox replay statements.
// One MERGE WITH (HOLDLOCK), so that two replays of one row at once count twice; it runs in the
// transaction of the replay (inReplayTx).
const bumpGenerationsSQL = `MERGE queuebox_replay_generation WITH (HOLDLOCK) AS g
USING @moved AS m
    ON g.outbox_id = m.moved_id
WHEN MATCHED THEN UPDATE SET generation = g.generation + 1, replayed_at = SYSUTCDATETIME()
WHEN NOT MATCHED THEN INSERT (outbox_id, generation, replayed_at)
    VALUES (m.moved_id, 1, SYSUTCDATETIME());`

// replayGenerationsSQL: @p1 the ids, a JSON array.
const replayGenerationsSQL = `SELECT LOWER(CONVERT(NVARCHAR(36), g.outbox_id)), g.generation
FROM queuebox_replay_generation AS g
WHERE g.outbox_id IN (SELECT CONVERT(UNIQUEIDENTIFIER, sel.value) FROM OPENJSON(@p1) AS sel);`

var (
	_ store.ReplayGenerationStore = (*Store)(nil)
	_ store.TrackTables           = (*Store)(nil)
)

// withoutGenerations returns an outbox replay statement without its bumpGenerationsSQL
// batch: the statement of a database that lacks queuebox_replay_generation. A statement
// without the bump is returned as it is; a test checks that none is.
func withoutGenerations(query string) string {
	return strings.Replace(query, bumpGenerationsSQL+"\n", "", 1)
}

// SetMissingTables tells the store which tables of QueueBox's own migration track the
// database lacks (store.TrackTables).
func (s *Store) SetMissingTables(tables []string) {
	for _, t := range tables {
		switch t {
		case store.ReplayGenerationTable:
			s.noGenerations.Store(true)
		case store.RevokedSessionTable:
			s.noSessions.Store(true)
		}
	}
}

// missingGenerations wraps Msg 208 about queuebox_replay_generation in
// store.ErrNoReplayGenerations; an error about another table keeps its own text.
func missingGenerations(op string, err error) error {
	if hasErrorNumber(err, errInvalidObjectName) && strings.Contains(err.Error(), store.ReplayGenerationTable) {
		return fmt.Errorf("%s: %w: %w", op, store.ErrNoReplayGenerations, err)
	}
	return fmt.Errorf("%s: %w", op, translate(err))
}

// inReplayTx runs an outbox replay batch (the UPDATE of the rows and the MERGE of their
// generations) in one transaction, and scans its answer; a deadlock victim runs again.
func (s *Store) inReplayTx(ctx context.Context, query string, args []any, scan func(*sql.Row) error) error {
	_, err := retryDeadlock(ctx, func() (struct{}, error) {
		tx, err := s.db.BeginTx(ctx, nil)
		if err != nil {
			return struct{}{}, err
		}
		if err := scan(tx.QueryRowContext(ctx, query, args...)); err != nil {
			_ = tx.Rollback()
			return struct{}{}, err
		}
		return struct{}{}, tx.Commit()
	})
	return err
}

// OutboxReplayGenerations returns the replay generation of each of ids that a replay moved.
func (s *Store) OutboxReplayGenerations(ctx context.Context, ids []string) (map[string]int64, error) {
	const op = "reading the replay generations"
	arg, err := idFilter(ids)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	out := map[string]int64{}
	if arg == nil || s.noGenerations.Load() {
		// Without the table no replay was counted: every row is at generation 0.
		return out, nil
	}
	type pair struct {
		id  string
		gen int64
	}
	pairs, err := retryDeadlock(ctx, func() ([]pair, error) {
		return queryAll(ctx, s.db, replayGenerationsSQL, []any{arg}, func(rows *sql.Rows) (pair, error) {
			var p pair
			err := rows.Scan(&p.id, &p.gen)
			return p, err
		})
	})
	if err != nil {
		return nil, missingGenerations(op, err)
	}
	for _, p := range pairs {
		out[p.id] = p.gen
	}
	return out, nil
}
