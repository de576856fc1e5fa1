package sqlserver

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"strconv"
	"time"

	"github.com/alternayte/queuebox/migrations"
	"github.com/alternayte/queuebox/shared/store"
)

// MigrationLockResource is the resource name of the application lock that a migration run
// holds on SQL Server (sp_getapplock, Exclusive, Session owner).
const MigrationLockResource = "queuebox:migrate"

const (
	// msSessionSettings are the SET options that a filtered index needs, plus XACT_ABORT so
	// that an error in a batch ends the transaction of the migration. They are sent as a plain
	// batch (no parameters), so they hold for the session.
	msSessionSettings = `SET ANSI_NULLS ON;
SET ANSI_PADDING ON;
SET ANSI_WARNINGS ON;
SET ARITHABORT ON;
SET CONCAT_NULL_YIELDS_NULL ON;
SET QUOTED_IDENTIFIER ON;
SET NUMERIC_ROUNDABORT OFF;
SET XACT_ABORT ON;`

	// msGetLock takes the application lock. @lock_result is a local variable; the one bound
	// parameter is @lock_timeout_ms (a local variable must not share a bound parameter's name).
	msGetLock = `DECLARE @lock_result INT;
EXEC @lock_result = sp_getapplock @Resource = N'` + MigrationLockResource + `', @LockMode = N'Exclusive', @LockOwner = N'Session', @LockTimeout = @lock_timeout_ms;
SELECT @lock_result;`

	msReleaseLock = `EXEC sp_releaseapplock @Resource = N'` + MigrationLockResource + `', @LockOwner = N'Session';`

	msTableExists = `SELECT CASE WHEN OBJECT_ID(QUOTENAME(@table_name), N'U') IS NULL THEN 0 ELSE 1 END;`
)

// msHistory holds the statements of one track's history table.
type msHistory struct {
	exists, create, createIndex, read, insert string
}

// msHistories are the statements of each track's history table. The table names are
// constants of package migrations, never input.
var msHistories = map[migrations.Track]msHistory{
	migrations.Main:     msHistoryStatements(migrations.Main.HistoryTable()),
	migrations.QueueBox: msHistoryStatements(migrations.QueueBox.HistoryTable()),
}

// msHistoryStatements returns the statements of the history table named table: Flyway's own
// history table for SQL Server, one statement per batch.
func msHistoryStatements(table string) msHistory {
	return msHistory{
		exists: `SELECT CASE WHEN OBJECT_ID(N'dbo.` + table + `', N'U') IS NULL THEN 0 ELSE 1 END;`,
		create: `IF OBJECT_ID(N'dbo.` + table + `', N'U') IS NULL
    CREATE TABLE dbo.` + table + ` (
        [installed_rank] INT NOT NULL,
        [version] NVARCHAR(50) NULL,
        [description] NVARCHAR(200) NULL,
        [type] NVARCHAR(20) NOT NULL,
        [script] NVARCHAR(1000) NOT NULL,
        [checksum] INT NULL,
        [installed_by] NVARCHAR(100) NOT NULL,
        [installed_on] DATETIME NOT NULL DEFAULT GETDATE(),
        [execution_time] INT NOT NULL,
        [success] BIT NOT NULL,
        CONSTRAINT [` + table + `_pk] PRIMARY KEY ([installed_rank])
    );`,
		createIndex: `IF NOT EXISTS (SELECT 1 FROM sys.indexes WHERE object_id = OBJECT_ID(N'dbo.` + table + `') AND name = N'` + table + `_s_idx')
    CREATE INDEX [` + table + `_s_idx] ON dbo.` + table + ` ([success]);`,
		read: `SELECT [installed_rank], COALESCE([version], N''), COALESCE([description], N''), [type], [script], [success]
FROM dbo.` + table + ` ORDER BY [installed_rank];`,
		insert: `INSERT INTO dbo.` + table + `
    ([installed_rank], [version], [description], [type], [script], [checksum], [installed_by], [execution_time], [success])
VALUES (@installed_rank, @version, @description, @type, @script, @checksum,
    COALESCE(NULLIF(@installed_by, N''), LEFT(SUSER_SNAME(), 100)), @execution_time, 1);`,
	}
}

func msHistoryOf(t migrations.Track) (msHistory, error) {
	h, ok := msHistories[t]
	if !ok {
		return msHistory{}, fmt.Errorf("no history table for the migration track %q", t)
	}
	return h, nil
}

// The statements of the main track's history table, flyway_schema_history.
var (
	msHistoryExists      = msHistories[migrations.Main].exists
	msCreateHistory      = msHistories[migrations.Main].create
	msCreateHistoryIndex = msHistories[migrations.Main].createIndex
	msReadHistory        = msHistories[migrations.Main].read
	msInsertHistory      = msHistories[migrations.Main].insert
)

