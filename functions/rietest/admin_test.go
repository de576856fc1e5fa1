package rietest

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"net/http"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/alternayte/queuebox/shared/lambdafn"
	"github.com/alternayte/queuebox/shared/localserver"
	"github.com/alternayte/queuebox/shared/service"
	"github.com/alternayte/queuebox/shared/store/postgres/dbtest"
)

// adminKey is the admin.auth key of functions/admin/testdata/post-*.json.
const adminKey = "admin-key-for-tests"

// adminSettings are the admin section of both sides: the api-key admin.auth that the
// template configures.
var adminSettings = map[string]string{
	"QUEUEBOX_ADMIN_ENABLED":   "true",
	"QUEUEBOX_ADMIN_AUTH_TYPE": "api-key",
	"QUEUEBOX_ADMIN_AUTH_KEY":  adminKey,
}

// localManagement runs the local process (localserver.New and Run, as `queuebox serve`
// does) with a management port on its own migrated database, and returns the management
// port's base URL and a pool on the database.
func localManagement(t *testing.T) (string, *pgxpool.Pool) {
	t.Helper()
	pool, dbURL := dbtest.Migrated(t)
	port := func() string {
		addr, err := freeAddr()
		require.NoError(t, err)
		_, p, err := net.SplitHostPort(addr)
		require.NoError(t, err)
		return p
	}
	env := map[string]string{
		"QUEUEBOX_DATABASE_URL":           dbURL,
		"QUEUEBOX_DATABASE_USERNAME":      "postgres",
		"QUEUEBOX_DATABASE_PASSWORD":      "unused-with-trust-auth",
		"QUEUEBOX_DATABASE_MIGRATE":       "false",
		"QUEUEBOX_SERVER_HTTPPORT":        port(),
		"QUEUEBOX_SERVER_MANAGEMENTPORT":  port(),
		"QUEUEBOX_OUTBOX_POLLINTERVALMS":  "50",
		"QUEUEBOX_INBOX_RELAY_ENABLED":    "false",
		"QUEUEBOX_RETENTION_ENABLED":      "false",
		"QUEUEBOX_OUTBOX_CAPTURE_ENABLED": "false",
	}
	maps.Copy(env, adminSettings)
	cfg, _, err := service.Load(service.LoadOptions{Env: env, ReadFile: noFile})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	local, err := localserver.New(ctx, cfg, testLog())
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- local.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	select {
	case <-local.Ready():
	case err := <-done:
		t.Fatalf("the local process stopped before it listened: %v", err)
	}
	addrs := local.Addrs()
	require.Len(t, addrs, 2, "the data port and the management port")
	_, mgmtPort, err := net.SplitHostPort(addrs[1].String())
	require.NoError(t, err)
	return "http://127.0.0.1:" + mgmtPort, pool
}

// adminRequest is one of functions/admin/testdata's events, decoded, and its JSON.
func adminRequest(t *testing.T, name string) lambdafn.HTTPRequest {
	t.Helper()
	var ev lambdafn.HTTPRequest
	require.NoError(t, json.Unmarshal(readFile(t, filepath.Join("..", "admin", "testdata", name)), &ev))
	return ev
}

// withBody returns ev with body as its body and content-length.
func withBody(ev lambdafn.HTTPRequest, body string) lambdafn.HTTPRequest {
	ev.Headers = maps.Clone(ev.Headers)
	ev.Body = body
	ev.Headers["content-length"] = strconv.Itoa(len(body))
	return ev
}

// withoutHeader returns ev without the header name.
func withoutHeader(ev lambdafn.HTTPRequest, name string) lambdafn.HTTPRequest {
	ev.Headers = maps.Clone(ev.Headers)
	delete(ev.Headers, name)
	return ev
}

// invokeEvent invokes the function with ev and decodes its API Gateway answer.
func invokeEvent(t *testing.T, e *Emulator, ev lambdafn.HTTPRequest) answer {
	t.Helper()
	raw, err := json.Marshal(ev)
	require.NoError(t, err)
	return decodeLambda(t, invoke(t, e, raw).Body)
}

// insertDead inserts a dead outbox row and returns its id.
func insertDead(t *testing.T, pool *pgxpool.Pool) string {
	t.Helper()
	var id string
	require.NoError(t, pool.QueryRow(context.Background(), `
		INSERT INTO outbox (topic, payload, state, attempt, last_error)
		VALUES ('order.created', '{"n":1}'::jsonb, 'dead', 5, 'HTTP 500 from orders-api') RETURNING id::text`).Scan(&id))
	return id
}

var transformContextRE = regexp.MustCompile(`"messageId":"[0-9a-f-]{36}","topic":"order\.created","attempt":0,"timestamp":"[0-9T:.Z-]+"`)

