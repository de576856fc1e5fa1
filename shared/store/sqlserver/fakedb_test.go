package sqlserver

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"io"
	"sync"
	"testing"

	mssql "github.com/microsoft/go-mssqldb"

	"github.com/alternayte/queuebox/shared/store"
)

// fakeDB is a database/sql driver that answers each statement from a test's script and
// records what the store did: every statement with its arguments, and every begin, commit and
// rollback. It proves the Go side of the store (arguments, transactions, scanning, sorting and
// error translation) without a SQL Server; the SQL itself runs only in the integration test.
type fakeDB struct {
	mu     sync.Mutex
	events []fakeEvent
	// answer returns the result of a statement: rows for a query, rowsAffected for an exec,
	// or an error.
	answer func(query string, args []any) fakeAnswer
}

type fakeEvent struct {
	kind  string // begin, query, exec, commit, rollback
	query string
	args  []any
}

type fakeAnswer struct {
	columns      []string
	rows         [][]any
	rowsAffected int64
	err          error
}

// newFakeStore returns a store with default names on a fake database.
func newFakeStore(t *testing.T, answer func(query string, args []any) fakeAnswer) (*Store, *fakeDB) {
	t.Helper()
	f := &fakeDB{answer: answer}
	db := sql.OpenDB(f)
	t.Cleanup(func() { _ = db.Close() })
	s, err := New(db, store.DefaultNames())
	if err != nil {
		t.Fatalf("creating store: %v", err)
	}
	return s, f
}

func (f *fakeDB) record(e fakeEvent) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.events = append(f.events, e)
}

// kinds returns the kinds of the recorded events in order.
func (f *fakeDB) kinds() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]string, len(f.events))
	for i, e := range f.events {
		out[i] = e.kind
	}
	return out
}

// statements returns the recorded statements (queries and execs) in order.
func (f *fakeDB) statements() []fakeEvent {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []fakeEvent
	for _, e := range f.events {
		if e.kind == "query" || e.kind == "exec" {
			out = append(out, e)
		}
	}
	return out
}

// Connect and Driver make fakeDB a driver.Connector.
func (f *fakeDB) Connect(context.Context) (driver.Conn, error) { return &fakeConn{db: f}, nil }
func (f *fakeDB) Driver() driver.Driver                        { return fakeDriver{} }

type fakeDriver struct{}

func (fakeDriver) Open(string) (driver.Conn, error) {
	return nil, errors.New("fake: use the connector")
}

type fakeConn struct{ db *fakeDB }

var (
	_ driver.ConnBeginTx        = (*fakeConn)(nil)
	_ driver.QueryerContext     = (*fakeConn)(nil)
	_ driver.ExecerContext      = (*fakeConn)(nil)
	_ driver.NamedValueChecker  = (*fakeConn)(nil)
	_ driver.ConnPrepareContext = (*fakeConn)(nil)
)

func (c *fakeConn) Prepare(string) (driver.Stmt, error) {
	return nil, errors.New("fake: prepare is not supported")
}
func (c *fakeConn) PrepareContext(context.Context, string) (driver.Stmt, error) {
	return nil, errors.New("fake: prepare is not supported")
}
func (c *fakeConn) Close() error { return nil }
func (c *fakeConn) Begin() (driver.Tx, error) {
	return c.BeginTx(context.Background(), driver.TxOptions{})
}
func (c *fakeConn) BeginTx(context.Context, driver.TxOptions) (driver.Tx, error) {
	c.db.record(fakeEvent{kind: "begin"})
	return fakeTx{db: c.db}, nil
}

// CheckNamedValue keeps every argument as the store passed it (int32 stays int32), as
// go-mssqldb does, so that the tests see the parameter types the server would declare.
func (c *fakeConn) CheckNamedValue(*driver.NamedValue) error { return nil }

func (c *fakeConn) QueryContext(_ context.Context, query string, named []driver.NamedValue) (driver.Rows, error) {
	args := plainArgs(named)
	c.db.record(fakeEvent{kind: "query", query: query, args: args})
	a := c.db.answer(query, args)
	if a.err != nil {
		return nil, a.err
	}
	return &fakeRows{columns: a.columns, rows: a.rows}, nil
}

func (c *fakeConn) ExecContext(_ context.Context, query string, named []driver.NamedValue) (driver.Result, error) {
	args := plainArgs(named)
	c.db.record(fakeEvent{kind: "exec", query: query, args: args})
	a := c.db.answer(query, args)
	if a.err != nil {
		return nil, a.err
	}
	return driver.RowsAffected(a.rowsAffected), nil
}

func plainArgs(named []driver.NamedValue) []any {
	out := make([]any, len(named))
	for i, nv := range named {
		out[i] = nv.Value
	}
	return out
}

type fakeTx struct{ db *fakeDB }

func (t fakeTx) Commit() error   { t.db.record(fakeEvent{kind: "commit"}); return nil }
func (t fakeTx) Rollback() error { t.db.record(fakeEvent{kind: "rollback"}); return nil }

type fakeRows struct {
	columns []string
	rows    [][]any
	next    int
}

func (r *fakeRows) Columns() []string {
	if r.columns != nil {
		return r.columns
	}
	if len(r.rows) == 0 {
		return []string{"c"}
	}
	cols := make([]string, len(r.rows[0]))
	for i := range cols {
		cols[i] = "c"
	}
	return cols
}

func (r *fakeRows) Close() error { return nil }

func (r *fakeRows) Next(dest []driver.Value) error {
	if r.next >= len(r.rows) {
		return io.EOF
	}
	for i, v := range r.rows[r.next] {
		dest[i] = v
	}
	r.next++
	return nil
}

// wireGUID returns a canonical UUID as go-mssqldb delivers a UNIQUEIDENTIFIER column: 16
// bytes with the first three groups in little-endian order.
func wireGUID(t *testing.T, s string) []byte {
	t.Helper()
	var u mssql.UniqueIdentifier
	if err := u.Scan(s); err != nil {
		t.Fatalf("parsing %s: %v", s, err)
	}
	v, err := u.Value()
	if err != nil {
		t.Fatalf("encoding %s: %v", s, err)
	}
	return v.([]byte)
}

// sqlError is a go-mssqldb error as the driver reports a batch: the last error in the fields,
// every error in All.
func sqlError(numbers ...int32) error {
	all := make([]mssql.Error, len(numbers))
	for i, n := range numbers {
		all[i] = mssql.Error{Number: n, Message: "fake error"}
	}
	last := all[len(all)-1]
	last.All = all
	return last
}
