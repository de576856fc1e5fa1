package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/alternayte/queuebox/shared/store/postgres/pgtool"
)

// cluster is the suite's own PostgreSQL cluster: initdb and pg_ctl of the machine, run as the
// postgres user when the suite runs as root, on a folder that user owns, on 127.0.0.1:port.
type cluster struct {
	bin     string
	dir     string
	port    int
	asPG    bool
	started bool
}

// startCluster creates and starts the cluster under dir/pg.
func startCluster(ctx context.Context, bin, dir string, port int) (*cluster, error) {
	c := &cluster{bin: bin, dir: filepath.Join(dir, "pg"), port: port, asPG: os.Geteuid() == 0}
	if conn, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), time.Second); err == nil {
		conn.Close()
		return nil, fmt.Errorf("127.0.0.1:%d is in use: another program (or the cluster of a chaos run that was killed, under /tmp/queuebox-chaos-*/pg/data: stop it with pg_ctl -D that folder stop) listens there; pick another port with -port", port)
	}
	if err := os.MkdirAll(c.dir, 0o700); err != nil {
		return nil, fmt.Errorf("creating %s: %w", c.dir, err)
	}
	if c.asPG {
		u, err := user.Lookup("postgres")
		if err != nil {
			return nil, fmt.Errorf("looking up the postgres user: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		// The folder above must be traversable by postgres too.
		if err := os.Chmod(dir, 0o755); err != nil {
			return nil, fmt.Errorf("chmod %s: %w", dir, err)
		}
		if err := os.Chown(c.dir, uid, gid); err != nil {
			return nil, fmt.Errorf("chown %s: %w", c.dir, err)
		}
	}
	if out, err := c.run(ctx, 2*time.Minute, "initdb", "-D", c.data(), "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync"); err != nil {
		return nil, fmt.Errorf("initdb: %w: %s", err, out)
	}
	if out, err := c.run(ctx, 30*time.Second, "mkdir", "-p", c.sock()); err != nil {
		return nil, fmt.Errorf("creating the socket folder: %w: %s", err, out)
	}
	opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c max_connections=300 -c fsync=off -c synchronous_commit=on", c.port, c.sock())
	if out, err := c.run(ctx, 2*time.Minute, "pg_ctl", "-D", c.data(), "-l", c.logFile(), "-w", "-t", "90", "-o", opts, "start"); err != nil {
		return nil, fmt.Errorf("pg_ctl start: %w: %s %s", err, out, tail(c.logFile(), 2000))
	}
	c.started = true
	return c, nil
}

func (c *cluster) data() string    { return filepath.Join(c.dir, "data") }
func (c *cluster) sock() string    { return filepath.Join(c.dir, "run") }
func (c *cluster) logFile() string { return filepath.Join(c.dir, "postgresql.log") }

// run runs one PostgreSQL program (or mkdir) as the postgres user when needed, bounded in time.
func (c *cluster) run(ctx context.Context, limit time.Duration, prog string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	path := prog
	if prog != "mkdir" {
		path = filepath.Join(c.bin, prog)
	}
	var cmd *exec.Cmd
	if c.asPG {
		cmd = exec.CommandContext(ctx, "runuser", append([]string{"-u", "postgres", "--", path}, args...)...)
	} else {
		cmd = exec.CommandContext(ctx, path, args...)
	}
	cmd.Dir = "/"
	out, err := cmd.CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

// restart runs pg_ctl restart -m fast and waits for the server to accept connections again.
func (c *cluster) restart(ctx context.Context) error {
	out, err := c.run(ctx, 2*time.Minute, "pg_ctl", "-D", c.data(), "-l", c.logFile(), "-w", "-t", "90", "-m", "fast", "restart")
	if err != nil {
		return fmt.Errorf("pg_ctl restart: %w: %s", err, out)
	}
	return nil
}

// stop stops the cluster at once; the suite keeps nothing of it.
func (c *cluster) stop() error {
	if !c.started {
		return nil
	}
	c.started = false
	out, err := c.run(context.Background(), time.Minute, "pg_ctl", "-D", c.data(), "-m", "immediate", "-w", "-t", "60", "stop")
	if err != nil {
		return fmt.Errorf("pg_ctl stop: %w: %s", err, out)
	}
	return nil
}

// url is the pgx URL of database name.
func (c *cluster) url(name string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", c.port, name)
}

// jdbc is the JDBC URL that queuebox.yml takes.
func (c *cluster) jdbc(name string) string {
	return fmt.Sprintf("jdbc:postgresql://127.0.0.1:%d/%s", c.port, name)
}

// createDatabase creates an empty database. name is a lowercase identifier, so its quoted
// form names the same database as the bare one.
func (c *cluster) createDatabase(ctx context.Context, name string) error {
	if err := pgtool.CreateDatabase(ctx, c.url("postgres"), name); err != nil {
		return fmt.Errorf("creating database %s: %w", name, err)
	}
	return nil
}

// tail returns the last n bytes of a file, for error messages.
func tail(path string, n int64) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return ""
	}
	off := st.Size() - n
	if off < 0 {
		off = 0
	}
	buf := make([]byte, st.Size()-off)
	_, _ = f.ReadAt(buf, off)
	return string(buf)
}
