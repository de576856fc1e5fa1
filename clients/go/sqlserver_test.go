package queuebox

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
)

// The fake database below stands in for SQL Server, which these machines cannot run. It
// answers the statements of the SQL Server contract as the server would, records what the
// worker sent, and raises Msg 51000 (the per-source claim lock was busy) on demand, as
// go-mssqldb's mssql.Error does: an error with SQLErrorNumber() int32.

type lockBusyError struct{}

func (lockBusyError) Error() string {
	return "mssql: inbox pull claim: sp_getapplock did not acquire the per-source claim lock"
}
func (lockBusyError) SQLErrorNumber() int32 { return 51000 }

type fakeCall struct {
	query    string
	args     map[string]any
	inTx     bool
	deadline time.Duration // how far the context deadline was, 0 for none
	at       time.Time
}

type fakeServer struct {
	mu         sync.Mutex
	lockBusy   int // how many claims fail with Msg 51000 before the rows come
	rows       [][]driver.Value
	claims     []fakeCall
	execs      []fakeCall
	commits    int
	rollbacks  int
	completion chan fakeCall // receives each completion that commits
}

type fakeConnector struct{ srv *fakeServer }

func (c *fakeConnector) Connect(context.Context) (driver.Conn, error) {
	return &fakeConn{srv: c.srv}, nil
}
func (c *fakeConnector) Driver() driver.Driver { return fakeDriver{} }

type fakeDriver struct{}

func (fakeDriver) Open(string) (driver.Conn, error) { return nil, errors.New("use the connector") }

type fakeConn struct {
	srv     *fakeServer
	tx      bool
	pending []fakeCall // statements of the open transaction
}

func (c *fakeConn) Prepare(string) (driver.Stmt, error) { return nil, errors.New("not supported") }
func (c *fakeConn) Close() error                        { return nil }
func (c *fakeConn) Begin() (driver.Tx, error) {
	return c.BeginTx(context.Background(), driver.TxOptions{})
}

func (c *fakeConn) BeginTx(context.Context, driver.TxOptions) (driver.Tx, error) {
	c.tx = true
	c.pending = nil
	return c, nil
}

func (c *fakeConn) Commit() error {
	c.srv.mu.Lock()
	c.srv.commits++
	pending := c.pending
	c.srv.mu.Unlock()
	c.tx = false
	for _, call := range pending {
		if strings.Contains(call.query, "processed_at") && c.srv.completion != nil {
			c.srv.completion <- call
		}
	}
	return nil
}

func (c *fakeConn) Rollback() error {
	c.srv.mu.Lock()
	c.srv.rollbacks++
	c.srv.mu.Unlock()
	c.tx = false
	return nil
}

func (c *fakeConn) call(ctx context.Context, query string, args []driver.NamedValue) fakeCall {
	call := fakeCall{query: query, args: map[string]any{}, inTx: c.tx, at: time.Now()}
	for _, a := range args {
		call.args[a.Name] = a.Value
	}
	if d, ok := ctx.Deadline(); ok {
		call.deadline = time.Until(d)
	}
	return call
}

func (c *fakeConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	call := c.call(ctx, query, args)
	c.srv.mu.Lock()
	defer c.srv.mu.Unlock()
	if !strings.Contains(query, "sp_getapplock") {
		return nil, errors.New("fake: unexpected query")
	}
	c.srv.claims = append(c.srv.claims, call)
	if c.srv.lockBusy > 0 {
		c.srv.lockBusy--
		return nil, lockBusyError{}
	}
	rows := c.srv.rows
	c.srv.rows = nil
	return &fakeRows{rows: rows}, nil
}

func (c *fakeConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	call := c.call(ctx, query, args)
	c.srv.mu.Lock()
	c.srv.execs = append(c.srv.execs, call)
	c.srv.mu.Unlock()
	if c.tx {
		c.pending = append(c.pending, call)
	}
	return driver.RowsAffected(1), nil
}

type fakeRows struct{ rows [][]driver.Value }

func (r *fakeRows) Columns() []string {
	return []string{"id", "source", "idempotency_key", "aggregate_id", "event_type", "payload", "headers", "attempt", "correlation_id", "claim_token"}
}
func (r *fakeRows) Close() error { return nil }
func (r *fakeRows) Next(dest []driver.Value) error {
	if len(r.rows) == 0 {
		return io.EOF
	}
	copy(dest, r.rows[0])
	r.rows = r.rows[1:]
	return nil
}

