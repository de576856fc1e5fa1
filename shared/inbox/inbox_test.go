package inbox_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/alternayte/queuebox/shared/filter"
	"github.com/alternayte/queuebox/shared/inbox"
	"github.com/alternayte/queuebox/shared/store"
	"github.com/alternayte/queuebox/shared/store/postgres"
	"github.com/alternayte/queuebox/shared/store/postgres/dbtest"
)

// countingMetrics records every measurement.
type countingMetrics struct {
	mu     sync.Mutex
	counts map[string]int
}

func (m *countingMetrics) add(key string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.counts == nil {
		m.counts = map[string]int{}
	}
	m.counts[key]++
}

func (m *countingMetrics) InboxMessage(status string)   { m.add("message:" + status) }
func (m *countingMetrics) InboxRejection(reason string) { m.add("rejection:" + reason) }
func (m *countingMetrics) InboxFiltered(source string)  { m.add("filtered:" + source) }

func (m *countingMetrics) InboxUndecodable(source string) { m.add("undecodable:" + source) }
func (m *countingMetrics) InboxTooLarge(source string)    { m.add("too_large:" + source) }
func (m *countingMetrics) InboxTombstoneSkipped(source string) {
	m.add("tombstone_skipped:" + source)
}

func (m *countingMetrics) get(key string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.counts[key]
}

// countingWaker counts the wake-ups.
type countingWaker struct{ n atomic.Int64 }

func (w *countingWaker) Wake() { w.n.Add(1) }

// tokenVerifier is a tiny inboundauth.Verifier: the header must hold the token. It records
// the body it was given.
type tokenVerifier struct {
	header, token string
	mu            sync.Mutex
	bodies        []string
}

func (v *tokenVerifier) Verify(h http.Header, body []byte, _ time.Time) error {
	v.mu.Lock()
	v.bodies = append(v.bodies, string(body))
	v.mu.Unlock()
	if h.Get(v.header) == "" {
		return errors.New("Missing header " + v.header)
	}
	if h.Get(v.header) != v.token {
		return errors.New("Invalid token")
	}
	return nil
}

func (v *tokenVerifier) CredentialHeaders() []string { return []string{v.header} }

// env is one handler on a private database.
type env struct {
	pool    *pgxpool.Pool
	handler *inbox.Handler
	server  *httptest.Server
	metrics *countingMetrics
	waker   *countingWaker
	// lastContentLength is the Content-Length of the last request that the server saw.
	lastContentLength atomic.Int64
}

// newEnv builds a handler with the sources on a fresh migrated database. edit may change the
// options before New.
func newEnv(t testing.TB, sources []inbox.Source, edit func(*inbox.Options)) *env {
	t.Helper()
	pool, _ := dbtest.Migrated(t)
	st, err := postgres.New(pool, store.DefaultNames())
	require.NoError(t, err)
	e := &env{pool: pool, metrics: &countingMetrics{}, waker: &countingWaker{}}
	opts := inbox.Options{
		MaxBodyBytes: 1024,
		Sources:      sources,
		Store:        st,
		Metrics:      e.metrics,
		Waker:        e.waker,
		Logger:       slog.New(slog.DiscardHandler),
	}
	if edit != nil {
		edit(&opts)
	}
	e.handler, err = inbox.New(opts)
	require.NoError(t, err)
	e.server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e.lastContentLength.Store(r.ContentLength)
		e.handler.ServeHTTP(w, r)
	}))
	t.Cleanup(e.server.Close)
	return e
}

// response is an answer as the tests read it.
type response struct {
	status  int
	body    string
	headers http.Header
}

func (e *env) post(t testing.TB, path, body string, headers map[string]string) response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, e.server.URL+path, strings.NewReader(body))
	require.NoError(t, err)
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	return e.do(t, req)
}

func (e *env) do(t testing.TB, req *http.Request) response {
	t.Helper()
	res, err := e.server.Client().Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	return response{status: res.StatusCode, body: string(b), headers: res.Header}
}

// row is one inbox row as the tests read it.
type row struct {
	ID, Source, Key, AggregateID, EventType, Payload, Headers, CorrelationID, Consumption, State, LastError string
}

func (e *env) rows(t testing.TB, source string) []row { return sourceRows(t, e.pool, source) }

// sourceRows reads the inbox rows of a source, oldest first.
func sourceRows(t testing.TB, pool *pgxpool.Pool, source string) []row {
	t.Helper()
	rs, err := pool.Query(context.Background(), `
		SELECT id::text, source, idempotency_key, coalesce(aggregate_id, ''), coalesce(event_type, ''),
		       payload::text, headers::text, coalesce(correlation_id, ''), consumption, state,
		       coalesce(last_error, '')
		FROM inbox WHERE source = $1 ORDER BY created_at, id`, source)
	require.NoError(t, err)
	defer rs.Close()
	var out []row
	for rs.Next() {
		var r row
		require.NoError(t, rs.Scan(&r.ID, &r.Source, &r.Key, &r.AggregateID, &r.EventType, &r.Payload,
			&r.Headers, &r.CorrelationID, &r.Consumption, &r.State, &r.LastError))
		out = append(out, r)
	}
	require.NoError(t, rs.Err())
	return out
}

func assertJSONAnswer(t *testing.T, r response, status int, body string) {
	t.Helper()
	assert.Equal(t, status, r.status, r.body)
	assert.Equal(t, body, r.body)
	assert.Equal(t, "application/json", r.headers.Get("Content-Type"))
}

