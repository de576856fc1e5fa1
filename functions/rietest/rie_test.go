package rietest

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/alternayte/queuebox/deploy/lambdazip"
	"github.com/alternayte/queuebox/shared/lambdafn"
	"github.com/alternayte/queuebox/shared/service"
	"github.com/alternayte/queuebox/shared/store"
	"github.com/alternayte/queuebox/shared/store/postgres"
	"github.com/alternayte/queuebox/shared/store/postgres/dbtest"
)

// functionTimeout is the AWS_LAMBDA_FUNCTION_TIMEOUT of every function, in seconds: room for
// a first invoke's Init (which migrates an empty database) and a drain on a loaded machine.
// The invokes drain and return long before it.
const functionTimeout = 30

var (
	emulatorPath string
	bootstraps   = map[string]string{} // function name → built bootstrap
)

// TestMain installs the emulator when it is missing and builds the functions once for every
// test of the package.
func TestMain(m *testing.M) {
	os.Exit(setupAndRun(m))
}

func setupAndRun(m *testing.M) int {
	// The emulator's install and the static build of four functions: minutes on a loaded
	// machine with a cold build cache (go test's own -timeout still bounds the whole run).
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	dir, err := DefaultEmulatorDir()
	if err != nil {
		fmt.Fprintln(os.Stderr, "rietest:", err)
		return 1
	}
	if emulatorPath, err = InstallEmulator(ctx, dir); err != nil {
		fmt.Fprintln(os.Stderr, "rietest:", err)
		return 1
	}
	work, err := os.MkdirTemp("", "queuebox-rietest-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "rietest:", err)
		return 1
	}
	defer os.RemoveAll(work)
	// One go command builds the four: the packages they share compile once.
	names := []string{"inbox", "poll", "relay", "admin"}
	if err := lambdazip.BuildAll(ctx, "../..", names, work, BuildEnv()); err != nil {
		fmt.Fprintln(os.Stderr, "rietest:", err)
		return 1
	}
	for _, name := range names {
		bootstraps[name] = filepath.Join(work, name)
	}
	return m.Run()
}

// startFunction starts the emulator with the named function on a fresh, empty database that
// the function migrates itself, and stops it when the test ends. It returns the emulator and
// a pool on the database.
func startFunction(t *testing.T, name string, extra map[string]string) (*Emulator, *pgxpool.Pool) {
	t.Helper()
	dbURL := dbtest.NewDatabase(t)
	env, err := DatabaseEnv(dbURL)
	require.NoError(t, err)
	env["AWS_LAMBDA_FUNCTION_TIMEOUT"] = fmt.Sprint(functionTimeout)
	env["AWS_LAMBDA_FUNCTION_NAME"] = "queuebox-" + name
	env[lambdafn.ModeVariable] = string(lambdafn.Drain)
	maps.Copy(env, extra)
	var out io.Writer
	if testing.Verbose() {
		out = os.Stderr
	}
	e, err := Start(Options{Emulator: emulatorPath, Bootstrap: bootstraps[name], Env: env, Output: out})
	require.NoError(t, err)
	t.Cleanup(e.Stop)
	return e, dbtest.NewPool(t, dbURL)
}

// invoke invokes the function with event and requires a 200 answer.
func invoke(t *testing.T, e *Emulator, event []byte) Response {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := e.Invoke(ctx, event)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.Status, "the emulator's status; body %s\nlogs:\n%s", resp.Body, e.Logs())
	return resp
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return b
}

func scheduledEvent(t *testing.T) []byte {
	return readFile(t, "../../shared/lambdafn/testdata/scheduled-event.json")
}

func noFile(name string) ([]byte, error) {
	return nil, fmt.Errorf("open %s: %w", name, fs.ErrNotExist)
}

func testLog() *slog.Logger {
	var out io.Writer = io.Discard
	if testing.Verbose() {
		out = os.Stderr
	}
	return service.NewLogger(out, slog.LevelInfo)
}

// hmacSecret signed the x-signature header of functions/inbox/testdata/hmac-signed.json.
const hmacSecret = "whsec-equivalence-test"

