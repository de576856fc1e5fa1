package sqlserver_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/alternayte/queuebox/migrations"
	"github.com/alternayte/queuebox/shared/migrate"
	"github.com/alternayte/queuebox/shared/store"
	"github.com/alternayte/queuebox/shared/store/sqlserver"
)

// No SQL Server runs on this machine. These tests run the migration runner of package migrate
// through this driver's backend (sqlserver.NewMigrationBackend) against a fake database/sql
// driver that records every statement and keeps the little state the runner reads (the
// history table, its rows, the tables that exist), so they check the statements, their order,
// their transactions and their parameters. migration_integration_test.go runs the same runner
// against a real server when QUEUEBOX_TEST_SQLSERVER_URL names one.

// The statements and the lock rule of the migration backend (export_test.go).
const (
	msSessionSettings = sqlserver.MSSessionSettings
	msGetLock         = sqlserver.MSGetLock
	msReleaseLock     = sqlserver.MSReleaseLock
	msTableExists     = sqlserver.MSTableExists
	msMoveInsert      = sqlserver.MSMoveInsert
	msMoveDelete      = sqlserver.MSMoveDelete
)

var (
	msHistoryExists      = sqlserver.MSHistoryExists
	msCreateHistory      = sqlserver.MSCreateHistory
	msCreateHistoryIndex = sqlserver.MSCreateHistoryIndex
	msReadHistory        = sqlserver.MSReadHistory
	msInsertHistory      = sqlserver.MSInsertHistory

	msQBHistoryExists      = sqlserver.MSQueueBoxHistoryExists
	msQBCreateHistory      = sqlserver.MSQueueBoxCreateHistory
	msQBCreateHistoryIndex = sqlserver.MSQueueBoxCreateHistoryIndex
	msQBReadHistory        = sqlserver.MSQueueBoxReadHistory
	msQBInsertHistory      = sqlserver.MSQueueBoxInsertHistory
)

var lockResult = sqlserver.LockResult

// msRunner returns the runner of package migrate on db, through the driver's backend.
func msRunner(db *sql.DB, opts migrate.Options) *migrate.Runner {
	r, err := migrate.New(sqlserver.NewMigrationBackend(db), opts)
	if err != nil {
		panic("migrate.New refused the SQL Server backend: " + err.Error())
	}
	return r
}

// msMigrate applies the pending migrations; see migrate.Runner.Migrate.
func msMigrate(ctx context.Context, db *sql.DB, opts migrate.Options) (migrate.Result, error) {
	return msRunner(db, opts).Migrate(ctx)
}

func seq(from, to int) []int {
	var out []int
	for v := from; v <= to; v++ {
		out = append(out, v)
	}
	return out
}

// fakeServer is the state behind the fake driver: the main track's history (history, rows,
// checksum) and the QueueBox track's (qb).
type fakeServer struct {
	mu       sync.Mutex
	log      []string
	args     [][]driver.NamedValue
	history  bool
	rows     []store.HistoryRow
	checksum []driver.Value
	qb       fakeHistory
	tables   map[string]bool
	lockCode int64
	failOn   string
	closed   int
}

// fakeHistory is the state of one history table.
type fakeHistory struct {
	exists   bool
	rows     []store.HistoryRow
	checksum []driver.Value
}

func (s *fakeServer) record(q string, args []driver.NamedValue) {
	s.log = append(s.log, q)
	s.args = append(s.args, args)
}

// statements returns the log.
func (s *fakeServer) statements() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.log...)
}

func (s *fakeServer) Connect(context.Context) (driver.Conn, error) { return &fakeConn{s: s}, nil }
func (s *fakeServer) Driver() driver.Driver                        { return fakeDriver{} }

type fakeDriver struct{}

func (fakeDriver) Open(string) (driver.Conn, error) { return nil, errors.New("use the connector") }

type fakeConn struct {
	s       *fakeServer
	pending []func()
}

func (c *fakeConn) Prepare(string) (driver.Stmt, error) {
	return nil, errors.New("prepare is not used")
}

func (c *fakeConn) Close() error {
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	c.s.closed++
	return nil
}

func (c *fakeConn) Begin() (driver.Tx, error) {
	return c.BeginTx(context.Background(), driver.TxOptions{})
}

