package lambdafn_test

import (
	"context"
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/alternayte/queuebox/shared/config"
	"github.com/alternayte/queuebox/shared/lambdafn"
	"github.com/alternayte/queuebox/shared/store/postgres/dbtest"
	"github.com/alternayte/queuebox/shared/transform/jsonata"
)

// adminKey is the admin.auth key of the admin function in these tests.
const adminKey = "admin-key-for-tests"

// adminFunction is an admin function built as functions/admin/main.go builds it, on a
// private migrated database.
type adminFunction struct {
	rt      *lambdafn.Runtime
	pool    *pgxpool.Pool
	logs    *syncBuffer
	handler lambda.Handler
}

// newAdminFunction builds the function with admin.enabled and an api-key admin.auth, over
// which extra wins.
func newAdminFunction(t *testing.T, extra map[string]string) *adminFunction {
	t.Helper()
	pool, dbURL := dbtest.Migrated(t)
	env := map[string]string{
		"QUEUEBOX_DATABASE_URL":                  dbURL,
		"QUEUEBOX_DATABASE_USERNAME":             "postgres",
		"QUEUEBOX_DATABASE_PASSWORD":             "unused-with-trust-auth",
		"QUEUEBOX_DATABASE_MIGRATE":              "false",
		"QUEUEBOX_ADMIN_ENABLED":                 "true",
		"QUEUEBOX_ADMIN_AUTH_TYPE":               "api-key",
		"QUEUEBOX_ADMIN_AUTH_KEY":                adminKey,
		"QUEUEBOX_DESTINATIONS_RECEIVER_BASEURL": "http://127.0.0.1:9",
		"QUEUEBOX_ROUTES_0_TOPICPATTERN":         "order.**",
		"QUEUEBOX_ROUTES_0_DESTINATION":          "receiver",
		// transformBody asks for seconds: an evaluation that must succeed is not cut off on a
		// loaded machine (the default of 100 ms is a few times what one takes under -race).
		"QUEUEBOX_ADMIN_MAXTRANSFORMTIMEOUTMS": "30000",
	}
	// An empty value in extra removes the variable.
	for k, v := range extra {
		if v == "" {
			delete(env, k)
		} else {
			env[k] = v
		}
	}
	logs := &syncBuffer{}
	var out io.Writer = logs
	if testing.Verbose() {
		out = io.MultiWriter(logs, os.Stderr)
	}
	rt, err := lambdafn.Init(context.Background(), lambdafn.Options{
		Load:      config.LoadOptions{Env: env, ReadFile: noFile},
		LogOutput: out,
		Engine:    jsonata.NewEngine(jsonata.EngineOptions{}),
	})
	require.NoError(t, err, "Init")
	t.Cleanup(rt.Close)
	h, err := lambdafn.AdminHandler(rt)
	require.NoError(t, err, "AdminHandler")
	return &adminFunction{rt: rt, pool: pool, logs: logs, handler: lambda.NewHandler(h)}
}

// adminEvent returns the IAM-authorized API Gateway event of testdata with the method, path,
// body and extra headers of the request (a nil body sends none).
func adminEvent(t *testing.T, method, path string, body *string, headers map[string]string) []byte {
	t.Helper()
	raw, err := os.ReadFile("testdata/admin-iam-event.json")
	require.NoError(t, err)
	var ev lambdafn.HTTPRequest
	require.NoError(t, json.Unmarshal(raw, &ev))
	require.NotNil(t, ev.RequestContext.Authorizer, "the event carries the IAM authorizer's context")
	require.NotNil(t, ev.RequestContext.Authorizer.IAM)
	ev.RawPath, ev.RequestContext.HTTP.Path, ev.RequestContext.HTTP.Method = path, path, method
	if body != nil {
		ev.Body = *body
		ev.Headers["content-type"] = "application/json"
		ev.Headers["content-length"] = strconv.Itoa(len(*body))
	}
	maps.Copy(ev.Headers, headers)
	out, err := json.Marshal(ev)
	require.NoError(t, err)
	return out
}

// invoke runs the event through the function as the runtime would, and returns what the
// client sees.
func (f *adminFunction) invoke(t *testing.T, event []byte) (int, http.Header, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := f.handler.Invoke(ctx, event)
	require.NoError(t, err)
	var resp lambdafn.HTTPResponse
	require.NoError(t, json.Unmarshal(out, &resp))
	require.False(t, resp.IsBase64Encoded, "a JSON or text answer is not base64")
	hdr := http.Header{}
	for k, v := range resp.Headers {
		hdr.Set(k, v)
	}
	for k, vs := range resp.MultiValueHeaders {
		for _, v := range vs {
			hdr.Add(k, v)
		}
	}
	return resp.StatusCode, hdr, resp.Body
}

