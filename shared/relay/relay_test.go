package relay_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alternayte/queuebox/shared/kind"
	"github.com/alternayte/queuebox/shared/relay"
	"github.com/alternayte/queuebox/shared/store"
	"github.com/alternayte/queuebox/shared/waker"
)

func TestForwardedRowAsDocumented(t *testing.T) {
	t.Parallel()
	fx := newFixture(t)
	withAll := insertInbox(t, fx.store, inboxRow{
		Source: "stripe", Key: "evt_1", Aggregate: "cus_1", EventType: "charge.succeeded",
		Correlation: "corr-1", Payload: `{"id":"evt_1","amount":42,"note":"<b>&</b>"}`,
		Headers: `{"X-INBOX-ID":"spoof","x-source":"spoof","X-Idempotency-KEY":"spoof",` +
			`"x-correlation-id":"spoof","X-Tenant":"acme","User-Agent":"Stripe/1.0"}`,
	})
	bare := insertInbox(t, fx.store, inboxRow{
		Source: "orders-queue", Key: "sha256:abc", Payload: `[1,2,3]`,
		Headers: `{"X-Correlation-Id":"from-sender","x-Source":"spoof"}`,
	})
	m := &countMetrics{}
	r := newRelay(t, fx.store, relay.Config{MaxAttempts: 7}, m)

	sum := drain(t, r)

	if want := (relay.Summary{Claimed: 2, Forwarded: 2}); sum != want {
		t.Errorf("summary = %+v, want %+v", sum, want)
	}
	if got := m.forwarded.Load(); got != 2 {
		t.Errorf("forwarded metric = %d, want 2", got)
	}
	tests := []struct {
		name        string
		inboxID     string
		topic       string
		key         *string
		payload     string
		headers     map[string]any
		maxAttempts int
	}{
		{
			name: "http row with every attribute and spoofed relay headers", inboxID: withAll,
			topic: "stripe.charge.succeeded", key: ptr("cus_1"),
			payload: `{"id":"evt_1","amount":42,"note":"<b>&</b>"}`,
			headers: map[string]any{
				"x-inbox-id": withAll, "x-source": "stripe", "x-idempotency-key": "evt_1",
				"X-Correlation-Id": "corr-1", "X-Tenant": "acme", "User-Agent": "Stripe/1.0",
			},
		},
		{
			name: "broker row without aggregate, event type or correlation id", inboxID: bare,
			topic: "orders-queue", key: nil, payload: `[1,2,3]`,
			headers: map[string]any{
				"x-inbox-id": bare, "x-source": "orders-queue", "x-idempotency-key": "sha256:abc",
				// The row has no correlation id, so the received header is not replaced.
				"X-Correlation-Id": "from-sender",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rows := outboxRowsOf(t, fx.pool, tt.inboxID)
			if len(rows) != 1 {
				t.Fatalf("outbox rows for inbox row %s = %d, want 1", tt.inboxID, len(rows))
			}
			o := rows[0]
			if o.Topic != tt.topic {
				t.Errorf("topic = %q, want %q", o.Topic, tt.topic)
			}
			if !reflect.DeepEqual(o.Key, tt.key) {
				t.Errorf("key = %v, want %v", deref(o.Key), deref(tt.key))
			}
			if !jsonEqual(t, o.Payload, tt.payload) {
				t.Errorf("payload = %s, want %s", o.Payload, tt.payload)
			}
			if !reflect.DeepEqual(o.Headers, tt.headers) {
				t.Errorf("headers = %v, want %v", o.Headers, tt.headers)
			}
			if o.MaxAttempts != 7 || o.Attempt != 0 || o.State != store.OutboxPending {
				t.Errorf("max_attempts, attempt, state = %d, %d, %s; want 7, 0, pending", o.MaxAttempts, o.Attempt, o.State)
			}
			in := readInbox(t, fx.pool, tt.inboxID)
			if in.State != store.InboxProcessed || !in.Processed || in.HasToken {
				t.Errorf("inbox row = %+v, want processed with processed_at and no token", in)
			}
		})
	}
}

