package localserver

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/alternayte/queuebox/migrations"
	"github.com/alternayte/queuebox/shared/console"
	"github.com/alternayte/queuebox/shared/store/postgres/dbtest"
)

// TestTheStartWithoutMigrateRunsWithoutQueueBoxsOwnTables runs the local process with
// database.migrate false on a database whose schema was applied by hand with V1..V11 only, as
// the documented procedure says (none of QueueBox's own migrations, no history). The start goes
// on and logs one warning per missing file of QueueBox's own track, naming the file and its
// table; a NATS JetStream row is delivered with its row id as Nats-Msg-Id; the admin replay,
// plain and batched, moves the row back to pending and it is sent again (the stream may drop
// the same Nats-Msg-Id: that is what the warning says); the console login works, its pages
// work, and the logout answers with the cookie cleared.
func TestTheStartWithoutMigrateRunsWithoutQueueBoxsOwnTables(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	stream, prefix := windowedStream(t, ctx, "qbnotrack")

	// The schema by hand: the files V1..V11, none of QueueBox's own track.
	dbURL := dbtest.NewDatabase(t)
	pool := dbtest.NewPool(t, dbURL)
	main, err := migrations.ListTrack(migrations.Main, migrations.PostgreSQL)
	require.NoError(t, err)
	for _, m := range main {
		_, err := pool.Exec(ctx, m.SQL)
		require.NoError(t, err, "applying %s by hand", m.Script)
	}

	u, err := url.Parse(dbURL)
	require.NoError(t, err)
	cfg := loadYAML(t, fmt.Sprintf(`
database:
  url: jdbc:postgresql://%s%s
  username: postgres
  password: trust-auth
  migrate: false
outbox:
  pollIntervalMs: 50
  retryBaseDelayMs: 100
admin:
  enabled: true
  auth:
    type: bearer
    token: %s
destinations:
  broker:
    type: nats
    servers: nats://127.0.0.1:4222
    subject: "%s.{{ topic }}"
routes:
  - topicPattern: "order.*"
    destination: broker
`, u.Host, u.Path, consoleToken, prefix))
	cfg.Server.HTTPPort = 0
	var logs syncBuffer
	l, err := New(context.Background(), cfg, slog.New(slog.NewJSONHandler(&logs, nil)))
	require.NoError(t, err, "the start without migrate on a database without QueueBox's own tables")
	base := runLocal(t, l)

	// One warning per missing file, naming the file and its table.
	qb, err := migrations.ListTrack(migrations.QueueBox, migrations.PostgreSQL)
	require.NoError(t, err)
	require.NotEmpty(t, qb)
	for _, m := range qb {
		var found int
		for _, line := range strings.Split(logs.String(), "\n") {
			if strings.Contains(line, `"level":"WARN"`) && strings.Contains(line, `"migration":"`+m.Script+`"`) &&
				strings.Contains(line, "migrations/queuebox/postgresql/"+m.Script+" (table "+m.Table+")") {
				found++
			}
		}
		assert.Equal(t, 1, found, "one start warning names %s and its table %s; log:\n%s", m.Script, m.Table, logs.String())
	}

	var rowID string
	require.NoError(t, pool.QueryRow(ctx, `INSERT INTO outbox (topic, key, payload) VALUES ('order.created', 'o-1', '{"orderId":"1"}') RETURNING id::text`).Scan(&rowID))
	waitSentAfter := func(what string, before time.Time) time.Time {
		t.Helper()
		var at time.Time
		waitUntil(t, 30*time.Second, what, func() bool {
			var state string
			require.NoError(t, pool.QueryRow(ctx, `SELECT state, updated_at FROM outbox WHERE id = $1`, rowID).Scan(&state, &at))
			return state == "sent" && at.After(before)
		})
		return at
	}
	sent := waitSentAfter("the first delivery", time.Time{})
	m, err := stream.GetMsg(ctx, 1)
	require.NoError(t, err)
	assert.Equal(t, rowID, m.Header.Get(jetstream.MsgIDHeader), "Nats-Msg-Id is the row id")
	assert.JSONEq(t, `{"orderId":"1"}`, string(m.Data))

	// The admin replay, plain and batched: each moves the row, which is sent again.
	for i, body := range []string{`{"ids": ["` + rowID + `"]}`, `{"ids": ["` + rowID + `"], "batchSize": 10}`} {
		req, err := http.NewRequest("POST", base+"/admin/replay", strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+consoleToken)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		answer, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode, "replay %d: %s", i+1, answer)
		var moved struct{ Moved int64 }
		require.NoError(t, json.Unmarshal(answer, &moved))
		require.Equal(t, int64(1), moved.Moved, "replay %d: %s", i+1, answer)
		sent = waitSentAfter(fmt.Sprintf("the delivery of replay %d", i+1), sent)
	}

	// The console: the login, a page and the logout, which clears the cookie.
	cookie, csrf := consoleLogin(t, base)
	status, _ := consoleGet(t, base, "/console/dead", cookie)
	require.Equal(t, http.StatusOK, status, "a console page without the table of the logouts")
	req, err := http.NewRequest("POST", base+"/console/logout", strings.NewReader(url.Values{"csrf": {csrf}}.Encode()))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.AddCookie(&http.Cookie{Name: console.CookieName, Value: cookie})
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusSeeOther, resp.StatusCode, "the logout without the table of the logouts")
	var cleared bool
	for _, c := range resp.Cookies() {
		if c.Name == console.CookieName && c.MaxAge < 0 {
			cleared = true
		}
	}
	assert.True(t, cleared, "the logout clears the browser's cookie")
}
