package tutorials_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// syncBuffer collects the output of scripts/run-local.sh (the receiver's lines and QueueBox's
// log) while the test reads it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// stack is one run of scripts/run-local.sh, as `make run` starts it, on private ports: its own
// PostgreSQL cluster in a temporary folder, its own receiver and HTTP port, and a copy of
// local/queuebox.yml that the tutorial may append to.
type stack struct {
	root     string // the checkout
	dir      string // the temporary folder: the cluster and the configuration copy
	config   string // the copy of local/queuebox.yml that queuebox serve reads
	pgPort   int
	httpPort int
	receiver string // the demo receiver's address
	env      []string

	out     *syncBuffer
	cmd     *exec.Cmd
	exited  chan struct{}
	stopped bool
}

// newStack prepares the folder, the ports and the configuration copy; start runs the script.
func newStack(t *testing.T, root, bin string) *stack {
	t.Helper()
	reapOrphans(root)
	dir, err := os.MkdirTemp("", stackPrefix)
	if err != nil {
		t.Fatalf("creating the stack's folder: %v", err)
	}
	// The owner's pid lets a later run stop this stack's cluster if this test process dies
	// before its cleanup (a panic, a kill, a timeout).
	if err := os.WriteFile(filepath.Join(dir, ownerFile), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		t.Fatalf("recording the stack's owner: %v", err)
	}
	// The script runs PostgreSQL as the postgres user, who must enter the folder.
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatalf("opening the stack's folder to the postgres user: %v", err)
	}
	s := &stack{root: root, dir: dir, config: filepath.Join(dir, "queuebox.yml"),
		pgPort: freePort(t), httpPort: freePort(t), receiver: fmt.Sprintf("127.0.0.1:%d", freePort(t))}
	t.Cleanup(func() {
		s.stop(t)
		_ = os.RemoveAll(dir)
	})
	// local/queuebox.yml names the receiver of `make run`, 127.0.0.1:8088; the copy names the
	// test's own, so that a developer's `make run` and a parallel run do not collide.
	local, err := os.ReadFile(filepath.Join(root, "local", "queuebox.yml"))
	if err != nil {
		t.Fatalf("reading local/queuebox.yml: %v", err)
	}
	if !bytes.Contains(local, []byte("http://127.0.0.1:8088")) {
		t.Fatalf("local/queuebox.yml no longer names the receiver http://127.0.0.1:8088 of scripts/run-local.sh; update the test")
	}
	local = bytes.ReplaceAll(local, []byte("http://127.0.0.1:8088"), []byte("http://"+s.receiver))
	if err := os.WriteFile(s.config, local, 0o644); err != nil {
		t.Fatalf("writing the configuration copy: %v", err)
	}
	s.env = append(cleanEnv(),
		"QUEUEBOX_LOCAL_DIR="+filepath.Join(dir, "pg"),
		"QUEUEBOX_LOCAL_PG_PORT="+strconv.Itoa(s.pgPort),
		"QUEUEBOX_LOCAL_BIN="+bin,
		"QUEUEBOX_LOCAL_RECEIVER_ADDR="+s.receiver,
		"QUEUEBOX_SERVER_HTTPPORT="+strconv.Itoa(s.httpPort),
		"QUEUEBOX_CONFIG_FILE="+s.config,
	)
	return s
}

const (
	stackPrefix = "queuebox-tutorial-"
	ownerFile   = "owner.pid"
)

// reapOrphans stops the clusters of the stacks whose test process no longer runs, with
// `scripts/run-local.sh stop`, and removes their folders.
func reapOrphans(root string) {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), stackPrefix+"*"))
	for _, dir := range dirs {
		b, err := os.ReadFile(filepath.Join(dir, ownerFile))
		if err != nil {
			continue
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil || pid <= 0 {
			continue
		}
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err == nil {
			continue // its test still runs
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		cmd := exec.CommandContext(ctx, filepath.Join(root, "scripts", "run-local.sh"), "stop")
		cmd.Dir = root
		cmd.Env = append(cleanEnv(), "QUEUEBOX_LOCAL_DIR="+filepath.Join(dir, "pg"))
		_ = cmd.Run()
		cancel()
		_ = os.RemoveAll(dir)
	}
}

// cleanEnv is the test's environment without the QUEUEBOX_ and PG variables, which would
// change what the script and psql connect to.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "QUEUEBOX_") || strings.HasPrefix(kv, "PG") {
			continue
		}
		env = append(env, kv)
	}
	return append(env, "PSQLRC=/dev/null")
}

// start runs scripts/run-local.sh in its own process group, so that stop can send it the
// Ctrl-C of a terminal.
func (s *stack) start(t *testing.T) {
	t.Helper()
	if s.cmd != nil {
		t.Fatalf("the stack is already running")
	}
	s.out = &syncBuffer{}
	s.cmd = exec.Command(filepath.Join(s.root, "scripts", "run-local.sh"))
	s.cmd.Dir = s.root
	s.cmd.Env = s.env
	s.cmd.Stdout, s.cmd.Stderr = s.out, s.out
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := s.cmd.Start(); err != nil {
		t.Fatalf("starting scripts/run-local.sh: %v", err)
	}
	s.exited = make(chan struct{})
	go func() {
		_ = s.cmd.Wait()
		close(s.exited)
	}()
}

// running reports whether the script still runs.
func (s *stack) running() bool {
	if s.cmd == nil {
		return false
	}
	select {
	case <-s.exited:
		return false
	default:
		return true
	}
}

// tail is the end of the script's output, for a failure message.
func (s *stack) tail() string {
	if s.out == nil {
		return "(not started)"
	}
	out := s.out.String()
	if len(out) > 4000 {
		out = "..." + out[len(out)-4000:]
	}
	return out
}

// stop is Ctrl-C in the `make run` terminal, then `scripts/run-local.sh stop`, as
// docs/tutorials-without-docker.md says for `docker compose down -v`; the caller removes the
// folder. It is idempotent.
func (s *stack) stop(t *testing.T) {
	t.Helper()
	if s.stopped {
		return
	}
	s.stopped = true
	if s.cmd != nil {
		_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGINT)
		select {
		case <-s.exited:
		case <-time.After(90 * time.Second):
			_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
			<-s.exited
			t.Errorf("scripts/run-local.sh did not stop within 90 s of Ctrl-C; killed it. Output:\n%s", s.tail())
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(s.root, "scripts", "run-local.sh"), "stop")
	cmd.Dir, cmd.Env = s.root, s.env
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("scripts/run-local.sh stop: %v: %s", err, out)
	}
}

// shell runs a script with bash in the checkout, with the stack's environment, and returns its
// standard output and error separately.
func (s *stack) shell(ctx context.Context, script string) (stdout, stderr string, err error) {
	cmd := exec.CommandContext(ctx, "bash", "-c", script)
	cmd.Dir, cmd.Env = s.root, s.env
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	cmd.WaitDelay = 5 * time.Second
	err = cmd.Run()
	if errors.Is(err, exec.ErrWaitDelay) {
		err = nil
	}
	return o.String(), e.String(), err
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("finding a free port: %v", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}
