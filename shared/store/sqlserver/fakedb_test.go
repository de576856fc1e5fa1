package sqlserver

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"sync"
	"testing"

	mssql "github.com/microsoft/go-mssqldb"

	"github.com/alternayte/queuebox/shared/store"
	"github.com/alternayte/queuebox/shared/store/sqlserver/sqlservertest"
)

// fakeDB is the store tests' view of sqlservertest.FakeDB: a database/sql driver that answers
// each statement from a test's script and records what the store did: every statement with
// its arguments, and every begin, commit and rollback. It proves the Go side of the store
// (arguments, transactions, scanning, sorting and error translation) without a SQL Server; the
// SQL itself runs only in the integration test. The store's tests do not look at connections,
// so the answers and the events leave them out.
type fakeDB struct {
	// answer returns the result of a statement: rows for a query, rowsAffected for an exec,
	// or an error.
	answer func(query string, args []any) fakeAnswer

	once  sync.Once
	inner *sqlservertest.FakeDB
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

func (f *fakeDB) db() *sqlservertest.FakeDB {
	f.once.Do(func() {
		f.inner = &sqlservertest.FakeDB{Answer: func(_ int, query string, args []any) sqlservertest.Answer {
			a := f.answer(query, args)
			return sqlservertest.Answer{Columns: a.columns, Rows: a.rows, RowsAffected: a.rowsAffected, Err: a.err}
		}}
	})
	return f.inner
}

// Connect and Driver make fakeDB a driver.Connector.
func (f *fakeDB) Connect(ctx context.Context) (driver.Conn, error) { return f.db().Connect(ctx) }
func (f *fakeDB) Driver() driver.Driver                            { return f.db().Driver() }

// events returns the recorded begins, statements, commits and rollbacks in order.
func (f *fakeDB) events() []fakeEvent {
	var out []fakeEvent
	for _, e := range f.db().Events() {
		if e.Kind != "connect" && e.Kind != "close" {
			out = append(out, fakeEvent{kind: e.Kind, query: e.Query, args: e.Args})
		}
	}
	return out
}

// kinds returns the kinds of the recorded events in order.
func (f *fakeDB) kinds() []string {
	events := f.events()
	out := make([]string, len(events))
	for i, e := range events {
		out[i] = e.kind
	}
	return out
}

// statements returns the recorded statements (queries and execs) in order.
func (f *fakeDB) statements() []fakeEvent {
	var out []fakeEvent
	for _, e := range f.events() {
		if e.kind == "query" || e.kind == "exec" {
			out = append(out, e)
		}
	}
	return out
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
