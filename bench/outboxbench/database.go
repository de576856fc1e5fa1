package outboxbench

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
	// admin is a small pool for the bench's own statements (setup, checks); the poller of
	// each run opens its own pool.
	admin *pgxpool.Pool
}

// createDatabase creates qb_bench_<random> on the server and applies the PostgreSQL
// migrations in version order, as an operator would with psql.
func createDatabase(ctx context.Context, server string) (*benchDatabase, error) {
	conn, err := pgx.Connect(ctx, server)
	if err != nil {
		return nil, fmt.Errorf("connecting to PostgreSQL at %s (start it with: pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start, or set QUEUEBOX_TEST_DATABASE_URL): %w", redactURL(server), err)
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
	cfg.MaxConns = 4
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

// The bench database is migrated with the default names, so its statements name the outbox
// table and its columns as the migrations create them.

// resetOutbox empties the outbox and its sequence between runs, so every run starts from the
// same table.
func (db *benchDatabase) resetOutbox(ctx context.Context) error {
	if _, err := db.admin.Exec(ctx, `TRUNCATE outbox`); err != nil {
		return fmt.Errorf("truncating the outbox: %w", err)
	}
	return nil
}

// insertBacklog writes rows pending outbox rows in one statement. With keys above 0 the key
// of row g is 'k' || (g % keys); otherwise the key is null. The rows share one created_at and
// scheduled_at (one transaction), the hardest case for the claim's ordered scan. The table is
// vacuumed and analysed afterwards, so every run starts with the same statistics.
func (db *benchDatabase) insertBacklog(ctx context.Context, rows, keys int) error {
	_, err := db.admin.Exec(ctx, `
INSERT INTO outbox (topic, key, payload)
SELECT 'orders.created',
       CASE WHEN $2::int > 0 THEN 'k' || (g % $2::int) END,
       jsonb_build_object('orderId', g, 'amount', 1999, 'currency', 'EUR')
FROM generate_series(1, $1::int) AS g`, rows, keys)
	if err != nil {
		return fmt.Errorf("inserting the backlog: %w", err)
	}
	if _, err := db.admin.Exec(ctx, `VACUUM ANALYZE outbox`); err != nil {
		return fmt.Errorf("vacuuming the outbox: %w", err)
	}
	return nil
}

// vacuum vacuums and analyses the outbox.
func (db *benchDatabase) vacuum(ctx context.Context) error {
	if _, err := db.admin.Exec(ctx, `VACUUM ANALYZE outbox`); err != nil {
		return fmt.Errorf("vacuuming the outbox: %w", err)
	}
	return nil
}

// stateCounts returns the number of outbox rows per state.
func (db *benchDatabase) stateCounts(ctx context.Context) (map[string]int, error) {
	rows, err := db.admin.Query(ctx, `SELECT state, count(*)::int FROM outbox GROUP BY state`)
	if err != nil {
		return nil, fmt.Errorf("counting outbox rows: %w", err)
	}
	out := map[string]int{}
	var state string
	var n int
	_, err = pgx.ForEachRow(rows, []any{&state, &n}, func() error {
		out[state] = n
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("counting outbox rows: %w", err)
	}
	return out, nil
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
WHERE name IN ('fsync', 'synchronous_commit', 'wal_sync_method', 'commit_delay', 'shared_buffers',
               'max_connections', 'max_wal_size', 'full_page_writes', 'jit')`)
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

// backendPIDs returns the server processes connected to the bench database.
func (db *benchDatabase) backendPIDs(ctx context.Context) ([]int, error) {
	rows, err := db.admin.Query(ctx, `SELECT pid FROM pg_stat_activity WHERE datname = current_database()`)
	if err != nil {
		return nil, fmt.Errorf("listing backends: %w", err)
	}
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		return nil, fmt.Errorf("listing backends: %w", err)
	}
	out := make([]int, len(pids))
	for i, p := range pids {
		out[i] = int(p)
	}
	return out, nil
}

func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(unparseable URL)"
	}
	return u.Redacted()
}
