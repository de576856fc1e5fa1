package webhook_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/alternayte/queuebox/shared/connect/webhook"
	"github.com/alternayte/queuebox/shared/outbox"
)

// received is one request as the test server saw it.
type received struct {
	Method     string
	RequestURI string
	Header     http.Header
	Body       []byte
}

// receiver is a loopback HTTP server that records every request and answers with the
// status and body that respond returns (200 and no body when respond is nil).
type receiver struct {
	srv     *httptest.Server
	mu      sync.Mutex
	got     []received
	respond func(r *http.Request, n int) (int, string)
}

func newReceiver(t *testing.T, respond func(r *http.Request, n int) (int, string)) *receiver {
	t.Helper()
	rc := &receiver{respond: respond}
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		rc.mu.Lock()
		rc.got = append(rc.got, received{Method: r.Method, RequestURI: r.RequestURI, Header: r.Header.Clone(), Body: body})
		n := len(rc.got)
		rc.mu.Unlock()
		status, text := http.StatusOK, ""
		if rc.respond != nil {
			status, text = rc.respond(r, n)
		}
		w.WriteHeader(status)
		_, _ = io.WriteString(w, text)
	}))
	t.Cleanup(rc.srv.Close)
	return rc
}

func (rc *receiver) requests() []received {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]received(nil), rc.got...)
}

func (rc *receiver) count() int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return len(rc.got)
}

// newPublisher builds a publisher for cfg (named orders-api unless cfg names it) and closes
// it at the end of the test.
func newPublisher(t testing.TB, cfg webhook.Config, metrics webhook.Metrics) *webhook.Publisher {
	t.Helper()
	if cfg.Name == "" {
		cfg.Name = "orders-api"
	}
	p, err := webhook.New(cfg, metrics)
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Close() })
	return p
}

func message() outbox.Message {
	return outbox.Message{
		ID:      "0191d3c4-8a2b-7c3d-9e4f-5a6b7c8d9e0f",
		Topic:   "order.created",
		Key:     "cust-42",
		Payload: json.RawMessage(`{"orderId":"o-1","amount":4200}`),
		Attempt: 0,
	}
}

func TestPublishSendsPayloadAndStandardHeaders(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name    string
		key     string
		attempt int
		payload string
	}{
		{name: "object payload with key", key: "cust-42", payload: `{"orderId":"o-1","amount":4200}`},
		{name: "no key", key: "", payload: `{"orderId":"o-2"}`},
		{name: "string payload", key: "k", attempt: 3, payload: `"text"`},
		{name: "array payload", attempt: 1, payload: `[1,2]`},
		{name: "number payload", attempt: 20, payload: `42`},
		{name: "spacing kept byte for byte", payload: "{ \"a\" : [1, 2],\n \"b\": \"\u00e9\" }"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rc := newReceiver(t, nil)
			p := newPublisher(t, webhook.Config{BaseURL: rc.srv.URL, Path: "/events"}, nil)

			m := message()
			m.Key, m.Attempt, m.Payload = tt.key, tt.attempt, json.RawMessage(tt.payload)
			require.NoError(t, p.Publish(context.Background(), m))

			reqs := rc.requests()
			require.Len(t, reqs, 1)
			got := reqs[0]
			assert.Equal(t, http.MethodPost, got.Method)
			assert.Equal(t, "/events", got.RequestURI)
			assert.Equal(t, tt.payload, string(got.Body))
			assert.Equal(t, []string{"application/json"}, got.Header.Values("Content-Type"))
			assert.Equal(t, []string{m.ID}, got.Header.Values("X-Message-Id"))
			assert.Equal(t, []string{"order.created"}, got.Header.Values("X-Topic"))
			assert.Equal(t, []string{fmt.Sprint(tt.attempt)}, got.Header.Values("X-Attempt"))
			if tt.key == "" {
				_, present := got.Header["X-Message-Key"]
				assert.False(t, present, "X-Message-Key must be absent for a row without a key")
			} else {
				assert.Equal(t, []string{tt.key}, got.Header.Values("X-Message-Key"))
			}
			assert.Empty(t, got.Header.Values("Authorization"))
		})
	}
}

