package localserver

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/alternayte/queuebox/shared/inboundauth"
	"github.com/alternayte/queuebox/shared/store/postgres/dbtest"
)

// The two secrets of the signed destination: each one alone verifies every delivery.
const (
	signedSecret1 = "whsec_AQIDBAUGBwgJCgsMDQ4PEBESExQVFhcYGRobHB0eHyA="
	signedSecret2 = "whsec_ZWZnaGlqa2xtbm9wcXJzdHV2d3h5ent8fX5/gIGCg4Q="
)

// signedRequest is one request that the signed receiver got.
type signedRequest struct {
	header http.Header
	body   []byte
}

// signedReceiver records every request by its webhook-id and answers 500 to the first request
// of the id in failOnce, and to every request of the id in failing while down is set.
type signedReceiver struct {
	mu       sync.Mutex
	got      map[string][]signedRequest
	failOnce string
	failing  string
	down     atomic.Bool
}

func (rc *signedReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	id := r.Header.Get("webhook-id")
	rc.mu.Lock()
	rc.got[id] = append(rc.got[id], signedRequest{header: r.Header.Clone(), body: body})
	n := len(rc.got[id])
	failOnce, failing := rc.failOnce, rc.failing
	rc.mu.Unlock()
	if (id == failOnce && n == 1) || (id == failing && rc.down.Load()) {
		w.WriteHeader(http.StatusInternalServerError)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (rc *signedReceiver) requests(id string) []signedRequest {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]signedRequest(nil), rc.got[id]...)
}

// waitFor polls cond every 20 ms until it holds, failing the test after 30 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 30 s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestSignedDeliveriesKeepTheirIDAcrossARetryAndAReplay runs the local process against the real
// PostgreSQL with a destination that signs with two Standard Webhooks secrets and transforms the
// payload. One row fails once, then is delivered: both attempts carry its id as webhook-id. A
// second row fails until it is dead, then is replayed through POST /admin/replay: the replayed
// delivery carries the same webhook-id. Every request verifies with the official Standard
// Webhooks Go library and with shared/inboundauth, for each secret alone, over the transformed
// body as it was sent.
func TestSignedDeliveriesKeepTheirIDAcrossARetryAndAReplay(t *testing.T) {
	t.Parallel()
	rc := &signedReceiver{got: map[string][]signedRequest{}}
	receiver := httptest.NewServer(rc)
	t.Cleanup(receiver.Close)
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
  retryBaseDelayMs: 10
admin:
  enabled: true
  auth:
    type: bearer
    token: admin-token
destinations:
  hooks:
    type: http
    baseUrl: %s
    path: /hooks
    transform:
      expression: '{ "data": $, "topic": $topic }'
      timeoutMs: 30000
    signing:
      type: standard-webhooks
      secrets:
        - %s
        - %s
routes:
  - topicPattern: "order.*"
    destination: hooks
`, u.Host, u.Path, receiver.URL, signedSecret1, signedSecret2))
	cfg.Server.HTTPPort = 0

	// The migrations run at start; the rows go in once the process listens.
	l, err := New(context.Background(), cfg, quietLog())
	require.NoError(t, err)
	base := runLocal(t, l)

	pool := dbtest.NewPool(t, dbURL)
	ctx := context.Background()
	state := func(id string) string {
		var s string
		require.NoError(t, pool.QueryRow(ctx, `SELECT state FROM outbox WHERE id = $1`, id).Scan(&s))
		return s
	}
	// The ids are drawn first (the application may set id, spec/29), so that the receiver knows
	// which row to fail from its first request.
	var retryID, deadID string
	require.NoError(t, pool.QueryRow(ctx, `SELECT gen_random_uuid()::text, gen_random_uuid()::text`).Scan(&retryID, &deadID))
	rc.mu.Lock()
	rc.failOnce, rc.failing = retryID, deadID
	rc.mu.Unlock()
	rc.down.Store(true)
	dbtest.Exec(t, pool, fmt.Sprintf(`INSERT INTO outbox (id, topic, payload, max_attempts) VALUES
		('%s', 'order.created', '{"orderId":"retry"}', 5),
		('%s', 'order.created', '{"orderId":"dead"}', 2)`, retryID, deadID))

	waitFor(t, "the retried row is sent", func() bool { return state(retryID) == "sent" })
	waitFor(t, "the failing row is dead", func() bool { return state(deadID) == "dead" })
	require.Len(t, rc.requests(retryID), 2, "500, then 204")
	attempts := len(rc.requests(deadID))
	require.GreaterOrEqual(t, attempts, 2, "the failing row was tried again before it went dead")

	rc.down.Store(false)
	req, err := http.NewRequest(http.MethodPost, base+"/admin/replay", strings.NewReader(`{"ids":["`+deadID+`"]}`))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer admin-token")
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	answer, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, string(answer))
	require.JSONEq(t, `{"moved":1}`, string(answer))
	waitFor(t, "the replayed row is sent", func() bool { return state(deadID) == "sent" })
	require.Len(t, rc.requests(deadID), attempts+1, "the attempts, then the replay")

	official := make([]*standardwebhooks.Webhook, 0, 2)
	inbound := make([]inboundauth.Verifier, 0, 2)
	for _, secret := range []string{signedSecret1, signedSecret2} {
		wh, err := standardwebhooks.NewWebhook(secret)
		require.NoError(t, err)
		official = append(official, wh)
		v, err := inboundauth.New(&inboundauth.Config{StandardWebhooks: &inboundauth.StandardWebhooks{
			Secret: inboundauth.NewSecret(secret), TimestampToleranceMs: 300000,
		}})
		require.NoError(t, err)
		inbound = append(inbound, v)
	}
	for _, id := range []string{retryID, deadID} {
		for i, r := range rc.requests(id) {
			assert.Equal(t, []string{id}, r.header.Values("webhook-id"), "%s request %d: the row id", id, i)
			assert.Equal(t, []string{id}, r.header.Values("X-Message-Id"), "%s request %d", id, i)
			assert.Contains(t, string(r.body), `"data":`, "the body is the transform's output")
			assert.Len(t, strings.Split(r.header.Get("webhook-signature"), " "), 2, "one signature per secret")
			for k := range official {
				assert.NoError(t, official[k].Verify(r.body, r.header), "%s request %d, secret %d, official library", id, i, k+1)
				assert.NoError(t, inbound[k].Verify(r.header, r.body, time.Now()), "%s request %d, secret %d, inboundauth", id, i, k+1)
			}
		}
	}
}