func TestTutorialReceiveAWebhook(t *testing.T) {
	t.Parallel()
	e := newEnv(t, []inbox.Source{{Name: "orders", Path: "/orders", IdempotencyKeyPath: "$.id", Consumption: "pull"}}, nil)
	const body = `{"id":"order-1","total":42}`

	first := e.post(t, "/inbox/orders", body, map[string]string{"Content-Type": "application/json"})
	require.Equal(t, http.StatusAccepted, first.status, first.body)
	assert.Equal(t, "application/json", first.headers.Get("Content-Type"))
	var accepted struct {
		MessageID string `json:"messageId"`
	}
	require.NoError(t, json.Unmarshal([]byte(first.body), &accepted))
	_, err := uuid.Parse(accepted.MessageID)
	require.NoError(t, err, "messageId must be a UUID")
	assert.JSONEq(t, fmt.Sprintf(`{"messageId":%q}`, accepted.MessageID), first.body)

	second := e.post(t, "/inbox/orders", body, map[string]string{"Content-Type": "application/json"})
	assertJSONAnswer(t, second, http.StatusOK, `{"status":"duplicate"}`)

	rows := e.rows(t, "orders")
	require.Len(t, rows, 1)
	r := rows[0]
	assert.Equal(t, accepted.MessageID, r.ID)
	assert.Equal(t, "orders", r.Source)
	assert.Equal(t, "order-1", r.Key)
	assert.Equal(t, "pull", r.Consumption)
	assert.Equal(t, "pending", r.State)
	assert.JSONEq(t, body, r.Payload)
	assert.Equal(t, first.headers.Get("X-Correlation-Id"), r.CorrelationID)
	assert.Empty(t, r.AggregateID)
	assert.Empty(t, r.EventType)
	var headers map[string]string
	require.NoError(t, json.Unmarshal([]byte(r.Headers), &headers))
	assert.Equal(t, "application/json", headers["content-type"])

	assert.Equal(t, 1, e.metrics.get("message:new"))
	assert.Equal(t, 1, e.metrics.get("message:duplicate"))
	assert.Zero(t, e.waker.n.Load(), "a pull source never wakes the relay")
}

func TestPushSourceStoresAttributesAndWakesTheRelay(t *testing.T) {
	t.Parallel()
	e := newEnv(t, []inbox.Source{{
		Name: "stripe", Path: "stripe", IdempotencyKeyPath: "$.id", EventTypePath: "$.type",
		AggregateIDPath: "$.data.object.customer",
	}}, func(o *inbox.Options) { o.BasePath = "/inbox/" })
	body := `{"id":"evt_1","type":"payment.completed","data":{"object":{"customer":"cus_9"}}}`

	res := e.post(t, "/inbox/stripe", body, nil)
	require.Equal(t, http.StatusAccepted, res.status, res.body)
	assert.EqualValues(t, 1, e.waker.n.Load())
	dup := e.post(t, "/inbox/stripe", body, nil)
	require.Equal(t, http.StatusOK, dup.status)
	assert.EqualValues(t, 1, e.waker.n.Load(), "a duplicate does not wake the relay")

	rows := e.rows(t, "stripe")
	require.Len(t, rows, 1)
	assert.Equal(t, "push", rows[0].Consumption)
	assert.Equal(t, "payment.completed", rows[0].EventType)
	assert.Equal(t, "cus_9", rows[0].AggregateID)
}

func TestConcurrentPostsOfOneMessage(t *testing.T) {
	t.Parallel()
	e := newEnv(t, []inbox.Source{{Name: "orders", Path: "/orders", IdempotencyKeyPath: "$.id"}}, nil)
	const n = 50
	statuses := make(chan int, n)
	var start, done sync.WaitGroup
	start.Add(1)
	for range n {
		done.Go(func() {
			start.Wait()
			req, _ := http.NewRequest(http.MethodPost, e.server.URL+"/inbox/orders", strings.NewReader(`{"id":"same","v":1}`))
			res, err := e.server.Client().Do(req)
			if err != nil {
				statuses <- -1
				return
			}
			_, _ = io.Copy(io.Discard, res.Body)
			res.Body.Close()
			statuses <- res.StatusCode
		})
	}
	start.Done()
	done.Wait()
	close(statuses)
	count := map[int]int{}
	for s := range statuses {
		count[s]++
	}
	assert.Equal(t, map[int]int{http.StatusAccepted: 1, http.StatusOK: n - 1}, count)
	assert.Len(t, e.rows(t, "orders"), 1)
	assert.Equal(t, 1, e.metrics.get("message:new"))
	assert.Equal(t, n-1, e.metrics.get("message:duplicate"))
	assert.EqualValues(t, 1, e.waker.n.Load())
}

// chunked is a body reader of unknown length, so the client sends it chunked.
type chunked struct{ r io.Reader }

func (c chunked) Read(p []byte) (int, error) { return c.r.Read(p) }

