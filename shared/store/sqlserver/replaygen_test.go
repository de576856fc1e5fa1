package sqlserver

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/alternayte/queuebox/shared/store"
)

// No SQL Server runs here: the replay generation statements are checked by their text, their
// order and their parameters on the fake database.

// TestOutboxReplaysRaiseTheGeneration: both outbox replay statements collect the moved ids in
// @moved and MERGE them into queuebox_replay_generation (a new row at 1, an existing one + 1)
// before they answer, in one batch that the store runs in a transaction.
func TestOutboxReplaysRaiseTheGeneration(t *testing.T) {
	t.Parallel()
	s, _ := newFakeStore(t, func(string, []any) fakeAnswer { return fakeAnswer{} })
	require.NoError(t, checkBalanced(bumpGenerationsSQL))
	assert.Contains(t, bumpGenerationsSQL, "MERGE queuebox_replay_generation WITH (HOLDLOCK) AS g\nUSING @moved AS m\n    ON g.outbox_id = m.moved_id\n")
	assert.Contains(t, bumpGenerationsSQL, "WHEN MATCHED THEN UPDATE SET generation = g.generation + 1, replayed_at = SYSUTCDATETIME()")
	assert.Contains(t, bumpGenerationsSQL, "VALUES (m.moved_id, 1, SYSUTCDATETIME());")
	for name, text := range map[string]string{"replay": s.stmt.outboxReplay, "replay batch": s.stmt.replay.outboxBatch} {
		require.NoError(t, checkBalanced(text), name)
		assert.True(t, strings.HasPrefix(text, "SET NOCOUNT ON;\nDECLARE @moved TABLE (moved_id UNIQUEIDENTIFIER NOT NULL);\nUPDATE "), name)
		update := strings.Index(text, "OUTPUT inserted.[id] INTO @moved (moved_id)")
		merge := strings.Index(text, bumpGenerationsSQL)
		answer := strings.LastIndex(text, "\nSELECT COUNT_BIG(*)")
		assert.True(t, update > 0 && merge > update && answer > merge, "%s: the UPDATE fills @moved, the MERGE raises their generations, then the answer:\n%s", name, text)
	}
	assert.NotContains(t, s.stmt.replay.inboxBatch, "queuebox_replay_generation", "an inbox replay keeps no generation")
}

func TestOutboxReplayGenerationsReadsTheIDsOnce(t *testing.T) {
	t.Parallel()
	const a, b = "3f2b1c1e-8d4a-4c1b-9a53-2d0f6f1e7a10", "9b7e5d2c-1a3f-4e8b-b6c4-0f1e2d3c4b5a"
	s, f := newFakeStore(t, func(string, []any) fakeAnswer {
		return fakeAnswer{columns: []string{"id", "generation"}, rows: [][]any{{a, int64(2)}}}
	})
	got, err := s.OutboxReplayGenerations(context.Background(), []string{a, strings.ToUpper(b), "not-a-uuid"})
	require.NoError(t, err)
	assert.Equal(t, map[string]int64{a: 2}, got)
	st := f.statements()
	require.Len(t, st, 1, "one statement for every id")
	assert.Equal(t, replayGenerationsSQL, st[0].query)
	assert.Equal(t, []any{`["` + a + `","` + b + `"]`}, st[0].args, "the UUIDs, in canonical form")

	got, err = s.OutboxReplayGenerations(context.Background(), nil)
	require.NoError(t, err)
	assert.Empty(t, got)
	assert.Len(t, f.statements(), 1, "no ids, no statement")
}

func TestReplayGenerationsMissingTable(t *testing.T) {
	t.Parallel()
	missing := sqlError(208)
	s, _ := newFakeStore(t, func(string, []any) fakeAnswer { return fakeAnswer{err: missing} })
	ctx := context.Background()
	_, err := s.OutboxReplayGenerations(ctx, []string{"3f2b1c1e-8d4a-4c1b-9a53-2d0f6f1e7a10"})
	require.Error(t, err)
	// The fake's message does not name the table: it is another table's Msg 208.
	assert.False(t, errors.Is(err, store.ErrNoReplayGenerations))
	assert.Contains(t, missingGenerations("replaying", errors.Join(missing, errors.New("Invalid object name 'queuebox_replay_generation'."))).Error(),
		"V3__add_replay_generation.sql")
}

// TestOutboxReplaysWithoutTheGenerationTable: once SetMissingTables names
// queuebox_replay_generation, both outbox replays run their statement without the MERGE (the
// UPDATE and the answer stay as they are), the generations are 0 without a statement, and the
// logouts answer ErrNoRevokedSessions without one.
func TestOutboxReplaysWithoutTheGenerationTable(t *testing.T) {
	t.Parallel()
	s, f := newFakeStore(t, func(query string, _ []any) fakeAnswer {
		if strings.Contains(query, "SELECT COUNT_BIG(*) FROM @moved;") {
			return fakeAnswer{columns: []string{"n"}, rows: [][]any{{int64(1)}}}
		}
		return fakeAnswer{columns: []string{"n", "last"}, rows: [][]any{{int64(1), "3f2b1c1e-8d4a-4c1b-9a53-2d0f6f1e7a10"}}}
	})
	for name, pair := range map[string][2]string{
		"replay":       {s.stmt.outboxReplay, s.stmt.outboxReplayNoGen},
		"replay batch": {s.stmt.replay.outboxBatch, s.stmt.replay.outboxBatchNoGen},
	} {
		with, without := pair[0], pair[1]
		require.NoError(t, checkBalanced(without), name)
		assert.NotContains(t, without, "queuebox_replay_generation", name)
		assert.Equal(t, strings.Replace(with, bumpGenerationsSQL+"\n", "", 1), without, name)
		assert.Contains(t, without, "OUTPUT inserted.[id] INTO @moved (moved_id)", name)
	}
	s.SetMissingTables([]string{store.ReplayGenerationTable, store.RevokedSessionTable})
	ctx := context.Background()
	_, err := s.OutboxReplay(ctx, store.OutboxReplayParams{IDs: []string{"3f2b1c1e-8d4a-4c1b-9a53-2d0f6f1e7a10"}})
	require.NoError(t, err)
	_, err = s.OutboxReplayBatch(ctx, store.OutboxSelection{Topics: []string{"t"}}, "", 10)
	require.NoError(t, err)
	var queries []string
	for _, st := range f.statements() {
		queries = append(queries, st.query)
	}
	assert.Contains(t, queries, s.stmt.outboxReplayNoGen)
	assert.Contains(t, queries, s.stmt.replay.outboxBatchNoGen)
	n := len(queries)
	gens, err := s.OutboxReplayGenerations(ctx, []string{"3f2b1c1e-8d4a-4c1b-9a53-2d0f6f1e7a10"})
	require.NoError(t, err)
	assert.Empty(t, gens)
	_, err = s.SessionRevoked(ctx, strings.Repeat("a", 64))
	assert.ErrorIs(t, err, store.ErrNoRevokedSessions)
	assert.ErrorIs(t, s.RevokeSession(ctx, strings.Repeat("a", 64), time.Now().Add(time.Hour)), store.ErrNoRevokedSessions)
	assert.Len(t, f.statements(), n, "no statement without the tables")
}
