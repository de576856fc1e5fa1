package admin_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/alternayte/queuebox/shared/admin"
	"github.com/alternayte/queuebox/shared/inboundauth"
	"github.com/alternayte/queuebox/shared/route"
	"github.com/alternayte/queuebox/shared/store"
	"github.com/alternayte/queuebox/shared/store/postgres"
	"github.com/alternayte/queuebox/shared/store/postgres/dbtest"
	"github.com/alternayte/queuebox/shared/transform/jsonata"
)

const token = "admin-token-5e1f"

// engine is shared: a runtime is expensive to create, and the engine is safe for concurrent use.
var engine = jsonata.NewEngine(jsonata.EngineOptions{})

type env struct {
	pool   *pgxpool.Pool
	store  *postgres.Store
	server *httptest.Server
}

// newEnv returns a handler whose transform test allows a timeoutMs of seconds: the tests that
// expect an answer send one, so that a loaded machine does not cut off an evaluation that must
// succeed (the default of 100 ms is a few times what one takes under the race detector).
func newEnv(t *testing.T, insecure bool) *env {
	t.Helper()
	return newEnvCapped(t, insecure, 30*time.Second)
}

// newEnvCapped returns a handler whose transform test caps the caller's timeoutMs at
// maxTransformTimeout.
func newEnvCapped(t *testing.T, insecure bool, maxTransformTimeout time.Duration) *env {
	t.Helper()
	pool, _ := dbtest.Migrated(t)
	st, err := postgres.New(pool, store.DefaultNames())
	if err != nil {
		t.Fatal(err)
	}
	var verifier inboundauth.Verifier
	if !insecure {
		auth := inboundauth.NewConfig(inboundauth.KindBearer)
		auth.Bearer.Token = inboundauth.NewSecret(token)
		if verifier, err = inboundauth.New(auth); err != nil {
			t.Fatal(err)
		}
	}
	h, err := admin.New(admin.Options{
		Verifier: verifier,
		Engine:   engine,
		Store:    st,
		Routes: route.NewTable([]route.Route{
			{Pattern: route.MustCompile("invoice.*"), Destination: "billing"},
			{Pattern: route.MustCompile("**"), Destination: "archive"},
		}),
		Destinations:        []string{"billing", "archive"},
		MaxTransformTimeout: maxTransformTimeout,
		MaxPayloadBytes:     2048,
		Logger:              slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	h.Register(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return &env{pool: pool, store: st, server: srv}
}

func (e *env) post(t *testing.T, path, body string, auth bool) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("POST", e.server.URL+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if auth {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type = %q", ct)
	}
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestTransformTest(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	code, body := e.post(t, "/admin/transform/test", `{
		"expression": "{ \"total\": $sum(items.(price * qty)), \"topic\": $topic }",
		"payload": {"items": [{"price": 10, "qty": 2}, {"price": 5, "qty": 3}]},
		"mockTopic": "order.created",
		"timeoutMs": 30000,
		"unknownField": true
	}`, true)
	if code != 200 {
		t.Fatalf("status %d: %s", code, body)
	}
	var got struct {
		Success bool
		Result  map[string]any
		Context struct {
			MessageID, Topic, Timestamp string
			Attempt                     int
		}
	}
	if err := json.Unmarshal([]byte(body), &got); err != nil {
		t.Fatal(err)
	}
	if !got.Success || got.Result["total"] != float64(35) || got.Result["topic"] != "order.created" {
		t.Errorf("answer = %s", body)
	}
	if got.Context.Topic != "order.created" || got.Context.Attempt != 0 || len(got.Context.MessageID) != 36 || !strings.HasSuffix(got.Context.Timestamp, "Z") {
		t.Errorf("context = %+v", got.Context)
	}

	code, body = e.post(t, "/admin/transform/test", `{"expression": "$topic", "payload": {}, "timeoutMs": 30000}`, true)
	if code != 200 || !strings.Contains(body, `"result":"test.topic"`) {
		t.Errorf("default mock topic: %d %s", code, body)
	}
}

func TestTransformTestRefusals(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	tests := []struct {
		name, body string
		auth       bool
		status     int
		prefix     string
	}{
		{"no credentials", `{"expression":"1","payload":{}}`, false, 401, `{"success":false,"error":"`},
		{"bad JSON", `{"expression":`, true, 400, `{"success":false,"error":"Invalid request: `},
		{"wrong type", `{"expression":42,"payload":{}}`, true, 400, `{"success":false,"error":"Invalid request: field expression must be a string"}`},
		{"no expression", `{"payload":{}}`, true, 400, `{"success":false,"error":"Invalid request: expression is required"}`},
		{"no payload", `{"expression":"1"}`, true, 400, `{"success":false,"error":"Invalid request: payload is required"}`},
		{"does not compile", `{"expression":"$sum(","payload":{}}`, true, 400, `{"success":false,"error":"Invalid expression: `},
		{"fails", `{"expression":"$error(\"boom\")","payload":{}}`, true, 400, `{"success":false,"error":"`},
		{"too big", `{"expression":"1","payload":"` + strings.Repeat("x", 3000) + `"}`, true, 413, `{"success":false,"error":"Request body exceeds 2048 bytes"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, body := e.post(t, "/admin/transform/test", tt.body, tt.auth)
			if code != tt.status || !strings.HasPrefix(body, tt.prefix) {
				t.Errorf("%d %s; want %d %s...", code, body, tt.status, tt.prefix)
			}
		})
	}
}

func TestTransformTestTimeoutIsClamped(t *testing.T) {
	t.Parallel()
	e := newEnvCapped(t, true, 300*time.Millisecond)
	start := time.Now()
	code, body := e.post(t, "/admin/transform/test",
		`{"expression":"( $loop := function($i){ $i < 1e12 ? $loop($i+1) : $i }; $loop(0) )","payload":{},"timeoutMs":600000}`, false)
	if code != 400 || !strings.HasPrefix(body, `{"success":false,"error":"`) {
		t.Errorf("runaway: %d %s", code, body)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("the runaway expression ran %s with a 300 ms ceiling", d)
	}
	// The engine (shared by every handler of these tests) is still healthy: a handler whose cap
	// leaves a loaded machine time answers an ordinary expression.
	healthy := newEnv(t, true)
	if code, body := healthy.post(t, "/admin/transform/test", `{"expression":"1 + 1","payload":{},"timeoutMs":30000}`, false); code != 200 || !strings.Contains(body, `"result":2`) {
		t.Errorf("after the runaway: %d %s", code, body)
	}
}

// seed inserts rows and drives each to the given state.
func seed(t *testing.T, e *env, rows map[string]string) map[string]string {
	t.Helper()
	ctx := context.Background()
	ids := map[string]string{}
	for name, topic := range rows {
		id, err := e.store.OutboxInsert(ctx, store.OutboxInsertParams{Topic: topic, Payload: json.RawMessage(`{}`)})
		if err != nil {
			t.Fatal(err)
		}
		ids[name] = id
	}
	return ids
}

func setState(t *testing.T, e *env, id, state string, age time.Duration) {
	t.Helper()
	_, err := e.pool.Exec(context.Background(),
		`UPDATE outbox SET state = $2, attempt = 3, last_error = 'x', created_at = now() - $3::interval WHERE id = $1`,
		id, state, fmt.Sprintf("%d seconds", int(age.Seconds())))
	if err != nil {
		t.Fatal(err)
	}
}

type outboxRow struct {
	State     string
	Attempt   int
	LastError *string
}

func readRow(t *testing.T, e *env, id string) outboxRow {
	t.Helper()
	var r outboxRow
	if err := e.pool.QueryRow(context.Background(), `SELECT state, attempt, last_error FROM outbox WHERE id = $1`, id).Scan(&r.State, &r.Attempt, &r.LastError); err != nil {
		t.Fatal(err)
	}
	return r
}

func TestReplay(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		body  func(ids map[string]string) string
		moved []string
	}{
		{"by ids, only finished rows move", func(ids map[string]string) string {
			return fmt.Sprintf(`{"ids":[%q,%q,%q]}`, ids["deadInvoice"], ids["pendingInvoice"], ids["processingOrder"])
		}, []string{"deadInvoice"}},
		{"by topic", func(map[string]string) string { return `{"topic":"order.created"}` }, []string{"sentOrder", "deadOrderOld"}},
		{"by destination and window", func(map[string]string) string {
			after := time.Now().Add(-2 * time.Hour).UTC().Format(time.RFC3339)
			return fmt.Sprintf(`{"destination":"billing","createdAfter":%q}`, after)
		}, []string{"deadInvoice", "sentInvoice"}},
		{"destination narrowed by topics", func(map[string]string) string {
			return `{"destination":"archive","topics":["order.created","invoice.paid"]}`
		}, []string{"sentOrder", "deadOrderOld"}},
		{"destination and topics that do not overlap", func(map[string]string) string {
			return `{"destination":"billing","topics":["order.created"]}`
		}, nil},
		{"a destination that no topic routes to", func(map[string]string) string { return `{"destination":"nowhere"}` }, nil},
		{"created before", func(map[string]string) string {
			before := time.Now().Add(-24 * time.Hour).UTC().Format(time.RFC3339)
			return fmt.Sprintf(`{"createdBefore":%q}`, before)
		}, []string{"deadOrderOld"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, false)
			ids := seed(t, e, map[string]string{
				"deadInvoice": "invoice.paid", "sentInvoice": "invoice.sent", "pendingInvoice": "invoice.paid",
				"sentOrder": "order.created", "deadOrderOld": "order.created", "processingOrder": "order.created",
			})
			setState(t, e, ids["deadInvoice"], "dead", time.Hour)
			setState(t, e, ids["sentInvoice"], "sent", time.Hour)
			setState(t, e, ids["pendingInvoice"], "pending", time.Hour)
			setState(t, e, ids["sentOrder"], "sent", time.Hour)
			setState(t, e, ids["deadOrderOld"], "dead", 48*time.Hour)
			setState(t, e, ids["processingOrder"], "processing", time.Hour)
			code, body := e.post(t, "/admin/replay", tt.body(ids), true)
			if code != 200 || body != fmt.Sprintf(`{"moved":%d}`, len(tt.moved)) {
				t.Fatalf("%d %s, want moved %d", code, body, len(tt.moved))
			}
			for _, name := range tt.moved {
				if r := readRow(t, e, ids[name]); r.State != "pending" || r.Attempt != 0 || r.LastError != nil {
					t.Errorf("%s after replay = %+v", name, r)
				}
			}
			if r := readRow(t, e, ids["processingOrder"]); r.State != "processing" {
				t.Errorf("a processing row moved: %+v", r)
			}
		})
	}
}

func TestReplayRefusals(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	tests := []struct {
		name, body string
		auth       bool
		status     int
		want       string
	}{
		{"no filter", `{}`, true, 400, `{"error":"A replay needs at least one filter."}`},
		{"only unknown fields", `{"destinaton":"billing"}`, true, 400, `{"error":"A replay needs at least one filter."}`},
		{"bad JSON", `{"ids":`, true, 400, `{"error":"Invalid request: the body is not a JSON object"}`},
		{"not a UUID", `{"ids":["nope"]}`, true, 400, `{"error":"Invalid request: \"nope\" is not a UUID"}`},
		{"bad time", `{"createdAfter":"yesterday"}`, true, 400, `{"error":"Invalid request: a time must be an ISO-8601 instant such as 2026-09-01T00:00:00Z"}`},
		{"no credentials", `{"topic":"x"}`, false, 401, `{"error":"Missing bearer token"}`},
		{"too big", `{"topics":["` + strings.Repeat("x", 3000) + `"]}`, true, 413, `{"error":"Request body exceeds 2048 bytes"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, body := e.post(t, "/admin/replay", tt.body, tt.auth)
			if code != tt.status || body != tt.want {
				t.Errorf("%d %s; want %d %s", code, body, tt.status, tt.want)
			}
		})
	}
}