func TestRowWithoutTopicIsDead(t *testing.T) {
	t.Parallel()
	fx := newFixture(t)
	noType := insertInbox(t, fx.store, inboxRow{Source: "stripe-raw", Key: "e1", Aggregate: "agg-1"})
	next := insertInbox(t, fx.store, inboxRow{Source: "stripe-raw", Key: "e2", Aggregate: "agg-1", EventType: "charge.succeeded"})
	blank := insertInbox(t, fx.store, inboxRow{Source: "stripe-raw", Key: "e3", EventType: "   "})
	ghost := insertInbox(t, fx.store, inboxRow{Source: "ghost", Key: "g1", EventType: "charge.succeeded"})
	m := &countMetrics{}
	r, err := relay.New(relay.Options{
		Store: fx.store, Metrics: m, Logger: testLogger(),
		Sources: map[string]relay.Source{"stripe-raw": {Kind: kind.HTTP}},
	})
	if err != nil {
		t.Fatal(err)
	}

	sum := drain(t, r)

	if want := (relay.Summary{Claimed: 4, Forwarded: 1, Dead: 3}); sum != want {
		t.Errorf("summary = %+v, want %+v", sum, want)
	}
	tests := []struct {
		name, id, wantErr string
	}{
		{"no event type", noType, "Topic template {{ eventType }} of source stripe-raw rendered an empty topic"},
		{"blank event type", blank, "Topic template {{ eventType }} of source stripe-raw rendered an empty topic"},
		{"source not configured", ghost, "Source ghost is not configured, so the relay has no topic template for it"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := readInbox(t, fx.pool, tt.id)
			if in.State != store.InboxDead || in.LastError != tt.wantErr || in.HasToken {
				t.Errorf("inbox row = %+v, want dead with last_error %q and no token", in, tt.wantErr)
			}
			if rows := outboxRowsOf(t, fx.pool, tt.id); len(rows) != 0 {
				t.Errorf("dead row has %d outbox rows, want 0", len(rows))
			}
		})
	}
	// A dead row releases its aggregate: the next row of agg-1 is forwarded.
	if rows := outboxRowsOf(t, fx.pool, next); len(rows) != 1 || rows[0].Topic != "charge.succeeded" {
		t.Errorf("next row of the aggregate: outbox rows %+v, want one with topic charge.succeeded", rows)
	}
	if got := m.relayErrors.Load(); got != 3 {
		t.Errorf("relay errors = %d, want 3 (one per dead row)", got)
	}
}

func TestPullRowsAreNeverTouched(t *testing.T) {
	t.Parallel()
	fx := newFixture(t)
	var pull []string
	for i := range 3 {
		pull = append(pull, insertInbox(t, fx.store, inboxRow{
			Source: "stripe", Key: fmt.Sprintf("pull-%d", i), Aggregate: "shared", EventType: "x", Consumption: store.ConsumptionPull,
		}))
	}
	push := insertInbox(t, fx.store, inboxRow{Source: "stripe", Key: "push-1", Aggregate: "shared", EventType: "x"})
	m := &countMetrics{}
	r := newRelay(t, fx.store, relay.Config{}, m)

	sum := drain(t, r)

	if want := (relay.Summary{Claimed: 1, Forwarded: 1}); sum != want {
		t.Errorf("summary = %+v, want %+v", sum, want)
	}
	for _, id := range pull {
		if in := readInbox(t, fx.pool, id); in.State != store.InboxPending || in.HasToken {
			t.Errorf("pull row %s = %+v, want pending without a token", id, in)
		}
	}
	if got := countRows(t, fx.pool, `SELECT count(*) FROM outbox`); got != 1 {
		t.Errorf("outbox rows = %d, want 1", got)
	}
	if len(outboxRowsOf(t, fx.pool, push)) != 1 {
		t.Error("the push row was not forwarded")
	}
	// The gauge reads the pending pull rows.
	if m.gaugeSets.Load() != 1 || m.oldest.Load() <= 0 {
		t.Errorf("oldest pending gauge set %d times to %s, want once above 0", m.gaugeSets.Load(), time.Duration(m.oldest.Load()))
	}
}