// inboxSources are the HTTP sources of both inbox sides.
var inboxSources = map[string]string{
	"QUEUEBOX_INBOX_MAXBODYBYTES":                  "512",
	"QUEUEBOX_SOURCES_ORDERS_TYPE":                 "http",
	"QUEUEBOX_SOURCES_ORDERS_PATH":                 "/orders",
	"QUEUEBOX_SOURCES_ORDERS_IDEMPOTENCYKEYPATH":   "$.id",
	"QUEUEBOX_SOURCES_ORDERS_EVENTTYPEPATH":        "$.type",
	"QUEUEBOX_SOURCES_ORDERS_AGGREGATEIDPATH":      "$.orderId",
	"QUEUEBOX_SOURCES_SIGNED_TYPE":                 "http",
	"QUEUEBOX_SOURCES_SIGNED_PATH":                 "/signed",
	"QUEUEBOX_SOURCES_SIGNED_IDEMPOTENCYKEYPATH":   "$.id",
	"QUEUEBOX_SOURCES_SIGNED_EVENTTYPEPATH":        "$.type",
	"QUEUEBOX_SOURCES_SIGNED_AUTH_SECRET":          hmacSecret,
	"QUEUEBOX_SOURCES_SIGNED_AUTH_HEADERNAME":      "X-Signature",
	"QUEUEBOX_SOURCES_SIGNED_AUTH_SIGNATUREPREFIX": "sha256=",
}

// localInbox is the data port as the local process serves it, on its own migrated database.
func localInbox(t *testing.T) (*httptest.Server, *pgxpool.Pool) {
	t.Helper()
	pool, dbURL := dbtest.Migrated(t)
	env := map[string]string{
		"QUEUEBOX_DATABASE_URL":      dbURL,
		"QUEUEBOX_DATABASE_USERNAME": "postgres",
		"QUEUEBOX_DATABASE_PASSWORD": "unused-with-trust-auth",
		"QUEUEBOX_DATABASE_MIGRATE":  "false",
	}
	maps.Copy(env, inboxSources)
	cfg, _, err := service.Load(service.LoadOptions{Env: env, ReadFile: noFile})
	require.NoError(t, err)
	log := testLog()
	db, err := service.Open(context.Background(), cfg, log)
	require.NoError(t, err)
	t.Cleanup(db.Close)
	app, err := service.Build(context.Background(), cfg, service.AppOptions{Database: db, Logger: log, Inbox: true})
	require.NoError(t, err)
	in := app.Inbox
	srv := httptest.NewServer(service.DataHandler(in, service.DataOptions{MaxBodyBytes: cfg.Inbox.MaxBodyBytes}))
	t.Cleanup(srv.Close)
	return srv, pool
}

// answer is what a client sees.
type answer struct {
	Status      int
	ContentType []string
	Body        string
}

// sendLocal sends the request that the API Gateway event describes to the local data port.
func sendLocal(t *testing.T, base string, ev lambdafn.HTTPRequest) answer {
	t.Helper()
	body := []byte(ev.Body)
	if ev.IsBase64Encoded {
		var err error
		body, err = base64.StdEncoding.DecodeString(ev.Body)
		require.NoError(t, err)
	}
	req, err := http.NewRequest(ev.RequestContext.HTTP.Method, base+ev.RawPath, bytes.NewReader(body))
	require.NoError(t, err)
	for name, value := range ev.Headers {
		switch name {
		case "host":
			req.Host = value
		case "content-length":
		default:
			req.Header.Set(name, value)
		}
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return answer{Status: resp.StatusCode, ContentType: resp.Header.Values("Content-Type"), Body: string(b)}
}

// decodeLambda decodes the function's API Gateway response from the emulator's answer.
func decodeLambda(t *testing.T, raw []byte) answer {
	t.Helper()
	var resp lambdafn.HTTPResponse
	require.NoError(t, json.Unmarshal(raw, &resp), "the function's answer %s", raw)
	body := resp.Body
	if resp.IsBase64Encoded {
		b, err := base64.StdEncoding.DecodeString(resp.Body)
		require.NoError(t, err)
		body = string(b)
	}
	hdr := http.Header{}
	for k, v := range resp.Headers {
		hdr.Set(k, v)
	}
	for k, vs := range resp.MultiValueHeaders {
		for _, v := range vs {
			hdr.Add(k, v)
		}
	}
	return answer{Status: resp.StatusCode, ContentType: hdr.Values("Content-Type"), Body: body}
}

var (
	uuidRE      = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)
	messageIDRE = regexp.MustCompile(`^\{"messageId":"([^"]*)"\}$`)
)

