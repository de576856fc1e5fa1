// Package logicaltest gives the tests of PostgreSQL logical capture a PostgreSQL server with wal_level = logical and a
// fresh, migrated database per test on it.
//
// The machine's shared server usually runs with wal_level = replica, and a test must not
// restart or reconfigure it. So Start starts a private cluster instead: initdb and pg_ctl of the
// machine's PostgreSQL in a temporary directory, on a free loopback port, with
// -c wal_level=logical; as root it runs them as the postgres user (runuser), exactly as
// scripts/run-local.sh does. Stop stops the cluster and removes its directory. A package
// starts one cluster in its TestMain (see Main) and its tests share it.
//
// QUEUEBOX_TEST_LOGICAL_DATABASE_URL names an existing server with wal_level = logical
// instead (a URL of a database where the user may CREATE DATABASE and CREATE ROLE); Start then
// starts nothing.
package logicaltest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/alternayte/queuebox/migrations"
)

// URLVariable names an existing server with wal_level = logical; when it is set, Start starts
// no cluster.
const URLVariable = "QUEUEBOX_TEST_LOGICAL_DATABASE_URL"

// Server is a PostgreSQL server with wal_level = logical.
type Server struct {
	// URL is the maintenance database of the server, as a pgx connection string.
	URL string
	// Port is the server's port on 127.0.0.1.
	Port int

	dir     string // the private cluster's directory; empty for a server of URLVariable
	bin     string
	asOwner bool // run the PostgreSQL programs as the postgres user
}

// Start returns the server of URLVariable or starts a private cluster. It fails with a message
// that says what to install when the machine has no PostgreSQL server programs.
func Start(ctx context.Context) (*Server, error) { return start(ctx, testSettings) }

// StartDurable is Start with a cluster that commits as a production server does: fsync,
// synchronous_commit and full_page_writes on, and 128 MB of shared buffers (the machine's
// shared server's), for a benchmark whose figures must not gain from a test's shortcuts.
func StartDurable(ctx context.Context) (*Server, error) { return start(ctx, durableSettings) }

// The server settings of Start and StartDurable, beside the port, socket and replication ones.
const (
	testSettings    = "-c fsync=off -c synchronous_commit=off -c full_page_writes=off -c shared_buffers=32MB -c max_connections=60"
	durableSettings = "-c shared_buffers=128MB -c max_connections=60"
)

func start(ctx context.Context, settings string) (*Server, error) {
	if u := os.Getenv(URLVariable); u != "" {
		pu, err := url.Parse(u)
		if err != nil {
			return nil, fmt.Errorf("parsing %s: %w", URLVariable, err)
		}
		port, _ := strconv.Atoi(pu.Port())
		return &Server{URL: u, Port: port}, nil
	}
	bin, err := serverBinaries()
	if err != nil {
		return nil, err
	}
	reapOrphans(ctx, bin)
	s := &Server{bin: bin, asOwner: os.Geteuid() == 0}
	if s.dir, err = os.MkdirTemp("", dirPrefix); err != nil {
		return nil, fmt.Errorf("creating the cluster directory: %w", err)
	}
	// The owner's pid lets a later Start stop this cluster if the test process dies first
	// (a panic or a kill skips TestMain's Stop).
	if err := os.WriteFile(filepath.Join(s.dir, ownerFile), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		_ = os.RemoveAll(s.dir)
		return nil, fmt.Errorf("recording the cluster's owner: %w", err)
	}
	if s.asOwner {
		if err := chownToPostgres(s.dir); err != nil {
			_ = os.RemoveAll(s.dir)
			return nil, err
		}
	}
	data := filepath.Join(s.dir, "data")
	if out, err := s.run(ctx, "initdb", "-D", data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync"); err != nil {
		_ = os.RemoveAll(s.dir)
		return nil, fmt.Errorf("running initdb: %w: %s", err, out)
	}
	// A free port can be taken between the probe and the start: try a few.
	var lastErr error
	for range 5 {
		port, err := freePort()
		if err != nil {
			lastErr = err
			continue
		}
		opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c wal_level=logical "+
			"-c max_wal_senders=10 -c max_replication_slots=10 %s", port, s.dir, settings)
		out, err := s.run(ctx, "pg_ctl", "-D", data, "-l", filepath.Join(s.dir, "postgresql.log"), "-w", "-t", "120", "-o", opts, "start")
		if err != nil {
			lastErr = fmt.Errorf("running pg_ctl start: %w: %s %s", err, out, s.logTail())
			continue
		}
		s.Port = port
		s.URL = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port)
		return s, nil
	}
	_ = os.RemoveAll(s.dir)
	return nil, lastErr
}

