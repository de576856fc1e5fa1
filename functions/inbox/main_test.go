package main

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
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/alternayte/queuebox/shared/config"
	"github.com/alternayte/queuebox/shared/inbox"
	"github.com/alternayte/queuebox/shared/lambdafn"
	"github.com/alternayte/queuebox/shared/service"
	"github.com/alternayte/queuebox/shared/store/postgres/dbtest"
	"github.com/alternayte/queuebox/shared/transform/jsonata"
)

// hmacSecret signed the x-signature headers of testdata/hmac-signed.json.
const hmacSecret = "whsec-equivalence-test"

// env is the configuration of both sides: three HTTP sources and a 512-byte body cap.
func env(dbURL string) map[string]string {
	return map[string]string{
		"QUEUEBOX_DATABASE_URL":                                dbURL,
		"QUEUEBOX_DATABASE_USERNAME":                           "postgres",
		"QUEUEBOX_DATABASE_PASSWORD":                           "unused-with-trust-auth",
		"QUEUEBOX_DATABASE_MIGRATE":                            "false",
		"QUEUEBOX_INBOX_MAXBODYBYTES":                          "512",
		"QUEUEBOX_SOURCES_ORDERS_TYPE":                         "http",
		"QUEUEBOX_SOURCES_ORDERS_PATH":                         "/orders",
		"QUEUEBOX_SOURCES_ORDERS_IDEMPOTENCYKEYPATH":           "$.id",
		"QUEUEBOX_SOURCES_ORDERS_EVENTTYPEPATH":                "$.type",
		"QUEUEBOX_SOURCES_ORDERS_AGGREGATEIDPATH":              "$.orderId",
		"QUEUEBOX_SOURCES_SIGNED_TYPE":                         "http",
		"QUEUEBOX_SOURCES_SIGNED_PATH":                         "/signed",
		"QUEUEBOX_SOURCES_SIGNED_IDEMPOTENCYKEYPATH":           "$.id",
		"QUEUEBOX_SOURCES_SIGNED_EVENTTYPEPATH":                "$.type",
		"QUEUEBOX_SOURCES_SIGNED_AUTH_SECRET":                  hmacSecret,
		"QUEUEBOX_SOURCES_SIGNED_AUTH_HEADERNAME":              "X-Signature",
		"QUEUEBOX_SOURCES_SIGNED_AUTH_SIGNATUREPREFIX":         "sha256=",
		"QUEUEBOX_SOURCES_LIMITED_TYPE":                        "http",
		"QUEUEBOX_SOURCES_LIMITED_PATH":                        "/limited",
		"QUEUEBOX_SOURCES_LIMITED_IDEMPOTENCYKEYPATH":          "$.id",
		"QUEUEBOX_SOURCES_LIMITED_EVENTTYPEPATH":               "$.type",
		"QUEUEBOX_SOURCES_LIMITED_CONSUMPTION":                 "pull",
		"QUEUEBOX_SOURCES_LIMITED_RATELIMIT_REQUESTSPERMINUTE": "1",
	}
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

// localSide is the data port as the local process serves it, on its own database.
func localSide(t *testing.T) (*httptest.Server, *pgxpool.Pool) {
	t.Helper()
	pool, dbURL := dbtest.Migrated(t)
	ctx := context.Background()
	cfg, _, err := service.Load(service.LoadOptions{Env: env(dbURL), ReadFile: noFile})
	require.NoError(t, err)
	log := testLog()
	db, err := service.Open(ctx, cfg, log)
	require.NoError(t, err)
	t.Cleanup(db.Close)
	app, err := service.Build(context.Background(), cfg, service.AppOptions{Database: db, Logger: log, Inbox: true})
	require.NoError(t, err)
	in := app.Inbox
	// The options of localserver's data port while it is not shutting down.
	srv := httptest.NewServer(service.DataHandler(in, service.DataOptions{MaxBodyBytes: cfg.Inbox.MaxBodyBytes}))
	t.Cleanup(srv.Close)
	return srv, pool
}

// lambdaSide is the function as main builds it, on its own database, invoked through
// aws-lambda-go's decoding and encoding.
func lambdaSide(t *testing.T) (lambda.Handler, *pgxpool.Pool) {
	t.Helper()
	pool, dbURL := dbtest.Migrated(t)
	rt, err := lambdafn.Init(context.Background(), lambdafn.Options{
		Load:      config.LoadOptions{Env: env(dbURL), ReadFile: noFile},
		LogOutput: io.Discard,
		Engine:    jsonata.NewEngine(jsonata.EngineOptions{}),
	})
	require.NoError(t, err)
	t.Cleanup(rt.Close)
	h, err := newHandler(rt)
	require.NoError(t, err)
	return lambda.NewHandler(h), pool
}

// answer is what a client sees.
type answer struct {
	Status int
	Header http.Header
	Body   string
}

func readEvent(t *testing.T, name string) ([]byte, lambdafn.HTTPRequest) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", name))
	require.NoError(t, err)
	var ev lambdafn.HTTPRequest
	require.NoError(t, json.Unmarshal(raw, &ev))
	return raw, ev
}