func (c *fakeConn) BeginTx(context.Context, driver.TxOptions) (driver.Tx, error) {
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	c.s.record("BEGIN", nil)
	c.pending = nil
	return c, nil
}

func (c *fakeConn) Commit() error {
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	c.s.record("COMMIT", nil)
	for _, f := range c.pending {
		f()
	}
	c.pending = nil
	return nil
}

func (c *fakeConn) Rollback() error {
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	c.s.record("ROLLBACK", nil)
	c.pending = nil
	return nil
}

func (c *fakeConn) ExecContext(_ context.Context, q string, args []driver.NamedValue) (driver.Result, error) {
	s := c.s
	s.mu.Lock()
	defer s.mu.Unlock()
	s.record(q, args)
	named := map[string]driver.Value{}
	for _, a := range args {
		named[a.Name] = a.Value
	}
	switch q {
	case msCreateHistory:
		c.pending = append(c.pending, func() { s.history = true })
	case msQBCreateHistory:
		c.pending = append(c.pending, func() { s.qb.exists = true })
	case msInsertHistory, msQBInsertHistory:
		c.pending = append(c.pending, func() {
			row := store.HistoryRow{
				InstalledRank: int(named["installed_rank"].(int64)),
				Version:       named["version"].(string),
				Description:   named["description"].(string),
				Type:          named["type"].(string),
				Script:        named["script"].(string),
				Success:       true,
			}
			if q == msInsertHistory {
				s.rows = append(s.rows, row)
				s.checksum = append(s.checksum, named["checksum"])
			} else {
				s.qb.rows = append(s.qb.rows, row)
				s.qb.checksum = append(s.qb.checksum, named["checksum"])
			}
		})
	case msMoveInsert:
		from := int(named["from_rank"].(int64))
		i := slices.IndexFunc(s.rows, func(r store.HistoryRow) bool { return r.InstalledRank == from })
		if i < 0 {
			return driver.RowsAffected(0), nil
		}
		old := s.rows[i]
		c.pending = append(c.pending, func() {
			var sum driver.Value
			if old.Type == "SQL" {
				sum = named["checksum"]
			}
			s.qb.rows = append(s.qb.rows, store.HistoryRow{InstalledRank: int(named["to_rank"].(int64)),
				Version: named["version"].(string), Description: named["description"].(string), Type: old.Type,
				Script: named["script"].(string), Success: old.Success})
			s.qb.checksum = append(s.qb.checksum, sum)
		})
		return driver.RowsAffected(1), nil
	case msMoveDelete:
		from := int(named["from_rank"].(int64))
		c.pending = append(c.pending, func() {
			i := slices.IndexFunc(s.rows, func(r store.HistoryRow) bool { return r.InstalledRank == from })
			if i >= 0 {
				s.rows = slices.Delete(s.rows, i, i+1)
				s.checksum = slices.Delete(s.checksum, i, i+1)
			}
		})
	default:
		if s.failOn != "" && strings.Contains(q, s.failOn) {
			return nil, errors.New("mssql: Invalid column name 'consumption'")
		}
	}
	return driver.RowsAffected(0), nil
}

func (c *fakeConn) QueryContext(_ context.Context, q string, args []driver.NamedValue) (driver.Rows, error) {
	s := c.s
	s.mu.Lock()
	defer s.mu.Unlock()
	s.record(q, args)
	switch q {
	case msGetLock:
		return &fakeRows{cols: []string{""}, data: [][]driver.Value{{s.lockCode}}}, nil
	case msHistoryExists:
		return &fakeRows{cols: []string{""}, data: [][]driver.Value{{boolInt(s.history)}}}, nil
	case msQBHistoryExists:
		return &fakeRows{cols: []string{""}, data: [][]driver.Value{{boolInt(s.qb.exists)}}}, nil
	case msTableExists:
		return &fakeRows{cols: []string{""}, data: [][]driver.Value{{boolInt(s.tables[args[0].Value.(string)])}}}, nil
	case msReadHistory, msQBReadHistory:
		rows := s.rows
		if q == msQBReadHistory {
			rows = s.qb.rows
		}
		r := &fakeRows{cols: []string{"installed_rank", "version", "description", "type", "script", "success"}}
		for _, h := range rows {
			r.data = append(r.data, []driver.Value{int64(h.InstalledRank), h.Version, h.Description, h.Type, h.Script, h.Success})
		}
		return r, nil
	}
	return nil, fmt.Errorf("fake: unexpected query %q", q)
}