const (
	dirPrefix = "queuebox-capture-pg-"
	ownerFile = "owner.pid"
)

// reapOrphans stops and removes the private clusters whose test process no longer runs.
func reapOrphans(ctx context.Context, bin string) {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), dirPrefix+"*"))
	for _, dir := range dirs {
		b, err := os.ReadFile(filepath.Join(dir, ownerFile))
		if err != nil {
			continue
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil || pid <= 0 || processAlive(pid) {
			continue
		}
		orphan := &Server{dir: dir, bin: bin, asOwner: os.Geteuid() == 0}
		_, _ = orphan.run(ctx, "pg_ctl", "-D", filepath.Join(dir, "data"), "-m", "immediate", "-w", "stop")
		_ = os.RemoveAll(dir)
	}
}

// processAlive reports whether a process with the pid exists.
func processAlive(pid int) bool {
	_, err := os.Stat(fmt.Sprintf("/proc/%d", pid))
	return err == nil
}

// Stop stops a private cluster at once and removes its directory; for a server of
// URLVariable it does nothing.
func (s *Server) Stop() error {
	if s == nil || s.dir == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := s.run(ctx, "pg_ctl", "-D", filepath.Join(s.dir, "data"), "-m", "immediate", "-w", "stop")
	rmErr := os.RemoveAll(s.dir)
	if err != nil {
		return fmt.Errorf("running pg_ctl stop: %w: %s", err, out)
	}
	if rmErr != nil {
		return fmt.Errorf("removing the cluster directory: %w", rmErr)
	}
	return nil
}

// Main starts the server, stores it in *srv, runs the tests and stops it. A package's
// TestMain calls os.Exit(logicaltest.Main(m, &server)).
func Main(m *testing.M, srv **Server) int {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	s, err := Start(ctx)
	cancel()
	if err != nil {
		fmt.Fprintf(os.Stderr, "logicaltest: no PostgreSQL server with wal_level = logical: %v\n", err)
		return 1
	}
	*srv = s
	code := m.Run()
	if err := s.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "logicaltest: %v\n", err)
	}
	return code
}

// Lazy starts the server when a test first needs it, so that a package whose other tests do
// not use it pays nothing. Call Stop from TestMain after m.Run.
type Lazy struct {
	once sync.Once
	s    *Server
	err  error
}

// Get returns the server, starting it on the first call; it fails the test when the server
// cannot start.
func (l *Lazy) Get(t testing.TB) *Server {
	t.Helper()
	l.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		l.s, l.err = Start(ctx)
	})
	if l.err != nil {
		t.Fatalf("logicaltest: no PostgreSQL server with wal_level = logical: %v", l.err)
	}
	return l.s
}

// Stop stops the server if Get started it.
func (l *Lazy) Stop() error {
	var s *Server
	l.once.Do(func() {}) // no start after Stop
	s = l.s
	return s.Stop()
}

var unsafeName = regexp.MustCompile(`[^a-z0-9_]+`)

// NewDatabase creates a database for the test, applies every bundled PostgreSQL migration of
// both tracks in version order (migrations.ListAll, as an operator would with psql), and
// returns its URL. The database is
// dropped when the test ends, after every replication slot of it.
func (s *Server) NewDatabase(t testing.TB) string {
	t.Helper()
	dbURL := s.EmptyDatabase(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatalf("logicaltest: connecting to %s: %v", redact(dbURL), err)
	}
	defer conn.Close(ctx)
	list, err := migrations.ListAll(migrations.PostgreSQL)
	if err != nil {
		t.Fatalf("logicaltest: %v", err)
	}
	for _, m := range list {
		if _, err := conn.Exec(ctx, m.SQL); err != nil {
			t.Fatalf("logicaltest: applying %s: %v", m.Script, err)
		}
	}
	return dbURL
}

// EmptyDatabase creates an empty database for the test and returns its URL; QueueBox's own
// start applies the migrations. The database is dropped when the test ends, after every
// replication slot of it.
func (s *Server) EmptyDatabase(t testing.TB) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	admin, err := pgx.Connect(ctx, s.URL)
	if err != nil {
		t.Fatalf("logicaltest: connecting to %s: %v", redact(s.URL), err)
	}
	defer admin.Close(ctx)
	var suffix [4]byte
	_, _ = rand.Read(suffix[:])
	name := "qbc_" + unsafeName.ReplaceAllString(strings.ToLower(t.Name()), "_")
	if len(name) > 40 {
		name = name[:40]
	}
	name += "_" + hex.EncodeToString(suffix[:])
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		t.Fatalf("logicaltest: creating database %s: %v", name, err)
	}
	t.Cleanup(func() { s.dropDatabase(t, name) })
	u, err := url.Parse(s.URL)
	if err != nil {
		t.Fatalf("logicaltest: parsing %s: %v", redact(s.URL), err)
	}
	u.Path = "/" + name
	return u.String()
}

