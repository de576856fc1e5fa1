package postgres

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/alternayte/queuebox/migrations"
	"github.com/alternayte/queuebox/shared/store"
)

// MigrationLockKey is the key of the session-level PostgreSQL advisory lock that a migration
// run holds: the bytes of "QueueBox" read as a big-endian 64-bit number.
const MigrationLockKey int64 = 0x5175657565426f78

const (
	pgHistoryExists = `SELECT to_regclass('flyway_schema_history') IS NOT NULL`

	// pgCreateHistory is Flyway's own history table for PostgreSQL.
	pgCreateHistory = `CREATE TABLE IF NOT EXISTS flyway_schema_history (
    installed_rank INT NOT NULL,
    version VARCHAR(50),
    description VARCHAR(200) NOT NULL,
    type VARCHAR(20) NOT NULL,
    script VARCHAR(1000) NOT NULL,
    checksum INTEGER,
    installed_by VARCHAR(100) NOT NULL,
    installed_on TIMESTAMP NOT NULL DEFAULT now(),
    execution_time INTEGER NOT NULL,
    success BOOLEAN NOT NULL,
    CONSTRAINT flyway_schema_history_pk PRIMARY KEY (installed_rank)
);
CREATE INDEX IF NOT EXISTS flyway_schema_history_s_idx ON flyway_schema_history (success);`

	// pgReadHistory reads the history in no particular order (interpret sorts it): an ORDER BY
	// makes the planner open the table's indexes, which costs a millisecond on the fresh
	// connection of a start.
	pgReadHistory = `SELECT installed_rank, COALESCE(version, ''), COALESCE(description, ''), type, script, success
FROM flyway_schema_history`

	pgInsertHistory = `INSERT INTO flyway_schema_history
    (installed_rank, version, description, type, script, checksum, installed_by, execution_time, success)
VALUES ($1, $2, $3, $4, $5, $6, COALESCE(NULLIF($7::text, ''), left(current_user, 100)), $8, true)`

	// pgProbe tells whether the history table exists; probe adds one pgTableProbe column per
	// table name, $1, $2, ... (a column each is cheaper to plan than an unnest of an array).
	pgProbe      = `SELECT to_regclass('flyway_schema_history') IS NOT NULL`
	pgTableProbe = `, to_regclass(quote_ident($%d)) IS NOT NULL`

	pgTryLock     = `SELECT pg_try_advisory_lock($1)`
	pgUnlock      = `SELECT pg_advisory_unlock($1)`
	pgTableExists = `SELECT to_regclass(quote_ident($1)) IS NOT NULL`
)

// NewMigrationBackend returns the PostgreSQL backend of the migration runner (shared/migrate)
// on pool: each session is one pooled connection, and the migration lock is the advisory lock
// MigrationLockKey of its database session. Open returns it as store.Driver.Migration.
func NewMigrationBackend(pool *pgxpool.Pool) store.MigrationBackend {
	return &migrationBackend{pool: pool}
}

type migrationBackend struct{ pool *pgxpool.Pool }

var _ store.MigrationProber = (*migrationSession)(nil)

// Dialect returns migrations.PostgreSQL.
func (d *migrationBackend) Dialect() migrations.Dialect { return migrations.PostgreSQL }

// Open acquires a connection of the pool and, with lockTimeout > 0, takes the migration lock.
func (d *migrationBackend) Open(ctx context.Context, lockTimeout time.Duration) (store.MigrationSession, error) {
	conn, err := d.pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("acquiring a connection for migrations: %w", err)
	}
	s := &migrationSession{conn: conn}
	if lockTimeout > 0 {
		if err := s.lock(ctx, lockTimeout); err != nil {
			conn.Release()
			return nil, err
		}
		s.locked = true
	}
	return s, nil
}

// migrationSession is one pooled connection; the advisory lock belongs to its database session.
type migrationSession struct {
	conn   *pgxpool.Conn
	locked bool
}

// lock polls pg_try_advisory_lock with backoff, so that a waiting process never sits in a
// blocked query that it cannot take back.
func (s *migrationSession) lock(ctx context.Context, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	wait := 20 * time.Millisecond
	for {
		var ok bool
		if err := s.conn.QueryRow(ctx, pgTryLock, MigrationLockKey).Scan(&ok); err != nil {
			return fmt.Errorf("taking the migration lock: %w", err)
		}
		if ok {
			return nil
		}
		left := time.Until(deadline)
		if left <= 0 {
			return fmt.Errorf("%w: another process held the PostgreSQL advisory lock %d for more than %s",
				store.ErrMigrationLockTimeout, MigrationLockKey, timeout)
		}
		t := time.NewTimer(min(wait, left))
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("waiting for the migration lock: %w", ctx.Err())
		case <-t.C:
		}
		wait = min(2*wait, time.Second)
	}
}

