package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/alternayte/queuebox/shared/store"
)

// bumpGenerations is the part of the outbox replay statements that raises the replay
// generation (queuebox_replay_generation, V3 of the QueueBox track) of every row that the CTE
// "moved" returns, in the statement that moves them. A data-modifying CTE runs whether or not
// the statement reads it.
const bumpGenerations = `,
bumped AS (
    INSERT INTO queuebox_replay_generation AS g (outbox_id, generation, replayed_at)
    SELECT m.{id}, 1, clock_timestamp() FROM moved m
    ON CONFLICT (outbox_id) DO UPDATE
    SET generation = g.generation + 1, replayed_at = clock_timestamp())`

// replayGenerationsSQL: $1 the ids.
const replayGenerationsSQL = `SELECT outbox_id::text, generation FROM queuebox_replay_generation WHERE outbox_id = ANY ($1::uuid[])`

var (
	_ store.ReplayGenerationStore = (*Store)(nil)
	_ store.TrackTables           = (*Store)(nil)
)

// withoutGenerations returns an outbox replay statement without its bumpGenerations part: the
// statement of a database that lacks queuebox_replay_generation.
func withoutGenerations(sql string) (string, error) {
	if strings.Count(sql, bumpGenerations) != 1 {
		return "", errors.New("an outbox replay statement does not raise the replay generation once")
	}
	return strings.Replace(sql, bumpGenerations, "", 1), nil
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

// missingGenerations wraps the undefined-table error of queuebox_replay_generation in
// store.ErrNoReplayGenerations; the statements that also name the outbox table keep that
// table's error as it is.
func missingGenerations(op string, err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "42P01" && strings.Contains(pgErr.Message, `"`+store.ReplayGenerationTable+`"`) {
		return fmt.Errorf("%s: %w", op, store.ErrNoReplayGenerations)
	}
	return wrapErr(op, err)
}

// OutboxReplayGenerations returns the replay generation of each of ids that a replay moved.
func (s *Store) OutboxReplayGenerations(ctx context.Context, ids []string) (map[string]int64, error) {
	const op = "reading the replay generations"
	valid := validIDs(ids)
	if valid == nil || s.noGenerations.Load() {
		// Without the table no replay was counted: every row is at generation 0.
		return map[string]int64{}, nil
	}
	rows, err := s.pool.Query(ctx, replayGenerationsSQL, valid)
	if err != nil {
		return nil, missingGenerations(op, err)
	}
	out := make(map[string]int64, len(ids))
	var id string
	var gen int64
	_, err = pgx.ForEachRow(rows, []any{&id, &gen}, func() error {
		out[id] = gen
		return nil
	})
	if err != nil {
		return nil, missingGenerations(op, err)
	}
	return out, nil
}
