package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/alternayte/queuebox/shared/store"
)

// boundedPool is the pool of a Store. Each statement waits at most timeout
// (database.connectionTimeoutMs) for a connection of the pgx pool, through
// store.AcquireWithin, and then runs with the caller's context, which alone bounds the
// statement. pgxpool has no acquire timeout of its own: its Exec, Query, QueryRow and Begin
// wait as long as their context allows.
//
// It has the methods of *pgxpool.Pool that the store uses, with the same release rules: the
// connection of Query goes back when the rows are closed or read to the end, that of QueryRow
// after Scan, that of Begin after Commit or Rollback.
type boundedPool struct {
	pool    *pgxpool.Pool
	timeout time.Duration // 0: the caller's context alone bounds the wait
}

func (p *boundedPool) acquire(ctx context.Context) (*pgxpool.Conn, error) {
	return store.AcquireWithin(ctx, p.timeout, p.pool.Acquire)
}

// Exec runs sql on a connection of the pool.
func (p *boundedPool) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	c, err := p.acquire(ctx)
	if err != nil {
		return pgconn.CommandTag{}, err
	}
	defer c.Release()
	return c.Exec(ctx, sql, args...)
}

// Query runs sql on a connection of the pool that the returned rows give back.
func (p *boundedPool) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	c, err := p.acquire(ctx)
	if err != nil {
		return nil, err
	}
	rows, err := c.Query(ctx, sql, args...)
	if err != nil {
		c.Release()
		return nil, err
	}
	return &releasingRows{Rows: rows, conn: c}, nil
}

// QueryAfter runs first and then sql on one connection of the pool, in one round trip and
// one implicit transaction (a pgx batch ends in a single Sync), and returns the rows of sql,
// which give the connection back. It is for a statement whose planner settings first sets
// with set_config(..., true): they hold until the transaction ends, for sql alone. The rows'
// Err reports a failure of first, of sql, or of the transaction's end, which commits what sql
// wrote.
func (p *boundedPool) QueryAfter(ctx context.Context, first, sql string, args ...any) (pgx.Rows, error) {
	c, err := p.acquire(ctx)
	if err != nil {
		return nil, err
	}
	b := &pgx.Batch{}
	b.Queue(first)
	b.Queue(sql, args...)
	br := c.SendBatch(ctx, b)
	if _, err := br.Exec(); err != nil {
		_ = br.Close()
		c.Release()
		return nil, err
	}
	rows, err := br.Query()
	if err != nil {
		_ = br.Close()
		c.Release()
		return nil, err
	}
	return &batchRows{Rows: rows, batch: br, conn: c}, nil
}

// QueryRow runs sql on a connection of the pool that Scan gives back.
func (p *boundedPool) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	c, err := p.acquire(ctx)
	if err != nil {
		return errRow{err: err}
	}
	return &releasingRow{row: c.QueryRow(ctx, sql, args...), conn: c}
}

// Begin starts a transaction on a connection of the pool that Commit or Rollback gives back.
func (p *boundedPool) Begin(ctx context.Context) (pgx.Tx, error) {
	c, err := p.acquire(ctx)
	if err != nil {
		return nil, err
	}
	tx, err := c.Begin(ctx)
	if err != nil {
		c.Release()
		return nil, err
	}
	return &releasingTx{Tx: tx, conn: c}, nil
}

// Ping checks that the database answers on a connection of the pool.
func (p *boundedPool) Ping(ctx context.Context) error {
	c, err := p.acquire(ctx)
	if err != nil {
		return err
	}
	defer c.Release()
	return c.Ping(ctx)
}

// Close closes the pgx pool.
func (p *boundedPool) Close() { p.pool.Close() }

// releasingRows gives its connection back to the pool when the rows end: Close, or Next
// returning false (pgx closes the rows then).
type releasingRows struct {
	pgx.Rows
	conn *pgxpool.Conn
}

func (r *releasingRows) Next() bool {
	if r.Rows.Next() {
		return true
	}
	r.release()
	return false
}

func (r *releasingRows) Close() {
	r.Rows.Close()
	r.release()
}

func (r *releasingRows) release() {
	if r.conn != nil {
		r.conn.Release()
		r.conn = nil
	}
}

// batchRows are the rows of the last statement of a batch: when they end (Close, or Next
// returning false) they close the batch, whose error, the end of the implicit transaction's
// included, Err then reports, and give the connection back.
type batchRows struct {
	pgx.Rows
	batch pgx.BatchResults
	conn  *pgxpool.Conn
	err   error
}

func (r *batchRows) Next() bool {
	if r.Rows.Next() {
		return true
	}
	r.end()
	return false
}

func (r *batchRows) Close() { r.end() }

func (r *batchRows) Err() error {
	if err := r.Rows.Err(); err != nil {
		return err
	}
	return r.err
}

func (r *batchRows) end() {
	if r.conn == nil {
		return
	}
	r.Rows.Close()
	r.err = r.batch.Close()
	r.conn.Release()
	r.conn = nil
}

// releasingRow gives its connection back to the pool after Scan.
type releasingRow struct {
	row  pgx.Row
	conn *pgxpool.Conn
}

func (r *releasingRow) Scan(dest ...any) error {
	defer r.conn.Release()
	return r.row.Scan(dest...)
}

// errRow is the row of a QueryRow that got no connection: Scan returns the acquire error.
type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }

// releasingTx gives its connection back to the pool when the transaction ends. The pool
// destroys a connection that a failed Commit or Rollback left inside a transaction.
type releasingTx struct {
	pgx.Tx
	conn *pgxpool.Conn
}

func (t *releasingTx) Commit(ctx context.Context) error {
	err := t.Tx.Commit(ctx)
	t.release()
	return err
}

func (t *releasingTx) Rollback(ctx context.Context) error {
	err := t.Tx.Rollback(ctx)
	t.release()
	return err
}

func (t *releasingTx) release() {
	if t.conn != nil {
		t.conn.Release()
		t.conn = nil
	}
}
