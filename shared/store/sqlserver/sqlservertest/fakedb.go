// Package sqlservertest holds test helpers of the SQL Server dialect. FakeDB is a database/sql
// driver that answers each statement from a test's script and records what the code under
// test did, connection by connection: it proves the Go side (statements and their order,
// arguments, scanning, the use of one connection) without a SQL Server. The store's tests
// (shared/store/sqlserver/fakedb_test.go, through a thin adapter) and the change data capture
// source's (shared/store/sqlserver/cdc) use it. The SQL itself runs only in the tests that
// QUEUEBOX_TEST_SQLSERVER_URL enables.
package sqlservertest

import (
	"context"
	"database/sql/driver"
	"errors"
	"io"
	"sync"
)

// FakeDB is a driver.Connector whose connections answer through Answer. Connections are
// numbered from 1 in the order they are opened. It is safe for concurrent use.
type FakeDB struct {
	// Answer returns the result of a statement run on the connection conn: rows for a query,
	// RowsAffected for an exec, or an error. Required.
	Answer func(conn int, query string, args []any) Answer
	// ConnectErr, when it returns an error, refuses a new connection. Optional.
	ConnectErr func() error

	mu     sync.Mutex
	conns  int
	open   map[int]bool
	events []Event
}

// Event is one thing that a connection did.
type Event struct {
	// Conn is the number of the connection.
	Conn int
	// Kind is connect, query, exec, begin, commit, rollback or close.
	Kind string
	// Query is the text of a query or an exec.
	Query string
	// Args are the arguments of a query or an exec, as the code passed them.
	Args []any
}

// Answer is the result of one statement.
type Answer struct {
	// Columns names the columns of the rows; default one "c" per value.
	Columns []string
	// Rows are the rows of a query.
	Rows [][]any
	// RowsAffected is the count of an exec.
	RowsAffected int64
	// Err fails the statement.
	Err error
}

// Events returns what the connections did, in order.
func (f *FakeDB) Events() []Event {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Event(nil), f.events...)
}

// Statements returns the queries and execs, in order.
func (f *FakeDB) Statements() []Event {
	var out []Event
	for _, e := range f.Events() {
		if e.Kind == "query" || e.Kind == "exec" {
			out = append(out, e)
		}
	}
	return out
}

// Open reports whether the connection conn is open.
func (f *FakeDB) Open(conn int) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.open[conn]
}

func (f *FakeDB) record(e Event) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.events = append(f.events, e)
}

// Connect opens a new numbered connection.
func (f *FakeDB) Connect(context.Context) (driver.Conn, error) {
	if f.ConnectErr != nil {
		if err := f.ConnectErr(); err != nil {
			return nil, err
		}
	}
	f.mu.Lock()
	f.conns++
	n := f.conns
	if f.open == nil {
		f.open = map[int]bool{}
	}
	f.open[n] = true
	f.events = append(f.events, Event{Conn: n, Kind: "connect"})
	f.mu.Unlock()
	return &conn{db: f, n: n}, nil
}

// Driver returns a driver that only opens through the connector.
func (f *FakeDB) Driver() driver.Driver { return fakeDriver{} }

type fakeDriver struct{}

func (fakeDriver) Open(string) (driver.Conn, error) {
	return nil, errors.New("sqlservertest: open through the connector")
}

type conn struct {
	db *FakeDB
	n  int
}

var (
	_ driver.ConnBeginTx        = (*conn)(nil)
	_ driver.QueryerContext     = (*conn)(nil)
	_ driver.ExecerContext      = (*conn)(nil)
	_ driver.NamedValueChecker  = (*conn)(nil)
	_ driver.ConnPrepareContext = (*conn)(nil)
)

func (c *conn) Prepare(string) (driver.Stmt, error) {
	return nil, errors.New("sqlservertest: prepare is not supported")
}

func (c *conn) PrepareContext(context.Context, string) (driver.Stmt, error) {
	return nil, errors.New("sqlservertest: prepare is not supported")
}

func (c *conn) Close() error {
	c.db.mu.Lock()
	delete(c.db.open, c.n)
	c.db.events = append(c.db.events, Event{Conn: c.n, Kind: "close"})
	c.db.mu.Unlock()
	return nil
}

func (c *conn) Begin() (driver.Tx, error) { return c.BeginTx(context.Background(), driver.TxOptions{}) }

func (c *conn) BeginTx(context.Context, driver.TxOptions) (driver.Tx, error) {
	c.db.record(Event{Conn: c.n, Kind: "begin"})
	return tx{c}, nil
}

// CheckNamedValue keeps every argument as the code passed it, as go-mssqldb does.
func (c *conn) CheckNamedValue(*driver.NamedValue) error { return nil }

func (c *conn) QueryContext(_ context.Context, query string, named []driver.NamedValue) (driver.Rows, error) {
	args := plainArgs(named)
	c.db.record(Event{Conn: c.n, Kind: "query", Query: query, Args: args})
	a := c.db.Answer(c.n, query, args)
	if a.Err != nil {
		return nil, a.Err
	}
	return &rows{columns: a.Columns, rows: a.Rows}, nil
}

func (c *conn) ExecContext(_ context.Context, query string, named []driver.NamedValue) (driver.Result, error) {
	args := plainArgs(named)
	c.db.record(Event{Conn: c.n, Kind: "exec", Query: query, Args: args})
	a := c.db.Answer(c.n, query, args)
	if a.Err != nil {
		return nil, a.Err
	}
	return driver.RowsAffected(a.RowsAffected), nil
}

func plainArgs(named []driver.NamedValue) []any {
	out := make([]any, len(named))
	for i, nv := range named {
		out[i] = nv.Value
	}
	return out
}

type tx struct{ c *conn }

func (t tx) Commit() error   { t.c.db.record(Event{Conn: t.c.n, Kind: "commit"}); return nil }
func (t tx) Rollback() error { t.c.db.record(Event{Conn: t.c.n, Kind: "rollback"}); return nil }

type rows struct {
	columns []string
	rows    [][]any
	next    int
}

func (r *rows) Columns() []string {
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

func (r *rows) Close() error { return nil }

func (r *rows) Next(dest []driver.Value) error {
	if r.next >= len(r.rows) {
		return io.EOF
	}
	for i, v := range r.rows[r.next] {
		dest[i] = v
	}
	r.next++
	return nil
}
