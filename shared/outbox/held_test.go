package outbox_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alternayte/queuebox/shared/outbox"
	"github.com/alternayte/queuebox/shared/store"
)

// The claim mode lock (held.go): the same guarantees as the lease mode, with the rows pending
// while they are delivered.

func TestLockModeOrderPerKeyWithThreePollers(t *testing.T) {
	t.Parallel()
	orderPerKeyWithThreePollers(t, outbox.ClaimModeLock)
}

// TestLockModeWritesEachOutcomeOnce: a row stays pending without a token while it is
// delivered, and then gets its outcome as in the lease mode: sent; retried, then dead after
// its attempts; dead at once without a route.
func TestLockModeWritesEachOutcomeOnce(t *testing.T) {
	t.Parallel()
	fx := newFixture(t)
	var duringDelivery sync.Map // id -> the row's state and token as the receiver saw them
	rc := newReceiver(t, func(r *http.Request, _ int) int {
		id := r.Header.Get("X-Message-Id")
		var state string
		var token *string
		if err := fx.pool.QueryRow(context.Background(), `SELECT state, claim_token::text FROM outbox WHERE id = $1`, id).Scan(&state, &token); err == nil {
			if token != nil {
				state += " with token " + *token
			}
			duringDelivery.Store(id, state)
		}
		if r.Header.Get("X-Topic") == "order.failing" {
			return http.StatusInternalServerError
		}
		return http.StatusOK
	})
	ok := insert(t, fx.store, store.OutboxInsertParams{Topic: "order.ok", Payload: json.RawMessage(`{}`)})
	failing := insert(t, fx.store, store.OutboxInsertParams{Topic: "order.failing", Payload: json.RawMessage(`{}`), MaxAttempts: 2})
	noRoute := insert(t, fx.store, store.OutboxInsertParams{Topic: "nowhere", Payload: json.RawMessage(`{}`)})
	m := newCountingMetrics()
	p := newPoller(t, fx.store, outbox.Config{PollInterval: 10 * time.Millisecond, RetryBaseDelay: 20 * time.Millisecond, ClaimMode: outbox.ClaimModeLock}, rc, m)
	runPoller(t, p)
	waitFor(t, 30*time.Second, "every row finished", func() bool {
		return readRow(t, fx.pool, ok).State == "sent" && readRow(t, fx.pool, failing).State == "dead" && readRow(t, fx.pool, noRoute).State == "dead"
	})
	if s := readRow(t, fx.pool, failing); s.Attempt != 2 || !strings.Contains(s.LastError, "500") {
		t.Errorf("failing row = %+v, want attempt 2 and the status in last_error", s)
	}
	if s := readRow(t, fx.pool, noRoute); !strings.Contains(s.LastError, "No route matches topic nowhere") {
		t.Errorf("row without a route = %+v, want a last_error that says so", s)
	}
	for _, id := range []string{ok, failing} {
		seen, _ := duringDelivery.Load(id)
		if seen != "pending" {
			t.Errorf("row %s was %q while delivered, want pending without a token", id, seen)
		}
	}
	if n := rc.count(); n != 4 {
		t.Errorf("the receiver got %d requests, want 4 (1 sent, 3 attempts of the failing row)", n)
	}
	if m.get("outcome/sent") != 1 || m.get("outcome/failed") != 2 || m.get("outcome/dead") != 2 || m.get("claimLost") != 0 {
		t.Errorf("metrics = %v", m.snapshot())
	}
}

