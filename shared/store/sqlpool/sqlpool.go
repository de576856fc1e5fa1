// Package sqlpool is the database/sql connection pool of a dialect driver
// (shared/store/sqlserver) with the two things that database/sql lacks: a bound on the wait
// for a connection (database.connectionTimeoutMs, "the longest wait for a connection from the
// pool" of spec/23) and the pool events behind the hikaricp_connections_* families of spec/28
// (store.PoolObserver: the acquire time, the acquires in progress and those that timed out,
// the time a caller holds a connection and the time to open one). Its Stats are the gauges of
// those families, from sql.DBStats.
//
// Every statement of a Pool first takes a connection with sql.DB.Conn under the bound
// (store.AcquireWithin), then runs on it with the caller's context, which alone bounds the
// statement. The connection goes back to the pool when the statement is done: at once for
// ExecContext and PingContext, when the rows end for QueryContext (Close, or Next returning
// false), when the transaction ends for BeginTx (Commit or Rollback). For the last two a
// goroutine waits in sql.Conn.Close, which blocks until the rows or the transaction end; a
// caller that never closes its rows keeps that goroutine and the connection, as it would keep
// the connection of a plain *sql.DB.
//
// The package is dialect-neutral: its tests run it on PostgreSQL through pgx's database/sql
// driver (github.com/jackc/pgx/v5/stdlib), the code path that SQL Server takes with
// go-mssqldb.
package sqlpool

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/alternayte/queuebox/shared/store"
)

// Config is what a Pool is built from.
type Config struct {
	// MaxOpen is the most connections open at once, and the most kept idle
	// (database.poolSize). It must be above 0.
	MaxOpen int
	// AcquireTimeout is the longest wait of a statement for a connection
	// (database.connectionTimeoutMs); a statement that waits longer fails with
	// store.ErrPoolTimeout. Default: 0, the caller's context alone bounds the wait.
	AcquireTimeout time.Duration
	// Observer, when set, receives the events of the pool. Default: nil, none.
	Observer store.PoolObserver
}

func (c Config) validate() error {
	if c.MaxOpen <= 0 {
		return fmt.Errorf("the pool size %d is not above 0 (database.poolSize, QUEUEBOX_DATABASE_POOLSIZE)", c.MaxOpen)
	}
	return nil
}

// Pool is a database/sql handle whose statements wait a bounded time for a connection and
// report to an observer. Its methods are safe for concurrent use.
type Pool struct {
	db      *sql.DB
	timeout time.Duration
	obs     store.PoolObserver
}

// Open builds the pool of the registered database/sql driver driverName ("sqlserver" of
// go-mssqldb, "pgx" of pgx's stdlib) on dsn, as sql.Open would, with the opening of each
// connection measured. It opens no connection.
func Open(driverName, dsn string, cfg Config) (*Pool, error) {
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("opening the %s pool: %w", driverName, err)
	}
	// sql.Open resolves the name to the registered driver; the handle itself is not used.
	probe, err := sql.Open(driverName, dsn)
	if err != nil {
		return nil, fmt.Errorf("opening the %s pool: %w", driverName, err)
	}
	drv := probe.Driver()
	_ = probe.Close()
	var conn driver.Connector
	if dc, ok := drv.(driver.DriverContext); ok {
		if conn, err = dc.OpenConnector(dsn); err != nil {
			return nil, fmt.Errorf("opening the %s pool: %w", driverName, err)
		}
	} else {
		conn = dsnConnector{dsn: dsn, drv: drv}
	}
	return New(conn, cfg)
}

// FromDB returns a pool on an open handle, sized by its owner, without a bound on the wait
// for a connection and without an observer: the statements of the pool run as they would on
// db.
func FromDB(db *sql.DB) *Pool { return &Pool{db: db, obs: nopObserver{}} }

// New builds the pool on connector. It opens no connection.
func New(connector driver.Connector, cfg Config) (*Pool, error) {
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("opening the pool: %w", err)
	}
	obs := cfg.Observer
	if obs == nil {
		obs = nopObserver{}
	}
	db := sql.OpenDB(measuredConnector{Connector: connector, obs: obs})
	db.SetMaxOpenConns(cfg.MaxOpen)
	db.SetMaxIdleConns(cfg.MaxOpen)
	return &Pool{db: db, timeout: max(cfg.AcquireTimeout, 0), obs: obs}, nil
}

// DB returns the database/sql handle, for what runs outside the bound and the observer (the
// start's wait for the database, the migration sessions).
func (p *Pool) DB() *sql.DB { return p.db }

// Stats returns a snapshot of the pool for the hikaricp_connections_* gauges: the connections
// in use and idle of sql.DBStats, and the maximum open connections. database/sql keeps no
// minimum of idle connections, so MinIdle is 0.
func (p *Pool) Stats() store.PoolStats {
	s := p.db.Stats()
	return store.PoolStats{Active: int64(s.InUse), Idle: int64(s.Idle), Max: int64(s.MaxOpenConnections)}
}

// Close closes the handle: see sql.DB.Close.
func (p *Pool) Close() error { return p.db.Close() }

