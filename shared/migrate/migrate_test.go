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
		{name: "no history", rows: nil, wantPending: seq(1, 12)},
		{name: "JVM history up to V10", rows: sqlRows(1, 10), wantPending: []int{11, 12}, wantCurrent: 10},
		{name: "complete", rows: sqlRows(1, 12), wantCurrent: 12},
		{name: "Flyway schema row and baseline row", rows: []store.HistoryRow{
			{InstalledRank: 0, Version: "", Type: "SCHEMA", Success: true},
			{InstalledRank: 1, Version: "9", Type: "BASELINE", Success: true},
		}, wantPending: []int{10, 11, 12}, wantCurrent: 9},
		{name: "per-version baseline rows", rows: []store.HistoryRow{
			{InstalledRank: 1, Version: "1", Type: "BASELINE", Success: true},
			{InstalledRank: 2, Version: "2", Type: "BASELINE", Success: true},
		}, wantPending: seq(3, 12), wantCurrent: 2},
		{name: "versions written as 1.0 and 002", rows: []store.HistoryRow{
			{InstalledRank: 1, Version: "1.0", Type: "SQL", Success: true},
			{InstalledRank: 2, Version: "002", Type: "SQL", Success: true},
		}, wantPending: seq(3, 12), wantCurrent: 2},
		{name: "a newer release's version", rows: append(sqlRows(1, 12), store.HistoryRow{InstalledRank: 13, Version: "13", Type: "SQL", Success: true}),
			wantCurrent: 12, wantUnknown: []string{"13"}},
		{name: "a version that is not a whole number", rows: append(sqlRows(1, 12), store.HistoryRow{InstalledRank: 13, Version: "12.1", Type: "SQL", Success: true}),
			wantCurrent: 12, wantUnknown: []string{"12.1"}},
		{name: "a deleted version is pending again", rows: append(sqlRows(1, 12), store.HistoryRow{InstalledRank: 13, Version: "12", Type: "DELETE", Success: true}),
			wantPending: []int{12}, wantCurrent: 11},
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