// TestLockModeStopLeavesQueuedRowsPending: at a stop, the rows that no publisher took get no
// request, and when the publish in flight outlives the shutdown timeout the claim is rolled
// back: every row is pending, unattempted, as soon as Run returns.
func TestLockModeStopLeavesQueuedRowsPending(t *testing.T) {
	t.Parallel()
	fx := newFixture(t)
	gate := make(chan struct{})
	started := make(chan struct{}, 10)
	rc := newReceiver(t, func(r *http.Request, _ int) int {
		started <- struct{}{}
		select {
		case <-gate:
		case <-r.Context().Done():
		}
		return http.StatusOK
	})
	var openGate sync.Once
	t.Cleanup(func() { openGate.Do(func() { close(gate) }) })
	for range 10 {
		insert(t, fx.store, store.OutboxInsertParams{Topic: "order.stop", Payload: json.RawMessage(`{}`)})
	}
	p := newPoller(t, fx.store, outbox.Config{BatchSize: 10, Concurrency: 1, PollInterval: time.Hour, ShutdownTimeout: 200 * time.Millisecond, ClaimMode: outbox.ClaimModeLock}, rc, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan outbox.Summary, 1)
	go func() { done <- p.Run(ctx, outbox.RunOptions{}) }()
	select {
	case <-started:
	case <-time.After(30 * time.Second):
		t.Fatal("no publish began within 30 s")
	}
	cancel()
	var sum outbox.Summary
	select {
	case sum = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return within 30 s of the stop")
	}
	if sum.Released != 9 || sum.Sent != 0 || sum.Claimed != 10 {
		t.Errorf("summary = %+v; want 10 claimed, 0 sent, 9 released", sum)
	}
	var pending int
	if err := fx.pool.QueryRow(context.Background(),
		`SELECT count(*) FROM outbox WHERE state = 'pending' AND attempt = 0 AND claim_token IS NULL`).Scan(&pending); err != nil {
		t.Fatal(err)
	}
	if pending != 10 {
		t.Errorf("%d rows pending unattempted after the stop, want 10", pending)
	}
	if n := rc.count(); n != 1 {
		t.Errorf("%d requests, want 1: a released row is not published", n)
	}
	// The rows are free at once: a claim takes all ten.
	q := newPoller(t, fx.store, outbox.Config{BatchSize: 10, PollInterval: 10 * time.Millisecond, ClaimMode: outbox.ClaimModeLock}, newReceiver(t, nil), nil)
	if got := q.RunOnce(context.Background()); got.Claimed != 10 || got.Sent != 10 {
		t.Errorf("a run after the stop: %+v, want 10 claimed and sent", got)
	}
}

// TestLockModeAbandonedRowIsFreeAtOnce: a publish still running at the end of the shutdown
// timeout is abandoned; its claim is rolled back, so the row is pending as soon as Run returns
// and another poller delivers it with attempt 0, without waiting for a lease.
func TestLockModeAbandonedRowIsFreeAtOnce(t *testing.T) {
	t.Parallel()
	fx := newFixture(t)
	hung := make(chan struct{})
	rc := newReceiver(t, func(r *http.Request, n int) int {
		if n == 1 {
			close(hung)
			<-r.Context().Done() // the first publish never gets an answer
		}
		return http.StatusOK
	})
	id := insert(t, fx.store, store.OutboxInsertParams{Topic: "order.hung", Key: "k", Payload: json.RawMessage(`{}`)})
	a := newPoller(t, fx.store, outbox.Config{PollInterval: 10 * time.Millisecond, ShutdownTimeout: 100 * time.Millisecond, ClaimMode: outbox.ClaimModeLock}, rc, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		a.Run(ctx, outbox.RunOptions{})
	}()
	select {
	case <-hung:
	case <-time.After(30 * time.Second):
		t.Fatal("no publish began within 30 s")
	}
	cancel()
	<-done
	if s := readRow(t, fx.pool, id); s.State != "pending" || s.Attempt != 0 {
		t.Fatalf("after the abandon the row is %+v, want pending with attempt 0", s)
	}
	b := newPoller(t, fx.store, outbox.Config{PollInterval: 10 * time.Millisecond, ClaimMode: outbox.ClaimModeLock}, rc, nil)
	runPoller(t, b)
	waitFor(t, 20*time.Second, "the other poller to deliver the row", func() bool { return readRow(t, fx.pool, id).State == "sent" })
	if s := readRow(t, fx.pool, id); s.Attempt != 0 {
		t.Errorf("attempt = %d, want 0", s.Attempt)
	}
}

