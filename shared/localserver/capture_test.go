package localserver

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/alternayte/queuebox/shared/config"
	"github.com/alternayte/queuebox/shared/health"
	"github.com/alternayte/queuebox/shared/service"
	"github.com/alternayte/queuebox/shared/store/postgres/logical/logicaltest"
	"github.com/alternayte/queuebox/shared/tracing/tracingtest"
)

// logical is the private PostgreSQL cluster with wal_level = logical of the capture tests,
// started by the first test that needs it (the shared server runs with wal_level = replica).
var logical logicaltest.Lazy

func TestMain(m *testing.M) {
	code := m.Run()
	if err := logical.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
	os.Exit(code)
}

var captureSlots atomic.Int64

// captureConfig is the configuration of a local process with postgres-logical capture on
// dbURL, routing order.* to receiverURL. The poll interval and the reconciliation interval
// are ten minutes: only a capture wake can deliver a row within a test's deadline.
func captureConfig(t *testing.T, dbURL, receiverURL, stateDir string) *config.Config {
	t.Helper()
	u, err := url.Parse(dbURL)
	require.NoError(t, err)
	yaml := fmt.Sprintf(`
server:
  httpPort: 8080
database:
  url: jdbc:postgresql://%s%s
  username: postgres
  password: trust-auth
outbox:
  pollIntervalMs: 600000
  capture:
    mode: postgres-logical
    enabled: true
    stateDirectory: %s
    slot: %s
    reconciliationIntervalMs: 600000
destinations:
  hooks:
    type: http
    baseUrl: %s
    path: /hooks
routes:
  - topicPattern: "order.*"
    destination: hooks
`, u.Host, u.Path, stateDir, fmt.Sprintf("qb_local_%d", captureSlots.Add(1)), receiverURL)
	cfg := loadYAML(t, yaml)
	cfg.Server.HTTPPort = 0
	return cfg
}

// runLocal runs l until the test ends and returns the base URL of its port.
func runLocal(t *testing.T, l *Local) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- l.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			assert.NoError(t, err)
		case <-time.After(60 * time.Second):
			t.Error("the local process did not stop within 60 s")
		}
	})
	select {
	case <-l.Ready():
	case <-time.After(30 * time.Second):
		t.Fatal("the local process did not listen within 30 s")
	}
	return fmt.Sprintf("http://127.0.0.1:%d", l.Addrs()[0].(*net.TCPAddr).Port)
}

func readiness(t *testing.T, base string) (int, health.Report) {
	t.Helper()
	resp, err := http.Get(base + "/health/ready")
	require.NoError(t, err)
	defer resp.Body.Close()
	var rep health.Report
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&rep))
	return resp.StatusCode, rep
}

// loadYAML loads yaml as the configuration file queuebox.yml, with no other environment.
func loadYAML(t *testing.T, yaml string) *config.Config {
	t.Helper()
	cfg, _, err := service.Load(service.LoadOptions{
		Env: map[string]string{"QUEUEBOX_CONFIG_FILE": "queuebox.yml"},
		ReadFile: func(name string) ([]byte, error) {
			if name == "queuebox.yml" {
				return []byte(yaml), nil
			}
			return nil, fs.ErrNotExist
		},
	})
	require.NoError(t, err)
	return cfg
}

func quietLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// TestCaptureWakesThePollerAtOnce runs the local process with capture on, a poll interval
// and a reconciliation interval of ten minutes: a committed outbox row reaches the receiver
// within the test's deadline only because capture woke the poller. Tracing is on: the
// commit's "capture wake" span reaches the OTLP receiver, with the delivery's span.
func TestCaptureWakesThePollerAtOnce(t *testing.T) {
	t.Parallel()
	srv := logical.Get(t)
	dbURL := srv.EmptyDatabase(t)
	delivered := make(chan string, 10)
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		delivered <- string(b)
	}))
	defer receiver.Close()

	cfg := captureConfig(t, dbURL, receiver.URL, filepath.Join(t.TempDir(), "capture"))
	rcv := tracingtest.NewReceiver(t)
	cfg.Tracing.Endpoint = rcv.Endpoint()
	l, err := New(context.Background(), cfg, quietLog())
	require.NoError(t, err)
	require.NotNil(t, l.Capture())
	// The operator's part, once the start migrated the tables.
	pool := logicaltest.Pool(t, dbURL)
	_, err = pool.Exec(context.Background(), `CREATE PUBLICATION queuebox_outbox FOR TABLE outbox`)
	require.NoError(t, err)
	base := runLocal(t, l)

	deadline := time.Now().Add(60 * time.Second)
	for {
		code, rep := readiness(t, base)
		if rep.Components["outbox-capture"].Status == "up" {
			assert.Equal(t, http.StatusOK, code)
			break
		}
		require.True(t, time.Now().Before(deadline), "outbox-capture is not up after 60 s: %+v", rep)
		time.Sleep(20 * time.Millisecond)
	}
	// Once the poller's first claim (at its start) found nothing, it waits ten minutes.
	_, err = pool.Exec(context.Background(), `INSERT INTO outbox (topic, key, payload) VALUES ('order.created', 'o-1', '{"orderId":"1"}')`)
	require.NoError(t, err)
	select {
	case body := <-delivered:
		assert.JSONEq(t, `{"orderId":"1"}`, body)
	case <-time.After(60 * time.Second):
		t.Fatal("the row was not delivered within 60 s: capture did not wake the poller")
	}
	// The row may reach the receiver before the stream counts its commit (a reconnect, or the
	// poller's first claim delayed on a busy machine, also wakes or claims): wait for the wake
	// of the committed insert itself, which the stream always records.
	wakeDeadline := time.Now().Add(60 * time.Second)
	for l.Capture().Stats().Wakes < 1 {
		require.True(t, time.Now().Before(wakeDeadline), "capture recorded no wake for the committed insert within 60 s")
		time.Sleep(20 * time.Millisecond)
	}

	// The spans go out in batches: wait for the wake of the commit and the delivery.
	spans := rcv.WaitFor(t, 60*time.Second, func(s []tracingtest.Span) bool {
		return len(tracingtest.ByName(s, "capture wake")) >= 1 && len(tracingtest.ByName(s, "outbox deliver")) >= 1
	})
	wake := tracingtest.ByName(spans, "capture wake")[0]
	assert.Equal(t, "1", wake.Attributes["queuebox.capture.outbox_inserts"])
	assert.Equal(t, "0", wake.Attributes["queuebox.capture.inbox_inserts"])
	assert.Equal(t, "queuebox", wake.Attributes["queuebox.capture.identity"])
	assert.Regexp(t, `^[0-9A-F]+/[0-9A-F]+$`, wake.Attributes["queuebox.capture.position"], "the commit's LSN")
	assert.Equal(t, "sent", tracingtest.ByName(spans, "outbox deliver")[0].Attributes["queuebox.result"])
}

// TestCaptureFaultIsAdvisory: without the publication, capture stops with its reason in the
// outbox-capture component, and the process stays ready.
func TestCaptureFaultIsAdvisory(t *testing.T) {
	t.Parallel()
	srv := logical.Get(t)
	dbURL := srv.EmptyDatabase(t)
	cfg := captureConfig(t, dbURL, "http://127.0.0.1:9", filepath.Join(t.TempDir(), "capture"))
	l, err := New(context.Background(), cfg, quietLog())
	require.NoError(t, err)
	base := runLocal(t, l)
	deadline := time.Now().Add(60 * time.Second)
	for {
		code, rep := readiness(t, base)
		if c := rep.Components["outbox-capture"]; c.Status == "down" && c.Error != "" && c.Error != "capture is starting" {
			assert.Equal(t, http.StatusOK, code, "a capture fault never makes the process unready")
			assert.Equal(t, "healthy", rep.Status)
			assert.Equal(t, "capture cannot start: the publication queuebox_outbox does not exist; create it with: "+
				"CREATE PUBLICATION queuebox_outbox FOR TABLE public.outbox (QueueBox never creates or drops a publication)", c.Error)
			return
		}
		require.True(t, time.Now().Before(deadline), "no capture fault after 60 s: %+v", rep)
		time.Sleep(20 * time.Millisecond)
	}
}

// TestSQLServerCDCIsAccepted: the start check of a sqlserver-cdc configuration (what
// `queuebox config check` runs) builds the SQL Server capture connector without connecting.
func TestSQLServerCDCIsAccepted(t *testing.T) {
	t.Parallel()
	yaml := `
database:
  type: sqlserver
  url: jdbc:sqlserver://127.0.0.1:1;databaseName=queuebox
  username: sa
  password: secret
outbox:
  capture:
    mode: sqlserver-cdc
    enabled: true
    stateDirectory: /var/lib/queuebox/capture
`
	cfg := loadYAML(t, yaml)
	require.NoError(t, Check(context.Background(), cfg))
}