const (
	// msMoveInsert copies a row of flyway_schema_history (a migration that moved to the
	// QueueBox track) into queuebox_schema_history under the QueueBox track's version, keeping
	// who applied it, when, and how long it took.
	msMoveInsert = `INSERT INTO dbo.queuebox_schema_history
    ([installed_rank], [version], [description], [type], [script], [checksum], [installed_by], [installed_on], [execution_time], [success])
SELECT @to_rank, @version, @description, [type], @script, CASE WHEN [type] = N'SQL' THEN @checksum END,
    [installed_by], [installed_on], [execution_time], [success]
FROM dbo.flyway_schema_history WHERE [installed_rank] = @from_rank;`
	msMoveDelete = `DELETE FROM dbo.flyway_schema_history WHERE [installed_rank] = @from_rank;`
)

// NewMigrationBackend returns the SQL Server backend of the migration runner (shared/migrate)
// on db (database/sql with go-mssqldb): each session is one connection of the pool, with the
// SET options that the files need, and the migration lock is the Session-owned application
// lock MigrationLockResource. Open returns it as store.Driver.Migration.
func NewMigrationBackend(db *sql.DB) store.MigrationBackend {
	return &migrationBackend{db: db}
}

type migrationBackend struct{ db *sql.DB }

// Dialect returns migrations.SQLServer.
func (d *migrationBackend) Dialect() migrations.Dialect { return migrations.SQLServer }

// Open takes a connection of the pool, sets its session options and, with lockTimeout > 0,
// takes the migration lock.
func (d *migrationBackend) Open(ctx context.Context, lockTimeout time.Duration) (store.MigrationSession, error) {
	conn, err := d.db.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("acquiring a connection for migrations: %w", err)
	}
	s := &migrationSession{conn: conn}
	if _, err := conn.ExecContext(ctx, msSessionSettings); err != nil {
		_ = conn.Close()
		return nil, fmt.Errorf("setting the session options of the migrations: %w", err)
	}
	if lockTimeout > 0 {
		if err := s.lock(ctx, lockTimeout); err != nil {
			s.discard()
			return nil, err
		}
		s.locked = true
	}
	return s, nil
}

// migrationSession is one connection of the pool; the application lock belongs to its session.
type migrationSession struct {
	conn   *sql.Conn
	locked bool
}

func (s *migrationSession) lock(ctx context.Context, timeout time.Duration) error {
	ms := min(timeout.Milliseconds(), 1<<31-1)
	var result int
	if err := s.conn.QueryRowContext(ctx, msGetLock, sql.Named("lock_timeout_ms", int32(ms))).Scan(&result); err != nil {
		return fmt.Errorf("taking the migration lock: %w", err)
	}
	return lockResult(result, timeout)
}

// lockResult turns the return code of sp_getapplock into an error.
func lockResult(code int, timeout time.Duration) error {
	switch {
	case code >= 0:
		return nil
	case code == -1:
		return fmt.Errorf("%w: another process held the SQL Server application lock %s for more than %s",
			store.ErrMigrationLockTimeout, MigrationLockResource, timeout)
	case code == -2:
		return fmt.Errorf("taking the migration lock: sp_getapplock was cancelled (%d)", code)
	case code == -3:
		return fmt.Errorf("taking the migration lock: sp_getapplock chose this session as a deadlock victim (%d)", code)
	default:
		return fmt.Errorf("taking the migration lock: sp_getapplock returned %d", code)
	}
}

// Close releases the lock, if held, and the connection.
func (s *migrationSession) Close(ctx context.Context) {
	if !s.locked {
		_ = s.conn.Close()
		return
	}
	rctx, cancel := releaseContext(ctx)
	defer cancel()
	if _, err := s.conn.ExecContext(rctx, msReleaseLock); err != nil {
		// The session may still hold the lock: dropping the connection ends the session.
		s.discard()
		return
	}
	_ = s.conn.Close()
}

// discard closes the connection instead of returning it to the pool, which ends its session
// and every Session-owned lock with it.
func (s *migrationSession) discard() {
	_ = s.conn.Raw(func(any) error { return driver.ErrBadConn })
	_ = s.conn.Close()
}

// HistoryExists reports whether the history table of track t exists.
func (s *migrationSession) HistoryExists(ctx context.Context, t migrations.Track) (bool, error) {
	h, err := msHistoryOf(t)
	if err != nil {
		return false, err
	}
	var n int
	err = s.conn.QueryRowContext(ctx, h.exists).Scan(&n)
	return n == 1, err
}

// CreateHistory creates the history table of track t and its index unless they exist.
func (s *migrationSession) CreateHistory(ctx context.Context, t migrations.Track) error {
	h, err := msHistoryOf(t)
	if err != nil {
		return err
	}
	return s.inTx(ctx, func(tx *sql.Tx) error {
		for _, q := range []string{h.create, h.createIndex} {
			if _, err := tx.ExecContext(ctx, q); err != nil {
				return err
			}
		}
		return nil
	})
}