// TestLockModeHoldsAtMostHeldBatches: with one held claim allowed, a claim of one row, and
// four publishers, one request at a time reaches the receiver.
func TestLockModeHoldsAtMostHeldBatches(t *testing.T) {
	t.Parallel()
	fx := newFixture(t)
	var now, most atomic.Int32
	rc := newReceiver(t, func(*http.Request, int) int {
		n := now.Add(1)
		defer now.Add(-1)
		for {
			m := most.Load()
			if n <= m || most.CompareAndSwap(m, n) {
				break
			}
		}
		time.Sleep(5 * time.Millisecond) // a slow answer, so that a second claim would overlap
		return http.StatusOK
	})
	for range 6 {
		insert(t, fx.store, store.OutboxInsertParams{Topic: "order.one", Payload: json.RawMessage(`{}`)})
	}
	p := newPoller(t, fx.store, outbox.Config{BatchSize: 1, Concurrency: 4, HeldBatches: 1, PollInterval: 10 * time.Millisecond, ClaimMode: outbox.ClaimModeLock}, rc, nil)
	runPoller(t, p)
	waitFor(t, 30*time.Second, "every row sent", func() bool {
		var n int
		_ = fx.pool.QueryRow(context.Background(), `SELECT count(*) FROM outbox WHERE state = 'sent'`).Scan(&n)
		return n == 6
	})
	if m := most.Load(); m != 1 {
		t.Errorf("%d requests at once, want 1 with one held claim of one row", m)
	}
}

// TestLockModeKilledWorkerFreesItsRowsAtOnce kills a delivering process with SIGKILL in the
// middle of its publish: the database ends its transaction when the connection drops, so the
// row is pending again without waiting for a lease, and another poller delivers it.
func TestLockModeKilledWorkerFreesItsRowsAtOnce(t *testing.T) {
	t.Parallel()
	fx := newFixture(t)
	hung := make(chan struct{})
	release := make(chan struct{})
	defer close(release)
	rc := newReceiver(t, func(r *http.Request, n int) int {
		if n == 1 {
			close(hung)
			select {
			case <-release:
			case <-r.Context().Done():
			}
		}
		return http.StatusOK
	})
	id := insert(t, fx.store, store.OutboxInsertParams{Topic: "order.created", Key: "k1", Payload: json.RawMessage(`{"n":1}`)})
	child := exec.Command(os.Args[0], "-test.run=^$")
	child.Env = append(os.Environ(), "QB_TEST_CHILD_DB="+fx.pool.Config().ConnString(), "QB_TEST_CHILD_RECEIVER="+rc.srv.URL,
		"QB_TEST_CHILD_CLAIM_MODE="+outbox.ClaimModeLock)
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-hung:
	case <-time.After(30 * time.Second):
		_ = child.Process.Kill()
		t.Fatal("the child never published")
	}
	if s := readRow(t, fx.pool, id); s.State != "pending" {
		t.Fatalf("while the child delivers, the row is %+v, want pending", s)
	}
	if err := child.Process.Kill(); err != nil { // SIGKILL
		t.Fatal(err)
	}
	_ = child.Wait()
	p := newPoller(t, fx.store, outbox.Config{PollInterval: 10 * time.Millisecond, ClaimMode: outbox.ClaimModeLock}, rc, nil)
	runPoller(t, p)
	waitFor(t, 20*time.Second, "another poller to deliver the row", func() bool { return readRow(t, fx.pool, id).State == "sent" })
	if s := readRow(t, fx.pool, id); s.Attempt != 0 {
		t.Errorf("attempt = %d, want 0", s.Attempt)
	}
	if n := rc.count(); n != 2 {
		t.Errorf("the receiver got %d requests, want the row twice", n)
	}
}
