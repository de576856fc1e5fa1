package localserver

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/alternayte/queuebox/shared/store/postgres/dbtest"
)

// headerReceiver records the headers of every request it receives, by the id member of the
// JSON body.
type headerReceiver struct {
	mu  sync.Mutex
	got map[string]http.Header
}

func newHeaderReceiver(t *testing.T) (*headerReceiver, *httptest.Server) {
	t.Helper()
	rc := &headerReceiver{got: map[string]http.Header{}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct{ ID string }
		_ = json.NewDecoder(r.Body).Decode(&body)
		rc.mu.Lock()
		rc.got[body.ID] = r.Header.Clone()
		rc.mu.Unlock()
	}))
	t.Cleanup(srv.Close)
	return rc, srv
}

// wait returns the headers of the request whose body has the id id, waiting up to 30 s.
func (rc *headerReceiver) wait(t *testing.T, id string) http.Header {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		rc.mu.Lock()
		h, ok := rc.got[id]
		rc.mu.Unlock()
		if ok {
			return h
		}
		if time.Now().After(deadline) {
			t.Fatalf("no delivery of %s reached the receiver within 30 s", id)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestWebhookSenderCannotForgeOutboundHeaders is issue 12, defect 3.1: a webhook that a
// sender posts with X-Api-Key, X-Team, X-Message-Id and X-Attempt headers is relayed and
// delivered with the destination's own credential and static header, one X-Message-Id (the
// outbox row's id) and the real attempt; hop-by-hop headers are not forwarded, and a source
// with forwardHeaders forwards only the headers it lists.
func TestWebhookSenderCannotForgeOutboundHeaders(t *testing.T) {
	t.Parallel()
	rc, receiver := newHeaderReceiver(t)
	dbURL := dbtest.NewDatabase(t)
	u, err := url.Parse(dbURL)
	require.NoError(t, err)
	cfg := loadYAML(t, fmt.Sprintf(`
database:
  url: jdbc:postgresql://%s%s
  username: postgres
  password: trust-auth
  migrate: true
outbox:
  pollIntervalMs: 50
inbox:
  relay:
    pollIntervalMs: 50
destinations:
  hooks:
    type: http
    baseUrl: %s
    path: /hooks
    headers:
      X-Team: orders
    auth:
      type: header
      headerName: X-Api-Key
      headerValue: destination-key
routes:
  - topicPattern: "hook.*"
    destination: hooks
sources:
  hooks:
    path: /hooks
    idempotencyKeyPath: $.id
    topic: hook.open
  github:
    path: /github
    idempotencyKeyPath: $.id
    topic: hook.github
    forwardHeaders: [X-Github-Event]
`, u.Host, u.Path, receiver.URL))
	cfg.Server.HTTPPort = 0
	l, err := New(context.Background(), cfg, quietLog())
	require.NoError(t, err)
	base := runLocal(t, l)

	post := func(path, body string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, base+"/inbox"+path, strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Api-Key", "FORGED")
		req.Header.Set("X-Team", "forged-team")
		req.Header.Set("X-Message-Id", "forged")
		req.Header.Set("X-Attempt", "99")
		req.Header.Set("X-Github-Event", "push")
		req.Header.Set("X-Tenant", "acme")
		req.Header.Set("Keep-Alive", "timeout=5")
		req.Header.Set("Upgrade", "h2c")
		req.Header.Set("Proxy-Foo", "bar")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		require.Equal(t, http.StatusAccepted, resp.StatusCode, "POST %s", path)
	}
	post("/hooks", `{"id":"evt-open"}`)
	post("/github", `{"id":"evt-github"}`)

	pool := dbtest.NewPool(t, dbURL)
	rowID := func(source string) string {
		var id string
		require.NoError(t, pool.QueryRow(context.Background(),
			`SELECT id::text FROM outbox WHERE headers->>'x-source' = $1`, source).Scan(&id))
		return id
	}

	for _, tt := range []struct {
		source, id string
		tenant     []string
	}{
		{source: "hooks", id: "evt-open", tenant: []string{"acme"}},
		{source: "github", id: "evt-github", tenant: nil},
	} {
		h := rc.wait(t, tt.id)
		assert.Equal(t, []string{"destination-key"}, h.Values("X-Api-Key"), tt.source)
		assert.Equal(t, []string{"orders"}, h.Values("X-Team"), tt.source)
		assert.Equal(t, []string{rowID(tt.source)}, h.Values("X-Message-Id"), tt.source)
		assert.Equal(t, []string{"0"}, h.Values("X-Attempt"), tt.source)
		assert.Equal(t, []string{"application/json"}, h.Values("Content-Type"), tt.source)
		assert.Equal(t, []string{"push"}, h.Values("X-Github-Event"), tt.source)
		assert.Equal(t, tt.tenant, h.Values("X-Tenant"), tt.source)
		assert.Equal(t, []string{tt.source}, h.Values("X-Source"), tt.source)
		for _, name := range []string{"Keep-Alive", "Upgrade", "Proxy-Foo"} {
			assert.Empty(t, h.Values(name), "%s: hop-by-hop header %s", tt.source, name)
		}
	}
}

// TestWebhookSenderCannotForgeBrokerHeaders: the same hardening on a RabbitMQ destination. A
// webhook whose sender sets the static header, the standard headers and CC is relayed and
// published with the destination's own values, and without the CC header.
func TestWebhookSenderCannotForgeBrokerHeaders(t *testing.T) {
	t.Parallel()
	exchange, deliveries := rabbitExchange(t, "qb-local-headers", "#")

	dbURL := dbtest.NewDatabase(t)
	u, err := url.Parse(dbURL)
	require.NoError(t, err)
	cfg := loadYAML(t, fmt.Sprintf(`
database:
  url: jdbc:postgresql://%s%s
  username: postgres
  password: trust-auth
  migrate: true
outbox:
  pollIntervalMs: 50
  retryBaseDelayMs: 100
inbox:
  relay:
    pollIntervalMs: 50
destinations:
  broker:
    type: rabbitmq
    url: amqp://guest:guest@127.0.0.1:5672/
    exchange: %s
    headers:
      x-team: orders
routes:
  - topicPattern: "order.*"
    destination: broker
sources:
  hooks:
    path: /hooks
    idempotencyKeyPath: $.id
    topic: order.received
`, u.Host, u.Path, exchange))
	cfg.Server.HTTPPort = 0
	l, err := New(context.Background(), cfg, quietLog())
	require.NoError(t, err)
	base := runLocal(t, l)

	req, err := http.NewRequest(http.MethodPost, base+"/inbox/hooks", strings.NewReader(`{"id":"evt-broker"}`))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Team", "forged")
	req.Header.Set("X-Topic", "forged.topic")
	req.Header.Set("X-Attempt", "99")
	req.Header.Set("CC", "elsewhere")
	req.Header.Set("X-Tenant", "acme")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusAccepted, resp.StatusCode)

	select {
	case d := <-deliveries:
		assert.Equal(t, "orders", d.Headers["x-team"])
		assert.Equal(t, "order.received", d.Headers["x-topic"])
		assert.Equal(t, int64(0), d.Headers["x-attempt"])
		assert.Equal(t, "acme", d.Headers["x-tenant"])
		assert.Equal(t, "hooks", d.Headers["x-source"])
		_, cc := d.Headers["cc"]
		assert.False(t, cc, "a received CC header must not be published")
	case <-time.After(30 * time.Second):
		t.Fatal("no message reached the queue within 30 s")
	}
}