// TestLostClaimWritesNoOutboxRow stalls relay A inside its forward (and its renewals) until its
// lease expires and relay B reclaims and forwards the row. A's forward then fails the fence and
// the store rolls its outbox insert back.
func TestLostClaimWritesNoOutboxRow(t *testing.T) {
	t.Parallel()
	fx := newFixture(t)
	id := insertInbox(t, fx.store, inboxRow{Source: "stripe", Key: "evt_lost", Aggregate: "cus_9", EventType: "charge.succeeded"})

	release := newGate()
	entered := newGate()
	slow := &hookStore{
		InboxStore: fx.store,
		beforeForward: func(context.Context, store.InboxForwardParams) error {
			entered.open()
			release.wait()
			return nil
		},
		beforeRenew: func(context.Context, store.Claim) { release.wait() },
		// The forward reaches the database after the lease expired (its statement was sent
		// before the relay's local lease deadline): the fence alone must refuse it.
		detachForward: true,
	}
	defer release.open()
	mA := &countMetrics{}
	a := newRelay(t, slow, relay.Config{ClaimTimeout: 300 * time.Millisecond}, mA)
	doneA := runAsync(context.Background(), a, relay.RunOptions{StopWhenIdle: true})

	select {
	case <-entered.done():
	case <-time.After(30 * time.Second):
		t.Fatal("relay A never forwarded")
	}
	waitFor(t, 30*time.Second, "the lease of relay A to expire", func() bool {
		return !readInbox(t, fx.pool, id).LeaseAlive
	})

	mB := &countMetrics{}
	b := newRelay(t, openStore(t, fx.pool), relay.Config{}, mB)
	sumB := drain(t, b)
	if want := (relay.Summary{Claimed: 1, Forwarded: 1, Reclaimed: 1}); sumB != want {
		t.Errorf("relay B summary = %+v, want %+v", sumB, want)
	}

	release.open()
	sumA := await(t, doneA, 30*time.Second)
	if want := (relay.Summary{Claimed: 1, ClaimsLost: 1}); sumA != want {
		t.Errorf("relay A summary = %+v, want %+v", sumA, want)
	}
	if got := mA.claimsLost.Load(); got != 1 {
		t.Errorf("relay A claims lost metric = %d, want 1", got)
	}
	if got := mA.forwarded.Load(); got != 0 {
		t.Errorf("relay A forwarded metric = %d, want 0", got)
	}
	if rows := outboxRowsOf(t, fx.pool, id); len(rows) != 1 {
		t.Errorf("outbox rows for the inbox row = %d, want exactly 1", len(rows))
	}
	if got := countRows(t, fx.pool, `SELECT count(*) FROM outbox`); got != 1 {
		t.Errorf("outbox rows = %d, want 1", got)
	}
	if in := readInbox(t, fx.pool, id); in.State != store.InboxProcessed {
		t.Errorf("inbox row = %+v, want processed", in)
	}
}

// TestRenewalThatFindsTheFenceGoneSkipsTheRow takes the claim of the second row of a batch
// away (as another replica's reclaim and claim would) while the first row's forward is slow.
// The renewal notices, and the relay never tries to forward that row.
func TestRenewalThatFindsTheFenceGoneSkipsTheRow(t *testing.T) {
	t.Parallel()
	fx := newFixture(t)
	first := insertInbox(t, fx.store, inboxRow{Source: "stripe", Key: "a", Aggregate: "agg-a", EventType: "e"})
	second := insertInbox(t, fx.store, inboxRow{Source: "stripe", Key: "b", Aggregate: "agg-b", EventType: "e"})

	secondForwards := make(chan struct{}, 10)
	h := &hookStore{InboxStore: fx.store}
	// until waits for cond while the forward of the first row is held.
	until := func(ctx context.Context, cond func() bool) error {
		for !cond() {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(5 * time.Millisecond):
			}
		}
		return nil
	}
	h.beforeForward = func(ctx context.Context, p store.InboxForwardParams) error {
		switch p.Claim.ID {
		case first:
			// Another replica takes the second row. Hold this forward until a renewal has
			// found the second claim gone, and one more renewal has run after it (the renewer
			// is sequential, so the mark is set by then).
			if _, err := fx.pool.Exec(ctx, `UPDATE inbox SET claim_token = gen_random_uuid() WHERE id = $1`, second); err != nil {
				return err
			}
			if err := until(ctx, func() bool { return h.lostRenews.Load() >= 1 }); err != nil {
				return err
			}
			seen := h.renews.Load()
			return until(ctx, func() bool { return h.renews.Load() > seen })
		case second:
			secondForwards <- struct{}{}
		}
		return nil
	}
	m := &countMetrics{}
	// The first row's claim lives only through renewals (every lease / 3) while its forward
	// is held; a lease of seconds keeps a renewal that a busy machine delays (by up to two
	// thirds of the lease, 4 s) from losing it.
	r := newRelay(t, h, relay.Config{ClaimTimeout: 6 * time.Second}, m)

	sum := r.RunOnce(context.Background())

	if want := (relay.Summary{Claimed: 2, Forwarded: 1, ClaimsLost: 1}); sum != want {
		t.Errorf("summary = %+v, want %+v", sum, want)
	}
	if len(secondForwards) != 0 {
		t.Error("the relay tried to forward a row whose renewal found the fence gone")
	}
	if m.claimsLost.Load() != 1 {
		t.Errorf("claims lost metric = %d, want 1", m.claimsLost.Load())
	}
	if len(outboxRowsOf(t, fx.pool, second)) != 0 || len(outboxRowsOf(t, fx.pool, first)) != 1 {
		t.Error("want one outbox row for the first row and none for the second")
	}
}

