package store

import (
	"context"
	"errors"
	"time"

	"github.com/alternayte/queuebox/migrations"
)

// MigrationHistoryTable is the name of the migration history table, Flyway's default
// (flyway_schema_history). On SQL Server it lives in the dbo schema; on PostgreSQL in the first
// schema of the search path.
const MigrationHistoryTable = "flyway_schema_history"

// ErrMigrationLockTimeout: another process held the migration lock for longer than the lock
// timeout that MigrationBackend.Open was given. Package migrate exports it as
// migrate.ErrLockTimeout.
var ErrMigrationLockTimeout = errors.New("migrate: timed out waiting for the migration lock")

// QueueBoxHistoryTable is the name of the history table of the QueueBox track
// (migrations.QueueBox): QueueBox's own tables, numbered on their own, with Flyway's columns.
const QueueBoxHistoryTable = "queuebox_schema_history"

// MigrationBackend is a dialect's side of the migration runner (shared/migrate): it opens
// sessions on one database, on which the runner reads and writes the history of each track
// (migrations.Track.HistoryTable) and applies the bundled files of package migrations. shared/store/postgres and shared/store/sqlserver
// implement it (their NewMigrationBackend, and Driver.Migration of their Open); the runner
// itself knows no dialect.
type MigrationBackend interface {
	// Dialect names the folder of package migrations whose files this backend applies.
	Dialect() migrations.Dialect
	// Open returns a session on one connection. With lockTimeout > 0 the session holds the
	// migration lock of the database until Close, and an error that wraps
	// ErrMigrationLockTimeout says that another process held it for longer than lockTimeout;
	// with 0 it takes no lock.
	Open(ctx context.Context, lockTimeout time.Duration) (MigrationSession, error)
}

// MigrationSession is one connection of a MigrationBackend, holding the migration lock when
// the run writes. The runner uses a session from one goroutine.
type MigrationSession interface {
	// HistoryExists reports whether the history table of track t exists.
	HistoryExists(ctx context.Context, t migrations.Track) (bool, error)
	// CreateHistory creates the history table of track t, with Flyway's columns, unless it
	// exists.
	CreateHistory(ctx context.Context, t migrations.Track) error
	// ReadHistory returns the rows of the history table of track t in any order.
	ReadHistory(ctx context.Context, t migrations.Track) ([]HistoryRow, error)
	// Apply runs m and inserts its history row into the history table of m.Track (type SQL,
	// installed_rank rank, the checksum of migrations.Checksum, installed_by installedBy or the
	// database user when empty) in one transaction.
	Apply(ctx context.Context, m migrations.Migration, rank int, installedBy string) error
	// Baseline inserts one BASELINE row per migration into the history table of their track,
	// ranks 1..n, checksum NULL, in one transaction.
	Baseline(ctx context.Context, ms []migrations.Migration, installedBy string) error
	// MoveToQueueBox moves the row of installed_rank fromRank of flyway_schema_history (a
	// migrations.Moved) to queuebox_schema_history, in one transaction: with toRank > 0 it
	// inserts the row of m there at toRank, keeping the type, installed_by, installed_on,
	// execution_time and success of the old row (the checksum is m's for type SQL, NULL
	// otherwise); then it deletes the old row. With toRank 0 it only deletes the old row (the
	// QueueBox history records m already).
	MoveToQueueBox(ctx context.Context, fromRank int, m migrations.Migration, toRank int) error
	// TablesPresent returns the names of the tables that exist, in the order given.
	TablesPresent(ctx context.Context, names []string) ([]string, error)
	// Close releases the lock and the connection.
	Close(ctx context.Context)
}

// MigrationProber is a MigrationSession that answers HistoryExists and TablesPresent in one
// round trip; the runner uses Probe when a session implements it.
type MigrationProber interface {
	MigrationSession
	// Probe reports whether the history table of each track exists (one answer per track, in
	// the order given) and returns the names of the tables that exist, in the order given.
	Probe(ctx context.Context, tracks []migrations.Track, names []string) (histories []bool, tables []string, err error)
	// ReadHistories returns the rows of the history table of each track, in the order given,
	// in one round trip. Each table must exist.
	ReadHistories(ctx context.Context, tracks []migrations.Track) ([][]HistoryRow, error)
}

// HistoryRow is one row of a history table, the columns that the runner reads.
type HistoryRow struct {
	// InstalledRank is installed_rank, the order in which the rows were written.
	InstalledRank int
	// Version is empty for a row without a version (Flyway's SCHEMA row, repeatable
	// migrations).
	Version string
	// Description is the description column.
	Description string
	// Type is SQL, BASELINE, or another Flyway type (DELETE, UNDO_SQL, SCHEMA).
	Type string
	// Script is the file name.
	Script string
	// Success is false for a migration that failed.
	Success bool
}

// HistoryDescription cuts a description to the width of the description column of a history
// table (200 characters).
func HistoryDescription(s string) string {
	if len(s) > 200 {
		return s[:200]
	}
	return s
}