func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

type fakeRows struct {
	cols []string
	data [][]driver.Value
	i    int
}

func (r *fakeRows) Columns() []string { return r.cols }
func (r *fakeRows) Close() error      { return nil }
func (r *fakeRows) Next(dest []driver.Value) error {
	if r.i >= len(r.data) {
		return io.EOF
	}
	copy(dest, r.data[r.i])
	r.i++
	return nil
}

func newFakeSQLServer(t *testing.T) (*fakeServer, *sql.DB) {
	t.Helper()
	s := &fakeServer{tables: map[string]bool{}}
	db := sql.OpenDB(s)
	t.Cleanup(func() { _ = db.Close() })
	return s, db
}

// wantMigrationStatements is what applying list[from-1:to] of the main track sends.
func wantMigrationStatements(t *testing.T, from, to int) []string {
	t.Helper()
	list, err := migrations.List(migrations.SQLServer)
	require.NoError(t, err)
	var out []string
	for _, m := range list[from-1 : to] {
		out = append(out, "BEGIN")
		out = append(out, migrations.SplitBatches(m.SQL)...)
		out = append(out, msInsertHistory, "COMMIT")
	}
	return out
}

// queueboxList returns the SQL Server files of the QueueBox track.
func queueboxList(t *testing.T) []migrations.Migration {
	t.Helper()
	list, err := migrations.ListTrack(migrations.QueueBox, migrations.SQLServer)
	require.NoError(t, err)
	require.NotEmpty(t, list)
	return list
}

// wantQueueBoxStatements is what applying versions from..to of the QueueBox track sends.
func wantQueueBoxStatements(t *testing.T, from, to int) []string {
	t.Helper()
	var out []string
	for _, m := range queueboxList(t)[from-1 : to] {
		out = append(out, "BEGIN")
		out = append(out, migrations.SplitBatches(m.SQL)...)
		out = append(out, msQBInsertHistory, "COMMIT")
	}
	return out
}

// probeStatements is what a run sends to read both histories and look for the tables:
// outbox, inbox and each table of the QueueBox track.
func probeStatements(t *testing.T, mainHistory, qbHistory bool) []string {
	t.Helper()
	out := []string{msHistoryExists}
	if mainHistory {
		out = append(out, msReadHistory)
	}
	out = append(out, msQBHistoryExists)
	if qbHistory {
		out = append(out, msQBReadHistory)
	}
	for range 2 + len(queueboxList(t)) {
		out = append(out, msTableExists)
	}
	return out
}

// versionsText writes from..to as the runner's messages do: "V1" or "V1..V3".
func versionsText(from, to int) string {
	if from == to {
		return fmt.Sprintf("V%d", from)
	}
	return fmt.Sprintf("V%d..V%d", from, to)
}

func TestSQLServerMigratesAFreshDatabaseOnce(t *testing.T) {
	t.Parallel()
	s, db := newFakeSQLServer(t)
	ctx := context.Background()

	qbList := queueboxList(t)
	nq := len(qbList)
	res, err := msMigrate(ctx, db, migrate.Options{})
	require.NoError(t, err)
	assert.Equal(t, "applied V1..V11; applied QueueBox's own migrations "+versionsText(1, nq), res.String())
	assert.Equal(t, migrations.SQLServer, res.Dialect)

	want := []string{msSessionSettings, msGetLock}
	want = append(want, probeStatements(t, false, false)...)
	want = append(want, "BEGIN", msCreateHistory, msCreateHistoryIndex, "COMMIT")
	want = append(want, wantMigrationStatements(t, 1, 11)...)
	want = append(want, "BEGIN", msQBCreateHistory, msQBCreateHistoryIndex, "COMMIT")
	want = append(want, wantQueueBoxStatements(t, 1, nq)...)
	want = append(want, msReleaseLock)
	assert.Equal(t, want, s.statements())

	assert.Equal(t, []driver.NamedValue{{Name: "lock_timeout_ms", Ordinal: 1, Value: int64(600000)}}, s.args[1])
	list, err := migrations.List(migrations.SQLServer)
	require.NoError(t, err)
	require.Len(t, s.rows, 11)
	for i, m := range list {
		assert.Equal(t, store.HistoryRow{InstalledRank: i + 1, Version: fmt.Sprint(m.Version), Description: m.Description,
			Type: "SQL", Script: m.Script, Success: true}, s.rows[i])
		assert.Equal(t, int64(migrations.Checksum(m.SQL)), s.checksum[i], m.Script)
	}
	require.Len(t, s.qb.rows, nq)
	for i, m := range qbList {
		assert.Equal(t, store.HistoryRow{InstalledRank: i + 1, Version: fmt.Sprint(m.Version), Description: m.Description,
			Type: "SQL", Script: m.Script, Success: true}, s.qb.rows[i])
		assert.Equal(t, int64(migrations.Checksum(m.SQL)), s.qb.checksum[i], m.Script)
	}

	n := len(s.statements())
	again, err := msMigrate(ctx, db, migrate.Options{})
	require.NoError(t, err)
	assert.Equal(t, fmt.Sprintf("schema is up to date at V11; QueueBox's own migrations are up to date at V%d", nq), again.String())
	want = append([]string{msSessionSettings, msGetLock}, probeStatements(t, true, true)...)
	assert.Equal(t, append(want, msReleaseLock), s.statements()[n:])
}

