package migrate

import (
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/alternayte/queuebox/migrations"
	"github.com/alternayte/queuebox/shared/store"
)

func TestInterpretReadsTheHistoryAsFlywayDoes(t *testing.T) {
	t.Parallel()
	list, err := migrations.List(migrations.PostgreSQL)
	require.NoError(t, err)
	sqlRows := func(from, to int) []store.HistoryRow {
		var out []store.HistoryRow
		for v := from; v <= to; v++ {
			out = append(out, store.HistoryRow{InstalledRank: v, Version: strconv.Itoa(v), Type: "SQL", Success: true})
		}
		return out
	}
	tests := []struct {
		name        string
		rows        []store.HistoryRow
		wantPending []int
		wantCurrent int
		wantUnknown []string
		wantErr     error
	}{
		{name: "no history", rows: nil, wantPending: seq(1, 11)},
		{name: "JVM history up to V10", rows: sqlRows(1, 10), wantPending: []int{11}, wantCurrent: 10},
		{name: "complete", rows: sqlRows(1, 11), wantCurrent: 11},
		{name: "Flyway schema row and baseline row", rows: []store.HistoryRow{
			{InstalledRank: 0, Version: "", Type: "SCHEMA", Success: true},
			{InstalledRank: 1, Version: "9", Type: "BASELINE", Success: true},
		}, wantPending: []int{10, 11}, wantCurrent: 9},
		{name: "per-version baseline rows", rows: []store.HistoryRow{
			{InstalledRank: 1, Version: "1", Type: "BASELINE", Success: true},
			{InstalledRank: 2, Version: "2", Type: "BASELINE", Success: true},
		}, wantPending: seq(3, 11), wantCurrent: 2},
		{name: "versions written as 1.0 and 002", rows: []store.HistoryRow{
			{InstalledRank: 1, Version: "1.0", Type: "SQL", Success: true},
			{InstalledRank: 2, Version: "002", Type: "SQL", Success: true},
		}, wantPending: seq(3, 11), wantCurrent: 2},
		{name: "a newer release's version", rows: append(sqlRows(1, 11), store.HistoryRow{InstalledRank: 12, Version: "12", Type: "SQL", Success: true}),
			wantCurrent: 11, wantUnknown: []string{"12"}},
		{name: "a version that is not a whole number", rows: append(sqlRows(1, 11), store.HistoryRow{InstalledRank: 12, Version: "11.1", Type: "SQL", Success: true}),
			wantCurrent: 11, wantUnknown: []string{"11.1"}},
		{name: "a deleted version is pending again", rows: append(sqlRows(1, 11), store.HistoryRow{InstalledRank: 12, Version: "11", Type: "DELETE", Success: true}),
			wantPending: []int{11}, wantCurrent: 10},
		{name: "failed migration", rows: append(sqlRows(1, 2), store.HistoryRow{InstalledRank: 3, Version: "3", Description: "add claimed at", Type: "SQL", Script: "V3__add_claimed_at.sql", Success: false}),
			wantErr: ErrFailedMigration},
		{name: "gap below an applied version", rows: append(sqlRows(1, 5), store.HistoryRow{InstalledRank: 6, Version: "7", Type: "SQL", Success: true}),
			wantErr: ErrOutOfOrder},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			st := interpret(list, tc.rows)
			err := st.err(migrations.PostgreSQL)
			if tc.wantErr != nil {
				require.ErrorIs(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.wantPending, st.Pending)
			assert.Equal(t, tc.wantCurrent, st.Current)
			assert.Equal(t, tc.wantUnknown, st.Unknown)
			assert.Equal(t, len(tc.rows) > 0, st.HasHistory)
		})
	}
}

func TestStatusErrNamesTheRemedy(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		st      Status
		wantErr error
		want    []string
	}{
		{"tables without history", Status{Tables: []string{"outbox", "inbox"}}, ErrNoHistory,
			[]string{"`queuebox migrate --baseline <version>`", "outbox, inbox", "flyway_schema_history", "database.migrate"}},
		{"failed row", Status{HasHistory: true, failed: &store.HistoryRow{InstalledRank: 3, Version: "3", Description: "add claimed at", Script: "V3__add_claimed_at.sql"}},
			ErrFailedMigration, []string{"V3 (add claimed at)", "installed_rank 3", "V3__add_claimed_at.sql", "delete that row"}},
		{"gap", Status{HasHistory: true, Current: 7, outOfOrder: 6}, ErrOutOfOrder, []string{"does not record V6", "later V7"}},
		{"no tables and no history", Status{}, nil, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := tc.st.err(migrations.PostgreSQL)
			if tc.wantErr == nil {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, tc.wantErr)
			for _, w := range tc.want {
				assert.Contains(t, err.Error(), w)
			}
		})
	}
}

