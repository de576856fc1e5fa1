package lambdafn_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/alternayte/queuebox/shared/config"
	"github.com/alternayte/queuebox/shared/lambdafn"
	"github.com/alternayte/queuebox/shared/service"
	"github.com/alternayte/queuebox/shared/store"
	"github.com/alternayte/queuebox/shared/store/postgres/dbtest"
	"github.com/alternayte/queuebox/shared/transform/jsonata"
)

// receiver is a real HTTP destination on loopback that records the X-Message-Id of every
// request. A hanging receiver answers only when the request is cancelled or the test ends.
type receiver struct {
	srv     *httptest.Server
	hang    bool
	release chan struct{}

	mu  sync.Mutex
	ids []string
}

func newReceiver(t *testing.T, hang bool) *receiver {
	t.Helper()
	rc := &receiver{hang: hang, release: make(chan struct{})}
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		rc.mu.Lock()
		rc.ids = append(rc.ids, r.Header.Get("X-Message-Id"))
		rc.mu.Unlock()
		if rc.hang {
			select {
			case <-r.Context().Done():
			case <-rc.release:
			}
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(rc.srv.Close)
	t.Cleanup(func() { close(rc.release) }) // runs first: frees a hanging handler
	return rc
}

func (rc *receiver) received() []string {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]string(nil), rc.ids...)
}

// syncBuffer is a log output that the handler writes while the test reads it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// lines returns the JSON log lines whose msg is msg.
func (b *syncBuffer) lines(t *testing.T, msg string) []map[string]any {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []map[string]any
	for _, line := range bytes.Split(b.buf.Bytes(), []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal(line, &m); err != nil {
			t.Fatalf("log line is not JSON: %s", line)
		}
		if m["msg"] == msg {
			out = append(out, m)
		}
	}
	return out
}

// noFile is a ReadFile with no configuration file, so the variables alone configure.
func noFile(name string) ([]byte, error) {
	return nil, fmt.Errorf("open %s: %w", name, fs.ErrNotExist)
}

// functionEnv is the environment of a poll function that delivers order.** to rc.
func functionEnv(dbURL string, rc *receiver, extra map[string]string) map[string]string {
	env := map[string]string{
		"QUEUEBOX_DATABASE_URL":                  dbURL,
		"QUEUEBOX_DATABASE_USERNAME":             "postgres",
		"QUEUEBOX_DATABASE_PASSWORD":             "unused-with-trust-auth",
		"QUEUEBOX_DATABASE_MIGRATE":              "false",
		"QUEUEBOX_OUTBOX_POLLINTERVALMS":         "50",
		"QUEUEBOX_DESTINATIONS_RECEIVER_BASEURL": rc.srv.URL,
		"QUEUEBOX_DESTINATIONS_RECEIVER_PATH":    "/events",
		// Only the invocation deadline may end a hanging publish.
		"QUEUEBOX_DESTINATIONS_RECEIVER_TIMEOUTMS": "60000",
		"QUEUEBOX_ROUTES_0_TOPICPATTERN":           "order.**",
		"QUEUEBOX_ROUTES_0_DESTINATION":            "receiver",
	}
	for k, v := range extra {
		env[k] = v
	}
	return env
}

// function is a poll function built as functions/poll/main.go builds it, on a private
// migrated database.
type function struct {
	rt      *lambdafn.Runtime
	pool    *pgxpool.Pool
	rc      *receiver
	logs    *syncBuffer
	handler lambda.Handler
}

func newFunction(t *testing.T, rc *receiver, extra map[string]string) *function {
	t.Helper()
	pool, dbURL := dbtest.Migrated(t)
	logs := &syncBuffer{}
	var out io.Writer = logs
	if testing.Verbose() {
		out = io.MultiWriter(logs, os.Stderr)
	}
	ctx := context.Background()
	rt, err := lambdafn.Init(ctx, lambdafn.Options{
		Load:      config.LoadOptions{Env: functionEnv(dbURL, rc, extra), ReadFile: noFile},
		LogOutput: out,
		Engine:    jsonata.NewEngine(jsonata.EngineOptions{}),
	})
	if err != nil {
		t.Fatalf("Init: %v", err)
	}
	t.Cleanup(rt.Close)
	app, err := rt.Build(ctx, service.AppOptions{Poller: true})
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	t.Cleanup(app.Close)
	ob := app.Outbox
	return &function{
		rt: rt, pool: pool, rc: rc, logs: logs,
		// The handler goes through aws-lambda-go's own decoding and encoding, as under Start.
		handler: lambda.NewHandler(lambdafn.PollHandler(ob.Poller, rt.Settings, rt.Log)),
	}
}

func scheduledEvent(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/scheduled-event.json")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// invoke calls the handler with the scheduled event and returns the decoded response and the
// time it returned.
func (f *function) invoke(t *testing.T, ctx context.Context) (map[string]int, time.Time) {
	t.Helper()
	resp, err := f.handler.Invoke(ctx, scheduledEvent(t))
	returned := time.Now()
	if err != nil {
		t.Fatalf("Invoke: %v", err)
	}
	var sum map[string]int
	if err := json.Unmarshal(resp, &sum); err != nil {
		t.Fatalf("response %s is not a summary: %v", resp, err)
	}
	return sum, returned
}

func (f *function) insert(t *testing.T, n int, keyPrefix string) []string {
	t.Helper()
	ids := make([]string, n)
	for i := range ids {
		id, err := f.rt.DB.Store.OutboxInsert(context.Background(), store.OutboxInsertParams{
			Topic: "order.created", Key: fmt.Sprintf("%s-%d", keyPrefix, i),
			Payload: json.RawMessage(fmt.Sprintf(`{"n":%d}`, i)),
		})
		if err != nil {
			t.Fatalf("inserting an outbox row: %v", err)
		}
		ids[i] = id
	}
	return ids
}

type rowState struct {
	State   string
	Attempt int
	Leased  bool // lease_expires_at is after the database clock
}

func (f *function) row(t *testing.T, id string) rowState {
	t.Helper()
	var s rowState
	err := f.pool.QueryRow(context.Background(),
		`SELECT state, attempt, coalesce(lease_expires_at > now(), false) FROM outbox WHERE id = $1`, id).
		Scan(&s.State, &s.Attempt, &s.Leased)
	if err != nil {
		t.Fatalf("reading row %s: %v", id, err)
	}
	return s
}

func (f *function) countState(t *testing.T, state string) int {
	t.Helper()
	var n int
	if err := f.pool.QueryRow(context.Background(), `SELECT count(*) FROM outbox WHERE state = $1`, state).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// summary is the response of an invocation with the given counts; the others are 0.
func summary(claimed, sent int) map[string]int {
	return map[string]int{"claimed": claimed, "sent": sent, "retried": 0, "dead": 0, "claimsLost": 0, "reclaimed": 0}
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, deadline time.Time, what string, cond func() bool) {
	t.Helper()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// sameSet reports whether a and b hold the same strings, each as often.
func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}