// TestSQLServerMovesTheFormerV12: a history that an earlier build wrote, with V12 (the
// destination state) in flyway_schema_history, is moved: one transaction inserts the row of
// V1 into queuebox_schema_history from the old row and deletes the old row; a second run
// moves nothing.
func TestSQLServerMovesTheFormerV12(t *testing.T) {
	t.Parallel()
	s, db := newFakeSQLServer(t)
	ctx := context.Background()
	s.history = true
	for v := 1; v <= 11; v++ {
		s.rows = append(s.rows, store.HistoryRow{InstalledRank: v, Version: fmt.Sprint(v), Type: "SQL", Success: true})
		s.checksum = append(s.checksum, int64(v))
	}
	s.rows = append(s.rows, store.HistoryRow{InstalledRank: 12, Version: "12", Description: "add destination state",
		Type: "SQL", Script: "V12__add_destination_state.sql", Success: true})
	s.checksum = append(s.checksum, int64(12))
	s.tables["outbox"], s.tables["inbox"], s.tables["queuebox_destination_state"] = true, true, true
	nq := len(queueboxList(t))

	start, err := msRunner(db, migrate.Options{}).CheckStart(ctx, false)
	if nq > 1 {
		// The later versions' tables do not exist: the start without migrate lists them.
		require.NoError(t, err)
		assert.Len(t, start.Missing, nq-1)
		for _, m := range queueboxList(t)[1:] {
			s.tables[m.Table] = true
		}
		start, err = msRunner(db, migrate.Options{}).CheckStart(ctx, false)
	}
	require.NoError(t, err)
	assert.Equal(t, migrate.LevelWarning, start.Level)
	assert.Contains(t, start.Message, "flyway_schema_history records V12 (V12__add_destination_state.sql), which is now V1 of QueueBox's own migrations")
	assert.Empty(t, start.Unknown)

	n := len(s.statements())
	res, err := msMigrate(ctx, db, migrate.Options{})
	require.NoError(t, err)
	assert.Equal(t, []int{1}, res.QueueBox.Moved)
	want := []string{msSessionSettings, msGetLock}
	want = append(want, probeStatements(t, true, false)...)
	want = append(want, "BEGIN", msQBCreateHistory, msQBCreateHistoryIndex, "COMMIT", "BEGIN", msMoveInsert)
	moveAt := n + len(want) - 1
	want = append(want, msMoveDelete, "COMMIT")
	want = append(want, wantQueueBoxStatements(t, 2, nq)...)
	assert.Equal(t, append(want, msReleaseLock), s.statements()[n:])
	assert.Equal(t, []driver.NamedValue{
		{Name: "to_rank", Ordinal: 1, Value: int64(1)},
		{Name: "version", Ordinal: 2, Value: "1"},
		{Name: "description", Ordinal: 3, Value: "add destination state"},
		{Name: "script", Ordinal: 4, Value: "V1__add_destination_state.sql"},
		{Name: "checksum", Ordinal: 5, Value: int64(migrations.Checksum(queueboxList(t)[0].SQL))},
		{Name: "from_rank", Ordinal: 6, Value: int64(12)},
	}, s.args[moveAt])
	require.Len(t, s.rows, 11, "flyway_schema_history holds the original's versions only")
	require.Len(t, s.qb.rows, nq)
	assert.Equal(t, store.HistoryRow{InstalledRank: 1, Version: "1", Description: "add destination state", Type: "SQL",
		Script: "V1__add_destination_state.sql", Success: true}, s.qb.rows[0])

	again, err := msMigrate(ctx, db, migrate.Options{})
	require.NoError(t, err)
	assert.Empty(t, again.QueueBox.Moved)
	assert.Empty(t, again.QueueBox.Applied)
	assert.Len(t, s.qb.rows, nq)
}

