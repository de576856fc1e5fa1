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

// pgHistory holds the statements of one track's history table.
type pgHistory struct {
	exists, create, read, insert string
}

// pgHistories are the statements of each track's history table. The table names are constants
// of package migrations, never input.
var pgHistories = map[migrations.Track]pgHistory{
	migrations.Main:     pgHistoryStatements(migrations.Main.HistoryTable()),
	migrations.QueueBox: pgHistoryStatements(migrations.QueueBox.HistoryTable()),
}

func pgHistoryStatements(table string) pgHistory {
	return pgHistory{
		exists: `SELECT to_regclass('` + table + `') IS NOT NULL`,
		// Flyway's own history table for PostgreSQL.
		create: `CREATE TABLE IF NOT EXISTS ` + table + ` (
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
    CONSTRAINT ` + table + `_pk PRIMARY KEY (installed_rank)
);
CREATE INDEX IF NOT EXISTS ` + table + `_s_idx ON ` + table + ` (success);`,
		// read takes no ORDER BY (interpret sorts the rows): an ORDER BY makes the planner open
		// the table's indexes, which costs a millisecond on the fresh connection of a start.
		read: `SELECT installed_rank, COALESCE(version, ''), COALESCE(description, ''), type, script, success
FROM ` + table,
		insert: `INSERT INTO ` + table + `
    (installed_rank, version, description, type, script, checksum, installed_by, execution_time, success)
VALUES ($1, $2, $3, $4, $5, $6, COALESCE(NULLIF($7::text, ''), left(current_user, 100)), $8, true)`,
	}
}

const (
	// pgHistoryExists looks for flyway_schema_history.
	pgHistoryExists = `SELECT to_regclass('flyway_schema_history') IS NOT NULL`

	// pgProbe starts the statement of Probe: one pgHistoryProbe column per track, then one
	// pgTableProbe column per table name, $1, $2, ... (a column each is cheaper to plan than an
	// unnest of an array).
	pgProbe        = `SELECT `
	pgHistoryProbe = `to_regclass('%s') IS NOT NULL`
	pgTableProbe   = `to_regclass(quote_ident($%d)) IS NOT NULL`

	// pgReadTagged reads one history table for ReadHistories: the index of its track, then
	// the columns of ReadHistory.
	pgReadTagged = `SELECT %d, installed_rank, COALESCE(version, ''), COALESCE(description, ''), type, script, success FROM %s`

	// pgMoveInsert copies a row of flyway_schema_history (a migration that moved to the
	// QueueBox track) into queuebox_schema_history under the QueueBox track's version, keeping
	// who applied it, when, and how long it took.
	pgMoveInsert = `INSERT INTO queuebox_schema_history
    (installed_rank, version, description, type, script, checksum, installed_by, installed_on, execution_time, success)
SELECT $1, $2, $3, type, $4, CASE WHEN type = 'SQL' THEN $5::int END, installed_by, installed_on, execution_time, success
FROM flyway_schema_history WHERE installed_rank = $6`
	pgMoveDelete = `DELETE FROM flyway_schema_history WHERE installed_rank = $1`

	pgTryLock     = `SELECT pg_try_advisory_lock($1)`
	pgUnlock      = `SELECT pg_advisory_unlock($1)`
	pgTableExists = `SELECT to_regclass(quote_ident($1)) IS NOT NULL`
)

func pgHistoryOf(t migrations.Track) (pgHistory, error) {
	h, ok := pgHistories[t]
	if !ok {
		return pgHistory{}, fmt.Errorf("no history table for the migration track %q", t)
	}
	return h, nil
}

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

// HistoryExists reports whether the history table of track t exists.
func (s *migrationSession) HistoryExists(ctx context.Context, t migrations.Track) (bool, error) {
	h, err := pgHistoryOf(t)
	if err != nil {
		return false, err
	}
	var ok bool
	err = s.conn.QueryRow(ctx, h.exists).Scan(&ok)
	return ok, err
}

// Probe answers HistoryExists for each track and TablesPresent in one round trip: the
// statement goes out unprepared (pgx.QueryExecModeExec), which saves the prepare round trip of
// a statement that a start runs once.
func (s *migrationSession) Probe(ctx context.Context, tracks []migrations.Track, names []string) ([]bool, []string, error) {
	var sql strings.Builder
	sql.WriteString(pgProbe)
	args := []any{pgx.QueryExecModeExec}
	histories := make([]bool, len(tracks))
	found := make([]bool, len(names))
	dest := make([]any, 0, len(tracks)+len(names))
	for i, t := range tracks {
		if _, err := pgHistoryOf(t); err != nil {
			return nil, nil, err
		}
		if i > 0 {
			sql.WriteString(", ")
		}
		fmt.Fprintf(&sql, pgHistoryProbe, t.HistoryTable())
		dest = append(dest, &histories[i])
	}
	for i, n := range names {
		if len(dest) > 0 {
			sql.WriteString(", ")
		}
		fmt.Fprintf(&sql, pgTableProbe, i+1)
		args = append(args, n)
		dest = append(dest, &found[i])
	}
	if len(dest) == 0 {
		return histories, nil, nil
	}
	if err := s.conn.QueryRow(ctx, sql.String(), args...).Scan(dest...); err != nil {
		return nil, nil, err
	}
	var tables []string
	for i, n := range names {
		if found[i] {
			tables = append(tables, n)
		}
	}
	return histories, tables, nil
}