func TestResultString(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		r    Result
		want string
	}{
		{"fresh database", Result{Applied: seq(1, 11), Current: 11}, "applied V1..V11"},
		{"one version", Result{Applied: []int{11}, Current: 11}, "applied V11"},
		{"not consecutive", Result{Applied: []int{3, 5}, Current: 5}, "applied V3, V5"},
		{"nothing to do", Result{Current: 11}, "schema is up to date at V11"},
		{"baseline", Result{Applied: seq(1, 11), Current: 11, Baseline: true}, "recorded V1..V11 as baseline"},
		{"fresh database with the QueueBox track", Result{Applied: seq(1, 11), Current: 11, QueueBox: TrackResult{Applied: seq(1, 3), Current: 3}},
			"applied V1..V11; applied QueueBox's own migrations V1..V3"},
		{"both tracks up to date", Result{Current: 11, QueueBox: TrackResult{Current: 3}},
			"schema is up to date at V11; QueueBox's own migrations are up to date at V3"},
		{"the former V12 moved", Result{Current: 11, QueueBox: TrackResult{Moved: []int{1}, Applied: []int{2, 3}, Current: 3}},
			"schema is up to date at V11; moved V12 from flyway_schema_history to queuebox_schema_history as V1; applied QueueBox's own migrations V2..V3"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tc.want, tc.r.String())
		})
	}
}

func TestOptionsWithDefaults(t *testing.T) {
	t.Parallel()
	o := Options{}.WithDefaults()
	assert.Equal(t, "outbox", o.Names.OutboxTable)
	assert.Equal(t, "inbox", o.Names.InboxTable)
	assert.Equal(t, DefaultLockTimeout, o.LockTimeout)
	assert.NotNil(t, o.Logger)

	bad := Options{}.WithDefaults()
	bad.Names.OutboxTable = "outbox; DROP TABLE inbox"
	require.ErrorContains(t, bad.validate(), "database.outboxTableName")
	assert.NoError(t, Options{LockTimeout: time.Second}.WithDefaults().validate())
}

func seq(from, to int) []int {
	var out []int
	for v := from; v <= to; v++ {
		out = append(out, v)
	}
	return out
}

