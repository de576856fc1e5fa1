package sqlserver_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
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
	msSessionSettings    = sqlserver.MSSessionSettings
	msGetLock            = sqlserver.MSGetLock
	msReleaseLock        = sqlserver.MSReleaseLock
	msHistoryExists      = sqlserver.MSHistoryExists
	msCreateHistory      = sqlserver.MSCreateHistory
	msCreateHistoryIndex = sqlserver.MSCreateHistoryIndex
	msReadHistory        = sqlserver.MSReadHistory
	msInsertHistory      = sqlserver.MSInsertHistory
	msTableExists        = sqlserver.MSTableExists
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

// fakeServer is the state behind the fake driver.
type fakeServer struct {
	mu       sync.Mutex
	log      []string
	args     [][]driver.NamedValue
	history  bool
	rows     []store.HistoryRow
	checksum []driver.Value
	tables   map[string]bool
	lockCode int64
	failOn   string
	closed   int
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
	switch q {
	case msCreateHistory:
		c.pending = append(c.pending, func() { s.history = true })
	case msInsertHistory:
		named := map[string]driver.Value{}
		for _, a := range args {
			named[a.Name] = a.Value
		}
		c.pending = append(c.pending, func() {
			s.rows = append(s.rows, store.HistoryRow{
				InstalledRank: int(named["installed_rank"].(int64)),
				Version:       named["version"].(string),
				Description:   named["description"].(string),
				Type:          named["type"].(string),
				Script:        named["script"].(string),
				Success:       true,
			})
			s.checksum = append(s.checksum, named["checksum"])
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
	case msTableExists:
		return &fakeRows{cols: []string{""}, data: [][]driver.Value{{boolInt(s.tables[args[0].Value.(string)])}}}, nil
	case msReadHistory:
		r := &fakeRows{cols: []string{"installed_rank", "version", "description", "type", "script", "success"}}
		for _, h := range s.rows {
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

// wantMigrationStatements is what applying list[from-1:to] sends.
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

func TestSQLServerMigratesAFreshDatabaseOnce(t *testing.T) {
	t.Parallel()
	s, db := newFakeSQLServer(t)
	ctx := context.Background()

	res, err := msMigrate(ctx, db, migrate.Options{})
	require.NoError(t, err)
	assert.Equal(t, "applied V1..V12", res.String())
	assert.Equal(t, migrations.SQLServer, res.Dialect)

	want := []string{msSessionSettings, msGetLock, msHistoryExists, msTableExists, msTableExists,
		"BEGIN", msCreateHistory, msCreateHistoryIndex, "COMMIT"}
	want = append(want, wantMigrationStatements(t, 1, 12)...)
	want = append(want, msReleaseLock)
	assert.Equal(t, want, s.statements())

	assert.Equal(t, []driver.NamedValue{{Name: "lock_timeout_ms", Ordinal: 1, Value: int64(600000)}}, s.args[1])
	list, err := migrations.List(migrations.SQLServer)
	require.NoError(t, err)
	require.Len(t, s.rows, 12)
	for i, m := range list {
		assert.Equal(t, store.HistoryRow{InstalledRank: i + 1, Version: fmt.Sprint(m.Version), Description: m.Description,
			Type: "SQL", Script: m.Script, Success: true}, s.rows[i])
		assert.Equal(t, int64(migrations.Checksum(m.SQL)), s.checksum[i], m.Script)
	}

	n := len(s.statements())
	again, err := msMigrate(ctx, db, migrate.Options{})
	require.NoError(t, err)
	assert.Equal(t, "schema is up to date at V12", again.String())
	assert.Equal(t, []string{msSessionSettings, msGetLock, msHistoryExists, msReadHistory, msTableExists, msTableExists, msReleaseLock},
		s.statements()[n:])
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
	assert.Equal(t, []int{11, 12}, start.Pending)

	start, err = r.CheckStart(ctx, true)
	require.NoError(t, err)
	assert.Equal(t, "applied V11..V12", start.Message)
	assert.Equal(t, 11, s.rows[10].InstalledRank)
	assert.Equal(t, 12, s.rows[11].InstalledRank)

	_, err = r.Baseline(ctx, 12)
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
	for _, q := range []string{msSessionSettings, msCreateHistory, msCreateHistoryIndex, msReadHistory, msHistoryExists, msReleaseLock} {
		assert.NotContains(t, q, "@p", "a statement without parameters is sent as a plain batch")
		assert.Len(t, migrations.SplitBatches(q), 1)
	}
}