func TestPublishHeaderPrecedence(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name    string
		static  map[string]string
		auth    webhook.Auth
		key     string
		row     map[string]string
		want    map[string][]string
		wantNot []string
	}{
		{
			name:   "static headers are sent",
			static: map[string]string{"X-Team": "orders", "x-source": "queuebox"},
			want:   map[string][]string{"X-Team": {"orders"}, "X-Source": {"queuebox"}},
		},
		{
			name:   "auth header wins over a static header",
			static: map[string]string{"x-api-key": "static"},
			auth:   webhook.Auth{Kind: webhook.AuthHeader, Header: webhook.Header{Name: "X-Api-Key", Value: "auth-value"}},
			want:   map[string][]string{"X-Api-Key": {"auth-value"}},
		},
		{
			name:   "row header wins over static and auth headers",
			static: map[string]string{"X-Team": "orders", "X-Api-Key": "static"},
			auth:   webhook.Auth{Kind: webhook.AuthHeader, Header: webhook.Header{Name: "x-api-key", Value: "auth-value"}},
			row:    map[string]string{"x-team": "row-team", "X-API-KEY": "row-key", "X-Row-Only": "r"},
			want:   map[string][]string{"X-Team": {"row-team"}, "X-Api-Key": {"row-key"}, "X-Row-Only": {"r"}},
		},
		{
			name: "row header wins over basic authorization",
			auth: webhook.Auth{Kind: webhook.AuthBasic, Basic: webhook.Basic{Username: "u", Password: "p"}},
			row:  map[string]string{"authorization": "Bearer from-row"},
			want: map[string][]string{"Authorization": {"Bearer from-row"}},
		},
		{
			name: "row header named like a standard header adds a second value",
			row:  map[string]string{"x-message-id": "row-id", "content-type": "text/plain", "X-Topic": "row-topic"},
			want: map[string][]string{
				"X-Message-Id": {message().ID, "row-id"},
				"Content-Type": {"application/json", "text/plain"},
				"X-Topic":      {"order.created", "row-topic"},
			},
		},
		{
			name: "row X-Message-Key on a row without a key is the only value",
			key:  "",
			row:  map[string]string{"x-message-key": "from-row"},
			want: map[string][]string{"X-Message-Key": {"from-row"}},
		},
		{
			name: "relay headers travel",
			row: map[string]string{
				"x-inbox-id": "i-1", "x-source": "stripe", "x-idempotency-key": "evt_1", "X-Correlation-Id": "c-1",
			},
			want: map[string][]string{
				"X-Inbox-Id": {"i-1"}, "X-Source": {"stripe"}, "X-Idempotency-Key": {"evt_1"}, "X-Correlation-Id": {"c-1"},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rc := newReceiver(t, nil)
			p := newPublisher(t, webhook.Config{BaseURL: rc.srv.URL, Headers: tt.static, Auth: tt.auth}, nil)
			m := message()
			m.Key = tt.key
			m.Headers = tt.row
			require.NoError(t, p.Publish(context.Background(), m))

			reqs := rc.requests()
			require.Len(t, reqs, 1)
			for name, values := range tt.want {
				assert.Equal(t, values, reqs[0].Header.Values(name), "header %s", name)
			}
		})
	}
}

