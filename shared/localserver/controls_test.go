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

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/alternayte/queuebox/shared/store/postgres/dbtest"
)

// controlsReceiver answers each path with its status and records the time of every request.
type controlsReceiver struct {
	mu     sync.Mutex
	status map[string]int
	times  map[string][]time.Time
}

func newControlsReceiver(t *testing.T, status map[string]int) (*controlsReceiver, *httptest.Server) {
	t.Helper()
	rc := &controlsReceiver{status: status, times: map[string][]time.Time{}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc.mu.Lock()
		rc.times[r.URL.Path] = append(rc.times[r.URL.Path], time.Now())
		code := rc.status[r.URL.Path]
		rc.mu.Unlock()
		if code == 0 {
			code = http.StatusOK
		}
		w.WriteHeader(code)
		_, _ = fmt.Fprintf(w, "answer %d", code)
	}))
	t.Cleanup(srv.Close)
	return rc, srv
}

func (rc *controlsReceiver) requests(path string) []time.Time {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]time.Time(nil), rc.times[path]...)
}

// outboxRow is what the test reads of an outbox row.
type outboxRow struct {
	state, lastError string
	attempt          int
	waitsFor         time.Duration // scheduled_at minus the database's now
}

func readOutboxRow(t *testing.T, pool *pgxpool.Pool, topic string) outboxRow {
	t.Helper()
	var r outboxRow
	var lastError *string
	var micros int64
	err := pool.QueryRow(context.Background(), `SELECT state, attempt, last_error,
		(EXTRACT(EPOCH FROM scheduled_at - now()) * 1000000)::bigint FROM outbox WHERE topic = $1`, topic).
		Scan(&r.state, &r.attempt, &lastError, &micros)
	require.NoError(t, err)
	if lastError != nil {
		r.lastError = *lastError
	}
	r.waitsFor = time.Duration(micros) * time.Microsecond
	return r
}