// TestSQLServerListsAMissingQueueBoxMigration: with database.migrate false, a version of the
// QueueBox track that no history records and whose table does not exist is listed as missing,
// with the sqlcmd line that applies it, and the start goes on.
func TestSQLServerListsAMissingQueueBoxMigration(t *testing.T) {
	t.Parallel()
	s, db := newFakeSQLServer(t)
	s.tables["outbox"], s.tables["inbox"] = true, true
	first, err := msRunner(db, migrate.Options{}).CheckStart(context.Background(), false)
	require.NoError(t, err)
	require.Len(t, first.Missing, len(queueboxList(t)))
	for i, m := range queueboxList(t) {
		assert.Equal(t, m.Table, first.Missing[i].Table)
		assert.Contains(t, first.Missing[i].Apply, "sqlcmd -b -I -i migrations/queuebox/sqlserver/"+m.Script)
		s.tables[m.Table] = true
	}
	start, err := msRunner(db, migrate.Options{}).CheckStart(context.Background(), false)
	require.NoError(t, err)
	assert.Equal(t, migrate.LevelInfo, start.Level)
}

func TestSQLServerFailedBatchRollsBack(t *testing.T) {
	t.Parallel()
	s, db := newFakeSQLServer(t)
	s.failOn = "ADD CONSTRAINT ck_inbox_consumption"

	_, err := msMigrate(context.Background(), db, migrate.Options{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "applying migration V6__add_consumption_and_leases.sql: batch 10:")
	assert.Len(t, s.rows, 5, "V1..V5 committed, V6 not recorded")
	log := s.statements()
	assert.Equal(t, []string{"ROLLBACK", msReleaseLock}, log[len(log)-2:])
}

func TestSQLServerLockTimeout(t *testing.T) {
	t.Parallel()
	s, db := newFakeSQLServer(t)
	s.lockCode = -1

	_, err := msMigrate(context.Background(), db, migrate.Options{LockTimeout: 2 * time.Second})
	require.ErrorIs(t, err, migrate.ErrLockTimeout)
	assert.Contains(t, err.Error(), "queuebox:migrate")
	assert.Equal(t, []string{msSessionSettings, msGetLock}, s.statements(), "nothing ran without the lock")
	assert.Equal(t, 1, s.closed, "the connection is dropped, not returned to the pool")
	assert.Equal(t, []driver.NamedValue{{Name: "lock_timeout_ms", Ordinal: 1, Value: int64(2000)}}, s.args[1])
}

func TestSQLServerLockResult(t *testing.T) {
	t.Parallel()
	tests := []struct {
		code    int
		wantErr error
		want    string
	}{
		{0, nil, ""},
		{1, nil, ""},
		{-1, migrate.ErrLockTimeout, "for more than 1s"},
		{-2, nil, "cancelled"},
		{-3, nil, "deadlock victim"},
		{-999, nil, "returned -999"},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprint(tc.code), func(t *testing.T) {
			t.Parallel()
			err := lockResult(tc.code, time.Second)
			if tc.want == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, tc.want)
			if tc.wantErr != nil {
				require.ErrorIs(t, err, tc.wantErr)
			}
		})
	}
}