// TestQueueBoxStatus: the QueueBox track's history, the former V12 rows of
// flyway_schema_history and the tables decide what is applied, pending and missing.
func TestQueueBoxStatus(t *testing.T) {
	t.Parallel()
	lists, err := listTracks(migrations.PostgreSQL)
	require.NoError(t, err)
	n := len(lists.queuebox)
	require.GreaterOrEqual(t, n, 1)
	v12 := store.HistoryRow{InstalledRank: 12, Version: "12", Description: "add destination state", Type: "SQL",
		Script: "V12__add_destination_state.sql", Success: true}
	mainRows := func(extra ...store.HistoryRow) []store.HistoryRow {
		var out []store.HistoryRow
		for v := 1; v <= 11; v++ {
			out = append(out, store.HistoryRow{InstalledRank: v, Version: strconv.Itoa(v), Type: "SQL", Success: true})
		}
		return append(out, extra...)
	}

	t.Run("the former V12 is the track's V1, not an unknown main version", func(t *testing.T) {
		t.Parallel()
		rows, moved := splitMoved(mainRows(v12))
		assert.Len(t, rows, 11)
		st := interpret(lists.main, rows)
		assert.Empty(t, st.Unknown)
		assert.Equal(t, 11, st.Current)
		qb := queueboxStatus(lists.queuebox, nil, moved, nil)
		assert.Equal(t, []int{1}, qb.InMainHistory)
		assert.Equal(t, []int{1}, qb.Applied)
		assert.Equal(t, seq(2, n), qb.Pending)
		assert.Contains(t, qb.warning(), "flyway_schema_history records V12 (V12__add_destination_state.sql), which is now V1")
	})
	t.Run("a V12 of the original stays in the main track", func(t *testing.T) {
		t.Parallel()
		jvm := store.HistoryRow{InstalledRank: 12, Version: "12", Type: "SQL", Script: "V12__something_else.sql", Success: true}
		rows, moved := splitMoved(mainRows(jvm))
		assert.Empty(t, moved)
		assert.Equal(t, []string{"12"}, interpret(lists.main, rows).Unknown)
	})
	t.Run("tables created by hand are not missing", func(t *testing.T) {
		t.Parallel()
		qb := queueboxStatus(lists.queuebox, nil, nil, lists.queueboxTables())
		assert.Equal(t, seq(1, n), qb.Pending)
		assert.Empty(t, qb.Missing)
		assert.Empty(t, qb.MissingFiles(migrations.PostgreSQL))
	})
	t.Run("a table that does not exist is missing", func(t *testing.T) {
		t.Parallel()
		qb := queueboxStatus(lists.queuebox, nil, nil, nil)
		assert.Equal(t, seq(1, n), qb.Missing)
		files := qb.MissingFiles(migrations.SQLServer)
		require.Len(t, files, n)
		assert.Equal(t, "V1__add_destination_state.sql", files[0].Script)
		assert.Equal(t, "queuebox_destination_state", files[0].Table)
		assert.Equal(t, "migrations/queuebox/sqlserver/V1__add_destination_state.sql", files[0].Path)
		for _, want := range []string{"sqlcmd -b -I -i migrations/queuebox/sqlserver/V1__add_destination_state.sql",
			"restart QueueBox", "queuebox migrate", "queuebox_schema_history"} {
			assert.Contains(t, files[0].Apply, want)
		}
	})
	t.Run("recorded versions", func(t *testing.T) {
		t.Parallel()
		var rows []store.HistoryRow
		for v := 1; v <= n; v++ {
			rows = append(rows, store.HistoryRow{InstalledRank: v, Version: strconv.Itoa(v), Type: "SQL", Success: true})
		}
		qb := queueboxStatus(lists.queuebox, append(rows, store.HistoryRow{InstalledRank: n + 1, Version: "99", Type: "SQL", Success: true}), nil, nil)
		assert.Empty(t, qb.Pending)
		assert.Empty(t, qb.Missing)
		assert.Equal(t, n, qb.Current)
		assert.Equal(t, []string{"99"}, qb.Unknown)
		assert.Contains(t, qb.warning(), "queuebox_schema_history records versions that this release does not ship (V99)")
	})
	t.Run("a failed row stops a run", func(t *testing.T) {
		t.Parallel()
		qb := queueboxStatus(lists.queuebox, []store.HistoryRow{{InstalledRank: 1, Version: "1", Description: "add destination state",
			Type: "SQL", Script: "V1__add_destination_state.sql"}}, nil, nil)
		err := qb.err(migrations.PostgreSQL)
		require.ErrorIs(t, err, ErrFailedMigration)
		assert.Contains(t, err.Error(), "queuebox_schema_history records version V1")
	})
}

// TestQueueBoxTrackAppliesAVersionMissingBelowARecordedOne: on the QueueBox track, whose files
// are safe to run again, a version that an operator deleted from the history below a recorded
// one is pending, not an error that stops the start.
func TestQueueBoxTrackAppliesAVersionMissingBelowARecordedOne(t *testing.T) {
	t.Parallel()
	lists, err := listTracks(migrations.PostgreSQL)
	require.NoError(t, err)
	n := len(lists.queuebox)
	if n < 2 {
		t.Skip("the QueueBox track has a single version")
	}
	var rows []store.HistoryRow
	for v := 2; v <= n; v++ {
		rows = append(rows, store.HistoryRow{InstalledRank: v, Version: strconv.Itoa(v), Type: "SQL", Success: true})
	}
	qb := queueboxStatus(lists.queuebox, rows, nil, nil)
	require.NoError(t, qb.err(migrations.PostgreSQL))
	assert.Equal(t, []int{1}, qb.Pending)
	assert.Equal(t, []int{1}, qb.Missing)
}