func ptr(s string) *string { return &s }

// transformBody is the request of spec/26's transform test example, with a timeoutMs of
// seconds.
const transformBody = `{"expression":"{ \"total\": $sum(items.(price * qty)) }","payload":{"items":[{"price":10,"qty":2},{"price":5,"qty":3}]},"mockTopic":"order.created","timeoutMs":30000}`

var transformAnswer = regexp.MustCompile(`^\{"success":true,"result":\{"total":35\},"context":\{"messageId":"[0-9a-f-]{36}","topic":"order\.created","attempt":0,"timestamp":"[^"]+"\}\}$`)

func TestAdminHandlerServesHealthAndNoMetrics(t *testing.T) {
	t.Parallel()
	f := newAdminFunction(t, nil)
	tests := []struct {
		name, method, path string
		status             int
		contentType        string
		body               string
	}{
		{"liveness", "GET", "/health/live", 200, "application/json", `{"status":"healthy","components":{"process":{"status":"up"}}}`},
		{"readiness", "GET", "/health/ready", 200, "application/json", `{"status":"healthy","components":{"database":{"status":"up"}}}`},
		{"the readiness alias", "GET", "/health", 200, "application/json", `{"status":"healthy","components":{"database":{"status":"up"}}}`},
		{"root", "GET", "/", 200, "text/plain; charset=utf-8", "QueueBox is running!"},
		{"no metrics on Lambda", "GET", "/metrics", 404, "text/plain; charset=utf-8", "404 page not found\n"},
		{"an unknown path", "GET", "/admin/nothing", 404, "text/plain; charset=utf-8", "404 page not found\n"},
		{"a wrong method", "POST", "/health/live", 405, "text/plain; charset=utf-8", "Method Not Allowed\n"},
	}
	for _, tt := range tests {
		status, hdr, body := f.invoke(t, adminEvent(t, tt.method, tt.path, nil, nil))
		assert.Equal(t, tt.status, status, "%s: status", tt.name)
		assert.Equal(t, tt.contentType, hdr.Get("Content-Type"), "%s: Content-Type", tt.name)
		assert.Equal(t, tt.body, body, "%s: body", tt.name)
	}
}

