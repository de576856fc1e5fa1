// Package benchdb gives a benchmark its private PostgreSQL database: created on the server as
// qb_bench_<random>, migrated with the bundled files in version order, and dropped at the end.
package benchdb

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"time"

	"github.com/alternayte/queuebox/migrations"
	"github.com/alternayte/queuebox/shared/store/postgres/pgtool"
)

// Database is the private database of one bench run.
type Database struct {
	// Server is the URL of the server's maintenance database.
	Server string
	// Name is the database name and URL its connection string.
	Name, URL string
	// Admin is a small pool for the bench's own statements (setup, checks); QueueBox opens
	// its own pool.
	Admin *pgtool.Pool
	logf  func(format string, args ...any)
}

// Create creates qb_bench_<random> on the server and applies the PostgreSQL migrations of both
// tracks in version order, as an operator would with psql. adminConns sizes the Admin pool; logf
// receives the problems of Drop.
func Create(ctx context.Context, server string, adminConns int32, logf func(format string, args ...any)) (*Database, error) {
	var suffix [6]byte
	_, _ = rand.Read(suffix[:])
	name := "qb_bench_" + hex.EncodeToString(suffix[:])
	if err := pgtool.CreateDatabase(ctx, server, name); err != nil {
		if ce, ok := errors.AsType[*pgtool.ConnectError](err); ok {
			return nil, fmt.Errorf("connecting to PostgreSQL at %s (start it with: pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start, or set QUEUEBOX_TEST_DATABASE_URL): %w", RedactURL(server), ce.Err)
		}
		return nil, fmt.Errorf("creating database %s: %w", name, err)
	}
	u, err := url.Parse(server)
	if err != nil {
		return nil, fmt.Errorf("parsing the server URL: %w", err)
	}
	u.Path = "/" + name
	db := &Database{Server: server, Name: name, URL: u.String(), logf: logf}

	if db.Admin, err = pgtool.OpenPool(ctx, db.URL, pgtool.PoolOptions{MaxConns: adminConns}); err != nil {
		db.Drop()
		return nil, fmt.Errorf("opening the admin pool: %w", err)
	}
	list, err := migrations.ListAll(migrations.PostgreSQL)
	if err != nil {
		db.Drop()
		return nil, fmt.Errorf("listing migrations: %w", err)
	}
	for _, m := range list {
		if _, err := db.Admin.Exec(ctx, m.SQL); err != nil {
			db.Drop()
			return nil, fmt.Errorf("applying %s: %w", m.Script, err)
		}
	}
	return db, nil
}

// Drop closes the admin pool and drops the database, whatever state the run left it in.
func (db *Database) Drop() {
	if db.Admin != nil {
		db.Admin.Close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := pgtool.DropDatabase(ctx, db.Server, db.Name); err != nil {
		db.logf("dropping database %s: %v", db.Name, err)
	}
}

// ServerInfo is the server's version and the settings that bound commits, as the reports
// hold them (ServerFacts reads them).
type ServerInfo struct {
	Version  string            `json:"version"`
	Settings map[string]string `json:"settings"`
}

// ServerFacts returns the server version and the settings that bound the commit rate.
func (db *Database) ServerFacts(ctx context.Context) (string, map[string]string, error) {
	var version string
	if err := db.Admin.QueryRow(ctx, `SHOW server_version`).Scan(&version); err != nil {
		return "", nil, fmt.Errorf("reading the server version: %w", err)
	}
	rows, err := db.Admin.Query(ctx, `
SELECT name, setting || COALESCE(unit, '')
FROM pg_settings
WHERE name IN ('fsync', 'synchronous_commit', 'wal_sync_method', 'commit_delay', 'shared_buffers',
               'max_connections', 'max_wal_size', 'full_page_writes', 'jit')`)
	if err != nil {
		return "", nil, fmt.Errorf("reading server settings: %w", err)
	}
	settings := map[string]string{}
	var name, value string
	err = pgtool.ForEachRow(rows, []any{&name, &value}, func() error {
		settings[name] = value
		return nil
	})
	if err != nil {
		return "", nil, fmt.Errorf("reading server settings: %w", err)
	}
	return version, settings, nil
}

// BackendPIDs returns the server processes connected to the bench database.
func (db *Database) BackendPIDs(ctx context.Context) ([]int, error) {
	return db.backendPIDs(ctx, `SELECT pid FROM pg_stat_activity WHERE datname = current_database()`)
}

// ApplicationPIDs returns the server processes connected to the bench database whose
// connections named themselves application (the application_name parameter).
func (db *Database) ApplicationPIDs(ctx context.Context, application string) ([]int, error) {
	return db.backendPIDs(ctx, `SELECT pid FROM pg_stat_activity WHERE application_name = $1 AND datname = current_database()`, application)
}

func (db *Database) backendPIDs(ctx context.Context, query string, args ...any) ([]int, error) {
	rows, err := db.Admin.Query(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("listing backends: %w", err)
	}
	pids, err := pgtool.CollectRows[int32](rows)
	if err != nil {
		return nil, fmt.Errorf("listing backends: %w", err)
	}
	out := make([]int, len(pids))
	for i, p := range pids {
		out[i] = int(p)
	}
	return out, nil
}

// RedactURL returns the URL with its password masked.
func RedactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(unparseable URL)"
	}
	return u.Redacted()
}