func TestReclaimReturnsExpiredLeaseAndForwards(t *testing.T) {
	t.Parallel()
	fx := newFixture(t)
	id := insertInbox(t, fx.store, inboxRow{Source: "orders-queue", Key: "m1", Aggregate: "order-1"})
	behind := insertInbox(t, fx.store, inboxRow{Source: "orders-queue", Key: "m2", Aggregate: "order-1"})
	// A relay that crashed after its claim.
	claimed, err := fx.store.InboxRelayClaim(context.Background(), store.InboxRelayClaimParams{Limit: 10, Lease: 50 * time.Millisecond})
	if err != nil || len(claimed) != 1 || claimed[0].ID != id {
		t.Fatalf("crashed claim = %v, %v; want the first row", claimed, err)
	}
	waitFor(t, 30*time.Second, "the crashed lease to expire", func() bool {
		return !readInbox(t, fx.pool, id).LeaseAlive
	})
	r := newRelay(t, fx.store, relay.Config{}, nil)

	sum := drain(t, r)

	if want := (relay.Summary{Claimed: 2, Forwarded: 2, Reclaimed: 1}); sum != want {
		t.Errorf("summary = %+v, want %+v", sum, want)
	}
	a, b := outboxRowsOf(t, fx.pool, id), outboxRowsOf(t, fx.pool, behind)
	if len(a) != 1 || len(b) != 1 {
		t.Fatalf("outbox rows = %d and %d, want 1 and 1", len(a), len(b))
	}
	if a[0].Sequence >= b[0].Sequence {
		t.Errorf("the reclaimed row has sequence %d, after the row behind it (%d)", a[0].Sequence, b[0].Sequence)
	}
}

// TestRenewalKeepsASlowBatch makes the first forward of a batch last several leases: the
// renewals keep every claimed row of the batch, and nothing is lost.
func TestRenewalKeepsASlowBatch(t *testing.T) {
	t.Parallel()
	fx := newFixture(t)
	var ids []string
	for i := range 3 {
		ids = append(ids, insertInbox(t, fx.store, inboxRow{Source: "stripe", Key: fmt.Sprint(i), Aggregate: fmt.Sprint("agg-", i), EventType: "e"}))
	}
	// A lease of seconds: a renewal (every lease / 3) that a busy machine delays by up to two
	// thirds of it (4 s) still finds the claim alive.
	const lease = 6 * time.Second
	h := &hookStore{InboxStore: fx.store}
	h.beforeForward = func(ctx context.Context, p store.InboxForwardParams) error {
		if p.Claim.ID != ids[0] {
			return nil
		}
		// A forward that outlives the lease by a fifth of it and lasts until three renewals
		// succeeded; every row of the batch stays claimed only through renewals.
		start := time.Now()
		for time.Since(start) < 6*lease/5 || (h.renews.Load() < 3 && time.Since(start) < 60*time.Second) {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(20 * time.Millisecond):
			}
		}
		return nil
	}
	m := &countMetrics{}
	r := newRelay(t, h, relay.Config{ClaimTimeout: lease}, m)

	sum := r.RunOnce(context.Background())

	if want := (relay.Summary{Claimed: 3, Forwarded: 3}); sum != want {
		t.Errorf("summary = %+v, want %+v", sum, want)
	}
	if got := h.renews.Load(); got < 3 {
		t.Errorf("successful renewals = %d, want at least 3", got)
	}
	for _, id := range ids {
		if len(outboxRowsOf(t, fx.pool, id)) != 1 {
			t.Errorf("inbox row %s has no outbox row", id)
		}
	}
}