// sendLocal sends the request that ev describes to the local data port, as the client that
// API Gateway received it from sent it: a body without content-length goes chunked.
func sendLocal(t *testing.T, base, path string, ev lambdafn.HTTPRequest) answer {
	t.Helper()
	body := []byte(ev.Body)
	if ev.IsBase64Encoded {
		var err error
		body, err = base64.StdEncoding.DecodeString(ev.Body)
		require.NoError(t, err)
	}
	url := base + path
	if ev.RawQueryString != "" {
		url += "?" + ev.RawQueryString
	}
	req, err := http.NewRequest(ev.RequestContext.HTTP.Method, url, bytes.NewReader(body))
	require.NoError(t, err)
	if _, ok := ev.Headers["content-length"]; !ok && len(body) > 0 {
		req.Body = io.NopCloser(bytes.NewReader(body))
		req.ContentLength = -1
	}
	for name, value := range ev.Headers {
		switch name {
		case "host":
			req.Host = value
		case "content-length":
		default:
			req.Header.Set(name, value)
		}
	}
	if len(ev.Cookies) > 0 {
		req.Header.Set("Cookie", strings.Join(ev.Cookies, "; "))
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return answer{Status: resp.StatusCode, Header: resp.Header, Body: string(b)}
}

// invokeLambda invokes the function with the event JSON as the runtime would.
func invokeLambda(t *testing.T, h lambda.Handler, raw []byte, requestID string) answer {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ctx = lambdacontext.NewContext(ctx, &lambdacontext.LambdaContext{AwsRequestID: requestID})
	out, err := h.Invoke(ctx, raw)
	require.NoError(t, err)
	var resp lambdafn.HTTPResponse
	require.NoError(t, json.Unmarshal(out, &resp))
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
	return answer{Status: resp.StatusCode, Header: hdr, Body: body}
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

// TestLambdaAnswersAsTheLocalDataPort sends the same requests to the local data port and, as
// API Gateway HTTP API events, to the function: every answer must have the same status, the
// same Content-Type, X-Correlation-Id and Retry-After, and the same body byte for byte
// (the generated messageId aside); and both databases must hold the same rows.
func TestLambdaAnswersAsTheLocalDataPort(t *testing.T) {
	t.Parallel()
	local, localPool := localSide(t)
	fn, fnPool := lambdaSide(t)

	tests := []struct {
		name       string
		event      string
		localPath  string // the path the client asked the local port for: rawPath without the stage
		wantStatus int
		wantBody   string // after normalising the messageId
	}{
		{name: "GET /", event: "get-root.json", localPath: "/", wantStatus: 200, wantBody: "QueueBox is running!"},
		{name: "a JSON body", event: "json-body.json", localPath: "/inbox/orders", wantStatus: 202, wantBody: `{"messageId":"<uuid>"}`},
		{name: "a base64 body", event: "base64-body.json", localPath: "/inbox/orders", wantStatus: 202, wantBody: `{"messageId":"<uuid>"}`},
		{name: "an HMAC-signed body", event: "hmac-signed.json", localPath: "/inbox/signed", wantStatus: 202, wantBody: `{"messageId":"<uuid>"}`},
		{name: "a duplicate", event: "duplicate.json", localPath: "/inbox/orders", wantStatus: 200, wantBody: `{"status":"duplicate"}`},
		{name: "a bad signature", event: "bad-signature.json", localPath: "/inbox/signed", wantStatus: 401},
		{name: "an oversized body", event: "oversized.json", localPath: "/inbox/orders", wantStatus: 413,
			wantBody: `{"error":"Request body exceeds 512 bytes"}`},
		{name: "an oversized base64 body without content-length", event: "oversized-base64-no-length.json", localPath: "/inbox/orders",
			wantStatus: 413, wantBody: `{"error":"Request body exceeds 512 bytes"}`},
		{name: "an unknown path", event: "unknown-path.json", localPath: "/inbox/nowhere", wantStatus: 404, wantBody: `{"error":"Not found"}`},
		{name: "a named stage", event: "named-stage.json", localPath: "/inbox/orders", wantStatus: 202, wantBody: `{"messageId":"<uuid>"}`},
		{name: "invalid JSON", event: "invalid-json.json", localPath: "/inbox/orders", wantStatus: 400, wantBody: `{"error":"Invalid JSON"}`},
		{name: "within the rate limit", event: "rate-limited.json", localPath: "/inbox/limited", wantStatus: 202, wantBody: `{"messageId":"<uuid>"}`},
		{name: "over the rate limit", event: "rate-limited.json", localPath: "/inbox/limited", wantStatus: 429, wantBody: ""},
	}
	// In order: the duplicate and the rate limit depend on the requests before them.
	for i, tt := range tests {
		raw, ev := readEvent(t, tt.event)
		want := sendLocal(t, local.URL, tt.localPath, ev)
		got := invokeLambda(t, fn, raw, fmt.Sprintf("req-%d", i))

		assert.Equal(t, tt.wantStatus, want.Status, "%s: the local status", tt.name)
		assert.Equal(t, want.Status, got.Status, "%s: status", tt.name)
		for _, name := range []string{"Content-Type", "Retry-After"} {
			assert.Equal(t, want.Header.Values(name), got.Header.Values(name), "%s: %s", tt.name, name)
		}
		wantCorr, gotCorr := want.Header.Get(inbox.CorrelationHeader), got.Header.Get(inbox.CorrelationHeader)
		if sent, ok := ev.Headers["x-correlation-id"]; ok {
			assert.Equal(t, sent, wantCorr, "%s: the local X-Correlation-Id", tt.name)
			assert.Equal(t, wantCorr, gotCorr, "%s: X-Correlation-Id", tt.name)
		} else {
			// Both generate one, or neither answers with one.
			assert.Equal(t, wantCorr == "", gotCorr == "", "%s: X-Correlation-Id %q and %q", tt.name, wantCorr, gotCorr)
			if wantCorr != "" {
				assert.Regexp(t, uuidRE, wantCorr, "%s: local X-Correlation-Id", tt.name)
				assert.Regexp(t, uuidRE, gotCorr, "%s: Lambda X-Correlation-Id", tt.name)
			}
		}
		wantBody, gotBody := normalised(t, "local", want.Body), normalised(t, "lambda", got.Body)
		if tt.wantBody != "" || tt.wantStatus == 429 {
			assert.Equal(t, tt.wantBody, wantBody, "%s: the local body", tt.name)
		}
		assert.Equal(t, wantBody, gotBody, "%s: body", tt.name)
		if tt.wantStatus == 429 {
			assert.NotEmpty(t, want.Header.Get("Retry-After"), "%s: Retry-After", tt.name)
		}
	}

	// Both sides stored the same rows, with the same payloads and headers.
	wantRows, gotRows := inboxRows(t, localPool), inboxRows(t, fnPool)
	assert.Equal(t, []string{"limited/lim-1", "orders/evt-1", "orders/evt-2", "orders/evt-3", "signed/pay-1"}, slices.Sorted(maps.Keys(wantRows)))
	assert.Equal(t, wantRows, gotRows)
	assert.Contains(t, gotRows["orders/evt-2"]["payload"], "café ☕", "the base64 body is stored decoded")
}

// inboxRows returns every inbox row by source/idempotency key, its generated correlation
// identifier replaced.
func inboxRows(t *testing.T, pool *pgxpool.Pool) map[string]map[string]any {
	t.Helper()
	rows, err := pool.Query(context.Background(), `
		SELECT source, idempotency_key, coalesce(event_type, ''), coalesce(aggregate_id, ''),
		       payload::text, headers::text, coalesce(correlation_id, ''), consumption, state
		FROM inbox`)
	require.NoError(t, err)
	defer rows.Close()
	out := map[string]map[string]any{}
	for rows.Next() {
		var source, key, eventType, aggregateID, payload, headers, corr, consumption, state string
		require.NoError(t, rows.Scan(&source, &key, &eventType, &aggregateID, &payload, &headers, &corr, &consumption, &state))
		if uuidRE.MatchString(corr) {
			corr = "<uuid>"
		}
		var hdr map[string]string
		require.NoError(t, json.Unmarshal([]byte(headers), &hdr))
		out[source+"/"+key] = map[string]any{
			"eventType": eventType, "aggregateId": aggregateID, "payload": payload, "headers": hdr,
			"correlationId": corr, "consumption": consumption, "state": state,
		}
	}
	require.NoError(t, rows.Err())
	return out
}