// normalised returns body with the value of messageId replaced, after checking it is a UUID.
func normalised(t *testing.T, side, body string) string {
	t.Helper()
	m := messageIDRE.FindStringSubmatch(body)
	if m == nil {
		return body
	}
	assert.Regexp(t, uuidRE, m[1], "%s: messageId", side)
	return `{"messageId":"<uuid>"}`
}

// TestInboxAnswersAsTheLocalDataPort invokes the built inbox function under the emulator
// with API Gateway HTTP API events and sends the same requests to the local data port: each
// answer has the same status, Content-Type and body (the generated messageId aside), and the
// function's database holds the same rows as the local one.
func TestInboxAnswersAsTheLocalDataPort(t *testing.T) {
	t.Parallel()
	local, localPool := localInbox(t)
	fn, fnPool := startFunction(t, "inbox", inboxSources)

	tests := []struct {
		name  string
		event string
	}{
		{name: "a JSON body", event: "json-body.json"},
		{name: "a base64 body", event: "base64-body.json"},
		{name: "an HMAC-signed body", event: "hmac-signed.json"},
	}
	for _, tt := range tests {
		raw := readFile(t, filepath.Join("..", "inbox", "testdata", tt.event))
		var ev lambdafn.HTTPRequest
		require.NoError(t, json.Unmarshal(raw, &ev))

		want := sendLocal(t, local.URL, ev)
		got := decodeLambda(t, invoke(t, fn, raw).Body)

		assert.Equal(t, http.StatusAccepted, want.Status, "%s: the local status", tt.name)
		assert.Equal(t, want.Status, got.Status, "%s: status", tt.name)
		assert.Equal(t, []string{"application/json"}, want.ContentType, "%s: the local Content-Type", tt.name)
		assert.Equal(t, want.ContentType, got.ContentType, "%s: Content-Type", tt.name)
		wantBody := normalised(t, "local", want.Body)
		assert.Equal(t, `{"messageId":"<uuid>"}`, wantBody, "%s: the local body", tt.name)
		assert.Equal(t, wantBody, normalised(t, "lambda", got.Body), "%s: body", tt.name)
	}

	wantRows, gotRows := inboxRows(t, localPool), inboxRows(t, fnPool)
	assert.Equal(t, []string{"orders/evt-1", "orders/evt-2", "signed/pay-1"}, slices.Sorted(maps.Keys(gotRows)))
	assert.Equal(t, wantRows, gotRows)
	assert.Contains(t, gotRows["orders/evt-2"]["payload"], "café ☕", "the base64 body is stored decoded")
}

// inboxRows returns every inbox row by source/idempotency key, its generated correlation
// identifier replaced.
func inboxRows(t *testing.T, pool *pgxpool.Pool) map[string]map[string]string {
	t.Helper()
	rows, err := pool.Query(context.Background(), `
		SELECT source, idempotency_key, coalesce(event_type, ''), coalesce(aggregate_id, ''),
		       payload::text, headers::text, coalesce(correlation_id, ''), consumption, state
		FROM inbox`)
	require.NoError(t, err)
	defer rows.Close()
	out := map[string]map[string]string{}
	for rows.Next() {
		var source, key, eventType, aggregateID, payload, headers, corr, consumption, state string
		require.NoError(t, rows.Scan(&source, &key, &eventType, &aggregateID, &payload, &headers, &corr, &consumption, &state))
		if uuidRE.MatchString(corr) {
			corr = "<uuid>"
		}
		out[source+"/"+key] = map[string]string{
			"eventType": eventType, "aggregateId": aggregateID, "payload": payload, "headers": headers,
			"correlationId": corr, "consumption": consumption, "state": state,
		}
	}
	require.NoError(t, rows.Err())
	return out
}

// receiver is a loopback HTTP destination that records the bodies it receives.
type receiver struct {
	srv    *httptest.Server
	mu     sync.Mutex
	bodies []string
}