// held is a connection taken by a statement, and when.
type held struct {
	conn *sql.Conn
	at   time.Time
}

// acquire waits at most the bound for a connection and reports the wait.
func (p *Pool) acquire(ctx context.Context) (held, error) {
	p.obs.AcquireStarted()
	start := time.Now()
	conn, err := store.AcquireWithin(ctx, p.timeout, p.db.Conn)
	now := time.Now()
	if err != nil {
		p.obs.AcquireEnded(now.Sub(start), err, errors.Is(err, store.ErrPoolTimeout) || errors.Is(err, context.DeadlineExceeded))
		return held{}, err
	}
	p.obs.AcquireEnded(now.Sub(start), nil, false)
	return held{conn: conn, at: now}, nil
}

// release gives the connection back to the pool, after the statements on it are done, and
// reports how long it was held.
func (p *Pool) release(h held) {
	_ = h.conn.Close()
	p.obs.Released(time.Since(h.at))
}

// ExecContext runs query on a connection of the pool.
func (p *Pool) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	h, err := p.acquire(ctx)
	if err != nil {
		return nil, err
	}
	defer p.release(h)
	return h.conn.ExecContext(ctx, query, args...)
}

// QueryContext runs query on a connection of the pool that goes back when the rows end.
func (p *Pool) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	h, err := p.acquire(ctx)
	if err != nil {
		return nil, err
	}
	rows, err := h.conn.QueryContext(ctx, query, args...)
	if err != nil {
		p.release(h)
		return nil, err
	}
	go p.release(h) // sql.Conn.Close waits until the rows end
	return rows, nil
}

// BeginTx starts a transaction on a connection of the pool that goes back when the
// transaction ends.
func (p *Pool) BeginTx(ctx context.Context, opts *sql.TxOptions) (*sql.Tx, error) {
	h, err := p.acquire(ctx)
	if err != nil {
		return nil, err
	}
	tx, err := h.conn.BeginTx(ctx, opts)
	if err != nil {
		p.release(h)
		return nil, err
	}
	go p.release(h) // sql.Conn.Close waits until the transaction ends
	return tx, nil
}

// QueryRowContext runs query, which returns at most one row, on a connection of the pool that
// goes back after Row.Scan. Like sql.DB.QueryRowContext it defers every error to Scan,
// including that of a wait that got no connection.
func (p *Pool) QueryRowContext(ctx context.Context, query string, args ...any) *Row {
	h, err := p.acquire(ctx)
	if err != nil {
		return &Row{err: err}
	}
	return &Row{row: h.conn.QueryRowContext(ctx, query, args...), release: func() { p.release(h) }}
}

// errScannedTwice is the error of a second Row.Scan.
var errScannedTwice = errors.New("sqlpool: Row.Scan called twice; the connection went back after the first")

// Row is the result of QueryRowContext. Scan must be called once: it gives the connection
// back, and a second Scan returns an error. A Row is not safe for concurrent use.
type Row struct {
	row     *sql.Row
	release func()
	err     error // the wait for a connection failed
}

// Scan copies the columns of the row into dest, as sql.Row.Scan does, and gives the
// connection back. It returns sql.ErrNoRows when the statement selected no row.
func (r *Row) Scan(dest ...any) error {
	if r.err != nil {
		return r.err
	}
	release := r.release
	r.release, r.err = nil, errScannedTwice
	defer release()
	return r.row.Scan(dest...)
}

// PingContext checks that the database answers on a connection of the pool.
func (p *Pool) PingContext(ctx context.Context) error {
	h, err := p.acquire(ctx)
	if err != nil {
		return err
	}
	defer p.release(h)
	return h.conn.PingContext(ctx)
}

// measuredConnector reports the time to open each connection.
type measuredConnector struct {
	driver.Connector
	obs store.PoolObserver
}

// Connect implements driver.Connector.
func (c measuredConnector) Connect(ctx context.Context) (driver.Conn, error) {
	start := time.Now()
	conn, err := c.Connector.Connect(ctx)
	if err == nil {
		c.obs.Connected(time.Since(start))
	}
	return conn, err
}

// Close closes the wrapped connector when it holds resources (sql.DB.Close calls it).
func (c measuredConnector) Close() error {
	if closer, ok := c.Connector.(io.Closer); ok {
		return closer.Close()
	}
	return nil
}

// dsnConnector is the connector of a driver without driver.DriverContext.
type dsnConnector struct {
	dsn string
	drv driver.Driver
}

func (c dsnConnector) Connect(context.Context) (driver.Conn, error) { return c.drv.Open(c.dsn) }
func (c dsnConnector) Driver() driver.Driver                        { return c.drv }

// nopObserver is the observer of a pool without one.
type nopObserver struct{}

func (nopObserver) AcquireStarted()                         {}
func (nopObserver) AcquireEnded(time.Duration, error, bool) {}
func (nopObserver) Released(time.Duration)                  {}
func (nopObserver) Connected(time.Duration)                 {}

var (
	_ store.PoolObserver = nopObserver{}
	_ io.Closer          = measuredConnector{}
)
