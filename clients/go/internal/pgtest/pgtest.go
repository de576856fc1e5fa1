// Package pgtest gives the tests and the benchmark of the Go pull client a private PostgreSQL
// database: a fresh database on the server of QUEUEBOX_TEST_DATABASE_URL (default
// postgres://postgres@127.0.0.1:5432/postgres), with the bundled migrations of the repository
// (migrations/postgresql/V*.sql) applied in version order, as an operator applies them with
// psql. It is internal: the library does not import it.
package pgtest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	// The pgx driver for database/sql, registered as "pgx".
	_ "github.com/jackc/pgx/v5/stdlib"
)

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

// Database is a private database on the test server.
type Database struct {
	// URL connects to the database.
	URL string
	// Name is the database name.
	Name string
}

var unsafeName = regexp.MustCompile(`[^a-z0-9_]+`)

// Create creates an empty database whose name starts with prefix.
func Create(ctx context.Context, prefix string) (Database, error) {
	server := ServerURL()
	admin, err := sql.Open("pgx", server)
	if err != nil {
		return Database{}, fmt.Errorf("opening %s: %w", redactURL(server), err)
	}
	defer admin.Close()
	if err := admin.PingContext(ctx); err != nil {
		return Database{}, fmt.Errorf("PostgreSQL at %s does not answer (%w); %s", redactURL(server), err, StartHint)
	}
	var suffix [6]byte
	_, _ = rand.Read(suffix[:])
	name := "qbc_" + unsafeName.ReplaceAllString(strings.ToLower(prefix), "_")
	if len(name) > 40 {
		name = name[:40]
	}
	name += "_" + hex.EncodeToString(suffix[:])
	if _, err := admin.ExecContext(ctx, `CREATE DATABASE "`+name+`"`); err != nil {
		return Database{}, fmt.Errorf("creating database %s: %w", name, err)
	}
	u, err := url.Parse(server)
	if err != nil {
		return Database{}, fmt.Errorf("parsing %s: %w", redactURL(server), err)
	}
	u.Path = "/" + name
	return Database{URL: u.String(), Name: name}, nil
}

// Drop drops the database, closing the connections that still use it.
func (d Database) Drop(ctx context.Context) error {
	admin, err := sql.Open("pgx", ServerURL())
	if err != nil {
		return err
	}
	defer admin.Close()
	_, err = admin.ExecContext(ctx, `DROP DATABASE IF EXISTS "`+d.Name+`" WITH (FORCE)`)
	return err
}

var migrationName = regexp.MustCompile(`^V([0-9]+)__[A-Za-z0-9_]+\.sql$`)

// MigrationsDir finds migrations/postgresql of the repository, from the working directory
// upwards.
func MigrationsDir() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		candidate := filepath.Join(dir, "migrations", "postgresql")
		if st, err := os.Stat(candidate); err == nil && st.IsDir() {
			return candidate, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("finding migrations/postgresql: not found above the working directory")
		}
		dir = parent
	}
}

// Migrate applies every V<n>__*.sql file of dir to db in version order.
func Migrate(ctx context.Context, db *sql.DB, dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("reading migrations: %w", err)
	}
	type file struct {
		version int
		name    string
	}
	var files []file
	for _, e := range entries {
		m := migrationName.FindStringSubmatch(e.Name())
		if m == nil {
			continue
		}
		v, _ := strconv.Atoi(m[1])
		files = append(files, file{v, e.Name()})
	}
	if len(files) == 0 {
		return fmt.Errorf("reading migrations: no V<n>__*.sql file in %s", dir)
	}
	sort.Slice(files, func(i, j int) bool { return files[i].version < files[j].version })
	for _, f := range files {
		body, err := os.ReadFile(filepath.Join(dir, f.name))
		if err != nil {
			return fmt.Errorf("reading migration %s: %w", f.name, err)
		}
		if _, err := db.ExecContext(ctx, string(body)); err != nil {
			return fmt.Errorf("applying migration %s: %w", f.name, err)
		}
	}
	return nil
}

// TB is the part of testing.TB that New uses.
type TB interface {
	Helper()
	Name() string
	Fatalf(format string, args ...any)
	Logf(format string, args ...any)
	Cleanup(func())
}

// New creates a fresh migrated database for a test, opens a *sql.DB on it with the pgx
// driver, and closes and drops both when the test ends. It fails the test, with a hint to
// start the server, when PostgreSQL does not answer.
func New(t TB) (*sql.DB, Database) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	d, err := Create(ctx, t.Name())
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := d.Drop(ctx); err != nil {
			t.Logf("pgtest: dropping database %s: %v", d.Name, err)
		}
	})
	db, err := sql.Open("pgx", d.URL)
	if err != nil {
		t.Fatalf("pgtest: opening %s: %v", d.Name, err)
	}
	t.Cleanup(func() { _ = db.Close() })
	dir, err := MigrationsDir()
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	if err := Migrate(ctx, db, dir); err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	return db, d
}

func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "the database URL"
	}
	return u.Redacted()
}