func TestBodies(t *testing.T) {
	t.Parallel()
	e := newEnv(t, []inbox.Source{
		{Name: "plain", Path: "/plain", IdempotencyKeyPath: "$.id"},
		{Name: "bracket", Path: "/bracket", IdempotencyKeyPath: "$['order']['id']", EventTypePath: `$["kind"]`},
		{Name: "indexed", Path: "/indexed", IdempotencyKeyPath: "$.items[0].sku", AggregateIDPath: "$.items[-1].sku"},
		{Name: "hyphen", Path: "/hyphen", IdempotencyKeyPath: "$.x-id"},
		{Name: "root", Path: "/root", IdempotencyKeyPath: "$"},
	}, nil)

	tests := []struct {
		name      string
		path      string
		body      string
		chunked   bool
		status    int
		answer    string // exact body, or empty to skip
		wantKey   string // the stored key when status is 202
		wantEvent string
		wantAggr  string
		payload   string // a fragment that the stored payload text must hold
	}{
		{name: "oversized with Content-Length", path: "/plain", body: `{"id":"big","pad":"` + strings.Repeat("x", 2000) + `"}`,
			status: 413, answer: `{"error":"Request body exceeds 1024 bytes"}`},
		{name: "oversized chunked", path: "/plain", body: `{"id":"bigc","pad":"` + strings.Repeat("x", 2000) + `"}`, chunked: true,
			status: 413, answer: `{"error":"Request body exceeds 1024 bytes"}`},
		{name: "exactly at the cap", path: "/plain", body: `{"id":"cap","pad":"` + strings.Repeat("x", 1024-len(`{"id":"cap","pad":""}`)) + `"}`,
			status: 202, wantKey: "cap"},
		{name: "chunked within the cap", path: "/plain", body: `{"id":"small-chunked"}`, chunked: true, status: 202, wantKey: "small-chunked"},
		{name: "empty body", path: "/plain", body: "", status: 400, answer: `{"error":"Invalid JSON"}`},
		{name: "whitespace only", path: "/plain", body: " \n", status: 400, answer: `{"error":"Invalid JSON"}`},
		{name: "not JSON", path: "/plain", body: "id=1&x=2", status: 400, answer: `{"error":"Invalid JSON"}`},
		{name: "truncated JSON", path: "/plain", body: `{"id":"t"`, status: 400, answer: `{"error":"Invalid JSON"}`},
		{name: "two documents", path: "/plain", body: `{"id":"a"} {"id":"b"}`, status: 400, answer: `{"error":"Invalid JSON"}`},
		{name: "not UTF-8", path: "/plain", body: "{\"id\":\"\xff\xfe\"}", status: 400, answer: `{"error":"Invalid JSON"}`},
		{name: "brackets inside strings do not count", path: "/plain", body: `{"id":"str","x":"` + strings.Repeat("[", 1000) + `"}`, status: 202, wantKey: "str"},
		{name: "huge number kept exactly", path: "/plain", body: `{"id":"num","amount":123456789012345678901234567890.123456789012345678901}`,
			status: 202, wantKey: "num", payload: "123456789012345678901234567890.123456789012345678901"},
		{name: "number key is its JSON text", path: "/plain", body: `{"id":12345678901234567890123}`, status: 202, wantKey: "12345678901234567890123"},
		{name: "decimal key is its JSON text", path: "/plain", body: `{"id":1.50}`, status: 202, wantKey: "1.50"},
		{name: "boolean key", path: "/plain", body: `{"id":true}`, status: 202, wantKey: "true"},
		{name: "object key is compact JSON sorted by name", path: "/plain", body: `{"id": {"b": 2, "a": "x<y"}}`, status: 202, wantKey: `{"a":"x<y","b":2}`},
		{name: "array key is compact JSON", path: "/plain", body: `{"id": [1, "two", {"z": null}]}`, status: 202, wantKey: `[1,"two",{"z":null}]`},
		{name: "missing key", path: "/plain", body: `{"other":"x"}`, status: 400, answer: `{"error":"Missing idempotency key at $.id"}`},
		{name: "null key", path: "/plain", body: `{"id":null}`, status: 400, answer: `{"error":"Missing idempotency key at $.id"}`},
		{name: "empty key", path: "/plain", body: `{"id":""}`, status: 400, answer: `{"error":"Missing idempotency key at $.id"}`},
		{name: "scalar body", path: "/plain", body: `"just a string"`, status: 400, answer: `{"error":"Missing idempotency key at $.id"}`},
		{name: "key of 300 characters", path: "/plain", body: `{"id":"` + strings.Repeat("k", 300) + `"}`, status: 400,
			answer: `{"error":"Idempotency key at $.id exceeds 255 characters"}`},
		{name: "key of 255 characters", path: "/plain", body: `{"id":"` + strings.Repeat("k", 255) + `"}`, status: 202, wantKey: strings.Repeat("k", 255)},
		{name: "key of 128 emoji counts 256 characters under the default UTF-16 rule", path: "/plain", body: `{"id":"` + strings.Repeat("😀", 128) + `"}`, status: 400,
			answer: `{"error":"Idempotency key at $.id exceeds 255 characters"}`},
		{name: "bracket paths", path: "/bracket", body: `{"order":{"id":"o-7"},"kind":"order.created"}`, status: 202, wantKey: "o-7", wantEvent: "order.created"},
		{name: "bracket path missing", path: "/bracket", body: `{"order":{}}`, status: 400, answer: `{"error":"Missing idempotency key at $['order']['id']"}`},
		{name: "event type too long", path: "/bracket", body: `{"order":{"id":"o-8"},"kind":"` + strings.Repeat("e", 256) + `"}`, status: 400,
			answer: `{"error":"Event type at $[\"kind\"] exceeds 255 characters"}`},
		{name: "index paths", path: "/indexed", body: `{"items":[{"sku":"first"},{"sku":"last"}]}`, status: 202, wantKey: "first", wantAggr: "last"},
		{name: "index out of range", path: "/indexed", body: `{"items":[]}`, status: 400, answer: `{"error":"Missing idempotency key at $.items[0].sku"}`},
		{name: "hyphen in a dot name", path: "/hyphen", body: `{"x-id":"h-1"}`, status: 202, wantKey: "h-1"},
		{name: "root path", path: "/root", body: `"whole-body-key"`, status: 202, wantKey: "whole-body-key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var rd io.Reader = strings.NewReader(tt.body)
			if tt.chunked {
				rd = chunked{rd}
			}
			req, err := http.NewRequest(http.MethodPost, e.server.URL+"/inbox"+tt.path, rd)
			require.NoError(t, err)
			res := e.do(t, req)
			if tt.chunked {
				assert.EqualValues(t, -1, e.lastContentLength.Load(), "the body went chunked")
			}
			require.Equal(t, tt.status, res.status, res.body)
			assert.Equal(t, "application/json", res.headers.Get("Content-Type"))
			if tt.answer != "" {
				assert.Equal(t, tt.answer, res.body)
			}
			if tt.status != http.StatusAccepted {
				return
			}
			var accepted struct {
				MessageID string `json:"messageId"`
			}
			require.NoError(t, json.Unmarshal([]byte(res.body), &accepted))
			var found *row
			for _, r := range e.rows(t, strings.TrimPrefix(tt.path, "/")) {
				if r.ID == accepted.MessageID {
					found = &r
				}
			}
			require.NotNil(t, found, "the row of messageId %s", accepted.MessageID)
			assert.Equal(t, tt.wantKey, found.Key)
			assert.Equal(t, tt.wantEvent, found.EventType)
			assert.Equal(t, tt.wantAggr, found.AggregateID)
			if tt.payload != "" {
				assert.Contains(t, found.Payload, tt.payload)
			}
		})
	}
	// Only the accepted cases left rows; every refused body left none.
	stored := 0
	for _, tt := range tests {
		if tt.status == http.StatusAccepted {
			stored++
		}
	}
	var total int
	require.NoError(t, e.pool.QueryRow(context.Background(), `SELECT count(*) FROM inbox`).Scan(&total))
	assert.Equal(t, stored, total)
	assert.Equal(t, stored, e.metrics.get("message:new"))
}

