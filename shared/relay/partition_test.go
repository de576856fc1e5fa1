package relay_test

import (
	"context"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/alternayte/queuebox/shared/connect/connecttest"
	"github.com/alternayte/queuebox/shared/lease"
	"github.com/alternayte/queuebox/shared/relay"
	"github.com/alternayte/queuebox/shared/store"
	"github.com/alternayte/queuebox/shared/store/postgres"
)

// leaseCounter is countMetrics that also counts lease deadlines.
type leaseCounter struct {
	countMetrics
	deadlines atomic.Int64
}

func (m *leaseCounter) LeaseDeadline(component string) {
	if component == "inbox" {
		m.deadlines.Add(1)
	}
}

// proxiedPool opens a pool on the test database through a proxy that the test can freeze. Its
// connections carry application_name, so that the test can see them in pg_stat_activity.
func proxiedPool(t *testing.T, dbURL, appName string) (*pgxpool.Pool, *connecttest.Proxy) {
	t.Helper()
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	px := connecttest.Listen(t, u.Host)
	u.Host = px.Addr()
	q := u.Query()
	q.Set("connect_timeout", "5")
	q.Set("application_name", appName)
	u.RawQuery = q.Encode()
	pool, err := pgxpool.New(context.Background(), u.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	// A test that fails while the proxy is frozen must not leave the pool's close waiting for
	// a statement that the proxy holds.
	t.Cleanup(px.Thaw)
	return pool, px
}

// heldBatch is a PostgreSQL store whose first batch forward waits for the test before it is
// sent.
type heldBatch struct {
	*postgres.Store
	once    sync.Once
	entered chan struct{} // closed when the first batch forward starts
	send    chan struct{} // the first batch forward is sent when it closes
}

func (h *heldBatch) InboxRelayForwardBatch(ctx context.Context, p []store.InboxForwardParams) ([]bool, error) {
	first := false
	h.once.Do(func() {
		first = true
		close(h.entered)
	})
	if first {
		<-h.send
	}
	return h.Store.InboxRelayForwardBatch(ctx, p)
}

// Relay A claims the first row of two aggregates and sends their forward while a partition
// holds every byte between A and PostgreSQL (the connections stay open). Relay B forwards both
// rows of both aggregates after A's leases expired. Then the partition heals and A's held
// statement reaches the database late. The fence refuses it: every inbox row reaches the
// outbox exactly once, in its aggregate's order. A itself abandons the forward when a renewal
// fails (times out), or at the latest at its claims' local lease deadline, without waiting for
// the partition to heal.
func TestARelayCutOffFromTheDatabaseNeverForwardsARowTwice(t *testing.T) {
	t.Parallel()
	fx := newFixture(t)
	var ids []string
	for _, r := range []inboxRow{
		{Source: "stripe", Key: "x1", Aggregate: "agg-x", EventType: "e"},
		{Source: "stripe", Key: "y1", Aggregate: "agg-y", EventType: "e"},
		{Source: "stripe", Key: "x2", Aggregate: "agg-x", EventType: "e"},
		{Source: "stripe", Key: "y2", Aggregate: "agg-y", EventType: "e"},
	} {
		ids = append(ids, insertInbox(t, fx.store, r))
	}
	poolA, px := proxiedPool(t, fx.url, "relay_a")
	held := &heldBatch{Store: openStore(t, poolA), entered: make(chan struct{}), send: make(chan struct{})}
	cfg := relay.Config{ClaimTimeout: 3 * time.Second, PollInterval: 50 * time.Millisecond}
	mA := &leaseCounter{}
	a, err := relay.New(relay.Options{Store: held, Config: cfg, Sources: testSources, Metrics: mA, Logger: testLogger()})
	if err != nil {
		t.Fatal(err)
	}
	doneA := make(chan relay.Summary, 1)
	go func() { doneA <- a.RunOnce(context.Background()) }()
	select {
	case <-held.entered:
	case <-time.After(time.Minute):
		t.Fatal("relay A did not forward its batch")
	}
	px.Freeze()
	close(held.send)

	b := newRelay(t, fx.store, cfg, nil)
	ctxB, stopB := context.WithCancel(context.Background())
	doneB := runAsync(ctxB, b, relay.RunOptions{})
	waitFor(t, time.Minute, "relay B to forward every row", func() bool {
		return countRows(t, fx.pool, `SELECT count(*) FROM inbox WHERE state = 'processed'`) == len(ids)
	})
	// The partition heals: A's statement reaches the database now. Once A's connections are
	// gone, everything they carried has run.
	px.Thaw()
	sumA := await(t, doneA, time.Minute)
	poolA.Close()
	waitFor(t, time.Minute, "relay A's connections to end", func() bool {
		return countRows(t, fx.pool, `SELECT count(*) FROM pg_stat_activity WHERE application_name = 'relay_a'`) == 0
	})
	stopB()
	await(t, doneB, time.Minute)

	// A renewal that timed out loses a row's claim, unless the local deadline came first.
	if sumA.Forwarded != 0 || sumA.LeaseExpired+sumA.ClaimsLost != 2 {
		t.Errorf("relay A summary = %+v, want its 2 rows abandoned by a failed renewal or at the lease deadline", sumA)
	}
	if got := mA.deadlines.Load(); got != int64(sumA.LeaseExpired) {
		t.Errorf("relay A lease deadline metric = %d, want %d", got, sumA.LeaseExpired)
	}
	var seq []int64
	for i, id := range ids {
		rows := outboxRowsOf(t, fx.pool, id)
		if len(rows) != 1 {
			t.Fatalf("inbox row %d has %d outbox rows, want exactly 1", i, len(rows))
		}
		seq = append(seq, rows[0].Sequence)
	}
	// ids are x1, y1, x2, y2.
	if seq[0] > seq[2] || seq[1] > seq[3] {
		t.Errorf("outbox sequences x1 %d x2 %d, y1 %d y2 %d: an aggregate's order is broken", seq[0], seq[2], seq[1], seq[3])
	}
}

// slowClaimAnswer is a store whose claim answers only when the claimed rows' leases have less
// than half the margin left by the database clock: a claim answer held up on its way back, or
// rows claimed ahead that waited. The relay's local deadline has then passed.
type slowClaimAnswer struct {
	store.InboxStore
	pool     *pgxpool.Pool
	margin   time.Duration
	forwards atomic.Int64
}

func (s *slowClaimAnswer) InboxRelayClaim(ctx context.Context, p store.InboxRelayClaimParams) ([]store.InboxMessage, error) {
	rows, err := s.InboxStore.InboxRelayClaim(ctx, p)
	if err != nil || len(rows) == 0 {
		return rows, err
	}
	ids := make([]string, len(rows))
	for i, r := range rows {
		ids[i] = r.ID
	}
	end := time.Now().Add(time.Minute)
	for time.Now().Before(end) {
		var left time.Duration
		if err := s.pool.QueryRow(ctx, `SELECT COALESCE(EXTRACT(EPOCH FROM min(lease_expires_at) - clock_timestamp()) * 1000000, 0)::bigint * 1000 FROM inbox WHERE id = ANY($1::uuid[])`, ids).Scan(&left); err != nil {
			return nil, err
		}
		if left < s.margin/2 {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	return rows, nil
}

func (s *slowClaimAnswer) InboxRelayForward(ctx context.Context, p store.InboxForwardParams) (bool, error) {
	s.forwards.Add(1)
	return s.InboxStore.InboxRelayForward(ctx, p)
}

func (s *slowClaimAnswer) InboxRelayDead(ctx context.Context, c store.Claim, lastError string) (bool, error) {
	s.forwards.Add(1)
	return s.InboxStore.InboxRelayDead(ctx, c, lastError)
}

// A claim whose answer arrives after the claim's local lease deadline (while the database's
// lease still runs) is not forwarded: the relay never starts a forward past that deadline.
// The row returns to pending with its lease and another relay forwards it once.
func TestARelayDoesNotStartAForwardPastItsLeaseDeadline(t *testing.T) {
	t.Parallel()
	fx := newFixture(t)
	id := insertInbox(t, fx.store, inboxRow{Source: "stripe", Key: "late", Aggregate: "agg-late", EventType: "e"})
	const leaseFor = 3 * time.Second
	slow := &slowClaimAnswer{InboxStore: fx.store, pool: fx.pool, margin: lease.Margin(leaseFor)}
	mA := &leaseCounter{}
	a, err := relay.New(relay.Options{Store: slow, Config: relay.Config{ClaimTimeout: leaseFor}, Sources: testSources, Metrics: mA, Logger: testLogger()})
	if err != nil {
		t.Fatal(err)
	}

	sumA := a.RunOnce(context.Background())

	if want := (relay.Summary{Claimed: 1, LeaseExpired: 1}); sumA != want {
		t.Errorf("relay A summary = %+v, want %+v", sumA, want)
	}
	if n := slow.forwards.Load(); n != 0 {
		t.Errorf("relay A sent %d forward or dead-letter writes past its lease's local deadline", n)
	}
	if got := mA.deadlines.Load(); got != 1 {
		t.Errorf("relay A lease deadline metric = %d, want 1", got)
	}
	b := newRelay(t, fx.store, relay.Config{ClaimTimeout: leaseFor, PollInterval: 50 * time.Millisecond}, nil)
	ctxB, stopB := context.WithCancel(context.Background())
	doneB := runAsync(ctxB, b, relay.RunOptions{})
	waitFor(t, time.Minute, "relay B to forward the row", func() bool { return readInbox(t, fx.pool, id).State == store.InboxProcessed })
	stopB()
	await(t, doneB, time.Minute)
	if rows := outboxRowsOf(t, fx.pool, id); len(rows) != 1 {
		t.Errorf("outbox rows for the inbox row = %d, want exactly 1", len(rows))
	}
}
