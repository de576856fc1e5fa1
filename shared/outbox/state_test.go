package outbox_test

import (
	"context"
	"encoding/json"
	"net/http"
	"sort"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alternayte/queuebox/shared/outbox"
	"github.com/alternayte/queuebox/shared/store"
)

// controlMetrics counts the measurements of the delivery controls too.
type controlMetrics struct {
	*countingMetrics
	open atomic.Bool
}

func newControlMetrics() *controlMetrics {
	return &controlMetrics{countingMetrics: newCountingMetrics()}
}

func (m *controlMetrics) Deferred(d, reason string) { m.inc("deferred/"+reason, 1) }

func (m *controlMetrics) DestinationState(d string, paused, open bool) {
	m.open.Store(open)
}

// sequences returns the sequence of each row id.
func sequences(t *testing.T, fx fixture) map[string]int64 {
	t.Helper()
	rows, err := fx.pool.Query(context.Background(), `SELECT id::text, sequence FROM outbox`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var id string
		var seq int64
		if err := rows.Scan(&id, &seq); err != nil {
			t.Fatal(err)
		}
		out[id] = seq
	}
	return out
}

// assertKeyOrder checks that the first delivery of each row came in sequence order per key.
func assertKeyOrder(t *testing.T, fx fixture, reqs []request) {
	t.Helper()
	seq := sequences(t, fx)
	seen := map[string]bool{}
	last := map[string]int64{}
	for _, r := range reqs {
		id, key := r.Header.Get("X-Message-Id"), r.Header.Get("X-Message-Key")
		if seen[id] {
			continue
		}
		seen[id] = true
		if s := seq[id]; s < last[key] {
			t.Errorf("key %s: row %s (sequence %d) came after sequence %d", key, id, s, last[key])
		} else {
			last[key] = s
		}
	}
}

func TestAPausedDestinationHoldsItsRowsWithoutAttemptsAndDeliversThemInKeyOrderAfterResume(t *testing.T) {
	t.Parallel()
	fx := newFixture(t)
	rc := newReceiver(t, nil)
	ctx := context.Background()
	if _, err := fx.store.DestinationSetPaused(ctx, "receiver", true); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for i := range 60 {
		ids = append(ids, insert(t, fx.store, store.OutboxInsertParams{
			Topic: "order.created", Key: "k" + strconv.Itoa(i%6), Payload: json.RawMessage(`{}`),
		}))
	}
	m := newControlMetrics()
	cfg := outbox.Config{PollInterval: 10 * time.Millisecond}
	for range 3 {
		runPoller(t, controlled(t, fx.store, cfg, rc, outbox.Destination{}, nil, m))
	}
	// Every key's head is held at least twice: the rows wait through more than one recheck.
	waitFor(t, 30*time.Second, "the held rows to be rechecked", func() bool { return m.get("deferred/paused") >= 12 })
	if n := rc.count(); n != 0 {
		t.Fatalf("a paused destination received %d requests", n)
	}
	for _, id := range ids {
		if s := readRow(t, fx.pool, id); s.Attempt != 0 || s.State == "sent" || s.State == "dead" {
			t.Fatalf("row %s of a paused destination: state %s, attempt %d; want it held with attempt 0", id, s.State, s.Attempt)
		}
	}
	if _, err := fx.store.DestinationSetPaused(ctx, "receiver", false); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 60*time.Second, "every row to be sent after the resume", func() bool {
		for _, id := range ids {
			if readRow(t, fx.pool, id).State != "sent" {
				return false
			}
		}
		return true
	})
	reqs := rc.requests()
	for _, r := range reqs {
		if r.Header.Get("X-Attempt") != "0" {
			t.Fatalf("a held row was delivered with X-Attempt %s, want 0", r.Header.Get("X-Attempt"))
		}
	}
	assertKeyOrder(t, fx, reqs)
}