func newReceiver(t *testing.T) *receiver {
	t.Helper()
	rc := &receiver{}
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		rc.mu.Lock()
		rc.bodies = append(rc.bodies, string(b))
		rc.mu.Unlock()
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(rc.srv.Close)
	return rc
}

func (rc *receiver) received() []string {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return slices.Clone(rc.bodies)
}

// summary decodes a poll or relay summary.
func summary(t *testing.T, raw []byte) map[string]int {
	t.Helper()
	var sum map[string]int
	require.NoError(t, json.Unmarshal(raw, &sum), "the function's answer %s is not a summary", raw)
	return sum
}

func openStore(t *testing.T, pool *pgxpool.Pool) *postgres.Store {
	t.Helper()
	st, err := postgres.New(pool, store.DefaultNames())
	require.NoError(t, err)
	return st
}

// TestPollDeliversAndReturnsBeforeItsDeadline invokes the built poll function under the
// emulator with a scheduled event: it delivers the pending outbox rows to a loopback
// receiver, marks them sent, and returns its summary well before the invocation deadline.
func TestPollDeliversAndReturnsBeforeItsDeadline(t *testing.T) {
	t.Parallel()
	rc := newReceiver(t)
	fn, pool := startFunction(t, "poll", map[string]string{
		"QUEUEBOX_OUTBOX_POLLINTERVALMS":         "50",
		"QUEUEBOX_DESTINATIONS_RECEIVER_BASEURL": rc.srv.URL,
		"QUEUEBOX_DESTINATIONS_RECEIVER_PATH":    "/events",
		"QUEUEBOX_ROUTES_0_TOPICPATTERN":         "order.**",
		"QUEUEBOX_ROUTES_0_DESTINATION":          "receiver",
	})

	// The first invoke runs Init, which migrates the empty database; nothing is pending.
	first := invoke(t, fn, scheduledEvent(t))
	assert.Zero(t, summary(t, first.Body)["claimed"], "the first invoke's summary %s", first.Body)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	initDuration, err := fn.InitDuration(ctx)
	require.NoError(t, err)
	assert.Positive(t, initDuration, "the emulator's INIT REPORT duration")

	st := openStore(t, pool)
	const n = 5
	var want []string
	for i := range n {
		payload := fmt.Sprintf(`{"n":%d}`, i)
		_, err := st.OutboxInsert(context.Background(), store.OutboxInsertParams{
			Topic: "order.created", Key: fmt.Sprintf("o-%d", i), Payload: json.RawMessage(payload),
		})
		require.NoError(t, err)
		want = append(want, payload)
	}

	resp := invoke(t, fn, scheduledEvent(t))
	assert.Less(t, resp.RoundTrip, functionTimeout*time.Second, "the invoke returns before its deadline")
	sum := summary(t, resp.Body)
	assert.Equal(t, n, sum["claimed"], "claimed; summary %s", resp.Body)
	assert.Equal(t, n, sum["sent"], "sent; summary %s", resp.Body)
	assert.Zero(t, sum["retried"]+sum["dead"], "retried and dead; summary %s", resp.Body)
	assert.ElementsMatch(t, want, compactAll(t, rc.received()), "the receiver's bodies")

	var sent, total int
	require.NoError(t, pool.QueryRow(context.Background(),
		`SELECT count(*) FILTER (WHERE state = 'sent'), count(*) FROM outbox`).Scan(&sent, &total))
	assert.Equal(t, n, total, "outbox rows")
	assert.Equal(t, n, sent, "outbox rows sent")
}

// compactAll returns the JSON bodies without insignificant white space.
func compactAll(t *testing.T, bodies []string) []string {
	t.Helper()
	out := make([]string, len(bodies))
	for i, b := range bodies {
		var buf bytes.Buffer
		require.NoError(t, json.Compact(&buf, []byte(b)), "the body %q", b)
		out[i] = buf.String()
	}
	return out
}

