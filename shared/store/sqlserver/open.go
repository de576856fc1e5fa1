package sqlserver

import (
	"context"
	"fmt"

	"github.com/alternayte/queuebox/shared/store"
	"github.com/alternayte/queuebox/shared/store/sqlpool"
)

// Open opens the database/sql pool of cfg with go-mssqldb (shared/store/sqlpool: each store
// statement waits at most cfg.AcquireTimeout for a connection, and the pool reports to
// cfg.Tracer), waits up to cfg.StartupTimeout for the database to answer (stopping at once
// with a *store.RefusedError when it refuses the login or cannot open the database, see
// Refused) and returns the driver with its store. Errors are *store.OpenError values.
func Open(ctx context.Context, cfg store.OpenConfig) (*store.Driver, error) {
	pool, err := sqlpool.Open("sqlserver", cfg.ConnString, sqlpool.Config{
		MaxOpen: cfg.PoolSize, AcquireTimeout: cfg.AcquireTimeout, Observer: cfg.Tracer,
	})
	if err != nil {
		return nil, &store.OpenError{Step: store.StepConnect, Err: err}
	}
	db := pool.DB()
	if cfg.WaitForDatabase != nil {
		if err := store.WaitUnlessRefused(ctx, cfg.WaitForDatabase, db.PingContext, cfg.StartupTimeout, Refused); err != nil {
			_ = pool.Close()
			return nil, &store.OpenError{Step: store.StepConnect, Err: err}
		}
	}
	st, err := NewWithPool(pool, cfg.Names)
	if err != nil {
		_ = pool.Close()
		return nil, &store.OpenError{Step: store.StepOpenStore, Err: err}
	}
	return &store.Driver{
		Store:     st,
		Migration: NewMigrationBackend(db),
		Ping:      db.PingContext,
		PoolStats: pool.Stats,
	}, nil
}

// OpenHealth opens the lazy pool of cfg.PoolSize connections that the capture node's database
// health component pings (shared/store/sqlpool, reporting to cfg.Tracer): it connects on the
// first ping, not here. cfg.ConnectTimeout bounds each ping when set.
func OpenHealth(_ context.Context, cfg store.OpenConfig) (*store.Driver, error) {
	pool, err := sqlpool.Open("sqlserver", cfg.ConnString, sqlpool.Config{MaxOpen: cfg.PoolSize, Observer: cfg.Tracer})
	if err != nil {
		return nil, fmt.Errorf("opening the health pool: %w", err)
	}
	ping := pool.DB().PingContext
	if cfg.ConnectTimeout > 0 {
		ping = func(ctx context.Context) error {
			ctx, cancel := context.WithTimeout(ctx, cfg.ConnectTimeout)
			defer cancel()
			return pool.DB().PingContext(ctx)
		}
	}
	return &store.Driver{Ping: ping, PoolStats: pool.Stats, Release: func() { _ = pool.Close() }}, nil
}