// waitUntil polls cond every 20 ms until it holds, failing the test after timeout.
func waitUntil(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s did not happen within %s", what, timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestDeliveryControlsFromQueueboxYml runs the local process, through the service's one
// assembly, from a queuebox.yml that sets the delivery controls of docs/delivery-controls.md
// on HTTP destinations, against the real PostgreSQL and a loopback receiver, and shows that
// each key takes effect:
//   - terminalStatuses [410]: the row goes dead at attempt 0 with the status in last_error;
//   - retry.scheduleMs of 2 entries: the row goes dead after 3 deliveries (the first and one
//     after each delay), although outbox.maxAttempts is 10;
//   - circuitBreaker with failureThreshold 2: after 2 failures the breaker opens and the row
//     waits for the cool-down, its attempt held, with no request while it is open;
//   - rateLimit of 5 requests a second, burst 1: 8 rows are all sent at attempt 0 and take
//     at least 7/5 s from the first request to the last.
func TestDeliveryControlsFromQueueboxYml(t *testing.T) {
	t.Parallel()
	rc, receiver := newControlsReceiver(t, map[string]int{"/gone": http.StatusGone, "/flaky": 500, "/down": 503})
	dbURL := dbtest.NewDatabase(t)
	u, err := url.Parse(dbURL)
	require.NoError(t, err)
	cfg := loadYAML(t, fmt.Sprintf(`
database:
  url: jdbc:postgresql://%[1]s%[2]s
  username: postgres
  password: trust-auth
  migrate: true
outbox:
  pollIntervalMs: 20
  maxAttempts: 10
  retry:
    jitter: false
destinations:
  gone:
    type: http
    baseUrl: %[3]s
    path: /gone
    terminalStatuses: [410]
  flaky:
    type: http
    baseUrl: %[3]s
    path: /flaky
    retry:
      scheduleMs: [100, 200]
  down:
    type: http
    baseUrl: %[3]s
    path: /down
    retry:
      scheduleMs: [50, 50, 50, 50, 50, 50, 50, 50]
    circuitBreaker:
      failureThreshold: 2
      windowMs: 600000
      coolDownMs: 600000
  limited:
    type: http
    baseUrl: %[3]s
    path: /limited
    rateLimit:
      requestsPerSecond: 5
      burst: 1
routes:
  - topicPattern: "gone.*"
    destination: gone
  - topicPattern: "flaky.*"
    destination: flaky
  - topicPattern: "down.*"
    destination: down
  - topicPattern: "limited.*"
    destination: limited
`, u.Host, u.Path, receiver.URL))
	cfg.Server.HTTPPort = 0
	l, err := New(context.Background(), cfg, quietLog())
	require.NoError(t, err)
	runLocal(t, l)

	pool := dbtest.NewPool(t, dbURL)
	for _, topic := range []string{"gone.a", "flaky.a", "down.a"} {
		dbtest.Exec(t, pool, `INSERT INTO outbox (topic, key, payload) VALUES ($1, $1, '{"n":1}')`, topic)
	}
	const limitedRows = 8
	for i := range limitedRows {
		dbtest.Exec(t, pool, `INSERT INTO outbox (topic, key, payload) VALUES ($1, $1, '{"n":1}')`, fmt.Sprintf("limited.%d", i))
	}

	waitUntil(t, 30*time.Second, "the 410 row going dead", func() bool { return readOutboxRow(t, pool, "gone.a").state == "dead" })
	gone := readOutboxRow(t, pool, "gone.a")
	assert.Equal(t, 0, gone.attempt, "a terminal status costs no retry")
	assert.Contains(t, gone.lastError, "410")
	assert.Len(t, rc.requests("/gone"), 1)

	waitUntil(t, 30*time.Second, "the scheduled row going dead", func() bool { return readOutboxRow(t, pool, "flaky.a").state == "dead" })
	flaky := readOutboxRow(t, pool, "flaky.a")
	assert.Equal(t, 2, flaky.attempt, "the schedule's length bounds the retries, not outbox.maxAttempts")
	assert.Contains(t, flaky.lastError, "500")
	assert.Len(t, rc.requests("/flaky"), 3, "the first delivery and one after each of the 2 delays")

	waitUntil(t, 30*time.Second, "the row of the open breaker waiting for the cool-down", func() bool {
		r := readOutboxRow(t, pool, "down.a")
		return r.state == "pending" && r.attempt >= 2 && r.waitsFor > 5*time.Minute
	})
	var micros int64
	require.NoError(t, pool.QueryRow(context.Background(),
		`SELECT (EXTRACT(EPOCH FROM open_until - now()) * 1000000)::bigint FROM queuebox_destination_state WHERE destination = 'down'`).Scan(&micros))
	openFor := time.Duration(micros) * time.Microsecond
	assert.Greater(t, openFor, 5*time.Minute, "the breaker is open for its cool-down of 10 minutes")
	held := readOutboxRow(t, pool, "down.a").attempt
	// The breaker opens at the second failure. A process that read the state table just
	// before it opened may let one more request through until its next read (at most a
	// second later); the schedule alone would have made 9 requests by then.
	assert.Contains(t, []int{2, 3}, held, "the breaker opened after failureThreshold failures")
	assert.Len(t, rc.requests("/down"), held, "every request is a counted attempt")

	waitUntil(t, 30*time.Second, "every rate-limited row being sent", func() bool {
		var sent int
		require.NoError(t, pool.QueryRow(context.Background(),
			`SELECT count(*) FROM outbox WHERE topic LIKE 'limited.%' AND state = 'sent' AND attempt = 0`).Scan(&sent))
		return sent == limitedRows
	})
	times := rc.requests("/limited")
	require.Len(t, times, limitedRows)
	span := times[len(times)-1].Sub(times[0])
	// 5 requests a second with a burst of 1: request n goes n/5 s after the first at the
	// earliest. A small margin covers the clocks of the database and the receiver.
	assert.GreaterOrEqual(t, span, (limitedRows-1)*time.Second/5-100*time.Millisecond,
		"the %d requests took %s, faster than 5 a second", limitedRows, span)
	// The rate-limited deliveries took over a second: the held row of the open breaker has
	// not been attempted meanwhile.
	assert.Equal(t, held, readOutboxRow(t, pool, "down.a").attempt, "the held row's attempt does not grow")
	assert.Len(t, rc.requests("/down"), held, "no request while the breaker is open")
	t.Logf("rate limit: %d requests in %s; breaker opened after %d failures, open for %s more", limitedRows, span, held, openFor.Round(time.Second))
}
