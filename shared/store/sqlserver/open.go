package sqlserver

import (
	"context"
	"database/sql"
	"fmt"

	mssql "github.com/microsoft/go-mssqldb"

	"github.com/alternayte/queuebox/shared/store"
)

// Open opens the database/sql handle of cfg with go-mssqldb, waits up to cfg.StartupTimeout
// for the database to answer and returns the driver with its store. Errors are
// *store.OpenError values.
func Open(ctx context.Context, cfg store.OpenConfig) (*store.Driver, error) {
	db, err := sql.Open("sqlserver", cfg.ConnString)
	if err != nil {
		return nil, &store.OpenError{Step: store.StepConnect, Err: err}
	}
	db.SetMaxOpenConns(cfg.PoolSize)
	db.SetMaxIdleConns(cfg.PoolSize)
	if cfg.WaitForDatabase != nil {
		if err := cfg.WaitForDatabase(ctx, db.PingContext, cfg.StartupTimeout); err != nil {
			_ = db.Close()
			return nil, &store.OpenError{Step: store.StepConnect, Err: err}
		}
	}
	st, err := New(db, cfg.Names)
	if err != nil {
		_ = db.Close()
		return nil, &store.OpenError{Step: store.StepOpenStore, Err: err}
	}
	return &store.Driver{
		Store:     st,
		Migration: NewMigrationBackend(db),
		Ping:      db.PingContext,
		PoolStats: func() store.PoolStats {
			s := db.Stats()
			return store.PoolStats{
				Active: int64(s.InUse), Idle: int64(s.Idle),
				Max: int64(s.MaxOpenConnections),
			}
		},
	}, nil
}

// OpenHealth opens the lazy pool of cfg.PoolSize connections that the capture node's database
// health component pings: it connects on the first ping, not here. cfg.ConnectTimeout bounds
// each ping's connection when set.
func OpenHealth(_ context.Context, cfg store.OpenConfig) (*store.Driver, error) {
	c, err := mssql.NewConnector(cfg.ConnString)
	if err != nil {
		return nil, fmt.Errorf("parsing database.url: %w", err)
	}
	db := sql.OpenDB(c)
	db.SetMaxOpenConns(cfg.PoolSize)
	db.SetMaxIdleConns(cfg.PoolSize)
	ping := db.PingContext
	if cfg.ConnectTimeout > 0 {
		ping = func(ctx context.Context) error {
			ctx, cancel := context.WithTimeout(ctx, cfg.ConnectTimeout)
			defer cancel()
			return db.PingContext(ctx)
		}
	}
	return &store.Driver{
		Ping: ping,
		PoolStats: func() store.PoolStats {
			s := db.Stats()
			return store.PoolStats{Active: int64(s.InUse), Idle: int64(s.Idle), Max: int64(s.MaxOpenConnections)}
		},
		Release: func() { _ = db.Close() },
	}, nil
}