func TestDeeplyNestedBodies(t *testing.T) {
	t.Parallel()
	e := newEnv(t, []inbox.Source{{Name: "d", Path: "/d", IdempotencyKeyPath: "$.id"}},
		func(o *inbox.Options) { o.MaxBodyBytes = 1 << 20 })
	for name, body := range map[string]string{
		"100000 open brackets":       strings.Repeat("[", 100000),
		"100000 balanced brackets":   strings.Repeat("[", 100000) + strings.Repeat("]", 100000),
		"100000 objects under a key": `{"id":"x","a":` + strings.Repeat(`{"a":`, 100000) + "1" + strings.Repeat("}", 100000) + "}",
	} {
		t.Run(name, func(t *testing.T) {
			assertJSONAnswer(t, e.post(t, "/inbox/d", body, nil), http.StatusBadRequest, `{"error":"Invalid JSON"}`)
		})
	}
	assert.Empty(t, e.rows(t, "d"))

	deep := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	res := e.post(t, "/inbox/d", `{"id":"over","x":`+deep(1000)+`}`, nil)
	assertJSONAnswer(t, res, http.StatusBadRequest, `{"error":"Invalid JSON"}`)
	res = e.post(t, "/inbox/d", `{"id":"deep","x":`+deep(999)+`}`, nil)
	require.Equal(t, http.StatusAccepted, res.status, res.body)
	rows := e.rows(t, "d")
	require.Len(t, rows, 1)
	assert.Equal(t, "deep", rows[0].Key)
}