// dropDatabase drops the replication slots of the database and the database.
func (s *Server) dropDatabase(t testing.TB, name string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := pgx.Connect(ctx, s.URL)
	if err != nil {
		t.Logf("logicaltest: dropping database %s: %v", name, err)
		return
	}
	defer c.Close(ctx)
	// A slot that a walsender still uses cannot be dropped: end those first.
	_, _ = c.Exec(ctx, `SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE database = $1 AND active_pid IS NOT NULL`, name)
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err = c.Exec(ctx, `SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE database = $1 AND NOT active`, name)
		var left int
		_ = c.QueryRow(ctx, `SELECT count(*) FROM pg_replication_slots WHERE database = $1`, name).Scan(&left)
		if left == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if _, err := c.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
		t.Logf("logicaltest: dropping database %s: %v", name, err)
	}
}

// Pool opens a pool on dbURL that closes when the test ends.
func Pool(t testing.TB, dbURL string) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(dbURL)
	if err != nil {
		t.Fatalf("logicaltest: parsing %s: %v", redact(dbURL), err)
	}
	cfg.MaxConns = 12
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatalf("logicaltest: opening a pool: %v", err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// WithUser returns dbURL with the user name replaced.
func WithUser(t testing.TB, dbURL, name string) string {
	t.Helper()
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatalf("logicaltest: parsing %s: %v", redact(dbURL), err)
	}
	u.User = url.User(name)
	return u.String()
}

// run runs a PostgreSQL server program, as the postgres user when the test runs as root.
func (s *Server) run(ctx context.Context, program string, args ...string) (string, error) {
	path := filepath.Join(s.bin, program)
	var cmd *exec.Cmd
	if s.asOwner {
		cmd = exec.CommandContext(ctx, "runuser", append([]string{"-u", "postgres", "--", path}, args...)...)
	} else {
		cmd = exec.CommandContext(ctx, path, args...)
	}
	cmd.Dir = s.dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	// pg_ctl start leaves the server running with these pipes' ends; WaitDelay bounds the
	// wait for a pipe that the server keeps open.
	cmd.WaitDelay = 5 * time.Second
	err := cmd.Run()
	if errors.Is(err, exec.ErrWaitDelay) {
		err = nil
	}
	return strings.TrimSpace(out.String()), err
}

func (s *Server) logTail() string {
	b, err := os.ReadFile(filepath.Join(s.dir, "postgresql.log"))
	if err != nil {
		return ""
	}
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return "log: " + string(b)
}

// serverBinaries finds the directory of initdb and pg_ctl: the newest
// /usr/lib/postgresql/*/bin, pg_config --bindir, or PATH.
func serverBinaries() (string, error) {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return versionOf(dirs[i]) > versionOf(dirs[j]) })
	for _, d := range dirs {
		if isExecutable(filepath.Join(d, "initdb")) && isExecutable(filepath.Join(d, "pg_ctl")) {
			return d, nil
		}
	}
	if out, err := exec.Command("pg_config", "--bindir").Output(); err == nil {
		d := strings.TrimSpace(string(out))
		if isExecutable(filepath.Join(d, "initdb")) {
			return d, nil
		}
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		return filepath.Dir(p), nil
	}
	return "", errors.New("initdb and pg_ctl are not installed; install them with: apt-get install -y postgresql " +
		"(or set " + URLVariable + " to a server with wal_level = logical)")
}

func versionOf(binDir string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return v
}

func isExecutable(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir() && st.Mode()&0o111 != 0
}

// chownToPostgres gives dir to the postgres user, who runs the cluster.
func chownToPostgres(dir string) error {
	u, err := user.Lookup("postgres")
	if err != nil {
		return fmt.Errorf("looking up the postgres user, who must own the private cluster (apt-get install -y postgresql creates it): %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	if err := os.Chown(dir, uid, gid); err != nil {
		return fmt.Errorf("giving %s to the postgres user: %w", dir, err)
	}
	return nil
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("finding a free port: %w", err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	_ = ln.Close()
	return port, nil
}

func redact(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(unparseable URL)"
	}
	return u.Redacted()
}
