package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/alternayte/queuebox/shared/store"
)

// Open builds the pgx pool of cfg, waits up to cfg.StartupTimeout for the database to answer
// (stopping at once with a *store.RefusedError when it refuses the login or knows no such
// database, see Refused) and returns the driver with its store. Errors are *store.OpenError values. The first
// connection (TCP, TLS, and the server starting a backend) is most of a cold start: the store
// builds its statements meanwhile, and a failure to connect is reported first, as when the two
// ran one after the other.
func Open(ctx context.Context, cfg store.OpenConfig) (*store.Driver, error) {
	pcfg, err := pgxpool.ParseConfig(cfg.ConnString)
	if err != nil {
		return nil, &store.OpenError{Step: store.StepConnect, Err: fmt.Errorf("parsing database.url: %w", err)}
	}
	pcfg.MaxConns = int32(cfg.PoolSize)
	if cfg.ConnectTimeout > 0 {
		pcfg.ConnConfig.ConnectTimeout = cfg.ConnectTimeout
	}
	if cfg.Tracer != nil {
		pcfg.ConnConfig.Tracer = NewPoolTracer(cfg.Tracer)
	}
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, &store.OpenError{Step: store.StepConnect, Err: err}
	}
	connected := make(chan error, 1)
	if cfg.WaitForDatabase != nil {
		go func() {
			connected <- store.WaitUnlessRefused(ctx, cfg.WaitForDatabase, connectOnce(pool), cfg.StartupTimeout, Refused)
		}()
	} else {
		connected <- nil
	}
	st, stErr := NewWithConfig(pool, Config{Names: cfg.Names, AcquireTimeout: cfg.AcquireTimeout})
	if err := <-connected; err != nil {
		pool.Close()
		return nil, &store.OpenError{Step: store.StepConnect, Err: err}
	}
	if stErr != nil {
		pool.Close()
		return nil, &store.OpenError{Step: store.StepOpenStore, Err: stErr}
	}
	return &store.Driver{
		Store:     st,
		Migration: NewMigrationBackend(pool),
		Ping:      connectOnce(pool),
		PoolStats: poolStats(pool),
	}, nil
}

// connectOnce returns the connect function of WaitForDatabase on a pool: it acquires a
// connection, which the pool opens (pgxpool.Pool.Ping would then send a query as well), and
// gives it back to the pool, idle, for the start checks. A connection that completed the
// server's startup handshake is a database that answers.
func connectOnce(pool *pgxpool.Pool) func(context.Context) error {
	return func(ctx context.Context) error {
		c, err := pool.Acquire(ctx)
		if err != nil {
			return err
		}
		c.Release()
		return nil
	}
}

// poolStats returns the snapshot function of pool: the acquired and idle connections of
// pool.Stat, and MinIdleConns and MaxConns of its configuration.
func poolStats(pool *pgxpool.Pool) func() store.PoolStats {
	cfg := pool.Config()
	minIdle, maxConns := int64(cfg.MinIdleConns), int64(cfg.MaxConns)
	return func() store.PoolStats {
		s := pool.Stat()
		return store.PoolStats{
			Active: int64(s.AcquiredConns()), Idle: int64(s.IdleConns()),
			MinIdle: minIdle, Max: maxConns,
		}
	}
}

// OpenHealth returns a driver without a Store for a health probe: a pool of at most
// cfg.PoolSize connections on cfg.ConnString that opens its first connection on the first
// Ping (pgxpool.Pool.Ping, which also sends a query). Close releases it.
func OpenHealth(ctx context.Context, cfg store.OpenConfig) (*store.Driver, error) {
	pcfg, err := pgxpool.ParseConfig(cfg.ConnString)
	if err != nil {
		return nil, fmt.Errorf("parsing database.url: %w", err)
	}
	pcfg.MaxConns = int32(cfg.PoolSize)
	if cfg.ConnectTimeout > 0 {
		pcfg.ConnConfig.ConnectTimeout = cfg.ConnectTimeout
	}
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, fmt.Errorf("opening the health pool: %w", err)
	}
	return &store.Driver{Ping: pool.Ping, PoolStats: poolStats(pool), Release: pool.Close}, nil
}