func TestStopWhenIdleDrains(t *testing.T) {
	t.Parallel()
	fx := newFixture(t)
	for a := range 3 {
		for i := range 10 {
			insertInbox(t, fx.store, inboxRow{Source: "orders-queue", Key: fmt.Sprintf("%d-%d", a, i), Aggregate: fmt.Sprint("order-", a)})
		}
	}
	for i := range 5 {
		insertInbox(t, fx.store, inboxRow{Source: "orders-queue", Key: fmt.Sprint("free-", i)})
	}
	// An hour-long poll interval: a drain must never wait for it while rows remain, even though
	// each claim takes only one row per aggregate.
	r := newRelay(t, fx.store, relay.Config{PollInterval: time.Hour}, nil)

	sum := await(t, runAsync(context.Background(), r, relay.RunOptions{StopWhenIdle: true}), 60*time.Second)

	if sum.Forwarded != 35 || sum.Claimed != 35 || sum.Dead+sum.ClaimsLost+sum.Failed+sum.Abandoned != 0 {
		t.Errorf("summary = %+v, want 35 claimed and forwarded", sum)
	}
	if got := countRows(t, fx.pool, `SELECT count(*) FROM inbox WHERE state <> 'processed'`); got != 0 {
		t.Errorf("%d inbox rows left unprocessed", got)
	}
}

func TestClaimUntilInThePastClaimsNothing(t *testing.T) {
	t.Parallel()
	fx := newFixture(t)
	id := insertInbox(t, fx.store, inboxRow{Source: "orders-queue", Key: "k"})
	r := newRelay(t, fx.store, relay.Config{}, nil)

	sum := r.Run(context.Background(), relay.RunOptions{ClaimUntil: time.Now().Add(-time.Second)})

	if sum != (relay.Summary{}) {
		t.Errorf("summary = %+v, want zero", sum)
	}
	if in := readInbox(t, fx.pool, id); in.State != store.InboxPending {
		t.Errorf("row = %+v, want pending", in)
	}
}