// mssqlBytes returns a UUID as go-mssqldb returns a UNIQUEIDENTIFIER: its first three groups
// little-endian.
func mssqlBytes(canonical string) []byte {
	var b [16]byte
	hexed := strings.ReplaceAll(canonical, "-", "")
	for i := range b {
		var v byte
		for _, c := range hexed[2*i : 2*i+2] {
			v <<= 4
			switch {
			case c >= '0' && c <= '9':
				v |= byte(c - '0')
			default:
				v |= byte(c-'a') + 10
			}
		}
		b[i] = v
	}
	b[0], b[1], b[2], b[3] = b[3], b[2], b[1], b[0]
	b[4], b[5] = b[5], b[4]
	b[6], b[7] = b[7], b[6]
	return b[:]
}

type recordingLogger struct {
	mu    sync.Mutex
	lines []string
}

func (l *recordingLogger) add(level, msg string, fields map[string]any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	line := level + " " + msg
	for k, v := range fields {
		if s, ok := v.(string); ok {
			line += " " + k + "=" + s
		}
	}
	l.lines = append(l.lines, line)
}
func (l *recordingLogger) Info(msg string, f map[string]any)  { l.add("INFO", msg, f) }
func (l *recordingLogger) Warn(msg string, f map[string]any)  { l.add("WARN", msg, f) }
func (l *recordingLogger) Error(msg string, f map[string]any) { l.add("ERROR", msg, f) }

func (l *recordingLogger) count(level, substring string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, line := range l.lines {
		if strings.HasPrefix(line, level+" ") && strings.Contains(line, substring) {
			n++
		}
	}
	return n
}