func TestAdminHandlerReadinessFailsWithoutTheDatabase(t *testing.T) {
	t.Parallel()
	f := newAdminFunction(t, nil)
	f.rt.DB.Close()

	status, _, body := f.invoke(t, adminEvent(t, "GET", "/health/ready", nil, nil))
	assert.Equal(t, http.StatusServiceUnavailable, status)
	var rep struct {
		Status     string                       `json:"status"`
		Components map[string]map[string]string `json:"components"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &rep), body)
	assert.Equal(t, "unhealthy", rep.Status)
	assert.Equal(t, []string{"database"}, keys(rep.Components))
	assert.Equal(t, "down", rep.Components["database"]["status"])
	assert.NotEmpty(t, rep.Components["database"]["error"])

	status, _, _ = f.invoke(t, adminEvent(t, "GET", "/health/live", nil, nil))
	assert.Equal(t, http.StatusOK, status, "liveness touches no dependency")
}

func keys(m map[string]map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func TestAdminHandlerChecksAdminAuth(t *testing.T) {
	t.Parallel()
	f := newAdminFunction(t, nil)

	// The SigV4 Authorization header of the IAM-authorized event is no admin credential.
	status, hdr, body := f.invoke(t, adminEvent(t, "POST", "/admin/transform/test", ptr(transformBody), nil))
	assert.Equal(t, http.StatusUnauthorized, status)
	assert.Equal(t, "application/json", hdr.Get("Content-Type"))
	assert.Equal(t, `{"success":false,"error":"Missing header X-API-Key"}`, body)

	status, _, body = f.invoke(t, adminEvent(t, "POST", "/admin/transform/test", ptr(transformBody), map[string]string{"x-api-key": "wrong"}))
	assert.Equal(t, http.StatusUnauthorized, status)
	assert.Equal(t, `{"success":false,"error":"Invalid API key"}`, body)

	status, _, body = f.invoke(t, adminEvent(t, "POST", "/admin/replay", ptr(`{"topic":"order.created"}`), nil))
	assert.Equal(t, http.StatusUnauthorized, status)
	assert.Equal(t, `{"error":"Missing header X-API-Key"}`, body)

	status, hdr, body = f.invoke(t, adminEvent(t, "POST", "/admin/transform/test", ptr(transformBody), map[string]string{"x-api-key": adminKey}))
	assert.Equal(t, http.StatusOK, status, body)
	assert.Equal(t, "application/json", hdr.Get("Content-Type"))
	assert.Regexp(t, transformAnswer, body)

	// admin.maxPayloadBytes applies to the decoded body, as on the local port.
	big := `{"topic":"` + strings.Repeat("x", 65536) + `"}`
	status, _, body = f.invoke(t, adminEvent(t, "POST", "/admin/replay", &big, map[string]string{"x-api-key": adminKey}))
	assert.Equal(t, http.StatusRequestEntityTooLarge, status)
	assert.Equal(t, `{"error":"Request body exceeds 65536 bytes"}`, body)
}

func TestAdminHandlerReplaysADeadRow(t *testing.T) {
	t.Parallel()
	f := newAdminFunction(t, nil)
	var dead, sent, pending string
	for _, row := range []struct {
		state string
		id    *string
	}{{"dead", &dead}, {"sent", &sent}, {"pending", &pending}} {
		require.NoError(t, f.pool.QueryRow(context.Background(), `
			INSERT INTO outbox (topic, payload, state, attempt, last_error)
			VALUES ('order.created', '{}'::jsonb, $1::text, 3, 'HTTP 500') RETURNING id::text`, row.state).Scan(row.id))
	}

	replay := `{"ids":["` + dead + `","` + pending + `"]}`
	status, hdr, body := f.invoke(t, adminEvent(t, "POST", "/admin/replay", &replay, map[string]string{"x-api-key": adminKey}))
	assert.Equal(t, http.StatusOK, status, body)
	assert.Equal(t, "application/json", hdr.Get("Content-Type"))
	assert.Equal(t, `{"moved":1}`, body, "only the dead row moves; a pending row never does")

	state := func(id string) (string, int, bool) {
		var s string
		var attempt int
		var hasError bool
		require.NoError(t, f.pool.QueryRow(context.Background(),
			`SELECT state, attempt, last_error IS NOT NULL FROM outbox WHERE id = $1`, id).Scan(&s, &attempt, &hasError))
		return s, attempt, hasError
	}
	s, attempt, hasError := state(dead)
	assert.Equal(t, "pending", s)
	assert.Zero(t, attempt)
	assert.False(t, hasError, "the replay clears last_error")
	s, _, _ = state(sent)
	assert.Equal(t, "sent", s, "a row outside the filter stays")
	assert.NotEmpty(t, f.logs.lines(t, "admin replay"), "the replay is logged")

	// The destination filter goes through the configured routes.
	status, _, body = f.invoke(t, adminEvent(t, "POST", "/admin/replay", ptr(`{"destination":"receiver"}`), map[string]string{"x-api-key": adminKey}))
	assert.Equal(t, http.StatusOK, status)
	assert.Equal(t, `{"moved":1}`, body, "the sent row of order.created")
}

func TestAdminHandlerWithoutAdminServesHealthOnly(t *testing.T) {
	t.Parallel()
	f := newAdminFunction(t, map[string]string{
		"QUEUEBOX_ADMIN_ENABLED": "false", "QUEUEBOX_ADMIN_AUTH_TYPE": "", "QUEUEBOX_ADMIN_AUTH_KEY": "",
	})
	assert.Len(t, f.logs.lines(t, "admin.enabled is false: this function serves the health routes only, and /admin/* answers 404"), 1)

	status, _, body := f.invoke(t, adminEvent(t, "POST", "/admin/transform/test", ptr(transformBody), map[string]string{"x-api-key": adminKey}))
	assert.Equal(t, http.StatusNotFound, status)
	assert.Equal(t, "404 page not found\n", body)
	status, _, _ = f.invoke(t, adminEvent(t, "GET", "/health/ready", nil, nil))
	assert.Equal(t, http.StatusOK, status)
}

// TestAdminHandlerBearerAuthMeetsSigV4 shows why the template configures admin.auth as an
// api-key: behind an IAM-authorized API the Authorization header carries the SigV4
// signature, so a bearer admin.auth refuses every request that API Gateway lets through.
func TestAdminHandlerBearerAuthMeetsSigV4(t *testing.T) {
	t.Parallel()
	f := newAdminFunction(t, map[string]string{
		"QUEUEBOX_ADMIN_AUTH_TYPE": "bearer", "QUEUEBOX_ADMIN_AUTH_KEY": "", "QUEUEBOX_ADMIN_AUTH_TOKEN": adminKey,
	})
	status, _, body := f.invoke(t, adminEvent(t, "POST", "/admin/transform/test", ptr(transformBody), nil))
	assert.Equal(t, http.StatusUnauthorized, status)
	assert.Equal(t, `{"success":false,"error":"Authorization header does not use the Bearer scheme"}`, body)
}
