package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/alternayte/queuebox/shared/health"
	"github.com/alternayte/queuebox/shared/store/postgres/logical/logicaltest"
)

// server is the private PostgreSQL cluster with wal_level = logical of these tests.
var server *logicaltest.Server

// binary is the capture node, built once by TestMain.
var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "capturenode-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "capturenode")
	if out, err := exec.Command("go", "build", "-o", binary, ".").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building the capture node: %v\n%s", err, out)
		os.Exit(1)
	}
	code := logicaltest.Main(m, &server)
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// fakeLambda records the Lambda Invoke calls that reach it.
type fakeLambda struct {
	srv   *httptest.Server
	mu    sync.Mutex
	paths []string
}

func newFakeLambda(t *testing.T) *fakeLambda {
	f := &fakeLambda{}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if r.Header.Get("X-Amz-Invocation-Type") != "Event" {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		f.mu.Lock()
		f.paths = append(f.paths, r.URL.Path)
		f.mu.Unlock()
		w.WriteHeader(http.StatusAccepted)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeLambda) count(path string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, p := range f.paths {
		if p == path {
			n++
		}
	}
	return n
}

// process is a running capture node.
type process struct {
	cmd *exec.Cmd
	// stderr is read only after the process exited.
	stderr *bytes.Buffer
	base   string
	done   chan error
}

// start runs the capture node with the configuration of dbURL in the environment, as the
// ECS task runs it; extra variables (NAME=value) come last and replace those of the same name.
func start(t *testing.T, dbURL, lambdaURL, stateDir string, extra ...string) *process {
	t.Helper()
	u, err := url.Parse(dbURL)
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := ln.Addr().(*net.TCPAddr).Port
	require.NoError(t, ln.Close())
	cmd := exec.Command(binary)
	cmd.Env = []string{
		"PATH=" + os.Getenv("PATH"),
		"QUEUEBOX_DATABASE_URL=jdbc:postgresql://" + u.Host + u.Path,
		"QUEUEBOX_DATABASE_USERNAME=postgres",
		"QUEUEBOX_DATABASE_PASSWORD=trust-auth",
		fmt.Sprintf("QUEUEBOX_SERVER_HTTPPORT=%d", port),
		"QUEUEBOX_OUTBOX_CAPTURE_MODE=postgres-logical",
		"QUEUEBOX_OUTBOX_CAPTURE_ENABLED=true",
		"QUEUEBOX_OUTBOX_CAPTURE_STATEDIRECTORY=" + stateDir,
		"QUEUEBOX_OUTBOX_CAPTURE_SLOT=qb_node_" + strings.ReplaceAll(filepath.Base(u.Path), "-", "_"),
		// Only inserts and attempts wake within a test.
		"QUEUEBOX_OUTBOX_CAPTURE_RECONCILIATIONINTERVALMS=600000",
		"CAPTURE_POLL_FUNCTION=queuebox-poll",
		"CAPTURE_RELAY_FUNCTION=queuebox-relay",
		"CAPTURE_WAKE_INTERVAL_MS=200",
		"CAPTURE_LAMBDA_ENDPOINT=" + lambdaURL,
		"AWS_REGION=eu-west-1",
		"AWS_ACCESS_KEY_ID=AKIDQUEUEBOXTEST",
		"AWS_SECRET_ACCESS_KEY=queuebox-test-secret",
		"AWS_EC2_METADATA_DISABLED=true",
		"AWS_CONFIG_FILE=" + filepath.Join(t.TempDir(), "none"),
		"AWS_SHARED_CREDENTIALS_FILE=" + filepath.Join(t.TempDir(), "none"),
	}
	// exec.Cmd keeps the last value of a variable that appears twice.
	cmd.Env = append(cmd.Env, extra...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	n := &process{cmd: cmd, stderr: &stderr, base: fmt.Sprintf("http://127.0.0.1:%d", port), done: make(chan error, 1)}
	go func() { n.done <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-n.done
		if t.Failed() {
			t.Logf("the capture node's log:\n%s", stderr.String())
		}
	})
	return n
}

// wait returns the exit code of the process within the timeout.
func (n *process) wait(t *testing.T, timeout time.Duration) int {
	t.Helper()
	select {
	case err := <-n.done:
		n.done <- err // for the cleanup
		if err == nil {
			return 0
		}
		var exit *exec.ExitError
		require.ErrorAs(t, err, &exit)
		return exit.ExitCode()
	case <-time.After(timeout):
		t.Fatalf("the capture node did not exit within %s", timeout)
		return -1
	}
}

func ready(base string) (int, health.Report, error) {
	resp, err := http.Get(base + "/health/ready")
	if err != nil {
		return 0, health.Report{}, err
	}
	defer resp.Body.Close()
	var rep health.Report
	err = json.NewDecoder(resp.Body).Decode(&rep)
	return resp.StatusCode, rep, err
}

func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestCaptureNodeWakesThePollFunction runs the built capture node against a database with
// the publication: it becomes ready, wakes the poll function through the Lambda Invoke API
// when an outbox row commits, serves /health/live and /metrics, closes the connection of a
// request body that never completes (server.readHeaderTimeoutMs and server.readBodyTimeoutMs,
// 300 ms here), and stops with 0 on SIGTERM.
func TestCaptureNodeWakesThePollFunction(t *testing.T) {
	t.Parallel()
	dbURL := server.NewDatabase(t)
	pool := logicaltest.Pool(t, dbURL)
	_, err := pool.Exec(context.Background(), `CREATE PUBLICATION queuebox_outbox FOR TABLE outbox`)
	require.NoError(t, err)
	fake := newFakeLambda(t)
	n := start(t, dbURL, fake.srv.URL, filepath.Join(t.TempDir(), "capture"),
		"QUEUEBOX_SERVER_READHEADERTIMEOUTMS=300", "QUEUEBOX_SERVER_READBODYTIMEOUTMS=300")

	waitFor(t, 60*time.Second, "the node ready with database and outbox-capture up", func() bool {
		code, rep, err := ready(n.base)
		return err == nil && code == http.StatusOK && rep.Components["outbox-capture"].Status == "up" &&
			rep.Components["database"].Status == "up"
	})
	const poll = "/2015-03-31/functions/queuebox-poll/invocations"
	// The connection attempt woke poll and relay once.
	waitFor(t, 30*time.Second, "the wake of the start", func() bool { return fake.count(poll) >= 1 })
	before := fake.count(poll)
	_, err = pool.Exec(context.Background(), `INSERT INTO outbox (topic, key, payload) VALUES ('order.created', 'o-1', '{}')`)
	require.NoError(t, err)
	waitFor(t, 30*time.Second, "the invoke of the insert", func() bool { return fake.count(poll) > before })
	assert.GreaterOrEqual(t, fake.count("/2015-03-31/functions/queuebox-relay/invocations"), 1, "the attempt woke the relay too")

	for _, path := range []string{"/health/live", "/health", "/metrics"} {
		resp, err := http.Get(n.base + path)
		require.NoError(t, err)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		assert.Equal(t, http.StatusOK, resp.StatusCode, path)
		if path == "/metrics" {
			assert.Contains(t, string(body), "queuebox_uptime_seconds")
		}
	}

	// A body that never completes: the node answers and closes the connection, within a
	// safety bound far above the deadline.
	conn, err := net.Dial("tcp", strings.TrimPrefix(n.base, "http://"))
	require.NoError(t, err)
	defer conn.Close()
	_, err = io.WriteString(conn, "GET /health/live HTTP/1.1\r\nHost: node\r\nContent-Length: 100\r\n\r\nsome")
	require.NoError(t, err)
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(60*time.Second)))
	got, err := io.ReadAll(conn)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Errorf("the node kept the connection of a body that never completes open (%q answered)", got)
	}

	require.NoError(t, n.cmd.Process.Signal(syscall.SIGTERM))
	assert.Equal(t, 0, n.wait(t, 60*time.Second), "a SIGTERM stops the node cleanly")
}

