package localserver

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/alternayte/queuebox/shared/store/postgres/dbtest"
)

// TestTheLocalServerDeliversInClaimModeLock: the whole process, with outbox.claimMode lock,
// delivers every row once per key in order, and no row is ever processing while it does: the
// lock claim reaches the store through the assembly's store, which is bound after the build.
func TestTheLocalServerDeliversInClaimModeLock(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewDatabase(t)
	pool := dbtest.NewPool(t, dbURL)
	var mu sync.Mutex
	var got []string
	var processing int
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var n int
		if err := pool.QueryRow(r.Context(), `SELECT count(*) FROM outbox WHERE state = 'processing'`).Scan(&n); err == nil {
			mu.Lock()
			processing += n
			mu.Unlock()
		}
		mu.Lock()
		got = append(got, r.Header.Get("X-Message-Key")+":"+r.Header.Get("X-Topic"))
		mu.Unlock()
	}))
	defer receiver.Close()
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
  claimMode: lock
destinations:
  hooks:
    type: http
    baseUrl: %s
    path: /hooks
routes:
  - topicPattern: "order.*"
    destination: hooks
`, u.Host, u.Path, receiver.URL))
	cfg.Server.HTTPPort = 0
	l, err := New(context.Background(), cfg, quietLog())
	require.NoError(t, err)
	runLocal(t, l)
	const rows = 20
	for i := range rows {
		dbtest.Exec(t, pool, fmt.Sprintf(`INSERT INTO outbox (topic, key, payload) VALUES ('order.step%02d', 'k%d', '{}')`, i, i%2))
	}
	ctx := context.Background()
	waitUntil(t, 60*time.Second, "every row to be sent", func() bool {
		var sent int
		require.NoError(t, pool.QueryRow(ctx, `SELECT COUNT(*) FROM outbox WHERE state = 'sent'`).Scan(&sent))
		return sent == rows
	})
	mu.Lock()
	defer mu.Unlock()
	require.Zero(t, processing, "rows were processing during deliveries in claim mode lock")
	last := map[string]string{}
	for _, g := range got {
		key, topic := g[:2], g[3:]
		require.Greater(t, topic, last[key], "key %s delivered %s after %s", key, topic, last[key])
		last[key] = topic
	}
	require.Len(t, got, rows)
}
