package examples

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/alternayte/queuebox/shared/specsql"
	"github.com/alternayte/queuebox/shared/store/postgres/dbtest"
)

// lockedBuffer collects a process's output while the test reads it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// startProcess starts a command of the test in the background; it is stopped with SIGTERM
// when the test ends.
func startProcess(t *testing.T, env []string, name string, args ...string) *lockedBuffer {
	t.Helper()
	out := &lockedBuffer{}
	cmd := exec.Command(name, args...)
	cmd.Dir = ".."
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", name, err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(60 * time.Second):
			_ = cmd.Process.Kill()
			<-done
			t.Errorf("%s did not stop within 60 s of SIGTERM", filepath.Base(name))
		}
	})
	return out
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s within %s", what, limit)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestHTTPFanoutExample runs examples/http-fanout as its README's "Without Docker" section
// says: its queuebox.yml against a fresh database, with two demo receivers on this machine in
// place of the Compose services analytics and audit. It posts the README's two webhooks and
// checks that each receiver prints the line the README shows and never the other's event,
// then runs the README's SQL block (one business event, one outbox row per destination) and
// checks that each receiver gets its copy once.
func TestHTTPFanoutExample(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile(filepath.Join("http-fanout", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	bin := buildQueueBox(t)
	receiverBin := filepath.Join(t.TempDir(), "receiver")
	build := exec.Command("go", "build", "-o", receiverBin, "./local/receiver")
	build.Dir = ".."
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./local/receiver: %v\n%s", err, out)
	}

	dbURL := dbtest.NewDatabase(t)
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	password, _ := u.User.Password()
	env := environWithout("QUEUEBOX_", "PG")
	receivers := map[string]*lockedBuffer{}
	port := freePort(t)
	serveEnv := append(env,
		"QUEUEBOX_CONFIG_FILE=examples/http-fanout/queuebox.yml",
		"QUEUEBOX_DATABASE_URL=jdbc:postgresql://"+u.Host+u.Path,
		"QUEUEBOX_DATABASE_USERNAME="+u.User.Username(),
		"QUEUEBOX_DATABASE_PASSWORD="+cmpOr(password, "unused"),
		"QUEUEBOX_SERVER_HTTPPORT="+strconv.Itoa(port),
	)
	for _, name := range []string{"analytics", "audit"} {
		addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
		receivers[name] = startProcess(t, env, receiverBin, "-addr", addr)
		serveEnv = append(serveEnv, "QUEUEBOX_DESTINATIONS_"+strings.ToUpper(name)+"_BASEURL=http://"+addr)
	}
	serve := startProcess(t, serveEnv, bin, "serve")
	base := "http://127.0.0.1:" + strconv.Itoa(port)
	waitFor(t, 2*time.Minute, "queuebox serve was not ready", func() bool {
		resp, err := http.Get(base + "/health/ready")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})

	// The README's Docker steps: its two posts, on this test's port instead of 18081.
	posts := 0
	for _, block := range specsql.Blocks(string(readme), "sh") {
		cmds, err := specsql.Commands(block)
		if err != nil {
			t.Fatalf("reading the README's block: %v", err)
		}
		for _, c := range cmds {
			if !strings.HasPrefix(c.Line, "curl ") || !strings.Contains(c.Line, "localhost:18081/inbox/stripe") {
				continue
			}
			script := strings.ReplaceAll(c.Script(), "http://localhost:18081", base)
			cmd := exec.Command("bash", "-c", "set -e; "+script)
			cmd.Env = env
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("%s: %v\n%s", script, err, out)
			}
			posts++
		}
	}
	if posts != 2 {
		t.Fatalf("the README's Docker steps hold %d posts to /inbox/stripe, want 2", posts)
	}

	// The README shows `analytics-1  | delivered POST /events {...e1...}` and the audit line.
	var shown int
	for _, block := range specsql.Blocks(string(readme), "text") {
		for _, line := range strings.Split(block, "\n") {
			service, printed, ok := strings.Cut(line, "|")
			if !ok {
				continue
			}
			name := strings.TrimSuffix(strings.TrimSpace(service), "-1")
			out, ok := receivers[name]
			if !ok {
				t.Fatalf("the README shows a line of %q, which is not a receiver", name)
			}
			printed = strings.TrimSpace(printed)
			waitFor(t, 2*time.Minute, fmt.Sprintf("the %s receiver did not print %q (serve: %s)", name, printed, serve.String()), func() bool {
				return strings.Contains(out.String(), printed+"\n")
			})
			shown++
		}
	}
	if shown != 2 {
		t.Fatalf("the README shows %d receiver lines, want 2", shown)
	}
	for name, other := range map[string]string{"analytics": `"id":"e2"`, "audit": `"id":"e1"`} {
		if strings.Contains(receivers[name].String(), other) {
			t.Errorf("the %s receiver got the other's event %s:\n%s", name, other, receivers[name].String())
		}
	}

	// One business event to both endpoints: the README's SQL block, one row per destination.
	sqlBlocks := specsql.Blocks(string(readme), "sql")
	if len(sqlBlocks) != 1 {
		t.Fatalf("the README holds %d sql blocks, want 1", len(sqlBlocks))
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, sqlBlocks[0]); err != nil {
		t.Fatalf("running the README's SQL block: %v", err)
	}
	for name, out := range receivers {
		waitFor(t, 2*time.Minute, "the "+name+" receiver did not get pay_1", func() bool {
			return strings.Contains(out.String(), `"paymentId":"pay_1"`)
		})
	}
	var sent int
	waitFor(t, time.Minute, "the two outbox rows were not sent", func() bool {
		_ = conn.QueryRow(ctx, `SELECT count(*) FROM outbox WHERE payload ->> 'paymentId' = 'pay_1' AND state = 'sent'`).Scan(&sent)
		return sent == 2
	})
	for name, out := range receivers {
		if n := strings.Count(out.String(), `"paymentId":"pay_1"`); n != 1 {
			t.Errorf("the %s receiver got pay_1 %d times, want once", name, n)
		}
	}
}
