// Package dbtest gives tests a private PostgreSQL database: each call creates a fresh
// database on the server named by QUEUEBOX_TEST_DATABASE_URL (default
// postgres://postgres@127.0.0.1:5432/postgres), and drops it when the test ends, so tests and
// packages run in parallel without seeing each other's rows.
//
// When the server does not answer, the test fails with a message that says how to start it.
//
// It is the test helper of the PostgreSQL dialect, so it lives in the dialect's folder
// (shared/store/postgres) with the other code that imports pgx.
package dbtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	_ "github.com/jackc/pgx/v5/stdlib" // registers SQLDriverName with database/sql

	"github.com/alternayte/queuebox/migrations"
)

// SQLDriverName is the database/sql driver of pgx (github.com/jackc/pgx/v5/stdlib), which
// this package registers. Tests of dialect-neutral database/sql code (shared/store/sqlpool)
// open the test server with it, on the code path that SQL Server takes with go-mssqldb,
// without importing pgx themselves.
const SQLDriverName = "pgx"

// DefaultURL is the server that tests use when QUEUEBOX_TEST_DATABASE_URL is not set.
const DefaultURL = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"

// StartHint tells a developer how to start the PostgreSQL server of the tests.
const StartHint = "start it with: pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start " +
	"(or set QUEUEBOX_TEST_DATABASE_URL to a server where the user may CREATE DATABASE)"

// ServerURL returns the URL of the test server.
func ServerURL() string {
	if u := os.Getenv("QUEUEBOX_TEST_DATABASE_URL"); u != "" {
		return u
	}
	return DefaultURL
}

var unsafeName = regexp.MustCompile(`[^a-z0-9_]+`)

// NewDatabase creates an empty database for the test and returns its URL. The database is
// dropped when the test and its subtests end.
func NewDatabase(t testing.TB) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	server := ServerURL()
	admin, err := pgx.Connect(ctx, server)
	if err != nil {
		t.Fatalf("dbtest: PostgreSQL at %s does not answer (%v); %s", redactURL(server), err, StartHint)
	}
	defer admin.Close(ctx)

	var suffix [6]byte
	_, _ = rand.Read(suffix[:])
	name := "qbt_" + unsafeName.ReplaceAllString(strings.ToLower(t.Name()), "_")
	if len(name) > 40 {
		name = name[:40]
	}
	name += "_" + hex.EncodeToString(suffix[:])
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		t.Fatalf("dbtest: creating database %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, server)
		if err != nil {
			t.Logf("dbtest: dropping database %s: %v", name, err)
			return
		}
		defer c.Close(ctx)
		if _, err := c.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
			t.Logf("dbtest: dropping database %s: %v", name, err)
		}
	})
	u, err := url.Parse(server)
	if err != nil {
		t.Fatalf("dbtest: parsing %s: %v", redactURL(server), err)
	}
	u.Path = "/" + name
	return u.String()
}

// NewPool creates a fresh database, opens a pool on it and closes the pool when the test ends.
func NewPool(t testing.TB, dbURL string) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(dbURL)
	if err != nil {
		t.Fatalf("dbtest: parsing %s: %v", redactURL(dbURL), err)
	}
	if cfg.MaxConns < 20 {
		cfg.MaxConns = 20
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatalf("dbtest: opening pool: %v", err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// Migrated creates a fresh database, applies every bundled PostgreSQL migration file in version
// order, the main track then the QueueBox track (migrations.ListAll), as an operator would with
// psql, and returns a pool on it. It writes no history.
func Migrated(t testing.TB) (*pgxpool.Pool, string) {
	t.Helper()
	dbURL := NewDatabase(t)
	pool := NewPool(t, dbURL)
	list, err := migrations.ListAll(migrations.PostgreSQL)
	if err != nil {
		t.Fatalf("dbtest: %v", err)
	}
	ctx := context.Background()
	for _, m := range list {
		if _, err := pool.Exec(ctx, m.SQL); err != nil {
			t.Fatalf("dbtest: applying %s: %v", m.Script, err)
		}
	}
	return pool, dbURL
}

func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(unparseable URL)"
	}
	return u.Redacted()
}

// Exec runs statements on the pool and fails the test on error.
func Exec(t testing.TB, pool *pgxpool.Pool, sql string, args ...any) {
	t.Helper()
	if _, err := pool.Exec(context.Background(), sql, args...); err != nil {
		t.Fatalf("dbtest: %s: %v", firstLine(sql), err)
	}
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > 80 {
		s = s[:80]
	}
	return fmt.Sprintf("%q", s)
}

// RenewalSecret is in the error of a renewal that RefuseRenewals refuses, as a password may be
// in a driver's error text: a test checks that no log line shows it.
const RenewalSecret = "hunter2"

// RefuseRenewals makes PostgreSQL refuse every lease renewal of table with an error that holds
// RenewalSecret: an update that keeps a row processing under the same claim token and moves
// its lease_expires_at. The claim (pending to processing) and the finishing writes (which
// leave processing, or clear the token) pass.
func RefuseRenewals(t testing.TB, pool *pgxpool.Pool, table string) {
	t.Helper()
	Exec(t, pool, fmt.Sprintf(`
CREATE FUNCTION qb_test_refuse_renewal() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'lease renewal refused by the test (password=%s)';
END $$;
CREATE TRIGGER qb_test_refuse_renewal BEFORE UPDATE ON %s FOR EACH ROW
WHEN (OLD.state = 'processing' AND NEW.state = 'processing'
      AND OLD.claim_token IS NOT DISTINCT FROM NEW.claim_token
      AND NEW.lease_expires_at IS DISTINCT FROM OLD.lease_expires_at)
EXECUTE FUNCTION qb_test_refuse_renewal();`, RenewalSecret, pgx.Identifier{table}.Sanitize()))
}
