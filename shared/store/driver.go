package store

import (
	"context"
	"log/slog"
	"time"
)

// The steps of an OpenError, as the start reports them.
const (
	// StepConnect is the step of an error that parsing the connection string, building the
	// pool or waiting for the database returned.
	StepConnect = "connect to the database"
	// StepOpenStore is the step of an error that building the store returned.
	StepOpenStore = "open the store"
)

// OpenError is the error of a dialect's Open: Step names what failed (StepConnect or
// StepOpenStore) and Err is the cause, with the text that the start prints.
type OpenError struct {
	Step string
	Err  error
}

// Error returns the text of the cause.
func (e *OpenError) Error() string { return e.Err.Error() }

// Unwrap returns the cause.
func (e *OpenError) Unwrap() error { return e.Err }

// OpenConfig is what a dialect driver (shared/store/postgres, shared/store/sqlserver) needs to
// open a database. The zero value of each optional field keeps the driver's default.
type OpenConfig struct {
	// ConnString is the connection string in the form that the dialect's driver takes
	// (postgres.ConnString or sqlserver.ConnString of database.url).
	ConnString string
	// PoolSize is the maximum number of open connections (database.poolSize).
	PoolSize int
	// ConnectTimeout bounds opening one connection (database.connectionTimeoutMs); 0 keeps
	// the driver's default. PostgreSQL only.
	ConnectTimeout time.Duration
	// AcquireTimeout bounds the wait of each store statement for a connection from the pool
	// (database.connectionTimeoutMs, "the longest wait for a connection from the pool"): a
	// statement that waits longer fails with ErrPoolTimeout, and the Tracer counts a timeout.
	// Both dialects. Default: 0, the caller's context alone bounds the wait.
	AcquireTimeout time.Duration
	// StartupTimeout is how long Open waits for the database to answer
	// (database.startupTimeoutMs).
	StartupTimeout time.Duration
	// WaitForDatabase waits up to timeout for connect to succeed (migrate.WaitForDatabase,
	// injected so that a driver does not depend on the migration runner). Nil: Open does not
	// wait.
	WaitForDatabase func(ctx context.Context, connect func(context.Context) error, timeout time.Duration) error
	// Names are the mapped table and column names.
	Names Names
	// Tracer, when set, observes the pool of the dialect: on PostgreSQL it receives the
	// events of a postgres.PoolTracer set as ConnConfig.Tracer, on SQL Server those of the
	// shared/store/sqlpool pool. Default: nil, no tracer.
	Tracer PoolObserver
	// Logger is the process logger. Default: slog.Default().
	Logger *slog.Logger
}

// PoolStats is one snapshot of a dialect's connection pool.
type PoolStats struct {
	// Active is the connections that a caller holds.
	Active int64
	// Idle is the connections that are free.
	Idle int64
	// MinIdle is the minimum idle connection count of the pool configuration.
	MinIdle int64
	// Max is the maximum pool size of the pool configuration.
	Max int64
}

// Driver is an open database of one dialect: the store and what the process needs besides it.
// A Driver knows its dialect; the code that uses it does not.
type Driver struct {
	// Store runs the statements of the dialect.
	Store Store
	// Migration is the backend on which package migrate runs the bundled migrations of this
	// dialect (see migrate.New).
	Migration MigrationBackend
	// Ping checks that the database answers, opening a connection when the pool has none.
	Ping func(ctx context.Context) error
	// PoolStats returns a snapshot of the pool.
	PoolStats func() PoolStats
	// Release, when set, closes the pool of a driver without a Store (a health pool).
	Release func()
}

// Close releases the connections of the driver.
func (d *Driver) Close() {
	switch {
	case d == nil:
	case d.Store != nil:
		d.Store.Close()
	case d.Release != nil:
		d.Release()
	}
}

// PoolObserver receives the events of a dialect's connection pool, measured by the driver;
// shared/metrics implements it for the hikaricp_connections_* families. Its methods must be
// safe for concurrent use.
type PoolObserver interface {
	// AcquireStarted: a caller waits for a connection from now.
	AcquireStarted()
	// AcquireEnded: the wait of AcquireStarted ended after wait. err is nil when the caller
	// got a connection; timedOut says that the acquire ran out of time.
	AcquireEnded(wait time.Duration, err error, timedOut bool)
	// Released: a caller gave back a connection that it held for held.
	Released(held time.Duration)
	// Connected: a physical connection opened in took.
	Connected(took time.Duration)
}
