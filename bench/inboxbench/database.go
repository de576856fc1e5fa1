package inboxbench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/alternayte/queuebox/migrations"
)

// benchDatabase is the private database of one bench run: created on the server, migrated,
// and dropped at the end.
type benchDatabase struct {
	server string
	name   string
	url    string
	// admin is a small pool for the bench's own statements (setup, counts); QueueBox opens
	// its own pool.
	admin *pgxpool.Pool
}

// createDatabase creates qb_bench_<random> on the server and applies the PostgreSQL
// migrations in version order, as an operator would with psql.
func createDatabase(ctx context.Context, server string) (*benchDatabase, error) {
	conn, err := pgx.Connect(ctx, server)
	if err != nil {
		return nil, fmt.Errorf("connecting to PostgreSQL at %s (start it, or set QUEUEBOX_TEST_DATABASE_URL): %w", redactURL(server), err)
	}
	defer conn.Close(ctx)
	var suffix [6]byte
	_, _ = rand.Read(suffix[:])
	name := "qb_bench_" + hex.EncodeToString(suffix[:])
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return nil, fmt.Errorf("creating database %s: %w", name, err)
	}
	u, err := url.Parse(server)
	if err != nil {
		return nil, fmt.Errorf("parsing the server URL: %w", err)
	}
	u.Path = "/" + name
	db := &benchDatabase{server: server, name: name, url: u.String()}

	cfg, err := pgxpool.ParseConfig(db.url)
	if err != nil {
		db.drop()
		return nil, fmt.Errorf("parsing the database URL: %w", err)
	}
	cfg.MaxConns = 2
	if db.admin, err = pgxpool.NewWithConfig(ctx, cfg); err != nil {
		db.drop()
		return nil, fmt.Errorf("opening the admin pool: %w", err)
	}
	list, err := migrations.List(migrations.PostgreSQL)
	if err != nil {
		db.drop()
		return nil, fmt.Errorf("listing migrations: %w", err)
	}
	for _, m := range list {
		if _, err := db.admin.Exec(ctx, m.SQL); err != nil {
			db.drop()
			return nil, fmt.Errorf("applying %s: %w", m.Script, err)
		}
	}
	return db, nil
}

// drop closes the admin pool and drops the database, whatever state the run left it in.
func (db *benchDatabase) drop() {
	if db.admin != nil {
		db.admin.Close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, db.server)
	if err != nil {
		logf("dropping database %s: %v", db.name, err)
		return
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{db.name}.Sanitize()+" WITH (FORCE)"); err != nil {
		logf("dropping database %s: %v", db.name, err)
	}
}

// The bench database is migrated with the default names, so its statements name the inbox
// table and its columns as the migrations create them.

// inboxCounts returns the number of inbox rows of the source and the number of distinct
// idempotency keys among them.
func (db *benchDatabase) inboxCounts(ctx context.Context, source string) (rows, distinct int, err error) {
	err = db.admin.QueryRow(ctx, `SELECT count(*)::int, count(DISTINCT idempotency_key)::int FROM inbox WHERE source = $1`, source).Scan(&rows, &distinct)
	if err != nil {
		return 0, 0, fmt.Errorf("counting inbox rows: %w", err)
	}
	return rows, distinct, nil
}

// serverFacts returns the server version and the settings that bound the commit rate.
func (db *benchDatabase) serverFacts(ctx context.Context) (string, map[string]string, error) {
	var version string
	if err := db.admin.QueryRow(ctx, `SHOW server_version`).Scan(&version); err != nil {
		return "", nil, fmt.Errorf("reading the server version: %w", err)
	}
	rows, err := db.admin.Query(ctx, `
SELECT name, setting || COALESCE(unit, '')
FROM pg_settings
WHERE name IN ('fsync', 'synchronous_commit', 'wal_sync_method', 'commit_delay', 'shared_buffers', 'max_connections')`)
	if err != nil {
		return "", nil, fmt.Errorf("reading server settings: %w", err)
	}
	settings := map[string]string{}
	var name, value string
	_, err = pgx.ForEachRow(rows, []any{&name, &value}, func() error {
		settings[name] = value
		return nil
	})
	if err != nil {
		return "", nil, fmt.Errorf("reading server settings: %w", err)
	}
	return version, settings, nil
}

// backendCPU returns the user + system seconds of each server process connected to the bench
// database, read from /proc, by process id.
func (db *benchDatabase) backendCPU(ctx context.Context) map[int]float64 {
	out := map[int]float64{}
	rows, err := db.admin.Query(ctx, `SELECT pid FROM pg_stat_activity WHERE datname = current_database()`)
	if err != nil {
		return out
	}
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		return out
	}
	for _, p := range pids {
		out[int(p)] = processCPU(int(p))
	}
	return out
}

func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(unparseable URL)"
	}
	return u.Redacted()
}

// userPassword returns the user and password of a URL, for database.username and
// database.password.
func userPassword(raw string) (user, password string, ok bool) {
	u, err := url.Parse(raw)
	if err != nil || u.User == nil {
		return "", "", false
	}
	p, _ := u.User.Password()
	return u.User.Username(), p, true
}
