package outbox_test

import (
	"bufio"
	"context"
	"encoding/json"
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
	"testing"
	"time"
)

// The tests that need a running QueueBox build the queuebox command of this checkout (the
// client module cannot import the service module), or take QUEUEBOX_TEST_BINARY, and run
// `queuebox serve` against a test database with an HTTP destination served by the test.

var (
	buildOnce sync.Once
	builtPath string
	buildErr  error
)

// queueboxBinary returns the path of a queuebox command: QUEUEBOX_TEST_BINARY, or one built
// once from the repository root (../../.. from this folder).
func queueboxBinary(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("QUEUEBOX_TEST_BINARY"); p != "" {
		return p
	}
	buildOnce.Do(func() {
		root, err := filepath.Abs(filepath.Join("..", "..", ".."))
		if err != nil {
			buildErr = err
			return
		}
		dir, err := os.MkdirTemp("", "qb-outbox-bin-")
		if err != nil {
			buildErr = err
			return
		}
		builtPath = filepath.Join(dir, "queuebox")
		cmd := exec.Command("go", "build", "-o", builtPath, "./local")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build ./local in %s: %v\n%s", root, err, out)
		}
	})
	if buildErr != nil {
		t.Fatalf("building queuebox: %v", buildErr)
	}
	return builtPath
}

// delivery is one request that the receiver got.
type delivery struct {
	Body    json.RawMessage
	Headers http.Header
}

// receiver is the HTTP destination of the tests: it answers 200 and records each request.
type receiver struct {
	server *httptest.Server
	mu     sync.Mutex
	got    []delivery
}

func newReceiver(t *testing.T) *receiver {
	r := &receiver{}
	r.server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.got = append(r.got, delivery{Body: body, Headers: req.Header.Clone()})
		r.mu.Unlock()
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(r.server.Close)
	return r
}

func (r *receiver) deliveries() []delivery {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]delivery(nil), r.got...)
}

// freePort returns a loopback port that was free a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("finding a free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// startQueueBox runs `queuebox serve` on databaseURL with the database block extended by
// databaseYAML (indented by two spaces), routing order.* to rcv, and waits for /health.
func startQueueBox(t *testing.T, databaseURL, databaseYAML string, rcv *receiver) {
	t.Helper()
	bin := queueboxBinary(t)
	port := freePort(t)
	// QueueBox takes the credentials apart from the URL, and requires a password even where
	// the server trusts the test user.
	u, err := url.Parse(databaseURL)
	if err != nil {
		t.Fatalf("parsing the database URL: %v", err)
	}
	username, password := u.User.Username(), "unused-by-trust-auth"
	if p, ok := u.User.Password(); ok {
		password = p
	}
	u.User = nil
	databaseURL = u.String()
	config := fmt.Sprintf(`server:
  httpPort: %d
database:
  url: %q
  username: %q
  password: %q
%s
outbox:
  pollIntervalMs: 50
destinations:
  receiver:
    type: http
    baseUrl: %q
    path: /hook
    timeoutMs: 10000
routes:
  - topicPattern: "order.*"
    destination: receiver
`, port, databaseURL, username, password, databaseYAML, rcv.server.URL)
	path := filepath.Join(t.TempDir(), "queuebox.yml")
	if err := os.WriteFile(path, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin, "serve")
	cmd.Env = []string{"QUEUEBOX_CONFIG_FILE=" + path, "PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 30 * time.Second
	stderr, _ := cmd.StderrPipe()
	cmd.Stdout = cmd.Stderr
	var logMu sync.Mutex
	var logTail []string
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatalf("starting queuebox serve: %v", err)
	}
	go func() {
		scanner := bufio.NewScanner(stderr)
		scanner.Buffer(make([]byte, 64*1024), 1024*1024)
		for scanner.Scan() {
			logMu.Lock()
			logTail = append(logTail, scanner.Text())
			if len(logTail) > 40 {
				logTail = logTail[1:]
			}
			logMu.Unlock()
		}
	}()
	exited := make(chan struct{})
	var waitErr error
	go func() { waitErr = cmd.Wait(); close(exited) }()
	tail := func() string {
		logMu.Lock()
		defer logMu.Unlock()
		return strings.Join(logTail, "\n")
	}
	t.Cleanup(func() {
		cancel()
		<-exited
		if t.Failed() {
			t.Logf("queuebox serve log (last lines):\n%s", tail())
		}
	})
	health := fmt.Sprintf("http://127.0.0.1:%d/health", port)
	deadline := time.Now().Add(90 * time.Second)
	for {
		select {
		case <-exited:
			t.Fatalf("queuebox serve exited before it was healthy (%v)", waitErr)
		default:
		}
		resp, err := http.Get(health)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("queuebox serve did not answer 200 on %s within 90 s (last error %v)", health, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitFor polls cond until it is true or the deadline passes.
func waitFor(t *testing.T, what string, within time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s: not within %s", what, within)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
