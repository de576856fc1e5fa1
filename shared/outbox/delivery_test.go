package outbox_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/alternayte/queuebox/shared/connect/webhook"
	"github.com/alternayte/queuebox/shared/outbox"
	"github.com/alternayte/queuebox/shared/route"
	"github.com/alternayte/queuebox/shared/store"
	"github.com/alternayte/queuebox/shared/store/postgres"
	"github.com/alternayte/queuebox/shared/store/postgres/dbtest"
)

// request is one request that a test receiver recorded.
type request struct {
	Header http.Header
	Body   string
	At     time.Time
}

// receiver is a real HTTP server on loopback that records every request and answers with
// the status that respond returns.
type receiver struct {
	srv     *httptest.Server
	mu      sync.Mutex
	got     []request
	respond func(r *http.Request, n int) int
}

func newReceiver(t *testing.T, respond func(r *http.Request, n int) int) *receiver {
	t.Helper()
	rc := &receiver{respond: respond}
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		rc.mu.Lock()
		rc.got = append(rc.got, request{Header: r.Header.Clone(), Body: string(body), At: time.Now()})
		n := len(rc.got)
		rc.mu.Unlock()
		status := http.StatusOK
		if rc.respond != nil {
			status = rc.respond(r, n)
		}
		w.WriteHeader(status)
	}))
	t.Cleanup(rc.srv.Close)
	return rc
}

func (rc *receiver) requests() []request {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]request(nil), rc.got...)
}

func (rc *receiver) count() int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return len(rc.got)
}

type fixture struct {
	pool  *pgxpool.Pool
	store *postgres.Store
}

func newFixture(t *testing.T) fixture {
	t.Helper()
	pool, _ := dbtest.Migrated(t)
	st, err := postgres.New(pool, store.DefaultNames())
	if err != nil {
		t.Fatal(err)
	}
	return fixture{pool: pool, store: st}
}

func testLogger(t *testing.T) *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

