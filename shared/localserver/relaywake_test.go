package localserver

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/alternayte/queuebox/shared/store/postgres/dbtest"
)

// TestRelayWakesThePollerAtOnce is issue 13: with capture off and a poll interval of ten
// minutes for the poller and for the relay, a webhook posted to the inbox reaches the
// receiver within the test's deadline only because the inbox handler woke the relay and the
// relay, having forwarded the row, woke the poller of the same process. The second webhook is
// posted once the first row is sent, when the poller waits for its next poll: the first could
// still be found by the poller's first claim at its start.
func TestRelayWakesThePollerAtOnce(t *testing.T) {
	t.Parallel()
	delivered := make(chan string, 10)
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		delivered <- string(b)
	}))
	defer receiver.Close()
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
  pollIntervalMs: 600000
inbox:
  relay:
    pollIntervalMs: 600000
destinations:
  hooks:
    type: http
    baseUrl: %s
    path: /hooks
routes:
  - topicPattern: "hook.*"
    destination: hooks
sources:
  hooks:
    path: /hooks
    idempotencyKeyPath: $.id
    topic: hook.received
`, u.Host, u.Path, receiver.URL))
	cfg.Server.HTTPPort = 0
	require.False(t, cfg.Outbox.Capture.Enabled)
	l, err := New(context.Background(), cfg, quietLog())
	require.NoError(t, err)
	require.Nil(t, l.Capture())
	base := runLocal(t, l)
	pool := dbtest.NewPool(t, dbURL)

	for _, id := range []string{"evt-1", "evt-2"} {
		resp, err := http.Post(base+"/inbox/hooks", "application/json", strings.NewReader(`{"id":"`+id+`"}`))
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		require.Equal(t, http.StatusAccepted, resp.StatusCode, "POST %s", id)
		select {
		case body := <-delivered:
			assert.JSONEq(t, `{"id":"`+id+`"}`, body)
		case <-time.After(60 * time.Second):
			t.Fatalf("%s was not delivered within 60 s: the relay did not wake the poller", id)
		}
		// Once its row is sent, the poller waits ten minutes for its next poll.
		deadline := time.Now().Add(60 * time.Second)
		for {
			var state string
			require.NoError(t, pool.QueryRow(context.Background(),
				`SELECT state FROM outbox WHERE payload->>'id' = $1`, id).Scan(&state))
			if state == "sent" {
				break
			}
			require.True(t, time.Now().Before(deadline), "the outbox row of %s is %s after 60 s, want sent", id, state)
			time.Sleep(20 * time.Millisecond)
		}
	}
}