// TestAdminAnswersAsTheLocalManagementPort invokes the built admin function under the
// emulator with IAM-authorized API Gateway HTTP API events (functions/admin/testdata) and
// sends the same requests to the management port of the local process: the health and admin
// routes answer with the same status, Content-Type and body (generated identifiers aside);
// readiness differs by design (the function checks the database only), and /metrics exists
// only locally.
func TestAdminAnswersAsTheLocalManagementPort(t *testing.T) {
	t.Parallel()
	local, localPool := localManagement(t)
	fn, fnPool := startFunction(t, "admin", adminSettings)

	// Liveness, the first invoke: Init migrates the empty database.
	live := adminRequest(t, "get-health-live.json")
	got := invokeEvent(t, fn, live)
	want := sendLocal(t, local, live)
	assert.Equal(t, answer{Status: 200, ContentType: []string{"application/json"},
		Body: `{"status":"healthy","components":{"process":{"status":"up"}}}`}, got)
	assert.Equal(t, want, got, "liveness")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	initDuration, err := fn.InitDuration(ctx)
	require.NoError(t, err)
	t.Logf("admin function init, migrating an empty database: %s", initDuration)

	// Readiness: the function checks the database; the local process also its poller.
	for _, name := range []string{"get-health-ready.json", "get-health.json"} {
		ev := adminRequest(t, name)
		got := invokeEvent(t, fn, ev)
		assert.Equal(t, answer{Status: 200, ContentType: []string{"application/json"},
			Body: `{"status":"healthy","components":{"database":{"status":"up"}}}`}, got, name)
		var want answer
		deadline := time.Now().Add(10 * time.Second)
		for {
			// The local loops start just after the ports listen.
			if want = sendLocal(t, local, ev); want.Status == http.StatusOK || time.Now().After(deadline) {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		assert.Equal(t, http.StatusOK, want.Status, "%s: the local status; body %s", name, want.Body)
		assert.Equal(t, want.ContentType, got.ContentType, name)
		var rep struct {
			Status     string                     `json:"status"`
			Components map[string]json.RawMessage `json:"components"`
		}
		require.NoError(t, json.Unmarshal([]byte(want.Body), &rep), want.Body)
		assert.Equal(t, "healthy", rep.Status)
		assert.JSONEq(t, `{"status":"up"}`, string(rep.Components["database"]), "%s: the local database component", name)
		assert.Contains(t, rep.Components, "outbox-poller", "%s: the local process reports its poller loop", name)
	}

	// The admin routes without credentials: 401 with the same body. The SigV4 Authorization
	// header that API Gateway passes on is not an admin credential.
	transform := adminRequest(t, "post-transform-test.json")
	for _, ev := range []lambdafn.HTTPRequest{withoutHeader(transform, "x-api-key"), withoutHeader(adminRequest(t, "post-replay.json"), "x-api-key")} {
		got := invokeEvent(t, fn, ev)
		want := sendLocal(t, local, ev)
		assert.Equal(t, http.StatusUnauthorized, got.Status, "%s without credentials", ev.RawPath)
		assert.Equal(t, want, got, "%s without credentials", ev.RawPath)
	}
	assert.Equal(t, `{"success":false,"error":"Missing header X-API-Key"}`, invokeEvent(t, fn, withoutHeader(transform, "x-api-key")).Body)

	// The transform test with credentials: spec/26's example.
	got = invokeEvent(t, fn, transform)
	want = sendLocal(t, local, transform)
	assert.Equal(t, http.StatusOK, got.Status, got.Body)
	assert.Regexp(t, `^\{"success":true,"result":\{"total":35\},"context":\{`+transformContextRE.String()+`\}\}$`, got.Body)
	assert.Equal(t, want.Status, got.Status)
	assert.Equal(t, want.ContentType, got.ContentType)
	assert.Equal(t, transformContextRE.ReplaceAllString(want.Body, "<context>"), transformContextRE.ReplaceAllString(got.Body, "<context>"))

	// A replay of a dead row: both move it, and the function's row is pending again.
	replay := adminRequest(t, "post-replay.json")
	fnDead, localDead := insertDead(t, fnPool), insertDead(t, localPool)
	got = invokeEvent(t, fn, withBody(replay, fmt.Sprintf(`{"ids":[%q]}`, fnDead)))
	want = sendLocal(t, local, withBody(replay, fmt.Sprintf(`{"ids":[%q]}`, localDead)))
	assert.Equal(t, answer{Status: 200, ContentType: []string{"application/json"}, Body: `{"moved":1}`}, got)
	assert.Equal(t, want, got, "replay")
	var state string
	var attempt int
	var lastError *string
	require.NoError(t, fnPool.QueryRow(context.Background(),
		`SELECT state, attempt, last_error FROM outbox WHERE id = $1`, fnDead).Scan(&state, &attempt, &lastError))
	assert.Equal(t, "pending", state, "the replayed row")
	assert.Zero(t, attempt, "the replayed row's attempt")
	assert.Nil(t, lastError, "the replayed row's last_error")

	// No /metrics on Lambda: the function answers 404 as for any path it does not serve.
	metrics := adminRequest(t, "get-metrics.json")
	got = invokeEvent(t, fn, metrics)
	assert.Equal(t, answer{Status: 404, ContentType: []string{"text/plain; charset=utf-8"}, Body: "404 page not found\n"}, got)
	want = sendLocal(t, local, metrics)
	assert.Equal(t, http.StatusOK, want.Status, "the local management port serves /metrics")
}