func TestPublishRefusesRowHeaderThatCannotTravel(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name string
		row  map[string]string
		want string
	}{
		{name: "name with a space", row: map[string]string{"Bad Name": "v"}, want: `row header name "Bad Name"`},
		{name: "value with CRLF", row: map[string]string{"X-Inject": "a\r\nX-Evil: 1"}, want: `row header "X-Inject"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rc := newReceiver(t, nil)
			p := newPublisher(t, webhook.Config{BaseURL: rc.srv.URL}, nil)
			m := message()
			m.Headers = tt.row
			err := p.Publish(context.Background(), m)
			require.ErrorIs(t, err, webhook.ErrInvalidHeader)
			assert.Contains(t, err.Error(), tt.want)
			assert.NotContains(t, err.Error(), "X-Evil")
			assert.Zero(t, rc.count(), "no request is sent")
		})
	}
}

func TestPublishJoinsBaseURLAndPath(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name     string
		basePath string // appended to the server URL
		path     string
		want     string
	}{
		{name: "defaults", basePath: "", path: "", want: "/"},
		{name: "root path", basePath: "", path: "/", want: "/"},
		{name: "base with slash and path with slash", basePath: "/", path: "/events", want: "/events"},
		{name: "neither has the slash", basePath: "/api", path: "events", want: "/api/events"},
		{name: "base with slash", basePath: "/api/", path: "events", want: "/api/events"},
		{name: "path with slash", basePath: "/api", path: "/events", want: "/api/events"},
		{name: "both have the slash", basePath: "/api/", path: "/events", want: "/api/events"},
		{name: "default path after a base path", basePath: "/api", path: "", want: "/api/"},
		{name: "query in path", basePath: "", path: "/hooks?sig=abc", want: "/hooks?sig=abc"},
		{name: "trailing slash kept", basePath: "", path: "/events/", want: "/events/"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rc := newReceiver(t, nil)
			p := newPublisher(t, webhook.Config{BaseURL: rc.srv.URL + tt.basePath, Path: tt.path}, nil)
			require.NoError(t, p.Publish(context.Background(), message()))
			reqs := rc.requests()
			require.Len(t, reqs, 1)
			assert.Equal(t, tt.want, reqs[0].RequestURI)
		})
	}
}

func TestPublishCompletesOn2xx(t *testing.T) {
	t.Parallel()

	for _, status := range []int{200, 201, 202, 204, 299} {
		t.Run(fmt.Sprint(status), func(t *testing.T) {
			t.Parallel()
			rc := newReceiver(t, func(*http.Request, int) (int, string) {
				if status == http.StatusNoContent {
					return status, ""
				}
				return status, `{"ok":true}`
			})
			p := newPublisher(t, webhook.Config{BaseURL: rc.srv.URL}, nil)
			require.NoError(t, p.Publish(context.Background(), message()))
			assert.Equal(t, 1, rc.count())
		})
	}
}

func TestPublishDoesNotFollowRedirects(t *testing.T) {
	t.Parallel()

	for _, status := range []int{301, 302, 303, 307, 308} {
		t.Run(fmt.Sprint(status), func(t *testing.T) {
			t.Parallel()
			target := newReceiver(t, nil)
			src := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				http.Redirect(w, r, target.srv.URL+"/stolen", status)
			}))
			t.Cleanup(src.Close)

			p := newPublisher(t, webhook.Config{
				BaseURL: src.URL,
				Auth:    webhook.Auth{Kind: webhook.AuthHeader, Header: webhook.Header{Value: "Bearer do-not-leak-1234"}},
			}, nil)
			err := p.Publish(context.Background(), message())
			require.Error(t, err)
			var se *webhook.StatusError
			require.ErrorAs(t, err, &se)
			assert.Equal(t, status, se.StatusCode)
			assert.Contains(t, err.Error(), fmt.Sprintf("HTTP %d %s from destination orders-api", status, http.StatusText(status)))
			assert.Zero(t, target.count(), "the redirect target must never be requested")
		})
	}
}

func TestPublishFailsOnOtherStatuses(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name    string
		status  int
		body    string
		maxBody int
		wantErr string
	}{
		{name: "500 with body", status: 500, body: "boom", wantErr: "HTTP 500 Internal Server Error from destination orders-api: boom"},
		{name: "404 without body", status: 404, wantErr: "HTTP 404 Not Found from destination orders-api"},
		{name: "400 JSON body", status: 400, body: `{"error":"bad payload"}`, wantErr: `HTTP 400 Bad Request from destination orders-api: {"error":"bad payload"}`},
		{name: "429", status: 429, body: "slow down\n", wantErr: "HTTP 429 Too Many Requests from destination orders-api: slow down"},
		{name: "503 body truncated", status: 503, body: strings.Repeat("x", 5000), maxBody: 16, wantErr: "HTTP 503 Service Unavailable from destination orders-api: " + strings.Repeat("x", 16)},
		{name: "default cap is 2048 bytes", status: 500, body: strings.Repeat("y", 3000), wantErr: "HTTP 500 Internal Server Error from destination orders-api: " + strings.Repeat("y", 2048)},
		{name: "code without a reason phrase", status: 599, body: "odd", wantErr: "HTTP 599 from destination orders-api: odd"},
		{name: "NUL and invalid UTF-8 replaced", status: 500, body: "a\x00b\xffc", wantErr: "HTTP 500 Internal Server Error from destination orders-api: a\ufffdb\ufffdc"},
		{name: "body secrets are the caller's to redact", status: 401, body: "password=hunter2", wantErr: "HTTP 401 Unauthorized from destination orders-api: password=hunter2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rc := newReceiver(t, func(*http.Request, int) (int, string) { return tt.status, tt.body })
			p := newPublisher(t, webhook.Config{BaseURL: rc.srv.URL, MaxErrorBodyBytes: tt.maxBody}, nil)
			err := p.Publish(context.Background(), message())
			require.Error(t, err)
			assert.Equal(t, tt.wantErr, err.Error())
			var se *webhook.StatusError
			require.ErrorAs(t, err, &se)
			assert.Equal(t, tt.status, se.StatusCode)
			assert.Equal(t, "orders-api", se.Destination)
		})
	}
}

// echoHeaders answers status with every request header in the body, as a misbehaving
// endpoint might.
func echoHeaders(status int) func(*http.Request, int) (int, string) {
	return func(r *http.Request, _ int) (int, string) {
		var b strings.Builder
		_ = r.Header.Write(&b)
		return status, b.String()
	}
}

func TestErrorsNeverCarryStaticCredentials(t *testing.T) {
	t.Parallel()

	const password = "hunter2-very-secret"
	basicValue := base64.StdEncoding.EncodeToString([]byte("queuebox:" + password))
	tests := []struct {
		name    string
		auth    webhook.Auth
		secrets []string
	}{
		{
			name:    "basic",
			auth:    webhook.Auth{Kind: webhook.AuthBasic, Basic: webhook.Basic{Username: "queuebox", Password: password}},
			secrets: []string{password, basicValue},
		},
		{
			name:    "header with the default name",
			auth:    webhook.Auth{Kind: webhook.AuthHeader, Header: webhook.Header{Value: "Bearer static-token-0123456789"}},
			secrets: []string{"static-token-0123456789"},
		},
		{
			name:    "custom header",
			auth:    webhook.Auth{Kind: webhook.AuthHeader, Header: webhook.Header{Name: "X-Api-Key", Value: "k-abcdef"}},
			secrets: []string{"k-abcdef"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			for _, status := range []int{400, 401, 500, 302} {
				rc := newReceiver(t, echoHeaders(status))
				p := newPublisher(t, webhook.Config{BaseURL: rc.srv.URL, Auth: tt.auth}, nil)
				err := p.Publish(context.Background(), message())
				require.Error(t, err)
				require.Len(t, rc.requests(), 1)
				assert.Contains(t, err.Error(), "[REDACTED]", "the echoed credential is replaced")
				for _, s := range tt.secrets {
					assert.NotContains(t, err.Error(), s)
				}
				assert.NotContains(t, fmt.Sprintf("%+v", err), password)
			}
		})
	}
}

func TestPublishTimesOut(t *testing.T) {
	t.Parallel()

	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) })

	metrics := newCountingMetrics()
	p := newPublisher(t, webhook.Config{BaseURL: srv.URL, Timeout: 200 * time.Millisecond}, metrics)
	start := time.Now()
	err := p.Publish(context.Background(), message())
	elapsed := time.Since(start)

	require.Error(t, err)
	// The server never answers: returning at all is the timeout; the bound leaves a loaded
	// machine room.
	assert.Less(t, elapsed, 10*time.Second)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Contains(t, err.Error(), "posting to destination orders-api: no response within 200ms")
	assert.NotContains(t, err.Error(), srv.URL, "the error does not repeat the URL")
	assert.Equal(t, map[string]int{"other": 1}, metrics.snapshot())
}

func TestPublishFailsOnConnectionRefused(t *testing.T) {
	t.Parallel()

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())

	p := newPublisher(t, webhook.Config{BaseURL: "http://" + addr, Timeout: 5 * time.Second}, nil)
	err = p.Publish(context.Background(), message())
	require.Error(t, err)
	assert.ErrorIs(t, err, syscall.ECONNREFUSED)
	assert.Contains(t, err.Error(), "posting to destination orders-api:")
	assert.NotContains(t, err.Error(), "no response within")
}

func TestStaticAuth(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name   string
		auth   webhook.Auth
		header string
		want   string
	}{
		{
			name:   "basic",
			auth:   webhook.Auth{Kind: webhook.AuthBasic, Basic: webhook.Basic{Username: "queuebox", Password: "s3cret:with:colons"}},
			header: "Authorization",
			want:   "Basic " + base64.StdEncoding.EncodeToString([]byte("queuebox:s3cret:with:colons")),
		},
		{
			name:   "header with the default name",
			auth:   webhook.Auth{Kind: webhook.AuthHeader, Header: webhook.Header{Value: "Bearer static-token"}},
			header: "Authorization",
			want:   "Bearer static-token",
		},
		{
			name:   "header with its own name",
			auth:   webhook.Auth{Kind: webhook.AuthHeader, Header: webhook.Header{Name: "x-api-key", Value: "key-1"}},
			header: "X-Api-Key",
			want:   "key-1",
		},
		{
			name:   "none spelled out",
			auth:   webhook.Auth{Kind: "none"},
			header: "Authorization",
			want:   "",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rc := newReceiver(t, nil)
			p := newPublisher(t, webhook.Config{BaseURL: rc.srv.URL, Auth: tt.auth}, nil)
			require.NoError(t, p.Publish(context.Background(), message()))
			reqs := rc.requests()
			require.Len(t, reqs, 1)
			assert.Equal(t, tt.want, reqs[0].Header.Get(tt.header))
			if tt.header != "Authorization" {
				assert.Empty(t, reqs[0].Header.Get("Authorization"))
			}
		})
	}
}

// countingMetrics counts HTTPResponse calls per status class.
type countingMetrics struct {
	mu     sync.Mutex
	counts map[string]int
}

func newCountingMetrics() *countingMetrics { return &countingMetrics{counts: map[string]int{}} }

func (m *countingMetrics) HTTPResponse(class string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.counts[class]++
}

func (m *countingMetrics) snapshot() map[string]int {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[string]int, len(m.counts))
	for k, v := range m.counts {
		out[k] = v
	}
	return out
}

func TestMetricsCountStatusClasses(t *testing.T) {
	t.Parallel()

	statuses := []int{200, 204, 302, 404, 401, 503}
	rc := newReceiver(t, func(_ *http.Request, n int) (int, string) { return statuses[n-1], "" })
	metrics := newCountingMetrics()
	p := newPublisher(t, webhook.Config{BaseURL: rc.srv.URL}, metrics)
	for range statuses {
		_ = p.Publish(context.Background(), message())
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	refused := newPublisher(t, webhook.Config{BaseURL: "http://" + addr}, metrics)
	require.Error(t, refused.Publish(context.Background(), message()))

	assert.Equal(t, map[string]int{"2xx": 2, "3xx": 1, "4xx": 2, "5xx": 1, "other": 1}, metrics.snapshot())
	assert.Equal(t, "http", p.Type())
}

// countConns starts a server of handler, with TLS (HTTP/2 enabled) when useTLS is set, and
// counts the connections it accepts.
func countConns(t *testing.T, useTLS bool, handler http.HandlerFunc) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var conns atomic.Int64
	srv := httptest.NewUnstartedServer(handler)
	srv.Config.ConnState = func(_ net.Conn, state http.ConnState) {
		if state == http.StateNew {
			conns.Add(1)
		}
	}
	if useTLS {
		srv.EnableHTTP2 = true
		srv.StartTLS()
	} else {
		srv.Start()
	}
	t.Cleanup(srv.Close)
	return srv, &conns
}

func TestPublishReusesConnections(t *testing.T) {
	t.Parallel()

	big := strings.Repeat("e", 10<<10) // longer than the kept error body, shorter than the drain
	srv, conns := countConns(t, false, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		switch r.Header.Get("X-Attempt") {
		case "1":
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = io.WriteString(w, big)
		case "2":
			_, _ = io.WriteString(w, big)
		default:
			w.WriteHeader(http.StatusNoContent)
		}
	})
	p := newPublisher(t, webhook.Config{BaseURL: srv.URL}, nil)

	t.Run("sequential", func(t *testing.T) {
		for i := range 150 {
			m := message()
			m.Attempt = i % 3
			err := p.Publish(context.Background(), m)
			if m.Attempt == 1 {
				require.Error(t, err)
			} else {
				require.NoError(t, err)
			}
		}
		assert.Equal(t, int64(1), conns.Load(), "every request reuses the one connection")
	})

	t.Run("concurrent", func(t *testing.T) {
		const workers = 8
		var wg sync.WaitGroup
		for range workers {
			wg.Go(func() {
				for range 50 {
					assert.NoError(t, p.Publish(context.Background(), message()))
				}
			})
		}
		wg.Wait()
		assert.LessOrEqual(t, conns.Load(), int64(2*workers), "400 requests reuse a handful of connections")
	})
}

func TestConfigPrintsNoSecret(t *testing.T) {
	t.Parallel()

	cfg := webhook.Config{
		Name:    "orders-api",
		BaseURL: "https://orders.example.com",
		Auth: webhook.Auth{
			Kind:   webhook.AuthOAuth2,
			OAuth2: webhook.OAuth2{ClientID: "queuebox", ClientSecret: "oauth-secret-1", TokenURL: "https://auth.example.com/token", ExtraParams: map[string]string{"audience": "aud"}},
			Basic:  webhook.Basic{Username: "u", Password: "basic-secret-2"},
			Header: webhook.Header{Name: "X-Api-Key", Value: "header-secret-3"},
		},
	}
	for _, verb := range []string{"%v", "%+v", "%#v", "%s"} {
		text := fmt.Sprintf(verb, cfg)
		for _, secret := range []string{"oauth-secret-1", "basic-secret-2", "header-secret-3"} {
			assert.NotContains(t, text, secret, verb)
		}
		assert.Contains(t, text, "Secret(***)", verb)
	}
	assert.Contains(t, fmt.Sprint(webhook.Basic{Username: "u"}), "Secret(empty)")
}

func TestNewValidatesConfig(t *testing.T) {
	t.Parallel()

	valid := webhook.Config{Name: "orders-api", BaseURL: "https://orders.example.com"}
	with := func(f func(c *webhook.Config)) webhook.Config {
		c := valid
		f(&c)
		return c
	}
	tests := []struct {
		name    string
		cfg     webhook.Config
		wantErr string // empty: valid
	}{
		{name: "minimal", cfg: valid},
		{name: "http base with port and path", cfg: with(func(c *webhook.Config) { c.BaseURL = "http://orders:8080/api/" })},
		{name: "path with query", cfg: with(func(c *webhook.Config) { c.Path = "/events?sig=1" })},
		{name: "path with dots inside a segment", cfg: with(func(c *webhook.Config) { c.Path = "/v1.2/..events" })},
		{name: "IPv6 host", cfg: with(func(c *webhook.Config) { c.BaseURL = "http://[::1]:8080" })},
		{name: "no name", cfg: with(func(c *webhook.Config) { c.Name = "" }), wantErr: "name is required"},
		{name: "no base URL", cfg: with(func(c *webhook.Config) { c.BaseURL = "" }), wantErr: "destinations.orders-api.baseUrl: required"},
		{name: "relative base URL", cfg: with(func(c *webhook.Config) { c.BaseURL = "/events" }), wantErr: "baseUrl: must be an absolute http or https URL"},
		{name: "ftp base URL", cfg: with(func(c *webhook.Config) { c.BaseURL = "ftp://files.example.com" }), wantErr: "baseUrl: must be an absolute http or https URL"},
		{name: "no host", cfg: with(func(c *webhook.Config) { c.BaseURL = "https://" }), wantErr: "with a host"},
		{name: "opaque", cfg: with(func(c *webhook.Config) { c.BaseURL = "https:orders.example.com" }), wantErr: "with a host"},
		{name: "user info", cfg: with(func(c *webhook.Config) { c.BaseURL = "https://bob:pa55word@orders.example.com" }), wantErr: "must not hold a user name or a password"},
		{name: "user name only", cfg: with(func(c *webhook.Config) { c.BaseURL = "https://bob@orders.example.com" }), wantErr: "must not hold a user name or a password"},
		{name: "query in base URL", cfg: with(func(c *webhook.Config) { c.BaseURL = "https://orders.example.com/?a=1" }), wantErr: "must not hold a query"},
		{name: "fragment in base URL", cfg: with(func(c *webhook.Config) { c.BaseURL = "https://orders.example.com/#x" }), wantErr: "must not hold a fragment"},
		{name: "dot-dot segment", cfg: with(func(c *webhook.Config) { c.Path = "/a/../admin" }), wantErr: "path: must not hold a . or .. segment"},
		{name: "dot segment", cfg: with(func(c *webhook.Config) { c.Path = "./events" }), wantErr: "path: must not hold a . or .. segment"},
		{name: "trailing dot-dot", cfg: with(func(c *webhook.Config) { c.Path = "/a/.." }), wantErr: "path: must not hold a . or .. segment"},
		{name: "encoded dot-dot", cfg: with(func(c *webhook.Config) { c.Path = "/a/%2e%2E/admin" }), wantErr: "path: must not hold a . or .. segment"},
		{name: "path is a URL", cfg: with(func(c *webhook.Config) { c.Path = "http://evil.example.com/x" }), wantErr: "path: must be a path, not a URL"},
		{name: "path with a host", cfg: with(func(c *webhook.Config) { c.Path = "//evil.example.com/x" }), wantErr: "path: must be a path, not a URL"},
		{name: "path with fragment", cfg: with(func(c *webhook.Config) { c.Path = "/a#b" }), wantErr: "path: must not hold a fragment"},
		{name: "negative timeout", cfg: with(func(c *webhook.Config) { c.Timeout = -time.Second }), wantErr: "timeoutMs: must be above 0"},
		{name: "negative error body", cfg: with(func(c *webhook.Config) { c.MaxErrorBodyBytes = -1 }), wantErr: "http.maxErrorBodyBytes"},
		{name: "bad static header name", cfg: with(func(c *webhook.Config) { c.Headers = map[string]string{"Bad Name": "v"} }), wantErr: `headers: "Bad Name" is not a valid header name`},
		{name: "static header value with CRLF", cfg: with(func(c *webhook.Config) { c.Headers = map[string]string{"X-A": "v\r\nX-B: w"} }), wantErr: "headers.X-A: the value holds a CR, LF or NUL"},
		{name: "static header twice", cfg: with(func(c *webhook.Config) { c.Headers = map[string]string{"X-A": "1", "x-a": "2"} }), wantErr: "name the same header"},
		{name: "unknown auth kind", cfg: with(func(c *webhook.Config) { c.Auth.Kind = "bearer" }), wantErr: `auth.type: unknown kind "bearer"`},
		{
			name: "oauth2 without client secret",
			cfg: with(func(c *webhook.Config) {
				c.Auth = webhook.Auth{Kind: webhook.AuthOAuth2, OAuth2: webhook.OAuth2{ClientID: "c", TokenURL: "https://a/t"}}
			}),
			wantErr: "auth.clientSecret: required",
		},
		{
			name: "oauth2 without client id",
			cfg: with(func(c *webhook.Config) {
				c.Auth = webhook.Auth{Kind: webhook.AuthOAuth2, OAuth2: webhook.OAuth2{ClientSecret: "topsecret", TokenURL: "https://a/t"}}
			}),
			wantErr: "auth.clientId: required",
		},
		{
			name: "oauth2 token URL with user info",
			cfg: with(func(c *webhook.Config) {
				c.Auth = webhook.Auth{Kind: webhook.AuthOAuth2, OAuth2: webhook.OAuth2{ClientID: "c", ClientSecret: "topsecret", TokenURL: "https://c:pa55word@a/t"}}
			}),
			wantErr: "auth.tokenUrl: must not hold a user name or a password",
		},
		{
			name: "oauth2 token URL with a query is fine",
			cfg: with(func(c *webhook.Config) {
				c.Auth = webhook.Auth{Kind: webhook.AuthOAuth2, OAuth2: webhook.OAuth2{ClientID: "c", ClientSecret: "topsecret", TokenURL: "https://a/t?tenant=1"}}
			}),
		},
		{name: "basic without password", cfg: with(func(c *webhook.Config) {
			c.Auth = webhook.Auth{Kind: webhook.AuthBasic, Basic: webhook.Basic{Username: "u"}}
		}), wantErr: "auth.password: required"},
		{name: "basic without user", cfg: with(func(c *webhook.Config) {
			c.Auth = webhook.Auth{Kind: webhook.AuthBasic, Basic: webhook.Basic{Password: "topsecret"}}
		}), wantErr: "auth.username: required"},
		{name: "basic user with colon", cfg: with(func(c *webhook.Config) {
			c.Auth = webhook.Auth{Kind: webhook.AuthBasic, Basic: webhook.Basic{Username: "a:b", Password: "topsecret"}}
		}), wantErr: "must not hold a colon"},
		{name: "header without value", cfg: with(func(c *webhook.Config) { c.Auth = webhook.Auth{Kind: webhook.AuthHeader} }), wantErr: "auth.headerValue: required"},
		{name: "header with bad name", cfg: with(func(c *webhook.Config) {
			c.Auth = webhook.Auth{Kind: webhook.AuthHeader, Header: webhook.Header{Name: "X:Y", Value: "topsecret"}}
		}), wantErr: "auth.headerName"},
		{name: "header value with LF", cfg: with(func(c *webhook.Config) {
			c.Auth = webhook.Auth{Kind: webhook.AuthHeader, Header: webhook.Header{Value: "top\nsecret"}}
		}), wantErr: "auth.headerValue: holds a CR, LF or NUL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p, err := webhook.New(tt.cfg, nil)
			if tt.wantErr == "" {
				require.NoError(t, err)
				require.NoError(t, p.Close())
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.wantErr)
			for _, secret := range []string{"pa55word", "topsecret", "top\nsecret"} {
				assert.NotContains(t, err.Error(), secret)
			}
		})
	}
}

func TestValidateBaseURLAndPath(t *testing.T) {
	t.Parallel()

	assert.NoError(t, webhook.ValidateBaseURL("https://api.partner.example"))
	assert.Error(t, webhook.ValidateBaseURL("mailto:someone@example.com"))
	assert.Error(t, webhook.ValidateBaseURL("https://u:p@h"))
	assert.NoError(t, webhook.ValidatePath("/webhooks"))
	assert.NoError(t, webhook.ValidatePath(""))
	assert.Error(t, webhook.ValidatePath("/a/./b"))
	err := webhook.ValidateBaseURL("https://bob:pa55word@h")
	require.Error(t, err)
	assert.NotContains(t, err.Error(), "pa55word")
}