// TestSQLServerWorker runs a SQL Server worker against the fake: two claims fail with Msg
// 51000 and are retried after a growing wait, the third returns a row, whose UNIQUEIDENTIFIER
// bytes reach the handler as the canonical UUID, and whose completion runs in the handler's
// transaction with named parameters.
func TestSQLServerWorker(t *testing.T) {
	t.Parallel()
	const id, token = "6f9619ff-8b86-d011-b42d-00c04fc964ff", "0a1b2c3d-4e5f-6071-8293-a4b5c6d7e8f9"
	srv := &fakeServer{
		lockBusy:   2,
		completion: make(chan fakeCall, 1),
		rows: [][]driver.Value{{
			mssqlBytes(id), "orders", "order-1", "customer-7", nil, `{"id":"order-1","total":42}`,
			`{"x-request-id":"r-1"}`, int64(0), "corr-1", mssqlBytes(token),
		}},
	}
	db := sql.OpenDB(&fakeConnector{srv})
	defer db.Close()
	logger := &recordingLogger{}
	w, err := NewInboxWorker(db, Options{Source: "orders", Dialect: DialectSQLServer, PollInterval: 10 * time.Millisecond, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	seen := make(chan Message, 1)
	done := make(chan error, 1)
	go func() {
		done <- w.Run(ctx, func(_ context.Context, m Message, tx *sql.Tx) error {
			if tx == nil {
				return errors.New("no transaction")
			}
			seen <- m
			return nil
		})
	}()

	var msg Message
	select {
	case msg = <-seen:
	case <-time.After(10 * time.Second):
		t.Fatal("the handler did not run within 10 s")
	}
	var completion fakeCall
	select {
	case completion = <-srv.completion:
	case <-time.After(10 * time.Second):
		t.Fatal("no completion committed within 10 s")
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run returned %v", err)
	}

	if msg.ID != id || msg.IdempotencyKey != "order-1" || msg.AggregateID != "customer-7" || msg.EventType != "" ||
		msg.CorrelationID != "corr-1" || msg.Headers["x-request-id"] != "r-1" || string(msg.Payload) != `{"id":"order-1","total":42}` {
		t.Errorf("message = %+v", msg)
	}
	if !completion.inTx {
		t.Error("the completion ran outside the handler's transaction")
	}
	if completion.args["id"] != id || completion.args["token"] != token || len(completion.args) != 2 {
		t.Errorf("completion args = %v, want id %s and token %s", completion.args, id, token)
	}
	if !strings.Contains(completion.query, "@id") || strings.Contains(completion.query, ":id") {
		t.Errorf("completion text does not use @id:\n%s", completion.query)
	}

	srv.mu.Lock()
	claims := append([]fakeCall{}, srv.claims...)
	srv.mu.Unlock()
	if len(claims) < 3 {
		t.Fatalf("%d claims, want at least 3", len(claims))
	}
	for i, c := range claims {
		if c.inTx {
			t.Errorf("claim %d ran inside a transaction; the SQL Server claim opens its own", i+1)
		}
		if c.deadline < 30*time.Second {
			t.Errorf("claim %d had a deadline of %s, want at least 30 s so that the server raises Msg 51000 first", i+1, c.deadline)
		}
		want := map[string]any{"source": "orders", "batch": int64(10), "lease_ms": int64(30_000), "cand_limit": int64(50)}
		if i >= 3 && c.args["batch"] == int64(9) {
			// While it holds the row, the worker claims at most 9 more, so that it never
			// holds more than BatchSize + MaxConcurrency - 1 rows.
			want["batch"] = int64(9)
		}
		for k, v := range want {
			if c.args[k] != v {
				t.Errorf("claim %d: @%s = %v, want %v", i+1, k, c.args[k], v)
			}
		}
		if !strings.Contains(c.query, "@Resource = @source") {
			t.Errorf("claim %d text does not bind the lock resource to @source", i+1)
		}
	}
	// The lock failures back off: 100 ms, then 200 ms (the poll interval of 10 ms, raised to
	// the 100 ms floor, doubled for each further failure).
	if gap := claims[1].at.Sub(claims[0].at); gap < 100*time.Millisecond {
		t.Errorf("second claim %s after the first, want at least 100 ms", gap)
	}
	if gap := claims[2].at.Sub(claims[1].at); gap < 200*time.Millisecond {
		t.Errorf("third claim %s after the second, want at least 200 ms", gap)
	}
	if n := logger.count("WARN", "claim lock is busy"); n != 2 {
		t.Errorf("%d warnings about the busy claim lock, want 2; lines: %q", n, logger.lines)
	}
	if n := logger.count("ERROR", ""); n != 0 {
		t.Errorf("%d error lines, want 0: %q", n, logger.lines)
	}
}

// TestSQLServerClaimOutlivesTheStop checks that a stop does not abandon a SQL Server claim in
// flight: the claim's context is not cancelled with the worker's.
func TestSQLServerClaimOutlivesTheStop(t *testing.T) {
	t.Parallel()
	srv := &fakeServer{}
	db := sql.OpenDB(&fakeConnector{srv})
	defer db.Close()
	w, err := NewInboxWorker(db, Options{Source: "orders", Dialect: DialectSQLServer})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := w.claim(ctx, context.Background(), 10); err != nil {
		t.Fatalf("a claim after the stop failed: %v; the SQL Server claim must run to its end", err)
	}
}

func TestIsClaimLockBusy(t *testing.T) {
	t.Parallel()
	if !isClaimLockBusy(lockBusyError{}) {
		t.Error("Msg 51000 is not recognised")
	}
	if !isClaimLockBusy(errors.Join(errors.New("claiming"), lockBusyError{})) {
		t.Error("a wrapped Msg 51000 is not recognised")
	}
	if isClaimLockBusy(errors.New("inbox pull claim: sp_getapplock did not acquire the per-source claim lock")) {
		t.Error("an error is recognised by its text")
	}
}

func TestUUIDText(t *testing.T) {
	t.Parallel()
	const id = "6f9619ff-8b86-d011-b42d-00c04fc964ff"
	tests := []struct {
		name    string
		v       any
		dialect Dialect
		want    string
	}{
		{"pgx text", "6F9619FF-8B86-D011-B42D-00C04FC964FF", DialectPostgreSQL, id},
		{"mssql bytes", mssqlBytes(id), DialectSQLServer, id},
		{"text bytes", []byte(id), DialectSQLServer, id},
	}
	for _, tt := range tests {
		got, err := uuidText(tt.v, tt.dialect)
		if err != nil || got != tt.want {
			t.Errorf("%s: uuidText = %q, %v; want %q", tt.name, got, err, tt.want)
		}
	}
	if _, err := uuidText(nil, DialectPostgreSQL); err == nil {
		t.Error("a NULL UUID gave no error")
	}
}

// numberedError is a driver error with SQL Server's error number, as go-mssqldb's mssql.Error.
type numberedError int32

func (e numberedError) Error() string { return fmt.Sprintf("mssql: error %d", int32(e)) }

func (e numberedError) SQLErrorNumber() int32 { return int32(e) }

// TestRefusedConnectionOnSQLServer: a failed SQL Server login ends Run like PostgreSQL's
// refused login; error 4060, which SQL Server also answers while a database recovers, and
// every other number are retried.
func TestRefusedConnectionOnSQLServer(t *testing.T) {
	for number, want := range map[int32]bool{18456: true, 4060: false, 40613: false, 51000: false} {
		if got := refusedConnection(fmt.Errorf("claiming: %w", numberedError(number))); got != want {
			t.Errorf("refusedConnection(error %d) = %v, want %v", number, got, want)
		}
	}
}