func TestWakeClaimsAtOnce(t *testing.T) {
	t.Parallel()
	fx := newFixture(t)
	h := &hookStore{InboxStore: fx.store}
	r := newRelay(t, h, relay.Config{PollInterval: time.Hour}, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := runAsync(ctx, r, relay.RunOptions{})
	defer func() {
		cancel()
		await(t, done, 30*time.Second)
	}()
	waitFor(t, 30*time.Second, "the first, empty claim", func() bool { return h.claims.Load() >= 1 })

	id := insertInbox(t, fx.store, inboxRow{Source: "orders-queue", Key: "k"})
	r.Wake()

	waitFor(t, 30*time.Second, "the woken relay to forward the row", func() bool {
		return readInbox(t, fx.pool, id).State == store.InboxProcessed
	})
}

// TestOutboxWakerAfterAForwardingCycle: the outbox waker is woken once after a cycle that
// forwarded rows, and not after a cycle that claimed nothing or only marked rows dead.
func TestOutboxWakerAfterAForwardingCycle(t *testing.T) {
	t.Parallel()
	fx := newFixture(t)
	var wakes atomic.Int64
	r, err := relay.New(relay.Options{
		Store: fx.store, Sources: testSources, Logger: testLogger(),
		OutboxWaker: waker.Func(func() { wakes.Add(1) }),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	if sum := r.RunOnce(ctx); sum.Claimed != 0 || wakes.Load() != 0 {
		t.Fatalf("empty cycle: summary %+v, %d wakes; want nothing claimed and no wake", sum, wakes.Load())
	}
	insertInbox(t, fx.store, inboxRow{Source: "orders-queue", Key: "k1", Aggregate: "a1"})
	insertInbox(t, fx.store, inboxRow{Source: "orders-queue", Key: "k2", Aggregate: "a2"})
	if sum := r.RunOnce(ctx); sum.Forwarded != 2 || wakes.Load() != 1 {
		t.Fatalf("forwarding cycle: summary %+v, %d wakes; want 2 forwarded and one wake", sum, wakes.Load())
	}
	insertInbox(t, fx.store, inboxRow{Source: "ghost", Key: "g1"})
	if sum := r.RunOnce(ctx); sum.Dead != 1 || sum.Forwarded != 0 || wakes.Load() != 1 {
		t.Fatalf("dead-letter cycle: summary %+v, %d wakes in all; want 1 dead, nothing forwarded, no new wake", sum, wakes.Load())
	}
}

func TestForwardErrorLeavesRowProcessing(t *testing.T) {
	t.Parallel()
	fx := newFixture(t)
	bad := insertInbox(t, fx.store, inboxRow{Source: "orders-queue", Key: "bad", Aggregate: "order-1"})
	good := insertInbox(t, fx.store, inboxRow{Source: "orders-queue", Key: "good", Aggregate: "order-2"})
	var badCalls int
	h := &hookStore{InboxStore: fx.store}
	h.beforeForward = func(_ context.Context, p store.InboxForwardParams) error {
		if p.Claim.ID == bad {
			badCalls++
			return errors.New("connection reset by peer")
		}
		return nil
	}
	m := &countMetrics{}
	r := newRelay(t, h, relay.Config{}, m)

	sum := r.RunOnce(context.Background())

	if want := (relay.Summary{Claimed: 2, Forwarded: 1, Failed: 1}); sum != want {
		t.Errorf("summary = %+v, want %+v", sum, want)
	}
	if badCalls != 3 {
		t.Errorf("forward attempts of the failing row = %d, want 3 (one and two retries)", badCalls)
	}
	if m.relayErrors.Load() != 1 {
		t.Errorf("relay errors = %d, want 1", m.relayErrors.Load())
	}
	if in := readInbox(t, fx.pool, bad); in.State != store.InboxProcessing || !in.LeaseAlive {
		t.Errorf("failed row = %+v, want processing under its lease", in)
	}
	if len(outboxRowsOf(t, fx.pool, bad)) != 0 || len(outboxRowsOf(t, fx.pool, good)) != 1 {
		t.Error("want no outbox row for the failed row and one for the other")
	}
}

// cancelAfterNextClaim returns the hooks of a run that is cancelled in the forward of the row
// first (any row when first is empty), once the run has begun the claim of its next batch,
// which it starts before it forwards a batch; and the count of claims that began after the
// cancel.
func cancelAfterNextClaim(t *testing.T, h *hookStore, cancel context.CancelFunc, first string) *atomic.Int64 {
	var late atomic.Int64
	var cancelled atomic.Bool
	var claims atomic.Int64
	next := make(chan struct{})
	h.beforeClaim = func() {
		if cancelled.Load() {
			late.Add(1)
		}
		if claims.Add(1) == 2 {
			close(next)
		}
	}
	var once sync.Once
	h.beforeForward = func(_ context.Context, p store.InboxForwardParams) error {
		if first != "" && p.Claim.ID != first {
			return nil
		}
		once.Do(func() {
			select {
			case <-next:
			case <-time.After(20 * time.Second):
				t.Error("the run did not begin its next claim while it forwarded a batch")
			}
			cancelled.Store(true)
			cancel()
		})
		return nil
	}
	return &late
}

// TestShutdownFinishesTheHeldBatch cancels the run while it forwards the first row of a batch:
// the run begins no claim after the cancel but forwards the rows it holds.
func TestShutdownFinishesTheHeldBatch(t *testing.T) {
	t.Parallel()
	fx := newFixture(t)
	for i := range 3 {
		insertInbox(t, fx.store, inboxRow{Source: "orders-queue", Key: fmt.Sprint(i), Aggregate: fmt.Sprint("order-", i)})
	}
	ctx, cancel := context.WithCancel(context.Background())
	h := &hookStore{InboxStore: fx.store}
	late := cancelAfterNextClaim(t, h, cancel, "")
	r := newRelay(t, h, relay.Config{PollInterval: time.Hour}, nil)

	sum := await(t, runAsync(ctx, r, relay.RunOptions{}), 30*time.Second)

	if want := (relay.Summary{Claimed: 3, Forwarded: 3}); sum != want {
		t.Errorf("summary = %+v, want %+v", sum, want)
	}
	if got := late.Load(); got != 0 {
		t.Errorf("%d claims began after the cancel, want none", got)
	}
}

// TestShutdownForwardsTheClaimUnderWay stops the run while it forwards one batch and has
// already claimed the next (batches of one row, two aggregates): the next batch is forwarded
// too, not left to its lease.
func TestShutdownForwardsTheClaimUnderWay(t *testing.T) {
	t.Parallel()
	fx := newFixture(t)
	first := insertInbox(t, fx.store, inboxRow{Source: "orders-queue", Key: "a", Aggregate: "order-a"})
	second := insertInbox(t, fx.store, inboxRow{Source: "orders-queue", Key: "b", Aggregate: "order-b"})
	ctx, cancel := context.WithCancel(context.Background())
	h := &hookStore{InboxStore: fx.store}
	late := cancelAfterNextClaim(t, h, cancel, first)
	r := newRelay(t, h, relay.Config{PollInterval: time.Hour, BatchSize: 1}, nil)

	sum := await(t, runAsync(ctx, r, relay.RunOptions{}), 30*time.Second)

	if want := (relay.Summary{Claimed: 2, Forwarded: 2}); sum != want {
		t.Errorf("summary = %+v, want %+v", sum, want)
	}
	if got := late.Load(); got != 0 {
		t.Errorf("%d claims began after the cancel, want none", got)
	}
	for _, id := range []string{first, second} {
		if in := readInbox(t, fx.pool, id); in.State != store.InboxProcessed {
			t.Errorf("row %s = %+v, want processed", id, in)
		}
		if n := len(outboxRowsOf(t, fx.pool, id)); n != 1 {
			t.Errorf("row %s has %d outbox rows, want 1", id, n)
		}
	}
}

// TestShutdownTimeoutAbandonsTheRest lets the first forward hang past the shutdown timeout: the
// run returns, and the rows it held stay processing for the reclaim step.
func TestShutdownTimeoutAbandonsTheRest(t *testing.T) {
	t.Parallel()
	fx := newFixture(t)
	var ids []string
	for i := range 3 {
		ids = append(ids, insertInbox(t, fx.store, inboxRow{Source: "orders-queue", Key: fmt.Sprint(i), Aggregate: fmt.Sprint("order-", i)}))
	}
	ctx, cancel := context.WithCancel(context.Background())
	h := &hookStore{InboxStore: fx.store}
	h.beforeForward = func(fctx context.Context, _ store.InboxForwardParams) error {
		cancel()
		<-fctx.Done()
		return fmt.Errorf("forwarding: %w", fctx.Err())
	}
	m := &countMetrics{}
	r := newRelay(t, h, relay.Config{ShutdownTimeout: 200 * time.Millisecond}, m)

	sum := await(t, runAsync(ctx, r, relay.RunOptions{}), 30*time.Second)

	if want := (relay.Summary{Claimed: 3, Abandoned: 3}); sum != want {
		t.Errorf("summary = %+v, want %+v", sum, want)
	}
	if m.relayErrors.Load() != 0 {
		t.Errorf("relay errors = %d, want 0: a stop is not an error", m.relayErrors.Load())
	}
	for _, id := range ids {
		if in := readInbox(t, fx.pool, id); in.State != store.InboxProcessing {
			t.Errorf("row %s = %+v, want processing", id, in)
		}
	}
	if got := countRows(t, fx.pool, `SELECT count(*) FROM outbox`); got != 0 {
		t.Errorf("outbox rows = %d, want 0", got)
	}
}

func ptr(s string) *string { return &s }

func deref(s *string) string {
	if s == nil {
		return "<null>"
	}
	return *s
}

func jsonEqual(t *testing.T, a, b string) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal([]byte(a), &x); err != nil {
		t.Fatalf("%s: %v", a, err)
	}
	if err := json.Unmarshal([]byte(b), &y); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	return reflect.DeepEqual(x, y)
}