// ReadHistory returns the rows of the history table of track t.
func (s *migrationSession) ReadHistory(ctx context.Context, t migrations.Track) ([]store.HistoryRow, error) {
	h, err := msHistoryOf(t)
	if err != nil {
		return nil, err
	}
	rows, err := s.conn.QueryContext(ctx, h.read)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []store.HistoryRow
	for rows.Next() {
		var h store.HistoryRow
		if err := rows.Scan(&h.InstalledRank, &h.Version, &h.Description, &h.Type, &h.Script, &h.Success); err != nil {
			return nil, err
		}
		out = append(out, h)
	}
	return out, rows.Err()
}

// Apply runs the batches of m and inserts its history row in one transaction.
func (s *migrationSession) Apply(ctx context.Context, m migrations.Migration, rank int, installedBy string) error {
	h, err := msHistoryOf(m.InTrack())
	if err != nil {
		return err
	}
	return s.inTx(ctx, func(tx *sql.Tx) error {
		start := time.Now()
		for i, b := range migrations.SplitBatches(m.SQL) {
			if _, err := tx.ExecContext(ctx, b); err != nil {
				return fmt.Errorf("batch %d: %w", i+1, err)
			}
		}
		elapsed := time.Since(start).Milliseconds()
		err := insertMSHistory(ctx, tx, h.insert, rank, m, "SQL", sql.NullInt32{Int32: migrations.Checksum(m.SQL), Valid: true},
			installedBy, int32(min(elapsed, 1<<31-1)))
		if err != nil {
			return fmt.Errorf("recording V%d in %s: %w", m.Version, m.InTrack().HistoryTable(), err)
		}
		return nil
	})
}

// Baseline inserts one BASELINE row per migration in one transaction.
func (s *migrationSession) Baseline(ctx context.Context, ms []migrations.Migration, installedBy string) error {
	return s.inTx(ctx, func(tx *sql.Tx) error {
		for i, m := range ms {
			h, err := msHistoryOf(m.InTrack())
			if err != nil {
				return err
			}
			if err := insertMSHistory(ctx, tx, h.insert, i+1, m, "BASELINE", sql.NullInt32{}, installedBy, 0); err != nil {
				return err
			}
		}
		return nil
	})
}

// MoveToQueueBox moves a row of flyway_schema_history to queuebox_schema_history in one
// transaction; see store.MigrationSession.
func (s *migrationSession) MoveToQueueBox(ctx context.Context, fromRank int, m migrations.Migration, toRank int) error {
	return s.inTx(ctx, func(tx *sql.Tx) error {
		if toRank > 0 {
			res, err := tx.ExecContext(ctx, msMoveInsert,
				sql.Named("to_rank", int32(toRank)),
				sql.Named("version", strconv.Itoa(m.Version)),
				sql.Named("description", store.HistoryDescription(m.Description)),
				sql.Named("script", m.Script),
				sql.Named("checksum", migrations.Checksum(m.SQL)),
				sql.Named("from_rank", int32(fromRank)),
			)
			if err != nil {
				return fmt.Errorf("recording V%d in %s: %w", m.Version, store.QueueBoxHistoryTable, err)
			}
			if n, err := res.RowsAffected(); err == nil && n != 1 {
				return fmt.Errorf("recording V%d in %s: %s has no row of installed_rank %d",
					m.Version, store.QueueBoxHistoryTable, store.MigrationHistoryTable, fromRank)
			}
		}
		if _, err := tx.ExecContext(ctx, msMoveDelete, sql.Named("from_rank", int32(fromRank))); err != nil {
			return fmt.Errorf("deleting installed_rank %d of %s: %w", fromRank, store.MigrationHistoryTable, err)
		}
		return nil
	})
}

func insertMSHistory(ctx context.Context, tx *sql.Tx, insert string, rank int, m migrations.Migration, typ string,
	checksum sql.NullInt32, installedBy string, elapsedMs int32) error {
	_, err := tx.ExecContext(ctx, insert,
		sql.Named("installed_rank", int32(rank)),
		sql.Named("version", strconv.Itoa(m.Version)),
		sql.Named("description", store.HistoryDescription(m.Description)),
		sql.Named("type", typ),
		sql.Named("script", m.Script),
		sql.Named("checksum", checksum),
		sql.Named("installed_by", installedBy),
		sql.Named("execution_time", elapsedMs),
	)
	return err
}

// TablesPresent returns the names of the tables that exist, in the order given.
func (s *migrationSession) TablesPresent(ctx context.Context, names []string) ([]string, error) {
	var out []string
	for _, n := range names {
		var ok int
		if err := s.conn.QueryRowContext(ctx, msTableExists, sql.Named("table_name", n)).Scan(&ok); err != nil {
			return nil, err
		}
		if ok == 1 {
			out = append(out, n)
		}
	}
	return out, nil
}

func (s *migrationSession) inTx(ctx context.Context, fn func(*sql.Tx) error) error {
	tx, err := s.conn.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		// With XACT_ABORT ON the server may have rolled back already; the error of this
		// rollback adds nothing to err.
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}

// releaseContext returns a context for releasing a lock after ctx may have ended.
func releaseContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
}
