package relay_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/alternayte/queuebox/shared/kind"
	"github.com/alternayte/queuebox/shared/metrics"
	"github.com/alternayte/queuebox/shared/relay"
	"github.com/alternayte/queuebox/shared/store"
	"github.com/alternayte/queuebox/shared/store/postgres"
	"github.com/alternayte/queuebox/shared/store/postgres/dbtest"
)

// The Prometheus registry of the local process must satisfy the relay's metrics interface.
var _ relay.Metrics = (*metrics.Registry)(nil)

// nopStore satisfies store.InboxStore for tests that never reach the database.
type nopStore struct{ store.InboxStore }

type fixture struct {
	pool  *pgxpool.Pool
	url   string
	store *postgres.Store
}

func newFixture(t testing.TB) fixture {
	t.Helper()
	pool, url := dbtest.Migrated(t)
	return fixture{pool: pool, url: url, store: openStore(t, pool)}
}

func openStore(t testing.TB, pool *pgxpool.Pool) *postgres.Store {
	t.Helper()
	st, err := postgres.New(pool, store.DefaultNames())
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func testLogger() *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// testSources are the sources of most tests: an HTTP source with a prefixed event type
// template, and a RabbitMQ source with its default template.
var testSources = map[string]relay.Source{
	"stripe":       {Kind: kind.HTTP, Topic: "stripe.{{ eventType }}"},
	"orders-queue": {Kind: "rabbitmq"},
}

func newRelay(t testing.TB, st store.InboxStore, cfg relay.Config, m relay.Metrics) *relay.Relay {
	t.Helper()
	r, err := relay.New(relay.Options{Store: st, Config: cfg, Sources: testSources, Metrics: m, Logger: testLogger()})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// countMetrics records the relay measurements.
type countMetrics struct {
	forwarded   atomic.Int64
	otherStatus atomic.Int64
	relayErrors atomic.Int64
	claimsLost  atomic.Int64
	gaugeSets   atomic.Int64
	oldest      atomic.Int64 // nanoseconds
}

func (m *countMetrics) InboxMessage(status string) {
	if status == "forwarded" {
		m.forwarded.Add(1)
		return
	}
	m.otherStatus.Add(1)
}
func (m *countMetrics) InboxRelayError() { m.relayErrors.Add(1) }
func (m *countMetrics) InboxClaimLost()  { m.claimsLost.Add(1) }
func (m *countMetrics) InboxOldestPendingAge(d time.Duration) {
	m.gaugeSets.Add(1)
	m.oldest.Store(int64(d))
}

// hookStore wraps a real store and lets a test intercept the relay writes.
type hookStore struct {
	store.InboxStore
	claims atomic.Int64
	renews atomic.Int64 // successful renewals
	// lostRenews counts renewals that found the fence gone.
	lostRenews atomic.Int64
	forwards   atomic.Int64

	// beforeForward, when set, runs before every forward; an error is returned instead of
	// forwarding.
	beforeForward func(ctx context.Context, p store.InboxForwardParams) error
	// detachForward runs the forward statement whatever its context says, as a statement
	// already on its way to the database when the relay gives up on it would.
	detachForward bool
	// beforeRenew, when set, runs before every renewal.
	beforeRenew func(ctx context.Context, c store.Claim)
	// beforeClaim, when set, runs before every claim.
	beforeClaim func()
}

func (h *hookStore) InboxRelayClaim(ctx context.Context, p store.InboxRelayClaimParams) ([]store.InboxMessage, error) {
	if h.beforeClaim != nil {
		h.beforeClaim()
	}
	rows, err := h.InboxStore.InboxRelayClaim(ctx, p)
	h.claims.Add(1)
	return rows, err
}

func (h *hookStore) InboxRelayForward(ctx context.Context, p store.InboxForwardParams) (bool, error) {
	h.forwards.Add(1)
	if h.beforeForward != nil {
		if err := h.beforeForward(ctx, p); err != nil {
			return false, err
		}
	}
	if h.detachForward {
		ctx = context.WithoutCancel(ctx)
	}
	return h.InboxStore.InboxRelayForward(ctx, p)
}

func (h *hookStore) InboxRelayRenew(ctx context.Context, c store.Claim, lease time.Duration) (bool, error) {
	if h.beforeRenew != nil {
		h.beforeRenew(ctx, c)
	}
	ok, err := h.InboxStore.InboxRelayRenew(ctx, c, lease)
	switch {
	case err == nil && ok:
		h.renews.Add(1)
	case err == nil:
		h.lostRenews.Add(1)
	}
	return ok, err
}

// gate blocks callers until it is opened.
type gate struct {
	once sync.Once
	ch   chan struct{}
}

func newGate() *gate { return &gate{ch: make(chan struct{})} }

func (g *gate) open()                 { g.once.Do(func() { close(g.ch) }) }
func (g *gate) wait()                 { <-g.ch }
func (g *gate) done() <-chan struct{} { return g.ch }

type inboxRow struct {
	Source, Key, Aggregate, EventType, Correlation, Consumption string
	Payload, Headers                                            string
}

func insertInbox(t testing.TB, st store.InboxStore, r inboxRow) string {
	t.Helper()
	p := store.InboxInsertParams{
		Source: r.Source, IdempotencyKey: r.Key, AggregateID: r.Aggregate, EventType: r.EventType,
		CorrelationID: r.Correlation, Consumption: r.Consumption, Payload: json.RawMessage(`{}`),
	}
	if r.Payload != "" {
		p.Payload = json.RawMessage(r.Payload)
	}
	if r.Headers != "" {
		p.Headers = json.RawMessage(r.Headers)
	}
	res, err := st.InboxInsert(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	if res.Duplicate {
		t.Fatalf("inbox row %s/%s is a duplicate", r.Source, r.Key)
	}
	return res.ID
}

type inboxState struct {
	State      string
	LastError  string
	HasToken   bool
	Processed  bool
	LeaseAlive bool
}

func readInbox(t testing.TB, pool *pgxpool.Pool, id string) inboxState {
	t.Helper()
	var s inboxState
	var lastErr *string
	err := pool.QueryRow(context.Background(), `
SELECT state, last_error, claim_token IS NOT NULL, processed_at IS NOT NULL,
       COALESCE(lease_expires_at > clock_timestamp(), false)
FROM inbox WHERE id = $1`, id).Scan(&s.State, &lastErr, &s.HasToken, &s.Processed, &s.LeaseAlive)
	if err != nil {
		t.Fatalf("reading inbox row %s: %v", id, err)
	}
	if lastErr != nil {
		s.LastError = *lastErr
	}
	return s
}

type outboxRow struct {
	ID          string
	Topic       string
	Key         *string
	Payload     string
	Headers     map[string]any
	MaxAttempts int
	Attempt     int
	State       string
	Sequence    int64
}

// outboxRowsOf returns the outbox rows whose x-inbox-id header is inboxID, in sequence order.
func outboxRowsOf(t testing.TB, pool *pgxpool.Pool, inboxID string) []outboxRow {
	t.Helper()
	return queryOutbox(t, pool, `WHERE headers->>'x-inbox-id' = $1`, inboxID)
}

func queryOutbox(t testing.TB, pool *pgxpool.Pool, where string, args ...any) []outboxRow {
	t.Helper()
	rows, err := pool.Query(context.Background(), `
SELECT id::text, topic, key, payload::text, headers::text, max_attempts, attempt, state, sequence
FROM outbox `+where+` ORDER BY sequence`, args...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []outboxRow
	for rows.Next() {
		var r outboxRow
		var headers string
		if err := rows.Scan(&r.ID, &r.Topic, &r.Key, &r.Payload, &headers, &r.MaxAttempts, &r.Attempt, &r.State, &r.Sequence); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal([]byte(headers), &r.Headers); err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func countRows(t testing.TB, pool *pgxpool.Pool, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t testing.TB, deadline time.Duration, what string, cond func() bool) {
	t.Helper()
	end := time.Now().Add(deadline)
	for !cond() {
		if time.Now().After(end) {
			t.Fatalf("timed out after %s waiting for %s", deadline, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// runAsync runs r in the background and returns a channel that yields its summary.
func runAsync(ctx context.Context, r *relay.Relay, opts relay.RunOptions) <-chan relay.Summary {
	ch := make(chan relay.Summary, 1)
	go func() { ch <- r.Run(ctx, opts) }()
	return ch
}

// await waits for a run's summary.
func await(t testing.TB, ch <-chan relay.Summary, deadline time.Duration) relay.Summary {
	t.Helper()
	select {
	case s := <-ch:
		return s
	case <-time.After(deadline):
		t.Fatalf("run did not return within %s", deadline)
		return relay.Summary{}
	}
}

// drain runs r until a claim finds nothing.
func drain(t testing.TB, r *relay.Relay) relay.Summary {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	return r.Run(ctx, relay.RunOptions{StopWhenIdle: true})
}
