package outbox_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alternayte/queuebox/shared/connect/webhook"
	"github.com/alternayte/queuebox/shared/outbox"
	"github.com/alternayte/queuebox/shared/route"
	"github.com/alternayte/queuebox/shared/store"
)

// controlled builds a poller whose one destination, "receiver", takes every order.** row and
// carries the given controls; wc adjusts the webhook configuration.
func controlled(t *testing.T, st store.OutboxStore, cfg outbox.Config, rc *receiver, dest outbox.Destination, wc func(*webhook.Config), m outbox.Metrics) *outbox.Poller {
	t.Helper()
	c := webhook.Config{Name: "receiver", BaseURL: rc.srv.URL, Path: "/events", Timeout: 5 * time.Second}
	if wc != nil {
		wc(&c)
	}
	pub, err := webhook.New(c, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pub.Close() })
	dest.Name, dest.Publisher = "receiver", pub
	p, err := outbox.New(outbox.Options{
		Store:        st,
		Config:       cfg,
		Routes:       route.NewTable([]route.Route{{Pattern: route.MustCompile("order.**"), Destination: "receiver"}}),
		Destinations: []outbox.Destination{dest},
		Metrics:      m,
		Logger:       testLogger(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// scaled is a duration of the recommended schedule at 1/1000 scale: an hour becomes 3.6 s.
func scaled(d time.Duration) time.Duration { return d / 1000 }

// recommended is the schedule that docs/delivery-controls.md recommends: it rides out a
// 6-hour outage.
var recommended = []time.Duration{5 * time.Second, 30 * time.Second, 2 * time.Minute, 10 * time.Minute, time.Hour, 6 * time.Hour}

// TestTheRecommendedScheduleRidesOutAnHourLongOutage runs the recommended schedule at 1/1000
// scale against a destination that is down for a scaled hour: no row is lost to dead. The
// same outage with the default backoff at the same scale kills the rows, which shows that the
// outage is long enough to matter.
func TestTheRecommendedScheduleRidesOutAnHourLongOutage(t *testing.T) {
	t.Parallel()
	outage := scaled(time.Hour)
	for _, tc := range []struct {
		name     string
		retry    *outbox.RetryPolicy
		wantDead bool
	}{
		{"recommended schedule", &outbox.RetryPolicy{Schedule: scaledAll(recommended)}, false},
		{"default backoff", nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			fx := newFixture(t)
			var once sync.Once
			var upAt time.Time
			var mu sync.Mutex
			rc := newReceiver(t, func(*http.Request, int) int {
				mu.Lock()
				defer mu.Unlock()
				once.Do(func() { upAt = time.Now().Add(outage) })
				if time.Now().Before(upAt) {
					return http.StatusServiceUnavailable
				}
				return http.StatusOK
			})
			var ids []string
			for i := range 20 {
				ids = append(ids, insert(t, fx.store, store.OutboxInsertParams{
					Topic: "order.created", Key: "k" + strconv.Itoa(i%5), Payload: json.RawMessage(`{}`),
				}))
			}
			cfg := outbox.Config{PollInterval: 5 * time.Millisecond, RetryBaseDelay: scaled(time.Second)}
			runPoller(t, controlled(t, fx.store, cfg, rc, outbox.Destination{Retry: tc.retry}, nil, nil))
			waitFor(t, 60*time.Second, "every row to be sent or dead", func() bool {
				for _, id := range ids {
					if s := readRow(t, fx.pool, id).State; s != "sent" && s != "dead" {
						return false
					}
				}
				return true
			})
			dead := 0
			for _, id := range ids {
				if readRow(t, fx.pool, id).State == "dead" {
					dead++
				}
			}
			if tc.wantDead && dead == 0 {
				t.Fatalf("no row died of a %s outage with the default backoff: the outage is too short to test the schedule", outage)
			}
			if !tc.wantDead && dead != 0 {
				t.Fatalf("%d of %d rows went dead during a %s outage with the recommended schedule", dead, len(ids), outage)
			}
		})
	}
}

func scaledAll(ds []time.Duration) []time.Duration {
	out := make([]time.Duration, len(ds))
	for i, d := range ds {
		out[i] = scaled(d)
	}
	return out
}

// retryGap reads how far in the future the row's next attempt was scheduled when it last
// failed, by the database clock.
func retryGap(t *testing.T, fx fixture, id string) (time.Duration, int) {
	t.Helper()
	var micros int64
	var attempt int
	err := fx.pool.QueryRow(context.Background(),
		`SELECT (EXTRACT(EPOCH FROM scheduled_at - updated_at) * 1000000)::bigint, attempt FROM outbox WHERE id = $1`, id).Scan(&micros, &attempt)
	if err != nil {
		t.Fatal(err)
	}
	return time.Duration(micros) * time.Microsecond, attempt
}

func TestARetryAfterSetsTheNextAttemptUpToTheCap(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		retryAfter string
		status     int
		maxDelay   time.Duration
		want       time.Duration
	}{
		{"429 with 2 seconds", "2", http.StatusTooManyRequests, time.Minute, 2 * time.Second},
		{"503 with a date", "", http.StatusServiceUnavailable, time.Minute, 3 * time.Second},
		{"an hour is capped", "3600", http.StatusTooManyRequests, 1500 * time.Millisecond, 1500 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			fx := newFixture(t)
			rc := newReceiver(t, nil)
			rc.respond = nil
			answered := make(chan time.Time, 1)
			var date time.Time // the Retry-After date of the 503, set before answered
			rc.srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				rc.mu.Lock()
				rc.got = append(rc.got, request{Header: r.Header.Clone(), At: time.Now()})
				n := len(rc.got)
				rc.mu.Unlock()
				if n == 1 {
					v := tc.retryAfter
					if v == "" {
						v = time.Now().Add(tc.want + 500*time.Millisecond).UTC().Format(http.TimeFormat)
						date, _ = http.ParseTime(v)
					}
					w.Header().Set("Retry-After", v)
					w.WriteHeader(tc.status)
					answered <- time.Now()
					return
				}
				w.WriteHeader(http.StatusOK)
			})
			id := insert(t, fx.store, store.OutboxInsertParams{Topic: "order.created", Payload: json.RawMessage(`{}`)})
			cfg := outbox.Config{PollInterval: 10 * time.Millisecond}
			dest := outbox.Destination{Retry: &outbox.RetryPolicy{HonorRetryAfter: true, MaxDelay: tc.maxDelay}}
			runPoller(t, controlled(t, fx.store, cfg, rc, dest, nil, nil))
			first := <-answered
			waitFor(t, 10*time.Second, "the retry to be scheduled", func() bool {
				_, attempt := retryGap(t, fx, id)
				return attempt == 1 || readRow(t, fx.pool, id).State == "sent"
			})
			switch {
			case readRow(t, fx.pool, id).State == "sent":
			case tc.retryAfter == "":
				// A date names a moment: the next attempt is at that moment, whenever the
				// answer was read. It cannot be earlier, and it is later at most by the time
				// between the answer and the write that scheduled it.
				var scheduled, written time.Time
				if err := fx.pool.QueryRow(context.Background(), `SELECT scheduled_at, updated_at FROM outbox WHERE id = $1`, id).Scan(&scheduled, &written); err != nil {
					t.Fatal(err)
				}
				if lag := written.Sub(first); scheduled.Before(date.Add(-100*time.Millisecond)) || scheduled.After(date.Add(lag+100*time.Millisecond)) {
					t.Errorf("the next attempt was scheduled at %s, want the Retry-After date %s (written %s after the answer)", scheduled, date, lag)
				}
			default:
				gap, _ := retryGap(t, fx, id)
				if low, high := tc.want-10*time.Millisecond, tc.want+100*time.Millisecond; gap < low || gap > high {
					t.Errorf("the next attempt was scheduled %s after the failure, want %s (at most the cap %s)", gap, tc.want, tc.maxDelay)
				}
			}
			waitFor(t, 20*time.Second, "the retry to be delivered", func() bool { return readRow(t, fx.pool, id).State == "sent" })
			reqs := rc.requests()
			low := tc.want - 100*time.Millisecond
			if tc.retryAfter == "" {
				low -= time.Second
			}
			if gap := reqs[1].At.Sub(first); gap < low {
				t.Errorf("the retry came %s after the 429/503, want at least %s", gap, low)
			}
		})
	}
}