func TestAuthentication(t *testing.T) {
	t.Parallel()
	v := &tokenVerifier{header: "X-Token", token: "s3cret-token"}
	e := newEnv(t, []inbox.Source{{
		Name: "partner", Path: "/partner", IdempotencyKeyPath: "$.id", Verifier: v,
		Filter: filter.Config{Require: []filter.Rule{{Header: "X-Tenant", Equals: new("acme")}}},
	}}, nil)
	good := map[string]string{"X-Token": "s3cret-token", "X-Tenant": "acme"}
	bad := map[string]string{"X-Token": "wrong", "X-Tenant": "acme"}

	tests := []struct {
		name    string
		body    string
		headers map[string]string
		status  int
		answer  string
	}{
		{name: "size cap comes first", body: strings.Repeat("x", 2000), headers: bad, status: 413, answer: `{"error":"Request body exceeds 1024 bytes"}`},
		{name: "bad credentials on non-JSON", body: "not json", headers: bad, status: 401, answer: `{"error":"Invalid token"}`},
		{name: "missing credentials", body: `{"id":"a"}`, headers: map[string]string{"X-Tenant": "acme"}, status: 401, answer: `{"error":"Missing header X-Token"}`},
		{name: "bad credentials before the filter", body: `{"id":"a"}`, headers: map[string]string{"X-Token": "wrong"}, status: 401, answer: `{"error":"Invalid token"}`},
		{name: "good credentials on non-JSON", body: "not json", headers: good, status: 400, answer: `{"error":"Invalid JSON"}`},
		{name: "good credentials, filtered", body: `{"id":"a"}`, headers: map[string]string{"X-Token": "s3cret-token"}, status: 202, answer: `{"status":"filtered"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := e.post(t, "/inbox/partner", tt.body, tt.headers)
			assertJSONAnswer(t, res, tt.status, tt.answer)
			if tt.status == 401 {
				assert.Empty(t, res.headers.Get("X-Correlation-Id"), "401 comes before the correlation id step")
			}
		})
	}
	assert.Empty(t, e.rows(t, "partner"))

	// The verifier sees the raw body, and no credential header reaches the row.
	res := e.post(t, "/inbox/partner", `{"id":"stored", "x": 1}`, map[string]string{
		"X-Token": "s3cret-token", "X-Tenant": "acme", "Authorization": "Bearer abc",
		"Proxy-Authorization": "Basic xyz", "Cookie": "session=1", "X-Other": "kept",
	})
	require.Equal(t, http.StatusAccepted, res.status, res.body)
	v.mu.Lock()
	assert.Equal(t, `{"id":"stored", "x": 1}`, v.bodies[len(v.bodies)-1])
	v.mu.Unlock()
	rows := e.rows(t, "partner")
	require.Len(t, rows, 1)
	var headers map[string]string
	require.NoError(t, json.Unmarshal([]byte(rows[0].Headers), &headers))
	for name := range headers {
		assert.NotContains(t, []string{"authorization", "proxy-authorization", "cookie", "x-token"}, strings.ToLower(name))
	}
	assert.Equal(t, "kept", headers["x-other"])
	assert.Equal(t, "acme", headers["x-tenant"])
	assert.NotContains(t, rows[0].Headers, "s3cret-token")
}

func TestCorrelationID(t *testing.T) {
	t.Parallel()
	e := newEnv(t, []inbox.Source{{Name: "c", Path: "/c", IdempotencyKeyPath: "$.id"}}, nil)
	tests := []struct {
		name     string
		values   []string // nil: no header
		want     string   // empty: a new UUID
		wantUUID bool
	}{
		{name: "absent", wantUUID: true},
		{name: "kept as received", values: []string{"abc-123"}, want: "abc-123"},
		{name: "control characters removed", values: []string{"a\x01b\x7fc\td\u0085e\x00f"}, want: "abcdef"},
		{name: "only control characters", values: []string{"\x01\x02"}, wantUUID: true},
		{name: "empty", values: []string{""}, wantUUID: true},
		{name: "200 characters cut to 128", values: []string{strings.Repeat("z", 200)}, want: strings.Repeat("z", 128)},
		{name: "a cut never splits a character", values: []string{strings.Repeat("a", 127) + "😀"}, want: strings.Repeat("a", 127)},
		{name: "invalid UTF-8 removed", values: []string{"ok\xffyes"}, want: "okyes"},
		{name: "the last of several wins", values: []string{"first", "second"}, want: "second"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// The handler is called directly: a Lambda event can carry values that net/http
			// refuses on the wire.
			req := httptest.NewRequest(http.MethodPost, "/inbox/c", strings.NewReader(fmt.Sprintf(`{"id":"corr-%d"}`, i)))
			for _, v := range tt.values {
				req.Header.Add("X-Correlation-Id", v)
			}
			rec := httptest.NewRecorder()
			e.handler.ServeHTTP(rec, req)
			require.Equal(t, http.StatusAccepted, rec.Code, rec.Body.String())
			got := rec.Header().Get("X-Correlation-Id")
			if tt.wantUUID {
				_, err := uuid.Parse(got)
				assert.NoError(t, err, "a new UUID, got %q", got)
			} else {
				assert.Equal(t, tt.want, got)
			}
			var accepted struct {
				MessageID string `json:"messageId"`
			}
			require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &accepted))
			for _, r := range e.rows(t, "c") {
				if r.ID == accepted.MessageID {
					assert.Equal(t, got, r.CorrelationID)
					return
				}
			}
			t.Fatalf("no row %s", accepted.MessageID)
		})
	}
	// An answer after step 4 carries the identifier too.
	res := e.post(t, "/inbox/c", "nope", map[string]string{"X-Correlation-Id": "on-error"})
	assert.Equal(t, http.StatusBadRequest, res.status)
	assert.Equal(t, "on-error", res.headers.Get("X-Correlation-Id"))
}

func TestFilter(t *testing.T) {
	t.Parallel()
	yes := true
	sources := []struct {
		name   string
		filter filter.Config
	}{
		{"equals", filter.Config{Require: []filter.Rule{{Header: "X-Env", Equals: new("prod")}}}},
		{"in", filter.Config{Require: []filter.Rule{{Header: "x-region", In: []string{"eu", "us"}}}}},
		{"matches", filter.Config{Require: []filter.Rule{{Header: "X-Event", Matches: new("order.*")}}}},
		{"exists", filter.Config{Require: []filter.Rule{{Header: "X-Signed", Exists: &yes}}}},
		{"exclude", filter.Config{Exclude: []filter.Rule{{Header: "X-Test", Exists: &yes}, {Header: "X-Env", Equals: new("dev")}}}},
		{"both", filter.Config{
			Require: []filter.Rule{{Header: "X-Env", In: []string{"prod", "staging"}}, {Header: "X-Event", Matches: new("order.**")}},
			Exclude: []filter.Rule{{Header: "X-Event", Equals: new("order.test")}},
		}},
	}
	var list []inbox.Source
	for _, s := range sources {
		list = append(list, inbox.Source{Name: s.name, Path: "/" + s.name, IdempotencyKeyPath: "$.id", Filter: s.filter})
	}
	e := newEnv(t, list, nil)

	tests := []struct {
		source  string
		headers map[string]string
		pass    bool
	}{
		{"equals", map[string]string{"x-env": "prod"}, true},
		{"equals", map[string]string{"X-Env": "Prod"}, false},
		{"equals", nil, false},
		{"in", map[string]string{"X-Region": "us"}, true},
		{"in", map[string]string{"X-Region": "apac"}, false},
		{"in", nil, false},
		{"matches", map[string]string{"X-Event": "order.created"}, true},
		{"matches", map[string]string{"X-Event": "order.created.v2"}, false},
		{"matches", nil, false},
		{"exists", map[string]string{"x-signed": ""}, true},
		{"exists", map[string]string{"X-Other": "1"}, false},
		{"exclude", nil, true},
		{"exclude", map[string]string{"X-Env": "prod"}, true},
		{"exclude", map[string]string{"X-Test": "1"}, false},
		{"exclude", map[string]string{"X-ENV": "dev"}, false},
		{"both", map[string]string{"X-Env": "staging", "X-Event": "order.created.v2"}, true},
		{"both", map[string]string{"X-Env": "staging", "X-Event": "order.test"}, false},
		{"both", map[string]string{"X-Env": "dev", "X-Event": "order.created"}, false},
	}
	wantFiltered := map[string]int{}
	wantRows := map[string]int{}
	for i, tt := range tests {
		t.Run(fmt.Sprintf("%s-%d", tt.source, i), func(t *testing.T) {
			res := e.post(t, "/inbox/"+tt.source, fmt.Sprintf(`{"id":"f-%d"}`, i), tt.headers)
			assert.Equal(t, "application/json", res.headers.Get("Content-Type"))
			require.Equal(t, http.StatusAccepted, res.status, res.body)
			if tt.pass {
				assert.Contains(t, res.body, `"messageId"`)
			} else {
				assert.Equal(t, `{"status":"filtered"}`, res.body)
				assert.Empty(t, res.headers.Get("X-Correlation-Id"), "the filter runs before the correlation id step")
			}
		})
		if tt.pass {
			wantRows[tt.source]++
		} else {
			wantFiltered[tt.source]++
		}
	}
	for _, s := range sources {
		assert.Len(t, e.rows(t, s.name), wantRows[s.name], s.name)
		assert.Equal(t, wantFiltered[s.name], e.metrics.get("filtered:"+s.name), s.name)
	}
}

func TestRateLimit(t *testing.T) {
	t.Parallel()
	var now atomic.Int64
	now.Store(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	e := newEnv(t, []inbox.Source{
		{Name: "limited", Path: "/limited", IdempotencyKeyPath: "$.id", RequestsPerMinute: 2},
		{Name: "other", Path: "/other", IdempotencyKeyPath: "$.id"},
	}, func(o *inbox.Options) { o.Now = func() time.Time { return time.Unix(0, now.Load()) } })

	require.Equal(t, http.StatusAccepted, e.post(t, "/inbox/limited", `{"id":"r1"}`, nil).status)
	require.Equal(t, http.StatusAccepted, e.post(t, "/inbox/limited", `{"id":"r2"}`, nil).status)
	third := e.post(t, "/inbox/limited", `{"id":"r3"}`, nil)
	assert.Equal(t, http.StatusTooManyRequests, third.status)
	assert.Equal(t, "30", third.headers.Get("Retry-After"))
	assert.Empty(t, third.body)
	// A refused request takes no token, and the bucket is per source.
	assert.Equal(t, http.StatusTooManyRequests, e.post(t, "/inbox/limited", `{"id":"r3"}`, nil).status)
	assert.Equal(t, http.StatusAccepted, e.post(t, "/inbox/other", `{"id":"o1"}`, nil).status)
	assert.Len(t, e.rows(t, "limited"), 2)

	now.Add(int64(30 * time.Second))
	assert.Equal(t, http.StatusAccepted, e.post(t, "/inbox/limited", `{"id":"r3"}`, nil).status)
	assert.Len(t, e.rows(t, "limited"), 3)
}

func TestStorageFailure(t *testing.T) {
	t.Parallel()
	e := newEnv(t, []inbox.Source{{Name: "s", Path: "/s", IdempotencyKeyPath: "$.id"}}, nil)
	require.Equal(t, http.StatusAccepted, e.post(t, "/inbox/s", `{"id":"before"}`, nil).status)
	dbtest.Exec(t, e.pool, `DROP TABLE inbox`)

	res := e.post(t, "/inbox/s", `{"id":"after"}`, nil)
	assertJSONAnswer(t, res, http.StatusInternalServerError, `{"error":"Storage failed"}`)
	assert.NotEmpty(t, res.headers.Get("X-Correlation-Id"))
	assert.Equal(t, 1, e.metrics.get("rejection:storage_failed"))
	assert.EqualValues(t, 1, e.waker.n.Load(), "only the stored row woke the relay")
}

func TestStorageFailureOnClosedPool(t *testing.T) {
	t.Parallel()
	e := newEnv(t, []inbox.Source{{Name: "s", Path: "/s", IdempotencyKeyPath: "$.id"}}, nil)
	e.pool.Close()
	res := e.post(t, "/inbox/s", `{"id":"x"}`, nil)
	assertJSONAnswer(t, res, http.StatusInternalServerError, `{"error":"Storage failed"}`)
}

func TestRoutingAndShutdown(t *testing.T) {
	t.Parallel()
	draining := atomic.Bool{}
	e := newEnv(t, []inbox.Source{{Name: "a", Path: "/a", IdempotencyKeyPath: "$.id"}},
		func(o *inbox.Options) { o.Draining = draining.Load })

	tests := []struct {
		name   string
		method string
		path   string
		status int
		answer string
	}{
		{name: "unknown path", method: http.MethodPost, path: "/inbox/b", status: 404, answer: `{"error":"Not found"}`},
		{name: "the source name is not the path", method: http.MethodPost, path: "/a", status: 404, answer: `{"error":"Not found"}`},
		{name: "trailing slash", method: http.MethodPost, path: "/inbox/a/", status: 404, answer: `{"error":"Not found"}`},
		{name: "GET on a source path", method: http.MethodGet, path: "/inbox/a", status: 404, answer: `{"error":"Not found"}`},
		{name: "PUT on a source path", method: http.MethodPut, path: "/inbox/a", status: 404, answer: `{"error":"Not found"}`},
		{name: "query string is ignored", method: http.MethodPost, path: "/inbox/a?x=1", status: 202},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequest(tt.method, e.server.URL+tt.path, strings.NewReader(`{"id":"`+tt.name+`"}`))
			require.NoError(t, err)
			res := e.do(t, req)
			assert.Equal(t, tt.status, res.status, res.body)
			assert.Equal(t, "application/json", res.headers.Get("Content-Type"))
			if tt.answer != "" {
				assert.Equal(t, tt.answer, res.body)
			}
		})
	}

	draining.Store(true)
	assertJSONAnswer(t, e.post(t, "/inbox/a", `{"id":"late"}`, nil), http.StatusServiceUnavailable, `{"error":"QueueBox is shutting down"}`)
	draining.Store(false)
	require.Equal(t, http.StatusAccepted, e.post(t, "/inbox/a", `{"id":"again"}`, nil).status)
	e.handler.Drain()
	assertJSONAnswer(t, e.post(t, "/inbox/a", `{"id":"later"}`, nil), http.StatusServiceUnavailable, `{"error":"QueueBox is shutting down"}`)
	assertJSONAnswer(t, e.post(t, "/inbox/zzz", `{}`, nil), http.StatusServiceUnavailable, `{"error":"QueueBox is shutting down"}`)
	for _, r := range e.rows(t, "a") {
		assert.NotEqual(t, "later", r.Key)
		assert.NotEqual(t, "late", r.Key)
	}
}

// fakeTransform is a source transform hook: it wraps the body, or fails while fail is set.
type fakeTransform struct {
	fail atomic.Bool
	mu   sync.Mutex
	seen []inbox.TransformInput
}

func (f *fakeTransform) Transform(_ context.Context, in inbox.TransformInput) (json.RawMessage, error) {
	f.mu.Lock()
	f.seen = append(f.seen, in)
	f.mu.Unlock()
	if f.fail.Load() {
		return nil, errors.New("boom at $.total")
	}
	headers, _ := json.Marshal(in.Headers)
	return json.RawMessage(fmt.Sprintf(`{"wrapped":%s,"source":%q,"topic":%q,"key":%q,"headers":%s}`, in.Payload, in.Source, in.Topic, in.IdempotencyKey, headers)), nil
}

func TestSourceTransform(t *testing.T) {
	t.Parallel()
	failT, skipT, deadT, okT := &fakeTransform{}, &fakeTransform{}, &fakeTransform{}, &fakeTransform{}
	failT.fail.Store(true)
	skipT.fail.Store(true)
	deadT.fail.Store(true)
	v := &tokenVerifier{header: "X-Api-Key", token: "k"}
	e := newEnv(t, []inbox.Source{
		{Name: "fail", Path: "/fail", IdempotencyKeyPath: "$.id", Transform: failT},
		{Name: "skip", Path: "/skip", IdempotencyKeyPath: "$.id", Transform: skipT, OnError: inbox.OnErrorSkip},
		{Name: "dead", Path: "/dead", IdempotencyKeyPath: "$.id", Transform: deadT, OnError: inbox.OnErrorDead},
		{Name: "ok", Path: "/ok", IdempotencyKeyPath: "$.id", EventTypePath: "$.type", Transform: okT, Verifier: v},
	}, nil)

	res := e.post(t, "/inbox/fail", `{"id":"1"}`, nil)
	assertJSONAnswer(t, res, http.StatusUnprocessableEntity, `{"error":"Transform failed: boom at $.total"}`)
	res = e.post(t, "/inbox/dead", `{"id":"1"}`, nil)
	assertJSONAnswer(t, res, http.StatusUnprocessableEntity, `{"error":"Transform failed: boom at $.total"}`)
	assert.Empty(t, e.rows(t, "fail"))
	assert.Empty(t, e.rows(t, "dead"))
	assert.Equal(t, 2, e.metrics.get("rejection:transform_failed"))

	res = e.post(t, "/inbox/skip", `{"id":"1","x":[1, 2]}`, nil)
	require.Equal(t, http.StatusAccepted, res.status, res.body)
	rows := e.rows(t, "skip")
	require.Len(t, rows, 1)
	assert.JSONEq(t, `{"id":"1","x":[1,2]}`, rows[0].Payload)

	res = e.post(t, "/inbox/ok", `{"id":"o1","type":"order.created"}`, map[string]string{"X-Api-Key": "k", "Authorization": "Bearer t", "X-Tenant": "acme"})
	require.Equal(t, http.StatusAccepted, res.status, res.body)
	rows = e.rows(t, "ok")
	require.Len(t, rows, 1)
	assert.JSONEq(t, `{"wrapped":{"id":"o1","type":"order.created"},"source":"ok","topic":"order.created","key":"o1","headers":`+rows[0].Headers+`}`, rows[0].Payload)
	assert.Equal(t, "o1", rows[0].Key, "the key comes from the original body")
	okT.mu.Lock()
	in := okT.seen[0]
	okT.mu.Unlock()
	assert.Equal(t, "acme", in.Headers["x-tenant"])
	assert.NotContains(t, in.Headers, "authorization")
	assert.NotContains(t, in.Headers, "x-api-key")
	assert.Equal(t, "order.created", in.EventType)
	assert.False(t, in.Timestamp.IsZero())
	_, err := uuid.Parse(in.MessageID)
	assert.NoError(t, err)

	// The transform runs before the duplicate check: a repeat whose transform now fails gets 422.
	okT.fail.Store(true)
	res = e.post(t, "/inbox/ok", `{"id":"o1","type":"order.created"}`, map[string]string{"X-Api-Key": "k"})
	assertJSONAnswer(t, res, http.StatusUnprocessableEntity, `{"error":"Transform failed: boom at $.total"}`)
	okT.fail.Store(false)
	res = e.post(t, "/inbox/ok", `{"id":"o1","type":"order.created"}`, map[string]string{"X-Api-Key": "k"})
	assertJSONAnswer(t, res, http.StatusOK, `{"status":"duplicate"}`)
}

func TestNewRefusesBadSources(t *testing.T) {
	t.Parallel()
	st := nopStore{}
	tests := []struct {
		name    string
		sources []inbox.Source
		wantErr string
	}{
		{name: "indefinite key path", sources: []inbox.Source{{Name: "a", Path: "/a", IdempotencyKeyPath: "$..id"}}, wantErr: "definite"},
		{name: "wildcard", sources: []inbox.Source{{Name: "a", Path: "/a", IdempotencyKeyPath: "$.items[*]"}}, wantErr: "definite"},
		{name: "filter", sources: []inbox.Source{{Name: "a", Path: "/a", IdempotencyKeyPath: "$.a", EventTypePath: "$[?@.x]"}}, wantErr: "definite"},
		{name: "no dollar", sources: []inbox.Source{{Name: "a", Path: "/a", IdempotencyKeyPath: "id"}}, wantErr: "must start with $"},
		{name: "no key path", sources: []inbox.Source{{Name: "a", Path: "/a"}}, wantErr: "idempotency key path is required"},
		{name: "no path", sources: []inbox.Source{{Name: "a", IdempotencyKeyPath: "$.id"}}, wantErr: "path is required"},
		{name: "same path", sources: []inbox.Source{
			{Name: "a", Path: "/x", IdempotencyKeyPath: "$.id"}, {Name: "b", Path: "x", IdempotencyKeyPath: "$.id"}}, wantErr: "both answer at /inbox/x"},
		{name: "same name", sources: []inbox.Source{
			{Name: "a", Path: "/x", IdempotencyKeyPath: "$.id"}, {Name: "a", Path: "/y", IdempotencyKeyPath: "$.id"}}, wantErr: "two sources are named"},
		{name: "consumption", sources: []inbox.Source{{Name: "a", Path: "/a", IdempotencyKeyPath: "$.id", Consumption: "poll"}}, wantErr: "consumption"},
		{name: "onError", sources: []inbox.Source{{Name: "a", Path: "/a", IdempotencyKeyPath: "$.id", OnError: "fail"}}, wantErr: "onError"},
		{name: "filter rule", sources: []inbox.Source{{Name: "a", Path: "/a", IdempotencyKeyPath: "$.id",
			Filter: filter.Config{Require: []filter.Rule{{Header: "x"}}}}}, wantErr: "exactly one"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := inbox.New(inbox.Options{Store: st, Sources: tt.sources})
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.wantErr)
		})
	}
	_, err := inbox.New(inbox.Options{})
	assert.ErrorContains(t, err, "store is required")
}

// nopStore is a store for the tests that never reach it.
type nopStore struct{ store.InboxStore }

func TestValidJSONThatTheDatabaseRefusesGets400(t *testing.T) {
	t.Parallel()
	e := newEnv(t, []inbox.Source{{Name: "orders", Path: "/orders", IdempotencyKeyPath: "$.id", Consumption: "pull"}}, nil)
	for _, body := range []string{`{"id":"nul-1","v":"a\u0000b"}`, `{"id":"sur-1","v":"\ud800"}`} {
		r := e.post(t, "/inbox/orders", body, nil)
		if r.status != 400 || r.body != `{"error":"Invalid JSON"}` {
			t.Errorf("%s: %d %s, want 400 Invalid JSON", body, r.status, r.body)
		}
	}
	if n := len(e.rows(t, "orders")); n != 0 {
		t.Errorf("%d rows stored", n)
	}
}

// TestKeyLengthCountsAsTheColumnDoes: with KeyLengthCodePoints (PostgreSQL's VARCHAR(255)) an
// idempotency key or an event type of up to 255 code points is stored, however many UTF-16
// units it takes (128 and 255 emoji); 256 code points get 400. The default, KeyLengthUTF16
// (SQL Server's NVARCHAR(255)), refuses 128 emoji (TestBodies).
func TestKeyLengthCountsAsTheColumnDoes(t *testing.T) {
	t.Parallel()
	e := newEnv(t, []inbox.Source{{Name: "cp", Path: "/cp", IdempotencyKeyPath: "$.id", EventTypePath: "$.type"}},
		func(o *inbox.Options) { o.KeyLength = inbox.KeyLengthCodePoints; o.MaxBodyBytes = 1 << 16 })
	post := func(id, typ string) response {
		body, err := json.Marshal(map[string]string{"id": id, "type": typ})
		require.NoError(t, err)
		req, err := http.NewRequest(http.MethodPost, e.server.URL+"/inbox/cp", strings.NewReader(string(body)))
		require.NoError(t, err)
		return e.do(t, req)
	}
	for _, n := range []int{128, 255} {
		key := strings.Repeat("😀", n)
		res := post(key, strings.Repeat("é", 255))
		require.Equal(t, http.StatusAccepted, res.status, "%d emoji: %s", n, res.body)
		found := false
		for _, r := range e.rows(t, "cp") {
			found = found || r.Key == key
		}
		assert.True(t, found, "the key of %d emoji is stored whole", n)
	}
	res := post(strings.Repeat("😀", 256), "t")
	assert.Equal(t, http.StatusBadRequest, res.status)
	assert.Equal(t, `{"error":"Idempotency key at $.id exceeds 255 characters"}`, res.body)
	res = post("k-256", strings.Repeat("a", 256))
	assert.Equal(t, http.StatusBadRequest, res.status)
	assert.Equal(t, `{"error":"Event type at $.type exceeds 255 characters"}`, res.body)
}
