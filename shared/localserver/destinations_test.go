package localserver

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/alternayte/queuebox/shared/store"
	"github.com/alternayte/queuebox/shared/store/postgres"
	"github.com/alternayte/queuebox/shared/store/postgres/dbtest"
)

const adminToken = "pause-token-81c2"

// adminCall sends an admin request with the bearer token and returns the status and body.
func adminCall(t *testing.T, method, url string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+adminToken)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

// metricValue returns the value of the sample of the scrape whose name and labels are line,
// or -1 when the scrape has none.
func metricValue(t *testing.T, base, line string) float64 {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(line) + ` (\S+)$`).FindStringSubmatch(string(b))
	if m == nil {
		return -1
	}
	v, err := strconv.ParseFloat(m[1], 64)
	require.NoError(t, err)
	return v
}

// TestTheAdminPauseHoldsTheRowsOfTheDestinationUntilTheResume runs the local process with
// admin routes: a destination paused through POST /admin/destinations/{name}/pause gets no
// request and its rows keep attempt 0 while the poller claims and holds them; after the resume
// every row is delivered, on its first attempt.
func TestTheAdminPauseHoldsTheRowsOfTheDestinationUntilTheResume(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var got []string
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Header.Get("X-Attempt"))
		mu.Unlock()
	}))
	defer receiver.Close()
	received := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), got...)
	}
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
  pollIntervalMs: 20
admin:
  enabled: true
  auth:
    type: bearer
    token: %s
destinations:
  hooks:
    type: http
    baseUrl: %s
    path: /hooks
  other:
    type: http
    baseUrl: %[4]s
    path: /other
routes:
  - topicPattern: "order.*"
    destination: hooks
`, u.Host, u.Path, adminToken, receiver.URL))
	cfg.Server.HTTPPort = 0
	l, err := New(context.Background(), cfg, quietLog())
	require.NoError(t, err)
	base := runLocal(t, l)
	pool := dbtest.NewPool(t, dbURL)
	st, err := postgres.New(pool, store.DefaultNames())
	require.NoError(t, err)
	ctx := context.Background()

	code, body := adminCall(t, "POST", base+"/admin/destinations/hooks/pause")
	require.Equal(t, http.StatusOK, code, body)
	assert.Contains(t, body, `"name":"hooks","paused":true`)
	states, err := st.DestinationStates(ctx)
	require.NoError(t, err)
	require.Len(t, states, 1)
	assert.True(t, states[0].Paused, "DestinationStates after the pause route: %+v", states)
	code, body = adminCall(t, "GET", base+"/admin/destinations")
	require.Equal(t, http.StatusOK, code, body)
	assert.Contains(t, body, `{"name":"hooks","paused":true,`)
	assert.Contains(t, body, `{"name":"other","paused":false,"pausedAt":null,"circuit":"closed","openRemainingMs":0,"failures":0}`)

	// The poller has read the pause once its gauge shows it.
	waitUntil(t, 30*time.Second, "the poller reading the pause", func() bool {
		return metricValue(t, base, `queuebox_destination_paused{destination="hooks"}`) == 1
	})
	const rows = 3
	for i := range rows {
		dbtest.Exec(t, pool, fmt.Sprintf(`INSERT INTO outbox (topic, key, payload) VALUES ('order.created', 'k%d', '{"n":%d}')`, i, i))
	}
	// Each row is claimed and held at least twice.
	waitUntil(t, 60*time.Second, "the held rows to be rechecked", func() bool {
		return metricValue(t, base, `queuebox_outbox_deferred_total{destination="hooks",reason="paused"}`) >= 2*rows
	})
	assert.Empty(t, received(), "a paused destination received requests")
	var attempts, pending int
	require.NoError(t, pool.QueryRow(ctx, `SELECT COALESCE(SUM(attempt), 0), COUNT(*) FILTER (WHERE state = 'pending') FROM outbox`).Scan(&attempts, &pending))
	assert.Equal(t, 0, attempts, "the held rows' attempts")
	assert.Equal(t, rows, pending, "the held rows are pending")

	code, body = adminCall(t, "POST", base+"/admin/destinations/hooks/resume")
	require.Equal(t, http.StatusOK, code, body)
	assert.Contains(t, body, `"name":"hooks","paused":false,"pausedAt":null`)
	waitUntil(t, 60*time.Second, "every row to be sent after the resume", func() bool {
		var sent int
		require.NoError(t, pool.QueryRow(ctx, `SELECT COUNT(*) FROM outbox WHERE state = 'sent'`).Scan(&sent))
		return sent == rows
	})
	assert.Equal(t, strings.Repeat("0", rows), strings.Join(received(), ""), "every row was delivered on its first attempt (X-Attempt)")

	code, body = adminCall(t, "POST", base+"/admin/destinations/nowhere/pause")
	assert.Equal(t, http.StatusNotFound, code, body)
	resp, err := http.Post(base+"/admin/destinations/hooks/pause", "application/json", nil)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusUnauthorized, resp.StatusCode, "a pause without the admin token")
}