// TestRelayForwardsAPushRow invokes the built relay function under the emulator with a
// scheduled event: it forwards a stored push inbox row into the outbox and marks it
// processed.
func TestRelayForwardsAPushRow(t *testing.T) {
	t.Parallel()
	fn, pool := startFunction(t, "relay", map[string]string{
		"QUEUEBOX_INBOX_RELAY_POLLINTERVALMS":        "50",
		"QUEUEBOX_SOURCES_ORDERS_TYPE":               "http",
		"QUEUEBOX_SOURCES_ORDERS_PATH":               "/orders",
		"QUEUEBOX_SOURCES_ORDERS_IDEMPOTENCYKEYPATH": "$.id",
		"QUEUEBOX_SOURCES_ORDERS_EVENTTYPEPATH":      "$.type",
		"QUEUEBOX_SOURCES_ORDERS_TOPIC":              "orders.{{ eventType }}",
	})

	// The first invoke runs Init, which migrates the empty database; nothing is pending.
	first := invoke(t, fn, scheduledEvent(t))
	assert.Zero(t, summary(t, first.Body)["claimed"], "the first invoke's summary %s", first.Body)

	res, err := openStore(t, pool).InboxInsert(context.Background(), store.InboxInsertParams{
		Source: "orders", IdempotencyKey: "evt-1", AggregateID: "o-1", EventType: "created",
		Payload:     json.RawMessage(`{"id":"evt-1","type":"created","orderId":"o-1"}`),
		Consumption: store.ConsumptionPush,
	})
	require.NoError(t, err)
	require.NotEmpty(t, res.ID)

	resp := invoke(t, fn, scheduledEvent(t))
	assert.Less(t, resp.RoundTrip, functionTimeout*time.Second, "the invoke returns before its deadline")
	sum := summary(t, resp.Body)
	assert.Equal(t, 1, sum["claimed"], "claimed; summary %s", resp.Body)
	assert.Equal(t, 1, sum["forwarded"], "forwarded; summary %s", resp.Body)
	assert.Zero(t, sum["dead"]+sum["failed"], "dead and failed; summary %s", resp.Body)

	var topic, key, payload string
	var count int
	require.NoError(t, pool.QueryRow(context.Background(),
		`SELECT count(*) OVER (), topic, coalesce(key, ''), payload::text FROM outbox`).Scan(&count, &topic, &key, &payload))
	assert.Equal(t, 1, count, "outbox rows")
	assert.Equal(t, "orders.created", topic)
	assert.Equal(t, "o-1", key, "the outbox key is the aggregate")
	assert.JSONEq(t, `{"id":"evt-1","type":"created","orderId":"o-1"}`, payload)

	var state string
	require.NoError(t, pool.QueryRow(context.Background(),
		`SELECT state FROM inbox WHERE id = $1`, res.ID).Scan(&state))
	assert.Equal(t, "processed", state, "the inbox row's state")
}

// TestDatabaseEnv checks the JDBC form of the database URL that the functions get.
func TestDatabaseEnv(t *testing.T) {
	t.Parallel()
	tests := []struct {
		url     string
		want    map[string]string
		wantErr string
	}{
		{
			url: "postgres://postgres@127.0.0.1:5432/qbt_x?sslmode=disable",
			want: map[string]string{
				"QUEUEBOX_DATABASE_URL": "jdbc:postgresql://127.0.0.1:5432/qbt_x?sslmode=disable", "QUEUEBOX_DATABASE_USERNAME": "postgres",
				"QUEUEBOX_DATABASE_PASSWORD": "unused-with-trust-auth", "QUEUEBOX_DATABASE_MIGRATE": "true",
			},
		},
		{
			url: "postgresql://app:s3cret@db:6543/qb",
			want: map[string]string{
				"QUEUEBOX_DATABASE_URL": "jdbc:postgresql://db:6543/qb", "QUEUEBOX_DATABASE_USERNAME": "app",
				"QUEUEBOX_DATABASE_PASSWORD": "s3cret", "QUEUEBOX_DATABASE_MIGRATE": "true",
			},
		},
		{url: "sqlserver://sa@db:1433", wantErr: "scheme"},
	}
	for _, tt := range tests {
		got, err := DatabaseEnv(tt.url)
		if tt.wantErr != "" {
			assert.ErrorContains(t, err, tt.wantErr, tt.url)
			continue
		}
		require.NoError(t, err, tt.url)
		assert.Equal(t, tt.want, got, tt.url)
	}
}