func newPoller(t *testing.T, st store.OutboxStore, cfg outbox.Config, rc *receiver, m outbox.Metrics) *outbox.Poller {
	t.Helper()
	pub, err := webhook.New(webhook.Config{Name: "receiver", BaseURL: rc.srv.URL, Path: "/events", Timeout: 5 * time.Second}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pub.Close() })
	p, err := outbox.New(outbox.Options{
		Store:  st,
		Config: cfg,
		Routes: route.NewTable([]route.Route{
			{Pattern: route.MustCompile("order.**"), Destination: "receiver"},
			{Pattern: route.MustCompile("unsupported.*"), Destination: "kafka-events"},
		}),
		Destinations: []outbox.Destination{{Name: "receiver", Publisher: pub}},
		Metrics:      m,
		Logger:       testLogger(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

type rowState struct {
	State     string
	Attempt   int
	LastError string
}

func readRow(t *testing.T, pool *pgxpool.Pool, id string) rowState {
	t.Helper()
	var s rowState
	var lastErr *string
	err := pool.QueryRow(context.Background(), `SELECT state, attempt, last_error FROM outbox WHERE id = $1`, id).Scan(&s.State, &s.Attempt, &lastErr)
	if err != nil {
		t.Fatalf("reading row %s: %v", id, err)
	}
	if lastErr != nil {
		s.LastError = *lastErr
	}
	return s
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, deadline time.Duration, what string, cond func() bool) {
	t.Helper()
	end := time.Now().Add(deadline)
	for !cond() {
		if time.Now().After(end) {
			t.Fatalf("timed out after %s waiting for %s", deadline, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func insert(t *testing.T, st store.OutboxStore, p store.OutboxInsertParams) string {
	t.Helper()
	id, err := st.OutboxInsert(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// runPoller runs a poller in the background until the test ends.
func runPoller(t *testing.T, p *outbox.Poller) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.Run(ctx, outbox.RunOptions{})
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
}

func TestHeadersAndBodyAsDocumented(t *testing.T) {
	t.Parallel()
	fx := newFixture(t)
	rc := newReceiver(t, nil)
	withKey := insert(t, fx.store, store.OutboxInsertParams{
		Topic: "order.created", Key: "order-1001",
		Payload: json.RawMessage(`{"orderId":"1001","amount":42}`),
		Headers: json.RawMessage(`{"X-Tenant":"acme"}`),
	})
	noKey := insert(t, fx.store, store.OutboxInsertParams{Topic: "order.noted", Payload: json.RawMessage(`[1,2,3]`)})
	p := newPoller(t, fx.store, outbox.Config{PollInterval: 20 * time.Millisecond}, rc, nil)
	runPoller(t, p)
	waitFor(t, 10*time.Second, "two deliveries", func() bool {
		return readRow(t, fx.pool, withKey).State == "sent" && readRow(t, fx.pool, noKey).State == "sent"
	})
	byID := map[string]request{}
	for _, r := range rc.requests() {
		byID[r.Header.Get("X-Message-Id")] = r
	}
	r := byID[withKey]
	if got := r.Header.Get("Content-Type"); got != "application/json" {
		t.Errorf("Content-Type = %q", got)
	}
	if r.Header.Get("X-Topic") != "order.created" || r.Header.Get("X-Attempt") != "0" ||
		r.Header.Get("X-Message-Key") != "order-1001" || r.Header.Get("X-Tenant") != "acme" {
		t.Errorf("headers = %v", r.Header)
	}
	var body map[string]any
	if err := json.Unmarshal([]byte(r.Body), &body); err != nil || body["orderId"] != "1001" || body["amount"] != float64(42) {
		t.Errorf("body = %s (%v)", r.Body, err)
	}
	r2 := byID[noKey]
	if _, ok := r2.Header["X-Message-Key"]; ok {
		t.Errorf("X-Message-Key sent for a row without a key: %v", r2.Header)
	}
	if strings.ReplaceAll(r2.Body, " ", "") != "[1,2,3]" {
		t.Errorf("array payload = %q", r2.Body)
	}
	if s := readRow(t, fx.pool, withKey); s.Attempt != 0 {
		t.Errorf("attempt = %d, want 0", s.Attempt)
	}
}

func TestRetriesThenDead(t *testing.T) {
	t.Parallel()
	fx := newFixture(t)
	rc := newReceiver(t, func(*http.Request, int) int { return http.StatusInternalServerError })
	id := insert(t, fx.store, store.OutboxInsertParams{Topic: "order.failing", Payload: json.RawMessage(`{}`), MaxAttempts: 2})
	m := newCountingMetrics()
	p := newPoller(t, fx.store, outbox.Config{PollInterval: 10 * time.Millisecond, RetryBaseDelay: 20 * time.Millisecond}, rc, m)
	runPoller(t, p)
	waitFor(t, 20*time.Second, "the row to go dead", func() bool { return readRow(t, fx.pool, id).State == "dead" })
	s := readRow(t, fx.pool, id)
	if s.Attempt != 2 {
		t.Errorf("attempt = %d, want 2", s.Attempt)
	}
	if n := rc.count(); n != 3 {
		t.Errorf("requests = %d, want 3", n)
	}
	if !strings.Contains(s.LastError, "500") {
		t.Errorf("last_error = %q, want the status", s.LastError)
	}
	reqs := rc.requests()
	for i, r := range reqs {
		if got := r.Header.Get("X-Attempt"); got != strconv.Itoa(i) {
			t.Errorf("request %d X-Attempt = %s", i, got)
		}
	}
	// Backoff: base * 2^attempt plus up to 25 %: the second gap is at least twice the base.
	if gap := reqs[2].At.Sub(reqs[1].At); gap < 40*time.Millisecond {
		t.Errorf("second retry came after %s, want at least 40ms", gap)
	}
	if m.get("outcome/failed") != 2 || m.get("outcome/dead") != 1 {
		t.Errorf("metrics = %v", m.snapshot())
	}
}

func TestNoRouteAndUnsupportedDestinationGoDeadAtOnce(t *testing.T) {
	t.Parallel()
	fx := newFixture(t)
	rc := newReceiver(t, nil)
	noRoute := insert(t, fx.store, store.OutboxInsertParams{Topic: "invoice.created", Payload: json.RawMessage(`{}`)})
	unsupported := insert(t, fx.store, store.OutboxInsertParams{Topic: "unsupported.x", Payload: json.RawMessage(`{}`)})
	p := newPoller(t, fx.store, outbox.Config{}, rc, nil)
	sum := p.RunOnce(context.Background())
	if sum.Dead != 2 {
		t.Fatalf("summary = %+v, want 2 dead", sum)
	}
	s := readRow(t, fx.pool, noRoute)
	if s.State != "dead" || s.LastError != "No route matches topic invoice.created" || s.Attempt != 0 {
		t.Errorf("no route row = %+v", s)
	}
	if s := readRow(t, fx.pool, unsupported); s.State != "dead" || !strings.Contains(s.LastError, "kafka-events") {
		t.Errorf("unsupported row = %+v", s)
	}
	if rc.count() != 0 {
		t.Errorf("receiver got %d requests", rc.count())
	}
}

func TestRedirectAndTimeoutFail(t *testing.T) {
	t.Parallel()
	fx := newFixture(t)
	rc := newReceiver(t, func(r *http.Request, _ int) int {
		if r.Header.Get("X-Topic") == "order.slow" {
			time.Sleep(400 * time.Millisecond)
			return http.StatusOK
		}
		return http.StatusFound
	})
	redirect := insert(t, fx.store, store.OutboxInsertParams{Topic: "order.moved", Payload: json.RawMessage(`{}`)})
	slow := insert(t, fx.store, store.OutboxInsertParams{Topic: "order.slow", Payload: json.RawMessage(`{}`)})
	pub, err := webhook.New(webhook.Config{Name: "receiver", BaseURL: rc.srv.URL, Timeout: 150 * time.Millisecond}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	p, err := outbox.New(outbox.Options{
		Store: fx.store, Config: outbox.Config{RetryBaseDelay: time.Hour},
		Routes:       route.NewTable([]route.Route{{Pattern: route.MustCompile("**"), Destination: "receiver"}}),
		Destinations: []outbox.Destination{{Name: "receiver", Publisher: pub}},
		Logger:       testLogger(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	sum := p.RunOnce(context.Background())
	if sum.Retried != 2 {
		t.Fatalf("summary = %+v, want 2 retried", sum)
	}
	for _, id := range []string{redirect, slow} {
		if s := readRow(t, fx.pool, id); s.State != "pending" || s.Attempt != 1 || s.LastError == "" {
			t.Errorf("row %s = %+v, want pending with attempt 1 and a reason", id, s)
		}
	}
}

// TestOrderPerKeyWithThreePollers runs three pollers at concurrency 8 on one database over
// 2 000 rows on 50 keys and checks that every key arrives in insert order, with one row of a
// key in flight at a time.
func TestOrderPerKeyWithThreePollers(t *testing.T) {
	t.Parallel()
	orderPerKeyWithThreePollers(t, outbox.ClaimModeLease)
}

// orderPerKeyWithThreePollers delivers 40 rows of each of 50 keys through three pollers of the
// claim mode, with a few retries on the way: no two deliveries of a key overlap, and each key's
// rows arrive in order.
func orderPerKeyWithThreePollers(t *testing.T, claimMode string) {
	fx := newFixture(t)
	const keys, perKey = 50, 40
	var inflight sync.Map // key -> *int32
	var overlap atomic.Int32
	rc := newReceiver(t, func(r *http.Request, n int) int {
		key := r.Header.Get("X-Message-Key")
		v, _ := inflight.LoadOrStore(key, new(int32))
		if atomic.AddInt32(v.(*int32), 1) > 1 {
			overlap.Add(1)
		}
		defer atomic.AddInt32(v.(*int32), -1)
		if n%97 == 0 {
			return http.StatusServiceUnavailable // a few retries on the way
		}
		return http.StatusOK
	})
	// Rows of several keys per transaction, so created_at ties and only sequence orders them.
	ctx := context.Background()
	for step := 0; step < perKey; step++ {
		tx, err := fx.pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for k := 0; k < keys; k++ {
			_, err := tx.Exec(ctx, `INSERT INTO outbox (topic, key, payload) VALUES ('order.step', $1, $2)`,
				fmt.Sprintf("key-%02d", k), fmt.Sprintf(`{"step":%d}`, step))
			if err != nil {
				t.Fatal(err)
			}
		}
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
	}
	cfg := outbox.Config{Concurrency: 8, BatchSize: 20, PollInterval: 10 * time.Millisecond, RetryBaseDelay: 5 * time.Millisecond, ClaimMode: claimMode}
	for range 3 {
		runPoller(t, newPoller(t, fx.store, cfg, rc, nil))
	}
	waitFor(t, 120*time.Second, "every row sent", func() bool {
		var n int
		_ = fx.pool.QueryRow(ctx, `SELECT count(*) FROM outbox WHERE state = 'sent'`).Scan(&n)
		return n == keys*perKey
	})
	if n := overlap.Load(); n != 0 {
		t.Errorf("%d deliveries overlapped another of the same key", n)
	}
	// The last successful delivery of each step must come in step order per key.
	lastOK := map[string][]int{}
	for _, r := range rc.requests() {
		var body struct{ Step int }
		_ = json.Unmarshal([]byte(r.Body), &body)
		key := r.Header.Get("X-Message-Key")
		steps := lastOK[key]
		if len(steps) > 0 && steps[len(steps)-1] == body.Step {
			continue // a retry of the same row
		}
		lastOK[key] = append(steps, body.Step)
	}
	for key, steps := range lastOK {
		if !sort.IntsAreSorted(steps) || len(steps) != perKey {
			t.Errorf("key %s delivered steps %v", key, steps)
		}
	}
}

// unansweredRenewals is a store whose lease renewals never answer: each waits until its own
// timeout ends it, as for a replica cut off from the database while its publish runs. The
// renewal's timeout (at least a second) ends after the local deadline of the short leases
// below, so the deadline, not the failed renewal, stops the work.
type unansweredRenewals struct{ store.OutboxStore }

func (unansweredRenewals) OutboxRenew(ctx context.Context, _ store.OutboxRenewParams) ([]store.Claim, error) {
	<-ctx.Done()
	return nil, fmt.Errorf("renewing: %w", ctx.Err())
}

// rescueLease is the lease of the pollers that rescue an expired claim: long enough that a
// busy machine does not make their own publishes outlive it, short enough that their reclaim
// (once per lease / 5) comes within a second.
const rescueLease = 5 * time.Second

// heldMarkSent is a store whose renewals never answer and whose first mark sent waits for the
// test: a replica whose publish succeeded within its lease, but whose finishing write reaches
// the database only after the lease expired and another replica took the row.
type heldMarkSent struct {
	unansweredRenewals
	once    sync.Once
	entered chan struct{} // closed when the first mark sent starts
	release chan struct{} // the first mark sent waits for it
}

func (h *heldMarkSent) OutboxMarkSent(ctx context.Context, claims []store.Claim) ([]string, error) {
	first := false
	h.once.Do(func() {
		first = true
		close(h.entered)
	})
	if first {
		<-h.release
		// The write's own timeout may have run out while it was held; the statement still
		// runs, as a slow one would.
		ctx = context.WithoutCancel(ctx)
	}
	return h.unansweredRenewals.OutboxMarkSent(ctx, claims)
}

// A publish that succeeded within its lease, whose mark sent comes after another replica took
// the row, loses the claim: the destination has the message twice, and the lost claim is
// counted and logged.
func TestLateMarkSentLosesItsClaimAndDuplicates(t *testing.T) {
	t.Parallel()
	fx := newFixture(t)
	rc := newReceiver(t, nil)
	id := insert(t, fx.store, store.OutboxInsertParams{Topic: "order.slow", Payload: json.RawMessage(`{}`)})
	held := &heldMarkSent{unansweredRenewals: unansweredRenewals{fx.store}, entered: make(chan struct{}), release: make(chan struct{})}
	mA := newCountingMetrics()
	// A's lease is long enough for its publish to a local receiver to end before the lease's
	// local deadline on a busy machine; nothing renews it.
	a := newPoller(t, held, outbox.Config{ClaimTimeout: 2 * time.Second, PollInterval: 10 * time.Millisecond}, rc, mA)
	doneA := make(chan outbox.Summary)
	go func() { doneA <- a.RunOnce(context.Background()) }()
	select {
	case <-held.entered:
	case <-time.After(30 * time.Second):
		t.Fatal("replica A did not publish and mark the row sent")
	}

	// Replica B reclaims the expired claim and delivers the row again. B's own lease is long
	// (reclaim once a second) so that a slow machine does not add duplicates of its own; more
	// deliveries than two would still be at-least-once, so the test asserts at least two.
	b := newPoller(t, fx.store, outbox.Config{ClaimTimeout: rescueLease, PollInterval: 10 * time.Millisecond}, rc, nil)
	runPoller(t, b)
	waitFor(t, 30*time.Second, "the second delivery", func() bool { return readRow(t, fx.pool, id).State == "sent" })
	close(held.release)
	sum := <-doneA
	if sum.ClaimsLost != 1 || sum.Sent != 0 {
		t.Errorf("replica A summary = %+v, want one lost claim", sum)
	}
	if mA.get("claimLost") != 1 {
		t.Errorf("claims lost metric = %d", mA.get("claimLost"))
	}
	reqs := rc.requests()
	if len(reqs) < 2 {
		t.Errorf("deliveries = %d, want at least 2 (the lost claim's publish and a duplicate)", len(reqs))
	}
	for i, r := range reqs {
		if got := r.Header.Get("X-Message-Id"); got != id {
			t.Errorf("delivery %d X-Message-Id = %q, want %q", i, got, id)
		}
	}
	if s := readRow(t, fx.pool, id); s.State != "sent" || s.Attempt != 0 {
		t.Errorf("row = %+v", s)
	}
}

// A publish that outlives its lease's local deadline (no renewal answers) is cancelled there:
// it spends no attempt and writes nothing; another replica delivers the row after the lease.
func TestSlowPublishIsCancelledAtItsLeaseDeadline(t *testing.T) {
	t.Parallel()
	fx := newFixture(t)
	release := make(chan struct{})
	defer close(release)
	cancelled := make(chan struct{})
	rc := newReceiver(t, func(r *http.Request, n int) int {
		if n == 1 {
			select {
			case <-r.Context().Done(): // the first publish outlives its lease
				close(cancelled)
			case <-release:
			}
		}
		return http.StatusOK
	})
	id := insert(t, fx.store, store.OutboxInsertParams{Topic: "order.slow", Payload: json.RawMessage(`{}`)})
	mA := newCountingMetrics()
	a := newPoller(t, unansweredRenewals{fx.store}, outbox.Config{ClaimTimeout: 300 * time.Millisecond, PollInterval: 10 * time.Millisecond}, rc, mA)
	doneA := make(chan outbox.Summary)
	go func() { doneA <- a.RunOnce(context.Background()) }()
	select {
	case <-cancelled:
	case <-time.After(30 * time.Second):
		t.Fatal("the publish that outlived its lease was not cancelled")
	}
	sum := <-doneA
	if sum.LeaseExpired != 1 || sum.Sent != 0 || sum.Retried != 0 || sum.ClaimsLost != 0 {
		t.Errorf("replica A summary = %+v, want one publish stopped at its lease deadline", sum)
	}
	if got := mA.get("leaseDeadline:outbox"); got != 1 {
		t.Errorf("lease deadline metric = %d, want 1", got)
	}
	if s := readRow(t, fx.pool, id); s.Attempt != 0 || s.LastError != "" {
		t.Errorf("row = %+v, want no attempt spent", s)
	}
	b := newPoller(t, fx.store, outbox.Config{ClaimTimeout: rescueLease, PollInterval: 10 * time.Millisecond}, rc, nil)
	runPoller(t, b)
	waitFor(t, 30*time.Second, "the delivery by another replica", func() bool { return readRow(t, fx.pool, id).State == "sent" })
	if s := readRow(t, fx.pool, id); s.Attempt != 0 {
		t.Errorf("row = %+v, want sent at attempt 0", s)
	}
}

func TestAbandonedClaimIsDeliveredAfterItsLease(t *testing.T) {
	t.Parallel()
	fx := newFixture(t)
	rc := newReceiver(t, nil)
	id := insert(t, fx.store, store.OutboxInsertParams{Topic: "order.orphan", Key: "k", Payload: json.RawMessage(`{}`)})
	// A replica claims the row and dies without a word.
	claimed, err := fx.store.OutboxClaim(context.Background(), store.OutboxClaimParams{Limit: 10, Lease: 300 * time.Millisecond})
	if err != nil || len(claimed) != 1 {
		t.Fatalf("claim = %v, %v", claimed, err)
	}
	p := newPoller(t, fx.store, outbox.Config{ClaimTimeout: rescueLease, PollInterval: 10 * time.Millisecond}, rc, nil)
	runPoller(t, p)
	waitFor(t, 20*time.Second, "the orphaned row to be delivered", func() bool { return readRow(t, fx.pool, id).State == "sent" })
	if s := readRow(t, fx.pool, id); s.Attempt != 0 {
		t.Errorf("attempt = %d, want 0", s.Attempt)
	}
	// At least once: the rescue delivers the row; a rescue whose own lease a stalled machine
	// let lapse may deliver it again, and every request is that row.
	reqs := rc.requests()
	if len(reqs) < 1 {
		t.Error("the orphaned row was never delivered")
	}
	for _, r := range reqs {
		if got := r.Header.Get("X-Message-Id"); got != id {
			t.Errorf("a request carried X-Message-Id %q, want %q", got, id)
		}
	}
}

func TestShutdownWaitsForPublishesInFlight(t *testing.T) {
	t.Parallel()
	fx := newFixture(t)
	started := make(chan struct{}, 1)
	rc := newReceiver(t, func(*http.Request, int) int {
		started <- struct{}{}
		time.Sleep(300 * time.Millisecond)
		return http.StatusOK
	})
	id := insert(t, fx.store, store.OutboxInsertParams{Topic: "order.slow", Payload: json.RawMessage(`{}`)})
	p := newPoller(t, fx.store, outbox.Config{ShutdownTimeout: 10 * time.Second}, rc, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan outbox.Summary)
	go func() { done <- p.Run(ctx, outbox.RunOptions{}) }()
	<-started
	cancel()
	sum := <-done
	if sum.Sent != 1 {
		t.Errorf("summary = %+v, want the publish in flight finished", sum)
	}
	if s := readRow(t, fx.pool, id); s.State != "sent" {
		t.Errorf("row = %+v", s)
	}
}

func TestShutdownTimeoutLeavesTheRowToItsLease(t *testing.T) {
	t.Parallel()
	fx := newFixture(t)
	started := make(chan struct{}, 1)
	rc := newReceiver(t, func(r *http.Request, n int) int {
		if n == 1 {
			started <- struct{}{}
			<-r.Context().Done() // hangs until QueueBox gives up
		}
		return http.StatusOK
	})
	id := insert(t, fx.store, store.OutboxInsertParams{Topic: "order.hang", Payload: json.RawMessage(`{}`)})
	p := newPoller(t, fx.store, outbox.Config{ShutdownTimeout: 100 * time.Millisecond}, rc, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan outbox.Summary)
	go func() { done <- p.Run(ctx, outbox.RunOptions{}) }()
	<-started
	cancel()
	<-done
	s := readRow(t, fx.pool, id)
	if s.State != "processing" || s.Attempt != 0 {
		t.Errorf("row = %+v, want processing with attempt 0 (no attempt spent)", s)
	}
}

func TestStopWhenIdleDrainsAndReturns(t *testing.T) {
	t.Parallel()
	fx := newFixture(t)
	rc := newReceiver(t, nil)
	for i := range 250 {
		insert(t, fx.store, store.OutboxInsertParams{Topic: "order.bulk", Key: fmt.Sprintf("k%d", i%10), Payload: json.RawMessage(`{}`)})
	}
	p := newPoller(t, fx.store, outbox.Config{BatchSize: 50, PollInterval: time.Hour}, rc, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	sum := p.Run(ctx, outbox.RunOptions{StopWhenIdle: true})
	if sum.Sent != 250 || rc.count() != 250 {
		t.Errorf("summary = %+v, deliveries = %d; want 250", sum, rc.count())
	}
}

func TestDatabaseDropsMidCycle(t *testing.T) {
	t.Parallel()
	fx := newFixture(t)
	rc := newReceiver(t, nil)
	p := newPoller(t, fx.store, outbox.Config{PollInterval: 10 * time.Millisecond}, rc, nil)
	runPoller(t, p)
	ctx := context.Background()
	var dbName string
	if err := fx.pool.QueryRow(ctx, `SELECT current_database()`).Scan(&dbName); err != nil {
		t.Fatal(err)
	}
	admin := dbtest.NewPool(t, dbtest.ServerURL())
	// Cut every connection of the test database a few times while rows arrive.
	var ids []string
	for round := range 3 {
		if _, err := admin.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()`, dbName); err != nil {
			t.Fatal(err)
		}
		var id string
		waitFor(t, 10*time.Second, "an insert after the cut", func() bool {
			var err error
			id, err = fx.store.OutboxInsert(ctx, store.OutboxInsertParams{Topic: "order.after-cut", Key: strconv.Itoa(round), Payload: json.RawMessage(`{}`)})
			return err == nil
		})
		ids = append(ids, id)
	}
	waitFor(t, 30*time.Second, "every row sent after the cuts", func() bool {
		for _, id := range ids {
			if readRow(t, fx.pool, id).State != "sent" {
				return false
			}
		}
		return true
	})
}

func TestRetryDelay(t *testing.T) {
	t.Parallel()
	base, maxDelay := time.Second, 60*time.Second
	tests := []struct {
		attempt int
		jitter  float64
		want    time.Duration
	}{
		{0, 0, time.Second},
		{1, 0, 2 * time.Second},
		{3, 0.25, 10 * time.Second},
		{5, 0, 32 * time.Second},
		{6, 0, 60 * time.Second},
		{40, 0.25, 60 * time.Second},
		{-1, 0, time.Second},
	}
	for _, tt := range tests {
		if got := outbox.RetryDelay(base, tt.attempt, tt.jitter, maxDelay); got != tt.want {
			t.Errorf("RetryDelay(attempt %d, jitter %v) = %s, want %s", tt.attempt, tt.jitter, got, tt.want)
		}
	}
}

// countingMetrics records the outbox measurements by name.
type countingMetrics struct {
	mu sync.Mutex
	n  map[string]int
}

func newCountingMetrics() *countingMetrics { return &countingMetrics{n: map[string]int{}} }

func (m *countingMetrics) inc(k string, d int) {
	m.mu.Lock()
	m.n[k] += d
	m.mu.Unlock()
}

func (m *countingMetrics) get(k string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.n[k]
}

func (m *countingMetrics) snapshot() map[string]int {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string]int{}
	for k, v := range m.n {
		out[k] = v
	}
	return out
}

func (m *countingMetrics) Outcome(s string)                      { m.inc("outcome/"+s, 1) }
func (m *countingMetrics) ClaimLost()                            { m.inc("claimLost", 1) }
func (m *countingMetrics) Reclaimed(n int)                       { m.inc("reclaimed", n) }
func (m *countingMetrics) ProcessError()                         { m.inc("processError", 1) }
func (m *countingMetrics) ProcessingDuration(time.Duration)      { m.inc("processing", 1) }
func (m *countingMetrics) PublishDuration(string, time.Duration) { m.inc("publish", 1) }
func (m *countingMetrics) DestinationOutcome(d, o string)        { m.inc("destination/"+d+"/"+o, 1) }
func (m *countingMetrics) Pending(int64, time.Duration)          {}
func (m *countingMetrics) QueueDepth(string, int64)              {}
func (m *countingMetrics) TransformFailure(s string)             { m.inc("transformFailure/"+s, 1) }

// LeaseDeadline implements lease.Metrics.
func (m *countingMetrics) LeaseDeadline(component string) { m.inc("leaseDeadline:"+component, 1) }

type pendingMetrics struct {
	*countingMetrics
	mu      sync.Mutex
	pending []int64
	depth   map[string]int64
}

func (m *pendingMetrics) Pending(n int64, _ time.Duration) {
	m.mu.Lock()
	m.pending = append(m.pending, n)
	m.mu.Unlock()
}

func (m *pendingMetrics) QueueDepth(d string, n int64) {
	m.mu.Lock()
	m.depth[d] = n
	m.mu.Unlock()
}

func TestPendingGaugesRefreshAtMostOncePerInterval(t *testing.T) {
	t.Parallel()
	fx := newFixture(t)
	rc := newReceiver(t, nil)
	for range 5 {
		insert(t, fx.store, store.OutboxInsertParams{Topic: "order.created", Payload: json.RawMessage(`{}`), Delay: time.Hour})
	}
	m := &pendingMetrics{countingMetrics: newCountingMetrics(), depth: map[string]int64{}}
	p := newPoller(t, fx.store, outbox.Config{PendingGaugeInterval: time.Hour}, rc, m)
	p.RunOnce(context.Background())
	p.RunOnce(context.Background())
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.pending) != 1 || m.pending[0] != 5 {
		t.Errorf("pending gauge updates = %v, want one update of 5", m.pending)
	}
	if m.depth["receiver"] != 5 {
		t.Errorf("queue depth = %v", m.depth)
	}
}

// recordedClaims is the real store with a record of each claim's parameters.
type recordedClaims struct {
	store.OutboxStore
	mu     sync.Mutex
	params []store.OutboxClaimParams
	rows   []int // the rows each claim returned
}

func (r *recordedClaims) OutboxClaim(ctx context.Context, p store.OutboxClaimParams) ([]store.OutboxMessage, error) {
	msgs, err := r.OutboxStore.OutboxClaim(ctx, p)
	r.mu.Lock()
	r.params = append(r.params, p)
	r.rows = append(r.rows, len(msgs))
	r.mu.Unlock()
	return msgs, err
}

// TestAShortClaimBoundsTheNext: three keys with 30 rows each. Each claim can take only the
// head of each key, so it comes back short (and with keys), and the claim after it examines
// a window of twice its limit (store.OutboxClaimParams.Window) instead of every held row. Every row
// arrives, each key in order.
func TestAShortClaimBoundsTheNext(t *testing.T) {
	t.Parallel()
	fx := newFixture(t)
	rc := newReceiver(t, nil)
	const keys, perKey = 3, 30
	for i := range keys * perKey {
		insert(t, fx.store, store.OutboxInsertParams{Topic: "order.hot", Key: fmt.Sprintf("k%d", i%keys),
			Payload: json.RawMessage(fmt.Sprintf(`{"n":%d}`, i))})
	}
	rec := &recordedClaims{OutboxStore: fx.store}
	p := newPoller(t, rec, outbox.Config{BatchSize: 10, Concurrency: 4, PollInterval: time.Hour}, rc, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	sum := p.Run(ctx, outbox.RunOptions{StopWhenIdle: true})
	if sum.Sent != keys*perKey {
		t.Fatalf("summary = %+v; want %d sent", sum, keys*perKey)
	}
	last := map[string]int{}
	for _, r := range rc.requests() {
		var body struct{ N int }
		if err := json.Unmarshal([]byte(r.Body), &body); err != nil {
			t.Fatalf("body %q: %v", r.Body, err)
		}
		key := r.Header.Get("X-Message-Key")
		if prev, ok := last[key]; ok && body.N <= prev {
			t.Errorf("key %s: row %d arrived after row %d", key, body.N, prev)
		}
		last[key] = body.N
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.params) < 2 || rec.params[0].Window != 0 {
		t.Fatalf("claims %+v: want the first without a window", rec.params)
	}
	for i, cp := range rec.params[1:] {
		if cp.Window != 2*cp.Limit {
			t.Errorf("claim %d after a short one: window %d, want twice its limit %d", i+1, cp.Window, cp.Limit)
		}
	}
}

// TestFullClaimsWithoutKeysKeepTheUnboundedClaim: 40 rows without a key, claims of 10. The
// claims that come back full and without keys keep the statement without a window; the one
// after the first short claim has a window.
func TestFullClaimsWithoutKeysKeepTheUnboundedClaim(t *testing.T) {
	t.Parallel()
	fx := newFixture(t)
	rc := newReceiver(t, nil)
	for i := range 40 {
		insert(t, fx.store, store.OutboxInsertParams{Topic: "order.plain", Payload: json.RawMessage(fmt.Sprintf(`{"n":%d}`, i))})
	}
	rec := &recordedClaims{OutboxStore: fx.store}
	p := newPoller(t, rec, outbox.Config{BatchSize: 10, Concurrency: 2, PollInterval: time.Hour}, rc, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if sum := p.Run(ctx, outbox.RunOptions{StopWhenIdle: true}); sum.Sent != 40 {
		t.Fatalf("summary = %+v; want 40 sent", sum)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	sawShort := false
	for i, cp := range rec.params {
		switch {
		case i == 0 || rec.rows[i-1] == rec.params[i-1].Limit:
			if cp.Window != 0 {
				t.Errorf("claim %d after a full claim without keys: window %d, want none (%+v)", i, cp.Window, rec.params)
			}
		default:
			sawShort = true
			if cp.Window != 2*cp.Limit {
				t.Errorf("claim %d after a short claim: window %d, want twice its limit %d", i, cp.Window, cp.Limit)
			}
		}
	}
	if !sawShort || rec.rows[0] != 10 {
		t.Fatalf("claims %+v returned %v: want a full first claim and a claim after a short one", rec.params, rec.rows)
	}
}

// TestStopReleasesTheRowsNoPublisherTook: one publisher, a claim of 10 rows. While the
// first publish hangs the run is stopped: the 9 rows still queued go back to pending at once,
// unattempted and without a claim, the first is published and sent, and no other row is.
func TestStopReleasesTheRowsNoPublisherTook(t *testing.T) {
	t.Parallel()
	fx := newFixture(t)
	gate := make(chan struct{})
	started := make(chan struct{}, 10)
	rc := newReceiver(t, func(*http.Request, int) int {
		started <- struct{}{}
		<-gate
		return http.StatusOK
	})
	var openGate sync.Once
	release := func() { openGate.Do(func() { close(gate) }) }
	t.Cleanup(release) // before the receiver's Close, which waits for its handlers
	for range 10 {
		insert(t, fx.store, store.OutboxInsertParams{Topic: "order.stop", Payload: json.RawMessage(`{}`)})
	}
	p := newPoller(t, fx.store, outbox.Config{BatchSize: 10, Concurrency: 1, PollInterval: time.Hour, ShutdownTimeout: 30 * time.Second}, rc, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan outbox.Summary, 1)
	go func() { done <- p.Run(ctx, outbox.RunOptions{}) }()
	select {
	case <-started:
	case <-time.After(30 * time.Second):
		t.Fatal("no publish began within 30 s")
	}
	cancel()
	count := func(where string) int {
		var n int
		if err := fx.pool.QueryRow(context.Background(), `SELECT count(*) FROM outbox WHERE `+where).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	waitFor(t, 30*time.Second, "the queued rows back to pending", func() bool {
		return count(`state = 'pending' AND attempt = 0 AND claim_token IS NULL AND lease_expires_at IS NULL`) == 9
	})
	release()
	var sum outbox.Summary
	select {
	case sum = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return within 30 s of the stop")
	}
	if sum.Released != 9 || sum.Sent != 1 || sum.Claimed != 10 {
		t.Errorf("summary = %+v; want 10 claimed, 1 sent, 9 released", sum)
	}
	if n := count(`state = 'sent'`); n != 1 {
		t.Errorf("%d rows sent, want 1", n)
	}
	if n := rc.count(); n != 1 {
		t.Errorf("%d requests, want 1: a released row is not published", n)
	}
}

// RunOnce delivers the whole batch it claimed, also the rows that wait in the queue for the
// one publisher when the run stops claiming: they are not released back to pending.
func TestRunOnceDeliversTheRowsStillQueued(t *testing.T) {
	t.Parallel()
	fx := newFixture(t)
	rc := newReceiver(t, nil)
	for i := 0; i < 10; i++ {
		insert(t, fx.store, store.OutboxInsertParams{Topic: "order.queued", Payload: json.RawMessage(`{}`)})
	}
	p := newPoller(t, fx.store, outbox.Config{BatchSize: 10, Concurrency: 1, PollInterval: time.Hour}, rc, nil)
	sum := p.RunOnce(context.Background())
	if sum.Claimed != 10 || sum.Sent != 10 {
		t.Errorf("summary = %+v, want 10 claimed and 10 sent", sum)
	}
	if n := rc.count(); n != 10 {
		t.Errorf("the receiver got %d requests, want 10", n)
	}
}
