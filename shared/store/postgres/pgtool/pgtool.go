// Package pgtool is the PostgreSQL plumbing of the tools outside the product (the benchmarks
// under bench/ and the fault suite under test/chaos): create and drop a database, open a pool
// with the settings a tool needs, read rows, and time every query that a pool runs.
//
// It lives in the dialect's folder (shared/store/postgres) because it imports pgx: only the
// dialect folders may import a database driver (shared/store/driverimports_test.go), so the
// tools reach pgx through this package. A tool that names the pool or the rows uses the
// aliases Pool and Rows, and calls their methods (Exec, Query, QueryRow) directly.
package pgtool

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Pool is pgx's connection pool, under the name a tool may use without importing pgx. It is
// the pool that postgres.New takes.
type Pool = pgxpool.Pool

// Rows is the result of Pool.Query, for ForEachRow and CollectRows.
type Rows = pgx.Rows

// ConnectError is the error of CreateDatabase and DropDatabase when the server does not
// answer: the connection to the server failed, before any statement. Its text is the text of
// Err.
type ConnectError struct {
	// Err is the error of the connection.
	Err error
}

// Error returns the text of the connection error.
func (e *ConnectError) Error() string { return e.Err.Error() }

// Unwrap returns the connection error.
func (e *ConnectError) Unwrap() error { return e.Err }

// QuoteIdentifier returns name quoted as a PostgreSQL identifier.
func QuoteIdentifier(name string) string { return pgx.Identifier{name}.Sanitize() }

// CreateDatabase connects to server (the URL of a database on the server, usually its
// maintenance database postgres) and creates the empty database name. A connection that fails
// returns a *ConnectError; the error of CREATE DATABASE is returned as it is.
func CreateDatabase(ctx context.Context, server, name string) error {
	return onServer(ctx, server, "CREATE DATABASE "+QuoteIdentifier(name))
}

// DropDatabase connects to server and drops the database name if it exists, ending the
// sessions connected to it (WITH (FORCE)). A connection that fails returns a *ConnectError;
// the error of DROP DATABASE is returned as it is.
func DropDatabase(ctx context.Context, server, name string) error {
	return onServer(ctx, server, "DROP DATABASE IF EXISTS "+QuoteIdentifier(name)+" WITH (FORCE)")
}

// onServer runs one statement on its own connection to server.
func onServer(ctx context.Context, server, sql string) error {
	conn, err := pgx.Connect(ctx, server)
	if err != nil {
		return &ConnectError{Err: err}
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, sql)
	return err
}

// QueryTimer receives every query of a pool when it ends: its SQL text, the time from the
// start of the query (before it is sent) to its end (its last row read), the rows that its
// command tag reports as affected (0 when it failed) and its error. It is called on the
// goroutine that ran the query, so it must be safe for concurrent use.
type QueryTimer func(sql string, took time.Duration, rowsAffected int64, err error)

// PoolOptions are the settings of OpenPool. A zero field keeps the value of the connection
// string (or pgx's default).
type PoolOptions struct {
	// MaxConns and MinConns bound the pool's connections.
	MaxConns, MinConns int32
	// AppName is the application_name of the pool's sessions (pg_stat_activity).
	AppName string
	// Timer, when set, times every query of the pool.
	Timer QueryTimer
}

// OpenPool parses connString, applies o and returns a pool. Like pgxpool.NewWithConfig it
// opens no connection until the first statement (or MinConns' background connects).
func OpenPool(ctx context.Context, connString string, o PoolOptions) (*Pool, error) {
	cfg, err := pgxpool.ParseConfig(connString)
	if err != nil {
		return nil, fmt.Errorf("parsing the database URL: %w", err)
	}
	if o.MaxConns > 0 {
		cfg.MaxConns = o.MaxConns
	}
	if o.MinConns > 0 {
		cfg.MinConns = o.MinConns
	}
	if o.AppName != "" {
		cfg.ConnConfig.RuntimeParams["application_name"] = o.AppName
	}
	if o.Timer != nil {
		cfg.ConnConfig.Tracer = queryTracer(o.Timer)
	}
	return pgxpool.NewWithConfig(ctx, cfg)
}

// ForEachRow scans each row of rows into scans and calls fn after each, then closes rows. It
// returns the first error of a scan, of fn or of the rows.
func ForEachRow(rows Rows, scans []any, fn func() error) error {
	_, err := pgx.ForEachRow(rows, scans, fn)
	return err
}

// CollectRows returns the one column of each row of rows, scanned as a T, and closes rows.
func CollectRows[T any](rows Rows) ([]T, error) {
	return pgx.CollectRows(rows, pgx.RowTo[T])
}

// queryTracer is the pgx.QueryTracer and pgx.BatchTracer of a QueryTimer. It implements no
// other tracer interface of pgx or pgxpool, so a pool with it traces its queries only. A
// query of a batch is timed from the start of the batch to the end of its own result, so
// the last statement of a batch (a claim after its planner settings) is timed whole.
type queryTracer QueryTimer

var (
	_ pgx.QueryTracer = queryTracer(nil)
	_ pgx.BatchTracer = queryTracer(nil)
)

type queryStartKey struct{}

type queryStart struct {
	sql   string
	start time.Time
}

// TraceQueryStart implements pgx.QueryTracer: the query runs from now.
func (t queryTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	return context.WithValue(ctx, queryStartKey{}, queryStart{sql: data.SQL, start: time.Now()})
}

// TraceQueryEnd implements pgx.QueryTracer: it reports the query to the timer.
func (t queryTracer) TraceQueryEnd(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryEndData) {
	st, ok := ctx.Value(queryStartKey{}).(queryStart)
	if !ok {
		return
	}
	t(st.sql, time.Since(st.start), data.CommandTag.RowsAffected(), data.Err)
}

type batchStartKey struct{}

// TraceBatchStart implements pgx.BatchTracer: the batch runs from now.
func (t queryTracer) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return context.WithValue(ctx, batchStartKey{}, time.Now())
}

// TraceBatchQuery implements pgx.BatchTracer: it reports a query of the batch to the timer
// when its result has been read.
func (t queryTracer) TraceBatchQuery(ctx context.Context, _ *pgx.Conn, data pgx.TraceBatchQueryData) {
	start, ok := ctx.Value(batchStartKey{}).(time.Time)
	if !ok {
		return
	}
	t(data.SQL, time.Since(start), data.CommandTag.RowsAffected(), data.Err)
}

// TraceBatchEnd implements pgx.BatchTracer; its queries were reported one by one.
func (t queryTracer) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}