// TestCaptureNodeRefusesToStartWithoutThePublication: the node exits 1 and prints the reason.
func TestCaptureNodeRefusesToStartWithoutThePublication(t *testing.T) {
	t.Parallel()
	dbURL := server.NewDatabase(t)
	fake := newFakeLambda(t)
	n := start(t, dbURL, fake.srv.URL, filepath.Join(t.TempDir(), "capture"))
	assert.Equal(t, 1, n.wait(t, 60*time.Second))
	assert.Contains(t, n.stderr.String(), "QueueBox could not run capture. Reason: capture cannot start: the publication queuebox_outbox "+
		"does not exist; create it with: CREATE PUBLICATION queuebox_outbox FOR TABLE public.outbox (QueueBox never creates or drops a publication)\n")
}

// TestCaptureNodeNeedsThePollFunction: without CAPTURE_POLL_FUNCTION the node does not start.
func TestCaptureNodeNeedsThePollFunction(t *testing.T) {
	t.Parallel()
	cmd := exec.Command(binary)
	cmd.Env = []string{
		"QUEUEBOX_DATABASE_URL=jdbc:postgresql://127.0.0.1:1/queuebox",
		"QUEUEBOX_DATABASE_USERNAME=queuebox",
		"QUEUEBOX_DATABASE_PASSWORD=secret",
		"QUEUEBOX_OUTBOX_CAPTURE_MODE=postgres-logical",
		"QUEUEBOX_OUTBOX_CAPTURE_ENABLED=true",
		"QUEUEBOX_OUTBOX_CAPTURE_STATEDIRECTORY=" + t.TempDir(),
	}
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit)
	assert.Equal(t, 1, exit.ExitCode())
	assert.Contains(t, string(out), "QueueBox could not read the capture node settings. Reason: CAPTURE_POLL_FUNCTION is not set; it names the poll function that capture wakes\n")
}