func TestSQLServerBaselineAndStartCheck(t *testing.T) {
	t.Parallel()
	s, db := newFakeSQLServer(t)
	s.tables["outbox"], s.tables["inbox"] = true, true
	for _, m := range queueboxList(t) {
		s.tables[m.Table] = true
	}
	r := msRunner(db, migrate.Options{})
	ctx := context.Background()

	_, err := r.CheckStart(ctx, true)
	require.ErrorIs(t, err, migrate.ErrNoHistory)
	assert.Contains(t, err.Error(), "queuebox migrate --baseline")

	start, err := r.CheckStart(ctx, false)
	require.NoError(t, err)
	assert.Equal(t, migrate.LevelInfo, start.Level)

	res, err := r.Baseline(ctx, 10)
	require.NoError(t, err)
	assert.Equal(t, "recorded V1..V10 as baseline", res.String())
	require.Len(t, s.rows, 10)
	for i, row := range s.rows {
		assert.Equal(t, "BASELINE", row.Type)
		assert.Equal(t, i+1, row.InstalledRank)
		assert.Nil(t, s.checksum[i])
	}

	start, err = r.CheckStart(ctx, false)
	require.NoError(t, err)
	assert.Equal(t, migrate.LevelWarning, start.Level)
	assert.Equal(t, []int{11}, start.Pending)

	start, err = r.CheckStart(ctx, true)
	require.NoError(t, err)
	assert.Contains(t, start.Message, "applied V11; applied QueueBox's own migrations V1")
	assert.Equal(t, 11, s.rows[10].InstalledRank)
	assert.Len(t, s.qb.rows, len(queueboxList(t)), "the QueueBox track applied and recorded over the tables made by hand")

	_, err = r.Baseline(ctx, 12)
	require.ErrorIs(t, err, migrate.ErrInvalidVersion)
	_, err = r.Baseline(ctx, 11)
	require.ErrorIs(t, err, migrate.ErrHistoryExists)
}

func TestSQLServerStatementText(t *testing.T) {
	t.Parallel()
	assert.Contains(t, msGetLock, "sp_getapplock @Resource = N'queuebox:migrate', @LockMode = N'Exclusive', @LockOwner = N'Session', @LockTimeout = @lock_timeout_ms;")
	assert.NotContains(t, msGetLock, "DECLARE @lock_timeout_ms", "a local variable must not share a parameter's name (Msg 134)")
	assert.Contains(t, msReleaseLock, "sp_releaseapplock @Resource = N'queuebox:migrate', @LockOwner = N'Session'")
	assert.Contains(t, msSessionSettings, "SET QUOTED_IDENTIFIER ON;")
	assert.Contains(t, msSessionSettings, "SET ANSI_NULLS ON;")
	for _, col := range []string{"[installed_rank] INT NOT NULL", "[version] NVARCHAR(50) NULL", "[description] NVARCHAR(200) NULL",
		"[type] NVARCHAR(20) NOT NULL", "[script] NVARCHAR(1000) NOT NULL", "[checksum] INT NULL",
		"[installed_by] NVARCHAR(100) NOT NULL", "[installed_on] DATETIME NOT NULL DEFAULT GETDATE()",
		"[execution_time] INT NOT NULL", "[success] BIT NOT NULL", "CONSTRAINT [flyway_schema_history_pk] PRIMARY KEY ([installed_rank])"} {
		assert.Contains(t, msCreateHistory, col)
	}
	assert.True(t, strings.HasPrefix(msCreateHistory, "IF OBJECT_ID(N'dbo.flyway_schema_history', N'U') IS NULL"))
	// The QueueBox track's history has the same columns under its own names.
	assert.Equal(t, strings.ReplaceAll(msCreateHistory, "flyway_schema_history", "queuebox_schema_history"), msQBCreateHistory)
	assert.Equal(t, strings.ReplaceAll(msCreateHistoryIndex, "flyway_schema_history", "queuebox_schema_history"), msQBCreateHistoryIndex)
	assert.Equal(t, strings.ReplaceAll(msInsertHistory, "flyway_schema_history", "queuebox_schema_history"), msQBInsertHistory)
	assert.Contains(t, msMoveInsert, "INSERT INTO dbo.queuebox_schema_history")
	assert.Contains(t, msMoveInsert, "FROM dbo.flyway_schema_history WHERE [installed_rank] = @from_rank;")
	assert.Equal(t, "DELETE FROM dbo.flyway_schema_history WHERE [installed_rank] = @from_rank;", msMoveDelete)
	for _, q := range []string{msSessionSettings, msCreateHistory, msCreateHistoryIndex, msReadHistory, msHistoryExists, msReleaseLock,
		msQBCreateHistory, msQBCreateHistoryIndex, msQBReadHistory, msQBHistoryExists} {
		assert.NotContains(t, q, "@p", "a statement without parameters is sent as a plain batch")
		assert.Len(t, migrations.SplitBatches(q), 1)
	}
}