func TestACircuitBreakerOpensAfterTheFailuresAndClosesAfterTheCoolDown(t *testing.T) {
	t.Parallel()
	fx := newFixture(t)
	var up atomic.Bool
	rc := newReceiver(t, func(*http.Request, int) int {
		if up.Load() {
			return http.StatusOK
		}
		return http.StatusInternalServerError
	})
	var ids []string
	for i := range 10 {
		ids = append(ids, insert(t, fx.store, store.OutboxInsertParams{
			Topic: "order.created", Key: "k" + strconv.Itoa(i), Payload: json.RawMessage(`{}`), MaxAttempts: 1000,
		}))
	}
	m := newControlMetrics()
	const threshold = 3
	const coolDown = 2 * time.Second
	cfg := outbox.Config{PollInterval: 10 * time.Millisecond, RetryBaseDelay: 10 * time.Millisecond, MaxRetryDelay: 20 * time.Millisecond, Concurrency: 1}
	dest := outbox.Destination{Breaker: &outbox.BreakerPolicy{Threshold: threshold, Window: time.Minute, CoolDown: coolDown}}
	p := controlled(t, fx.store, cfg, rc, dest, nil, m)
	runPoller(t, p)

	// The breaker opens after the threshold, and the trial after the cool-down fails and
	// opens it again: without the breaker the rows would have been retried every 20 ms.
	opens := map[time.Time]bool{}
	waitFor(t, 30*time.Second, "the breaker to open twice", func() bool {
		states, err := fx.store.DestinationStates(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range states {
			if !s.OpenUntil.IsZero() {
				opens[s.OpenUntil] = true
			}
		}
		return len(opens) >= 2
	})
	reqs := rc.requests()
	failed := len(reqs)
	attempts := 0
	for _, id := range ids {
		attempts += readRow(t, fx.pool, id).Attempt
	}
	// The breaker opened after the threshold-th request, and each trial comes at least a
	// cool-down after the one before: one trial when this test saw the second opening at once,
	// more when a loaded machine made it look later.
	trials := 1
	if len(reqs) >= threshold {
		trials = max(1, int(time.Since(reqs[threshold-1].At)/coolDown))
	}
	if failed > threshold+trials {
		t.Errorf("%d requests reached the failing destination, want at most %d (the threshold, then one trial per cool-down)", failed, threshold+trials)
	}
	if attempts > failed {
		t.Errorf("the rows hold %d attempts for %d failed requests: a held row's attempt grew", attempts, failed)
	}
	if m.get("deferred/circuit_open") == 0 {
		t.Error("no row was held while the breaker was open")
	}
	if st := p.Destinations(); len(st) != 1 || st[0].Circuit == "closed" {
		t.Errorf("destination status while failing: %+v, want the circuit open or half-open", st)
	}

	up.Store(true)
	waitFor(t, 30*time.Second, "every row to be sent after the cool-down", func() bool {
		for _, id := range ids {
			if readRow(t, fx.pool, id).State != "sent" {
				return false
			}
		}
		return true
	})
	states, err := fx.store.DestinationStates(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(states) != 1 || !states[0].OpenUntil.IsZero() {
		t.Errorf("state after recovery: %+v, want the breaker closed", states)
	}
	if st := p.Destinations(); st[0].Circuit != "closed" {
		t.Errorf("destination status after recovery: %+v", st)
	}
}

func TestARateLimitHoldsTwoPollersWithinTenPercentOfIt(t *testing.T) {
	t.Parallel()
	fx := newFixture(t)
	rc := newReceiver(t, nil)
	const rate = 50
	const window = 20 * time.Second
	n := rate*int(window/time.Second)*2 + 200
	params := make([]store.OutboxInsertParams, n)
	for i := range params {
		params[i] = store.OutboxInsertParams{Topic: "order.created", Payload: json.RawMessage(`{}`)}
	}
	insertMany(t, fx, params)
	m := newControlMetrics()
	cfg := outbox.Config{PollInterval: 20 * time.Millisecond}
	dest := outbox.Destination{RateLimit: &outbox.RateLimit{RequestsPerSecond: rate, Burst: 5}}
	for range 2 {
		runPoller(t, controlled(t, fx.store, cfg, rc, dest, nil, m))
	}
	waitFor(t, 30*time.Second, "the first delivery", func() bool { return rc.count() > 0 })
	start := rc.requests()[0].At.Add(time.Second)
	end := start.Add(window)
	waitFor(t, window+30*time.Second, "the window to pass", func() bool {
		reqs := rc.requests()
		return len(reqs) > 0 && reqs[len(reqs)-1].At.After(end)
	})
	reqs := rc.requests()
	times := make([]time.Time, len(reqs))
	for i, r := range reqs {
		times[i] = r.At
	}
	sort.Slice(times, func(i, j int) bool { return times[i].Before(times[j]) })
	in := 0
	for _, at := range times {
		if !at.Before(start) && at.Before(end) {
			in++
		}
	}
	// The guarantee is the ceiling: the two pollers together never send more than the rate
	// (10 % over it at most). The floor is only a guard against a limiter that throttles far
	// below its rate: a busy machine may deliver fewer than the rate allows, so it is loose.
	want := rate * int(window/time.Second)
	if in > want*11/10 {
		t.Errorf("%d requests in %s, want at most %d + 10 %%", in, window, want)
	}
	if in < want/4 {
		t.Errorf("%d requests in %s: the limiter let through less than a quarter of its rate (%d)", in, window, want)
	}
	if m.get("deferred/rate_limited") == 0 {
		t.Error("no row waited for the rate limit")
	}
}

// insertMany writes the rows through the store, one by one.
func insertMany(t *testing.T, fx fixture, params []store.OutboxInsertParams) {
	t.Helper()
	for _, p := range params {
		insert(t, fx.store, p)
	}
}
