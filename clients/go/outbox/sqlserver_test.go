package outbox_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"io"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/alternayte/queuebox/clients/go/outbox"
)

// SQL Server cannot run on these machines, and the client module does not require go-mssqldb
// (it would raise the module's go version). This stand-in driver records what a *sql.Tx sends,
// as go-mssqldb receives it, and answers the OUTPUT row the server would.

type recordedQuery struct {
	query string
	args  []driver.NamedValue
	inTx  bool
}

type recorder struct {
	mu      sync.Mutex
	queries []recordedQuery
	commits int
}

type recConnector struct{ rec *recorder }

func (c recConnector) Connect(context.Context) (driver.Conn, error) { return &recConn{rec: c.rec}, nil }
func (c recConnector) Driver() driver.Driver                        { return recDriver{} }

type recDriver struct{}

func (recDriver) Open(string) (driver.Conn, error) { return nil, errors.New("use the connector") }

type recConn struct {
	rec  *recorder
	inTx bool
}

func (c *recConn) Prepare(string) (driver.Stmt, error) { return nil, errors.New("not used") }
func (c *recConn) Close() error                        { return nil }
func (c *recConn) Begin() (driver.Tx, error)           { c.inTx = true; return recTx{c}, nil }
func (c *recConn) QueryContext(_ context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	c.rec.mu.Lock()
	defer c.rec.mu.Unlock()
	c.rec.queries = append(c.rec.queries, recordedQuery{query: query, args: args, inTx: c.inTx})
	return &recRows{values: []driver.Value{"6F9619FF-8B86-D011-B42D-00C04FC964FF"}}, nil
}

type recTx struct{ c *recConn }

func (t recTx) Commit() error {
	t.c.inTx = false
	t.c.rec.mu.Lock()
	t.c.rec.commits++
	t.c.rec.mu.Unlock()
	return nil
}
func (t recTx) Rollback() error { t.c.inTx = false; return nil }

type recRows struct {
	values []driver.Value
	done   bool
}

func (r *recRows) Columns() []string { return []string{""} }
func (r *recRows) Close() error      { return nil }
func (r *recRows) Next(dest []driver.Value) error {
	if r.done {
		return io.EOF
	}
	r.done = true
	copy(dest, r.values)
	return nil
}

// TestEnqueueSQLServerBindsInOrder writes through a *sql.Tx of a SQL Server Writer and checks
// the statement, that it ran inside the transaction, and each bound parameter in order.
func TestEnqueueSQLServerBindsInOrder(t *testing.T) {
	rec := &recorder{}
	db := sql.OpenDB(recConnector{rec})
	defer db.Close()
	w, err := outbox.New(outbox.Config{Dialect: outbox.DialectSQLServer})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	id, err := w.Enqueue(ctx, tx, outbox.Message{Topic: "order.created", Key: "k", Payload: map[string]int{"a": 1},
		Headers: map[string]string{"X-Tenant": "acme"}, MaxAttempts: 3, Delay: 61250 * time.Millisecond})
	if err != nil {
		t.Fatalf("Enqueue: %v", err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if id != "6F9619FF-8B86-D011-B42D-00C04FC964FF" {
		t.Errorf("id = %q", id)
	}
	if len(rec.queries) != 1 || rec.commits != 1 {
		t.Fatalf("queries %d, commits %d: want 1 and 1", len(rec.queries), rec.commits)
	}
	q := rec.queries[0]
	if q.query != w.Statement(true, true) || !q.inTx {
		t.Errorf("query %q (in a transaction: %v), want %q in one", q.query, q.inTx, w.Statement(true, true))
	}
	var got []any
	for _, a := range q.args {
		got = append(got, a.Value)
	}
	want := []any{"order.created", "k", nil, `{"a":1}`, `{"X-Tenant":"acme"}`, int64(3), int64(61), int64(250)}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("arguments = %#v, want %#v", got, want)
	}
}
