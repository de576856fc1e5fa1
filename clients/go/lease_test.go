package queuebox_test

import (
	"context"
	"database/sql"
	"fmt"
	"net"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	queuebox "github.com/alternayte/queuebox/clients/go"
	"github.com/alternayte/queuebox/clients/go/internal/freezeproxy"
	"github.com/alternayte/queuebox/clients/go/internal/pgtest"
)

// The lease's local deadline, tested through a proxy between a worker and PostgreSQL that
// freezes: it stops passing bytes without closing a connection, as a network partition does.
// The tests assert the guarantees, never a time: a handler's context has ended before another
// worker can take its row; no handler starts on a claim whose lease has run out; the handler
// runs and accepted deliveries of one aggregate keep their order, duplicates included; every
// row is completed once, at attempt 0.

// partitionFixture is a migrated database, a proxy in front of it, and the record of what the
// handlers did.
type partitionFixture struct {
	t      *testing.T
	db     *sql.DB // direct
	viaURL string  // the database through the proxy
	proxy  *freezeproxy.Proxy

	mu         sync.Mutex
	deliveries []string // "worker key", in the order the deliveries were accepted
	violations []string
}

func newPartitionFixture(t *testing.T) *partitionFixture {
	t.Helper()
	db, d := pgtest.New(t)
	if _, err := db.Exec(`CREATE TABLE writes (idempotency_key TEXT NOT NULL, worker TEXT NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(d.URL)
	if err != nil {
		t.Fatal(err)
	}
	port := u.Port()
	if port == "" {
		port = "5432"
	}
	proxy, err := freezeproxy.Start(net.JoinHostPort(u.Hostname(), port))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = proxy.Close() })
	u.Host = proxy.Addr()
	return &partitionFixture{t: t, db: db, viaURL: u.String(), proxy: proxy}
}

// openViaProxy opens a *sql.DB whose connections all pass through the proxy.
func (f *partitionFixture) openViaProxy() *sql.DB {
	f.t.Helper()
	db, err := sql.Open("pgx", f.viaURL)
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { _ = db.Close() })
	return db
}

// seed inserts due pull rows of the source orders in order; each key is "aggregate/n".
func (f *partitionFixture) seed(keys ...string) {
	f.t.Helper()
	for i, k := range keys {
		aggregate, _, _ := strings.Cut(k, "/")
		_, err := f.db.Exec(`INSERT INTO inbox (source, idempotency_key, aggregate_id, payload, consumption, created_at, scheduled_at)
			VALUES ('orders', $1, $2, '{}', 'pull', clock_timestamp() - INTERVAL '1 second' + $3 * INTERVAL '1 microsecond',
			        clock_timestamp() - INTERVAL '1 second')`, k, aggregate, i)
		if err != nil {
			f.t.Fatal(err)
		}
	}
}

func (f *partitionFixture) violation(format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.violations = append(f.violations, fmt.Sprintf(format, args...))
}

// checkLeaseLive records a violation when the row's lease, on the database's clock, has run
// out as its handler starts: the worker handed the handler a claim that another worker may
// already hold. (It reads the row's lease, whichever claim it belongs to: a test that relies
// on it keeps the worker from claiming the row again while it holds it.)
func (f *partitionFixture) checkLeaseLive(worker string, m queuebox.Message) {
	var live bool
	err := f.db.QueryRow(`SELECT state = 'processing' AND lease_expires_at > clock_timestamp() FROM inbox WHERE id = CAST($1 AS UUID)`, m.ID).Scan(&live)
	if err != nil {
		f.violation("%s: reading the lease of %s: %v", worker, m.IdempotencyKey, err)
		return
	}
	if !live {
		f.violation("%s started the handler of %s on a lease that had run out", worker, m.IdempotencyKey)
	}
}

// deliver accepts a delivery of m, as a destination would, unless the handler's context has
// ended, and writes the row of the delivery in the handler's transaction.
func (f *partitionFixture) deliver(ctx context.Context, worker string, m queuebox.Message, tx *sql.Tx) error {
	if _, err := tx.ExecContext(ctx, `INSERT INTO writes VALUES ($1, $2)`, m.IdempotencyKey, worker); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return err
	}
	f.deliveries = append(f.deliveries, worker+" "+m.IdempotencyKey)
	return nil
}

// processed reports whether every row is processed.
func (f *partitionFixture) processed() bool {
	var left int
	if err := f.db.QueryRow(`SELECT count(*) FROM inbox WHERE state <> 'processed'`).Scan(&left); err != nil {
		f.t.Fatal(err)
	}
	return left == 0
}

// check asserts the guarantees over what the handlers did and what the database holds: no
// violation was recorded; the accepted deliveries of each aggregate are in order, counting
// every one of them, duplicates included; every row is processed once, at attempt 0 (a
// handler cancelled by its deadline spends no attempt), with one committed write.
func (f *partitionFixture) check(keys ...string) {
	f.t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, v := range f.violations {
		f.t.Error(v)
	}
	position := map[string]int{}
	for i, k := range keys {
		position[k] = i
	}
	last := map[string]int{} // aggregate -> highest position delivered
	for _, d := range f.deliveries {
		_, key, _ := strings.Cut(d, " ")
		aggregate, _, _ := strings.Cut(key, "/")
		if p, seen := last[aggregate]; seen && position[key] < p {
			f.t.Errorf("order violation: %q was accepted after %q of its aggregate; deliveries: %q", d, keys[p], f.deliveries)
		}
		last[aggregate] = max(last[aggregate], position[key])
	}
	for _, k := range keys {
		var state string
		var attempt, writes int
		var lastError sql.NullString
		err := f.db.QueryRow(`SELECT state, attempt, last_error, (SELECT count(*) FROM writes w WHERE w.idempotency_key = i.idempotency_key)
			FROM inbox i WHERE idempotency_key = $1`, k).Scan(&state, &attempt, &lastError, &writes)
		if err != nil {
			f.t.Fatal(err)
		}
		if state != "processed" || attempt != 0 || lastError.Valid || writes != 1 {
			f.t.Errorf("row %s: state %s, attempt %d, last_error %v, %d committed writes; want processed at attempt 0, no last_error, one write",
				k, state, attempt, lastError, writes)
		}
	}
}

// TestHandlerContextEndsBeforeAnotherWorkerCanReclaim: worker A, behind the proxy, holds row
// k1/1 in a slow delivery (it waits for its context, or for the test to let it through) and
// has claimed m1/1 of another aggregate ahead. The proxy freezes: A's renewals cannot reach
// the database. Worker B, connected directly, takes the rows once A's leases have run out.
// A's handler context must have ended before B takes k1/1; A must start nothing more on the
// rows it claimed; B delivers every row in order; A's slow delivery, let through at the end,
// must not be accepted after B's deliveries of the same aggregate.
func TestHandlerContextEndsBeforeAnotherWorkerCanReclaim(t *testing.T) {
	t.Parallel()
	f := newPartitionFixture(t)
	keys := []string{"k1/1", "k1/2", "k1/3", "m1/1", "m1/2"}
	f.seed(keys...)

	var aCtx atomic.Pointer[context.Context]
	aStarted, letThrough := make(chan struct{}), make(chan struct{})
	var aStartedOnce sync.Once
	a, err := queuebox.NewInboxWorker(f.openViaProxy(), queuebox.Options{
		Source: "orders", LeaseMS: 3000, PollInterval: 20 * time.Millisecond, ShutdownGrace: 100 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	var aRuns atomic.Int32
	stopA := running(t, a, func(ctx context.Context, m queuebox.Message, tx *sql.Tx) error {
		f.checkLeaseLive("A", m)
		if aRuns.Add(1) == 1 {
			if m.IdempotencyKey != "k1/1" {
				return fmt.Errorf("A's first handler is %s, want k1/1", m.IdempotencyKey)
			}
			aCtx.Store(&ctx)
			aStartedOnce.Do(func() { close(aStarted) })
			select { // a slow delivery
			case <-ctx.Done():
				return ctx.Err()
			case <-letThrough:
			}
		}
		return f.deliver(ctx, "A", m, tx)
	})
	select {
	case <-aStarted:
	case <-time.After(30 * time.Second):
		t.Fatal("A's handler of k1/1 did not start within 30 s")
	}
	waitUntil(t, "A holds k1/1 and m1/1", 10*time.Second, func() bool {
		var n int
		if err := f.db.QueryRow(`SELECT count(*) FROM inbox WHERE state = 'processing' AND idempotency_key IN ('k1/1', 'm1/1')`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n == 2
	})
	f.proxy.Freeze()

	b, err := queuebox.NewInboxWorker(f.db, queuebox.Options{Source: "orders", LeaseMS: 3000, PollInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	stopB := running(t, b, func(ctx context.Context, m queuebox.Message, tx *sql.Tx) error {
		f.checkLeaseLive("B", m)
		if m.IdempotencyKey == "k1/1" {
			if p := aCtx.Load(); p == nil || (*p).Err() == nil {
				f.violation("B took k1/1 while A's handler context had not ended")
			}
		}
		return f.deliver(ctx, "B", m, tx)
	})
	waitUntil(t, "B processes every row", 60*time.Second, f.processed)
	if err := stopB(); err != nil {
		t.Fatal(err)
	}

	// The partition heals; A's slow delivery, if it still runs, goes through.
	close(letThrough)
	f.proxy.Thaw()
	if err := stopA(); err != nil {
		t.Fatal(err)
	}
	if n := aRuns.Load(); n != 1 {
		t.Errorf("A ran %d handlers, want 1: it must start none on rows whose deadline passed while it was cut off", n)
	}
	f.check(keys...)
}

// TestClaimAnsweredAfterTheDeadlineIsNotHandled: the database runs and commits a claim, but
// its answer reaches the worker only after the lease has run out (the proxy holds it back).
// The worker must not hand that claim to the handler; it claims the row again and handles it
// once, at attempt 0.
func TestClaimAnsweredAfterTheDeadlineIsNotHandled(t *testing.T) {
	t.Parallel()
	f := newPartitionFixture(t)
	key := "late/claim-answer-7d1c5e"
	f.seed(key)
	f.proxy.FreezeOnReply([]byte(key))

	// One row held at a time: the worker claims nothing more until the held row is finished,
	// so the lease that the handler finds is the one of the claim it was handed.
	w, err := queuebox.NewInboxWorker(f.openViaProxy(), queuebox.Options{Source: "orders", LeaseMS: 3000, BatchSize: 1, PollInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	stop := running(t, w, func(ctx context.Context, m queuebox.Message, tx *sql.Tx) error {
		f.checkLeaseLive("A", m)
		return f.deliver(ctx, "A", m, tx)
	})
	waitUntil(t, "the proxy holds the answer of the claim", 30*time.Second, f.proxy.Frozen)
	waitUntil(t, "the lease runs out on the database's clock", 30*time.Second, func() bool {
		var expired bool
		if err := f.db.QueryRow(`SELECT lease_expires_at <= clock_timestamp() FROM inbox WHERE idempotency_key = $1`, key).Scan(&expired); err != nil {
			t.Fatal(err)
		}
		return expired
	})
	f.proxy.Thaw()
	waitUntil(t, "the row is processed", 30*time.Second, f.processed)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	f.check(key)
}

// TestNothingCommitsAfterTheDeadline: the completion reaches the database in time, but its
// answer reaches the worker only after the lease has run out on the database's clock (the proxy
// holds it back). The worker must not send COMMIT then: that run's write and completion roll
// back, and the row runs again and is completed once, at attempt 0.
func TestNothingCommitsAfterTheDeadline(t *testing.T) {
	t.Parallel()
	f := newPartitionFixture(t)
	key := "late/commit-4b9e21"
	f.seed(key)
	var id string
	if err := f.db.QueryRow(`SELECT CAST(id AS TEXT) FROM inbox WHERE idempotency_key = $1`, key).Scan(&id); err != nil {
		t.Fatal(err)
	}
	// The first statement that sends the row's id is the completion (the handler returns well
	// before the first renewal).
	f.proxy.FreezeAfterRequest([]byte(id))

	// One row held at a time: the worker claims the row again only once the first run is over.
	w, err := queuebox.NewInboxWorker(f.openViaProxy(), queuebox.Options{Source: "orders", LeaseMS: 3000, BatchSize: 1, PollInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	var runs atomic.Int32
	stop := running(t, w, func(ctx context.Context, m queuebox.Message, tx *sql.Tx) error {
		return f.deliver(ctx, fmt.Sprintf("A#%d", runs.Add(1)), m, tx)
	})
	waitUntil(t, "the proxy holds the answer of the completion", 30*time.Second, f.proxy.Frozen)
	waitUntil(t, "the lease runs out on the database's clock", 30*time.Second, func() bool {
		var expired bool
		if err := f.db.QueryRow(`SELECT lease_expires_at <= clock_timestamp() FROM inbox WHERE idempotency_key = $1`, key).Scan(&expired); err != nil {
			t.Fatal(err)
		}
		return expired
	})
	f.proxy.Thaw()
	waitUntil(t, "the row is processed", 30*time.Second, f.processed)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	var first int
	if err := f.db.QueryRow(`SELECT count(*) FROM writes WHERE worker = 'A#1'`).Scan(&first); err != nil {
		t.Fatal(err)
	}
	if first != 0 {
		t.Error("the first run committed after its lease had run out")
	}
	f.check(key)
}