// Close releases the lock, if held, and gives the connection back to the pool.
func (s *migrationSession) Close(ctx context.Context) {
	defer s.conn.Release()
	if !s.locked {
		return
	}
	rctx, cancel := releaseContext(ctx)
	defer cancel()
	var released bool
	if err := s.conn.QueryRow(rctx, pgUnlock, MigrationLockKey).Scan(&released); err != nil || !released {
		// The session may still hold the lock: ending the session releases it, and the pool
		// drops a closed connection on Release.
		_ = s.conn.Conn().Close(rctx)
	}
}

// HistoryExists reports whether flyway_schema_history exists.
func (s *migrationSession) HistoryExists(ctx context.Context) (bool, error) {
	var ok bool
	err := s.conn.QueryRow(ctx, pgHistoryExists).Scan(&ok)
	return ok, err
}

// Probe answers HistoryExists and TablesPresent in one round trip: the statement goes out
// unprepared (pgx.QueryExecModeExec), which saves the prepare round trip of a statement that
// a start runs once.
func (s *migrationSession) Probe(ctx context.Context, names []string) (bool, []string, error) {
	var sql strings.Builder
	sql.WriteString(pgProbe)
	args := []any{pgx.QueryExecModeExec}
	var exists bool
	found := make([]bool, len(names))
	dest := []any{&exists}
	for i, n := range names {
		fmt.Fprintf(&sql, pgTableProbe, i+1)
		args = append(args, n)
		dest = append(dest, &found[i])
	}
	if err := s.conn.QueryRow(ctx, sql.String(), args...).Scan(dest...); err != nil {
		return false, nil, err
	}
	var tables []string
	for i, n := range names {
		if found[i] {
			tables = append(tables, n)
		}
	}
	return exists, tables, nil
}

// CreateHistory creates flyway_schema_history and its index unless they exist.
func (s *migrationSession) CreateHistory(ctx context.Context) error {
	_, err := s.conn.Exec(ctx, pgCreateHistory)
	return err
}

// ReadHistory returns the rows of flyway_schema_history.
func (s *migrationSession) ReadHistory(ctx context.Context) ([]store.HistoryRow, error) {
	rows, err := s.conn.Query(ctx, pgReadHistory, pgx.QueryExecModeExec)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.HistoryRow, error) {
		var h store.HistoryRow
		err := r.Scan(&h.InstalledRank, &h.Version, &h.Description, &h.Type, &h.Script, &h.Success)
		return h, err
	})
}

// Apply runs m and inserts its history row in one transaction.
func (s *migrationSession) Apply(ctx context.Context, m migrations.Migration, rank int, installedBy string) error {
	return s.inTx(ctx, func(tx pgx.Tx) error {
		start := time.Now()
		if _, err := tx.Exec(ctx, m.SQL); err != nil {
			return err
		}
		elapsed := time.Since(start).Milliseconds()
		checksum := migrations.Checksum(m.SQL)
		_, err := tx.Exec(ctx, pgInsertHistory, rank, strconv.Itoa(m.Version), store.HistoryDescription(m.Description),
			"SQL", m.Script, &checksum, installedBy, int32(min(elapsed, 1<<31-1)))
		if err != nil {
			return fmt.Errorf("recording V%d in %s: %w", m.Version, store.MigrationHistoryTable, err)
		}
		return nil
	})
}

// Baseline inserts one BASELINE row per migration in one transaction.
func (s *migrationSession) Baseline(ctx context.Context, ms []migrations.Migration, installedBy string) error {
	return s.inTx(ctx, func(tx pgx.Tx) error {
		for i, m := range ms {
			_, err := tx.Exec(ctx, pgInsertHistory, i+1, strconv.Itoa(m.Version), store.HistoryDescription(m.Description),
				"BASELINE", m.Script, (*int32)(nil), installedBy, int32(0))
			if err != nil {
				return err
			}
		}
		return nil
	})
}

// TablesPresent returns the names of the tables that exist, in the order given.
func (s *migrationSession) TablesPresent(ctx context.Context, names []string) ([]string, error) {
	var out []string
	for _, n := range names {
		var ok bool
		if err := s.conn.QueryRow(ctx, pgTableExists, n).Scan(&ok); err != nil {
			return nil, err
		}
		if ok {
			out = append(out, n)
		}
	}
	return out, nil
}

func (s *migrationSession) inTx(ctx context.Context, fn func(pgx.Tx) error) error {
	tx, err := s.conn.Begin(ctx)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		rctx, cancel := releaseContext(ctx)
		defer cancel()
		_ = tx.Rollback(rctx)
		return err
	}
	return tx.Commit(ctx)
}

// releaseContext returns a context for releasing a lock after ctx may have ended.
func releaseContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
}
