package relay_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/alternayte/queuebox/shared/relay"
	"github.com/alternayte/queuebox/shared/store"
	"github.com/alternayte/queuebox/shared/store/postgres/dbtest"
)

// lockOutbox holds an EXCLUSIVE lock on the outbox table until the returned release is called
// (or the test ends): a relay forward, whose statement inserts into the outbox, waits for it
// before it touches the inbox row.
func lockOutbox(t *testing.T, pool *pgxpool.Pool) (release func()) {
	t.Helper()
	tx, err := pool.Begin(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(context.Background(), `LOCK TABLE outbox IN EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	release = func() { once.Do(func() { _ = tx.Rollback(context.Background()) }) }
	t.Cleanup(release)
	return release
}

// lines is a slog.Handler that keeps the message, level and attributes of every line.
type lines struct {
	mu   *sync.Mutex
	recs *[]string
}

func newLines() lines { return lines{mu: &sync.Mutex{}, recs: &[]string{}} }

func (l lines) Enabled(context.Context, slog.Level) bool { return true }

func (l lines) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s", r.Level, r.Message)
	r.Attrs(func(a slog.Attr) bool {
		fmt.Fprintf(&b, " %s=%s", a.Key, a.Value)
		return true
	})
	l.mu.Lock()
	*l.recs = append(*l.recs, b.String())
	l.mu.Unlock()
	return nil
}

func (l lines) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l lines) WithGroup(string) slog.Handler      { return l }

func (l lines) all() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), *l.recs...)
}

// A lease renewal that fails with an error loses the claim, as one that updates zero rows
// does: the relay abandons the forward that waits for the database at once, not at the
// claim's local deadline, writes nothing to the row, and counts a lost claim, with one log
// line for the renewal whose error is redacted. PostgreSQL refuses the renewal; the forward
// waits for a lock that the test holds on the outbox table.
func TestARenewalThatFailsAbandonsTheForward(t *testing.T) {
	t.Parallel()
	fx := newFixture(t)
	id := insertInbox(t, fx.store, inboxRow{Source: "stripe", Key: "k1", Aggregate: "agg-1", EventType: "e"})
	dbtest.RefuseRenewals(t, fx.pool, "inbox")
	release := lockOutbox(t, fx.pool)
	logs := newLines()
	m := &leaseCounter{}
	// The first renewal runs a third of the lease after the claim; the local deadline comes
	// at four fifths of it.
	r, err := relay.New(relay.Options{Store: fx.store, Config: relay.Config{ClaimTimeout: 6 * time.Second},
		Sources: testSources, Metrics: m, Logger: slog.New(logs)})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan relay.Summary, 1)
	go func() { done <- r.RunOnce(context.Background()) }()
	sum := await(t, done, time.Minute)
	release()

	if want := (relay.Summary{Claimed: 1, ClaimsLost: 1}); sum != want {
		t.Errorf("summary = %+v, want %+v: the failed renewal, not the local deadline, stopped the forward", sum, want)
	}
	if n := m.claimsLost.Load(); n != 1 {
		t.Errorf("queuebox_claims_lost_total{component=inbox} moved by %d, want 1", n)
	}
	if n := m.deadlines.Load(); n != 0 {
		t.Errorf("queuebox_lease_deadline_total{component=inbox} moved by %d, want 0", n)
	}
	if s := readInbox(t, fx.pool, id); s.State != store.InboxProcessing || s.LastError != "" || !s.HasToken {
		t.Errorf("inbox row = %+v, want it left processing with its claim and no last_error, for its lease to expire", s)
	}
	if rows := outboxRowsOf(t, fx.pool, id); len(rows) != 0 {
		t.Errorf("%d outbox rows for a row whose renewal failed, want none", len(rows))
	}
	failures := 0
	for _, l := range logs.all() {
		if strings.HasPrefix(l, "WARN renewing an inbox relay lease failed") {
			failures++
		}
		if strings.Contains(l, dbtest.RenewalSecret) {
			t.Errorf("a log line shows the password of the renewal's error: %s", l)
		}
	}
	if failures != 1 {
		t.Errorf("%d warning lines for the failed renewal, want one", failures)
	}
}