func TestARetryAfterIsIgnoredUnlessThePolicyHonoursIt(t *testing.T) {
	t.Parallel()
	fx := newFixture(t)
	rc := newReceiver(t, nil)
	rc.srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "3600")
		w.WriteHeader(http.StatusTooManyRequests)
	})
	id := insert(t, fx.store, store.OutboxInsertParams{Topic: "order.created", Payload: json.RawMessage(`{}`)})
	cfg := outbox.Config{PollInterval: 10 * time.Millisecond, RetryBaseDelay: 200 * time.Millisecond}
	runPoller(t, controlled(t, fx.store, cfg, rc, outbox.Destination{}, nil, nil))
	waitFor(t, 10*time.Second, "the first failure", func() bool { _, a := retryGap(t, fx, id); return a >= 1 })
	// The row may have failed more than once by the time it is read (a busy machine): the gap
	// is the backoff of the attempt read, 200 ms doubling with at most 25 % jitter, never the
	// hour of the Retry-After.
	gap, attempt := retryGap(t, fx, id)
	backoff := 200 * time.Millisecond << (attempt - 1)
	if limit := backoff + backoff/4 + 50*time.Millisecond; gap > limit {
		t.Errorf("the default policy waited %s after failure %d with a Retry-After of an hour, want its backoff of %s (at most %s)", gap, attempt, backoff, limit)
	}
}

func TestATerminalStatusSendsTheRowToDeadAtOnce(t *testing.T) {
	t.Parallel()
	fx := newFixture(t)
	rc := newReceiver(t, func(r *http.Request, _ int) int {
		if r.Header.Get("X-Topic") == "order.gone" {
			return http.StatusGone
		}
		return http.StatusInternalServerError
	})
	gone := insert(t, fx.store, store.OutboxInsertParams{Topic: "order.gone", Payload: json.RawMessage(`{}`)})
	failing := insert(t, fx.store, store.OutboxInsertParams{Topic: "order.failing", Payload: json.RawMessage(`{}`)})
	cfg := outbox.Config{PollInterval: 10 * time.Millisecond, RetryBaseDelay: time.Hour}
	p := controlled(t, fx.store, cfg, rc, outbox.Destination{}, func(c *webhook.Config) { c.TerminalStatuses = []int{410} }, nil)
	runPoller(t, p)
	waitFor(t, 10*time.Second, "the 410 row to go dead", func() bool { return readRow(t, fx.pool, gone).State == "dead" })
	s := readRow(t, fx.pool, gone)
	if s.Attempt != 0 || !strings.Contains(s.LastError, "410") {
		t.Errorf("the 410 row: attempt %d, last_error %q; want attempt 0 and the status in last_error", s.Attempt, s.LastError)
	}
	waitFor(t, 10*time.Second, "the 500 row to fail once", func() bool { return readRow(t, fx.pool, failing).Attempt == 1 })
	if s := readRow(t, fx.pool, failing); s.State != "pending" {
		t.Errorf("a 500 (not terminal) row is %s, want pending for its retry", s.State)
	}
}