// CreateHistory creates the history table of track t and its index unless they exist.
func (s *migrationSession) CreateHistory(ctx context.Context, t migrations.Track) error {
	h, err := pgHistoryOf(t)
	if err != nil {
		return err
	}
	_, err = s.conn.Exec(ctx, h.create)
	return err
}

// ReadHistory returns the rows of the history table of track t.
func (s *migrationSession) ReadHistory(ctx context.Context, t migrations.Track) ([]store.HistoryRow, error) {
	h, err := pgHistoryOf(t)
	if err != nil {
		return nil, err
	}
	rows, err := s.conn.Query(ctx, h.read, pgx.QueryExecModeExec)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.HistoryRow, error) {
		var h store.HistoryRow
		err := r.Scan(&h.InstalledRank, &h.Version, &h.Description, &h.Type, &h.Script, &h.Success)
		return h, err
	})
}

// ReadHistories returns the rows of the history table of each track in one statement: the
// tables' reads joined by UNION ALL, each row tagged with the index of its track.
func (s *migrationSession) ReadHistories(ctx context.Context, tracks []migrations.Track) ([][]store.HistoryRow, error) {
	var sql strings.Builder
	for i, t := range tracks {
		if _, err := pgHistoryOf(t); err != nil {
			return nil, err
		}
		if i > 0 {
			sql.WriteString("\nUNION ALL\n")
		}
		fmt.Fprintf(&sql, pgReadTagged, i, t.HistoryTable())
	}
	rows, err := s.conn.Query(ctx, sql.String(), pgx.QueryExecModeExec)
	if err != nil {
		return nil, err
	}
	out := make([][]store.HistoryRow, len(tracks))
	var track int
	var h store.HistoryRow
	_, err = pgx.ForEachRow(rows, []any{&track, &h.InstalledRank, &h.Version, &h.Description, &h.Type, &h.Script, &h.Success}, func() error {
		if track < 0 || track >= len(tracks) {
			return fmt.Errorf("a history row of an unknown track %d", track)
		}
		out[track] = append(out[track], h)
		return nil
	})
	return out, err
}

// Apply runs m and inserts its history row in one transaction.
func (s *migrationSession) Apply(ctx context.Context, m migrations.Migration, rank int, installedBy string) error {
	h, err := pgHistoryOf(m.InTrack())
	if err != nil {
		return err
	}
	return s.inTx(ctx, func(tx pgx.Tx) error {
		start := time.Now()
		if _, err := tx.Exec(ctx, m.SQL); err != nil {
			return err
		}
		elapsed := time.Since(start).Milliseconds()
		checksum := migrations.Checksum(m.SQL)
		_, err := tx.Exec(ctx, h.insert, rank, strconv.Itoa(m.Version), store.HistoryDescription(m.Description),
			"SQL", m.Script, &checksum, installedBy, int32(min(elapsed, 1<<31-1)))
		if err != nil {
			return fmt.Errorf("recording V%d in %s: %w", m.Version, m.InTrack().HistoryTable(), err)
		}
		return nil
	})
}

// Baseline inserts one BASELINE row per migration in one transaction.
func (s *migrationSession) Baseline(ctx context.Context, ms []migrations.Migration, installedBy string) error {
	return s.inTx(ctx, func(tx pgx.Tx) error {
		for i, m := range ms {
			h, err := pgHistoryOf(m.InTrack())
			if err != nil {
				return err
			}
			_, err = tx.Exec(ctx, h.insert, i+1, strconv.Itoa(m.Version), store.HistoryDescription(m.Description),
				"BASELINE", m.Script, (*int32)(nil), installedBy, int32(0))
			if err != nil {
				return err
			}
		}
		return nil
	})
}

// MoveToQueueBox moves a row of flyway_schema_history to queuebox_schema_history in one
// transaction; see store.MigrationSession.
func (s *migrationSession) MoveToQueueBox(ctx context.Context, fromRank int, m migrations.Migration, toRank int) error {
	return s.inTx(ctx, func(tx pgx.Tx) error {
		if toRank > 0 {
			checksum := migrations.Checksum(m.SQL)
			tag, err := tx.Exec(ctx, pgMoveInsert, toRank, strconv.Itoa(m.Version), store.HistoryDescription(m.Description),
				m.Script, checksum, fromRank)
			if err != nil {
				return fmt.Errorf("recording V%d in %s: %w", m.Version, store.QueueBoxHistoryTable, err)
			}
			if tag.RowsAffected() != 1 {
				return fmt.Errorf("recording V%d in %s: %s has no row of installed_rank %d",
					m.Version, store.QueueBoxHistoryTable, store.MigrationHistoryTable, fromRank)
			}
		}
		if _, err := tx.Exec(ctx, pgMoveDelete, fromRank); err != nil {
			return fmt.Errorf("deleting installed_rank %d of %s: %w", fromRank, store.MigrationHistoryTable, err)
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
