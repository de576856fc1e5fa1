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

	msHistoryExists = `SELECT CASE WHEN OBJECT_ID(N'dbo.flyway_schema_history', N'U') IS NULL THEN 0 ELSE 1 END;`

	// msCreateHistory is Flyway's own history table for SQL Server, one statement per batch.
	msCreateHistory = `IF OBJECT_ID(N'dbo.flyway_schema_history', N'U') IS NULL
    CREATE TABLE dbo.flyway_schema_history (
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
        CONSTRAINT [flyway_schema_history_pk] PRIMARY KEY ([installed_rank])
    );`
	msCreateHistoryIndex = `IF NOT EXISTS (SELECT 1 FROM sys.indexes WHERE object_id = OBJECT_ID(N'dbo.flyway_schema_history') AND name = N'flyway_schema_history_s_idx')
    CREATE INDEX [flyway_schema_history_s_idx] ON dbo.flyway_schema_history ([success]);`

	msReadHistory = `SELECT [installed_rank], COALESCE([version], N''), COALESCE([description], N''), [type], [script], [success]
FROM dbo.flyway_schema_history ORDER BY [installed_rank];`

	msInsertHistory = `INSERT INTO dbo.flyway_schema_history
    ([installed_rank], [version], [description], [type], [script], [checksum], [installed_by], [execution_time], [success])
VALUES (@installed_rank, @version, @description, @type, @script, @checksum,
    COALESCE(NULLIF(@installed_by, N''), LEFT(SUSER_SNAME(), 100)), @execution_time, 1);`

	msTableExists = `SELECT CASE WHEN OBJECT_ID(QUOTENAME(@table_name), N'U') IS NULL THEN 0 ELSE 1 END;`
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

// HistoryExists reports whether dbo.flyway_schema_history exists.
func (s *migrationSession) HistoryExists(ctx context.Context) (bool, error) {
	var n int
	err := s.conn.QueryRowContext(ctx, msHistoryExists).Scan(&n)
	return n == 1, err
}

// CreateHistory creates dbo.flyway_schema_history and its index unless they exist.
func (s *migrationSession) CreateHistory(ctx context.Context) error {
	return s.inTx(ctx, func(tx *sql.Tx) error {
		for _, q := range []string{msCreateHistory, msCreateHistoryIndex} {
			if _, err := tx.ExecContext(ctx, q); err != nil {
				return err
			}
		}
		return nil
	})
}

// ReadHistory returns the rows of dbo.flyway_schema_history.
func (s *migrationSession) ReadHistory(ctx context.Context) ([]store.HistoryRow, error) {
	rows, err := s.conn.QueryContext(ctx, msReadHistory)
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
	return s.inTx(ctx, func(tx *sql.Tx) error {
		start := time.Now()
		for i, b := range migrations.SplitBatches(m.SQL) {
			if _, err := tx.ExecContext(ctx, b); err != nil {
				return fmt.Errorf("batch %d: %w", i+1, err)
			}
		}
		elapsed := time.Since(start).Milliseconds()
		err := insertMSHistory(ctx, tx, rank, m, "SQL", sql.NullInt32{Int32: migrations.Checksum(m.SQL), Valid: true},
			installedBy, int32(min(elapsed, 1<<31-1)))
		if err != nil {
			return fmt.Errorf("recording V%d in %s: %w", m.Version, store.MigrationHistoryTable, err)
		}
		return nil
	})
}

// Baseline inserts one BASELINE row per migration in one transaction.
func (s *migrationSession) Baseline(ctx context.Context, ms []migrations.Migration, installedBy string) error {
	return s.inTx(ctx, func(tx *sql.Tx) error {
		for i, m := range ms {
			if err := insertMSHistory(ctx, tx, i+1, m, "BASELINE", sql.NullInt32{}, installedBy, 0); err != nil {
				return err
			}
		}
		return nil
	})
}

func insertMSHistory(ctx context.Context, tx *sql.Tx, rank int, m migrations.Migration, typ string,
	checksum sql.NullInt32, installedBy string, elapsedMs int32) error {
	_, err := tx.ExecContext(ctx, msInsertHistory,
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
