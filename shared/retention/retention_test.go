package retention_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/alternayte/queuebox/shared/metrics"
	"github.com/alternayte/queuebox/shared/retention"
	"github.com/alternayte/queuebox/shared/store"
	"github.com/alternayte/queuebox/shared/store/postgres"
	"github.com/alternayte/queuebox/shared/store/postgres/dbtest"
)

// db is a private migrated database with a postgres store on it, seen through a
// countingStore.
type db struct {
	pool  *pgxpool.Pool
	store *countingStore
}

func newDB(t *testing.T) *db {
	t.Helper()
	pool, _ := dbtest.Migrated(t)
	st, err := postgres.New(pool, store.DefaultNames())
	require.NoError(t, err)
	return &db{pool: pool, store: &countingStore{Store: st}}
}

// countingStore counts the delete statements that reach the database, and can fail or
// intercept them.
type countingStore struct {
	retention.Store

	mu    sync.Mutex
	calls map[string]int
	// fail, when set, is asked before each statement; a non-nil error replaces it.
	fail func(method string, call int) error
	// after, when set, runs after each statement that succeeded.
	after func(method string, call int)
}

func (s *countingStore) count(method string) (int, error) {
	s.mu.Lock()
	if s.calls == nil {
		s.calls = map[string]int{}
	}
	s.calls[method]++
	n, fail := s.calls[method], s.fail
	s.mu.Unlock()
	if fail != nil {
		return n, fail(method, n)
	}
	return n, nil
}

func (s *countingStore) done(method string, n int) {
	s.mu.Lock()
	after := s.after
	s.mu.Unlock()
	if after != nil {
		after(method, n)
	}
}

func (s *countingStore) Calls(method string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[method]
}

func (s *countingStore) OutboxDeleteFinished(ctx context.Context, p store.DeleteFinishedParams) (int64, error) {
	n, err := s.count("OutboxDeleteFinished")
	if err != nil {
		return 0, err
	}
	defer s.done("OutboxDeleteFinished", n)
	return s.Store.OutboxDeleteFinished(ctx, p)
}

func (s *countingStore) OutboxDeleteExcess(ctx context.Context, p store.DeleteExcessParams) (int64, error) {
	n, err := s.count("OutboxDeleteExcess")
	if err != nil {
		return 0, err
	}
	defer s.done("OutboxDeleteExcess", n)
	return s.Store.OutboxDeleteExcess(ctx, p)
}

func (s *countingStore) InboxDeleteFinished(ctx context.Context, p store.DeleteFinishedParams) (int64, error) {
	n, err := s.count("InboxDeleteFinished")
	if err != nil {
		return 0, err
	}
	defer s.done("InboxDeleteFinished", n)
	return s.Store.InboxDeleteFinished(ctx, p)
}

// outboxRows inserts n outbox rows, moves them to state and makes updated_at (and
// created_at) age old, and returns their ids, oldest first. Row i is i seconds younger
// than row 0, so the rows have distinct ages. Processing rows get a claim and a live lease.
func (d *db) outboxRows(t *testing.T, n int, state, age string) []string {
	t.Helper()
	ids := make([]string, 0, n)
	rows, err := d.pool.Query(context.Background(), `
		INSERT INTO outbox (topic, key, payload)
		SELECT 'order.created', 'k-' || g, '{}'::jsonb FROM generate_series(1, $1) g
		RETURNING id::text`, n)
	require.NoError(t, err)
	for rows.Next() {
		var id string
		require.NoError(t, rows.Scan(&id))
		ids = append(ids, id)
	}
	require.NoError(t, rows.Err())
	dbtest.Exec(t, d.pool, `
		UPDATE outbox o SET state = $2::text,
		       updated_at = now() - $3::interval + (x.ord - 1) * interval '1 second',
		       created_at = now() - $3::interval + (x.ord - 1) * interval '1 second',
		       claim_token = CASE WHEN $2::text = 'processing' THEN gen_random_uuid() END,
		       lease_expires_at = CASE WHEN $2::text = 'processing' THEN now() + interval '5 minutes' END
		FROM unnest($1::uuid[]) WITH ORDINALITY AS x(id, ord)
		WHERE o.id = x.id`, ids, state, age)
	return ids
}

// inboxRows inserts n inbox rows in state whose created_at is age old, and returns their ids.
// Their processed_at is 100 days old, which the inbox policy must ignore.
func (d *db) inboxRows(t *testing.T, n int, state, age string) []string {
	t.Helper()
	var ids []string
	rows, err := d.pool.Query(context.Background(), `
		INSERT INTO inbox (source, idempotency_key, payload, state, created_at, processed_at,
		                   claim_token, lease_expires_at)
		SELECT 'stripe', gen_random_uuid()::text, '{}'::jsonb, $2::text, now() - $3::interval,
		       now() - interval '100 days',
		       CASE WHEN $2::text = 'processing' THEN gen_random_uuid() END,
		       CASE WHEN $2::text = 'processing' THEN now() + interval '5 minutes' END
		FROM generate_series(1, $1)
		RETURNING id::text`, n, state, age)
	require.NoError(t, err)
	for rows.Next() {
		var id string
		require.NoError(t, rows.Scan(&id))
		ids = append(ids, id)
	}
	require.NoError(t, rows.Err())
	return ids
}

// remaining returns which of ids still exist in table.
func (d *db) remaining(t *testing.T, table string, ids []string) []string {
	t.Helper()
	var left []string
	err := d.pool.QueryRow(context.Background(),
		fmt.Sprintf(`SELECT coalesce(array_agg(id::text), '{}') FROM %s WHERE id = ANY($1::uuid[])`, table), ids).Scan(&left)
	require.NoError(t, err)
	return left
}

func (d *db) count(t *testing.T, table string) int {
	t.Helper()
	var n int
	require.NoError(t, d.pool.QueryRow(context.Background(), fmt.Sprintf(`SELECT count(*) FROM %s`, table)).Scan(&n))
	return n
}

func concat(lists ...[]string) []string {
	var out []string
	for _, l := range lists {
		out = append(out, l...)
	}
	return out
}

func age(maxAge time.Duration, batch int) retention.TableConfig {
	return retention.TableConfig{
		Policy: retention.PolicyAge, MaxAge: maxAge,
		CleanupInterval: time.Hour, BatchSize: batch,
	}
}

func disabled() retention.TableConfig { return retention.TableConfig{}.WithDefaults() }

// recorder is a retention.Metrics that keeps every call.
type recorder struct {
	mu    sync.Mutex
	calls []cleanupCall
}

type cleanupCall struct {
	Table   string
	Deleted int64
	At      time.Time
}

func (r *recorder) Cleanup(table string, deleted int64, _ time.Duration, at time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, cleanupCall{table, deleted, at})
}

func (r *recorder) of(table string) []cleanupCall {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []cleanupCall
	for _, c := range r.calls {
		if c.Table == table {
			out = append(out, c)
		}
	}
	return out
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func newCleaner(t *testing.T, opts retention.Options) *retention.Cleaner {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = quietLogger()
	}
	c, err := retention.New(opts)
	require.NoError(t, err)
	return c
}

// startRun runs c.Run in a goroutine and returns stop, which ends it and returns its error;
// stop is safe to call more than once and runs at the end of the test.
func startRun(t *testing.T, c *retention.Cleaner) (stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	var once sync.Once
	var err error
	stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case err = <-done:
			case <-time.After(10 * time.Second):
				err = errors.New("Run did not return within 10 s after its context ended")
			}
		})
		return err
	}
	t.Cleanup(func() { _ = stop() })
	return stop
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestOutboxAgeDeletesOldFinishedRowsInBatches(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	oldSent := d.outboxRows(t, 2490, store.OutboxSent, "10 days")
	oldDead := d.outboxRows(t, 10, store.OutboxDead, "10 days")
	youngSent := d.outboxRows(t, 5, store.OutboxSent, "6 days")
	youngDead := d.outboxRows(t, 5, store.OutboxDead, "1 hour")
	oldPending := d.outboxRows(t, 3, store.OutboxPending, "30 days")
	oldProcessing := d.outboxRows(t, 3, store.OutboxProcessing, "30 days")
	// The inbox is DISABLED: its old finished rows stay.
	inboxOld := d.inboxRows(t, 4, store.InboxProcessed, "90 days")

	c := newCleaner(t, retention.Options{Store: d.store, Config: retention.Config{
		Enabled: true, Outbox: age(7*24*time.Hour, 1000), Inbox: disabled(),
	}})
	sum := c.RunOnce(context.Background())

	require.NoError(t, sum.Err())
	require.Len(t, sum.Tables, 1)
	got := sum.Tables[0]
	assert.Equal(t, retention.TableOutbox, got.Table)
	assert.Equal(t, retention.PolicyAge, got.Policy)
	assert.EqualValues(t, 2500, got.Deleted)
	assert.Equal(t, 3, got.Statements, "1000 + 1000 + 500: the third batch comes back short")
	assert.True(t, got.Complete)
	assert.Equal(t, 3, d.store.Calls("OutboxDeleteFinished"))
	assert.Zero(t, d.store.Calls("InboxDeleteFinished"))

	assert.Empty(t, d.remaining(t, "outbox", concat(oldSent, oldDead)), "old sent and dead rows")
	kept := concat(youngSent, youngDead, oldPending, oldProcessing)
	assert.ElementsMatch(t, kept, d.remaining(t, "outbox", kept), "young finished rows and active rows stay")
	assert.ElementsMatch(t, inboxOld, d.remaining(t, "inbox", inboxOld))

	// A second run finds nothing: one statement that comes back empty.
	sum = c.RunOnce(context.Background())
	require.Len(t, sum.Tables, 1)
	assert.EqualValues(t, 0, sum.Tables[0].Deleted)
	assert.Equal(t, 1, sum.Tables[0].Statements)
	assert.Equal(t, len(kept), d.count(t, "outbox"))
}

func TestOutboxCountKeepsTheNewestSentAndDead(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	// Oldest first: the last three of each state are the newest.
	sent := d.outboxRows(t, 10, store.OutboxSent, "2 hours")
	dead := d.outboxRows(t, 7, store.OutboxDead, "2 hours")
	pending := d.outboxRows(t, 4, store.OutboxPending, "400 days")
	processing := d.outboxRows(t, 2, store.OutboxProcessing, "400 days")

	c := newCleaner(t, retention.Options{Store: d.store, Config: retention.Config{
		Enabled: true,
		Outbox: retention.TableConfig{
			Policy: retention.PolicyCount, MaxCount: 3,
			CleanupInterval: time.Hour, BatchSize: 2,
		},
		Inbox: disabled(),
	}})
	sum := c.RunOnce(context.Background())

	require.NoError(t, sum.Err())
	require.Len(t, sum.Tables, 1)
	got := sum.Tables[0]
	assert.Equal(t, retention.PolicyCount, got.Policy)
	assert.EqualValues(t, 7+4, got.Deleted)
	// sent: 2+2+2+1 (short); dead: 2+2+0 (short).
	assert.Equal(t, 7, got.Statements)
	assert.Equal(t, 7, d.store.Calls("OutboxDeleteExcess"))
	assert.True(t, got.Complete)

	assert.ElementsMatch(t, sent[7:], d.remaining(t, "outbox", sent), "the 3 newest sent rows")
	assert.ElementsMatch(t, dead[4:], d.remaining(t, "outbox", dead), "the 3 newest dead rows")
	active := concat(pending, processing)
	assert.ElementsMatch(t, active, d.remaining(t, "outbox", active))
}

func TestInboxAgeMeasuresFromCreatedAtAndDeletesOnlyProcessedAndDead(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	oldProcessed := d.inboxRows(t, 5, store.InboxProcessed, "31 days")
	oldDead := d.inboxRows(t, 2, store.InboxDead, "31 days")
	// processed_at is 100 days old on every row; created_at alone decides.
	youngProcessed := d.inboxRows(t, 3, store.InboxProcessed, "29 days")
	oldPending := d.inboxRows(t, 2, store.InboxPending, "365 days")
	oldProcessing := d.inboxRows(t, 2, store.InboxProcessing, "365 days")
	// The outbox is DISABLED: its old sent rows stay.
	outboxOld := d.outboxRows(t, 3, store.OutboxSent, "365 days")

	c := newCleaner(t, retention.Options{Store: d.store, Config: retention.Config{
		Enabled: true, Outbox: disabled(), Inbox: age(30*24*time.Hour, 4),
	}})
	sum := c.RunOnce(context.Background())

	require.NoError(t, sum.Err())
	require.Len(t, sum.Tables, 1)
	got := sum.Tables[0]
	assert.Equal(t, retention.TableInbox, got.Table)
	assert.EqualValues(t, 7, got.Deleted)
	assert.Equal(t, 2, got.Statements, "4 + 3 (short)")
	assert.True(t, got.Complete)

	assert.Empty(t, d.remaining(t, "inbox", concat(oldProcessed, oldDead)))
	kept := concat(youngProcessed, oldPending, oldProcessing)
	assert.ElementsMatch(t, kept, d.remaining(t, "inbox", kept))
	assert.ElementsMatch(t, outboxOld, d.remaining(t, "outbox", outboxOld))
	assert.Zero(t, d.store.Calls("OutboxDeleteFinished")+d.store.Calls("OutboxDeleteExcess"))
}

func TestNothingRunsWhenDisabled(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		cfg  retention.Config
	}{
		{name: "retention.enabled false", cfg: retention.Config{Enabled: false, Outbox: age(24*time.Hour, 10), Inbox: age(24*time.Hour, 10)}},
		{name: "both policies DISABLED", cfg: retention.Config{Enabled: true, Outbox: disabled(), Inbox: disabled()}},
		{name: "zero table blocks", cfg: retention.Config{Enabled: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			d := newDB(t)
			outboxIDs := d.outboxRows(t, 3, store.OutboxSent, "100 days")
			inboxIDs := d.inboxRows(t, 3, store.InboxProcessed, "100 days")
			rec := &recorder{}
			c := newCleaner(t, retention.Options{Store: d.store, Config: tt.cfg, Metrics: rec})

			sum := c.RunOnce(context.Background())

			assert.Empty(t, sum.Tables)
			assert.Zero(t, d.store.Calls("OutboxDeleteFinished")+d.store.Calls("OutboxDeleteExcess")+d.store.Calls("InboxDeleteFinished"))
			assert.ElementsMatch(t, outboxIDs, d.remaining(t, "outbox", outboxIDs))
			assert.ElementsMatch(t, inboxIDs, d.remaining(t, "inbox", inboxIDs))
			assert.Empty(t, rec.calls)
			assert.Equal(t, tt.cfg.Enabled, c.Status().Enabled)
			assert.Empty(t, c.Status().Tables)
		})
	}
}

func TestRunReturnsAtOnceWhenRetentionIsOff(t *testing.T) {
	t.Parallel()
	c := newCleaner(t, retention.Options{Store: &countingStore{}, Config: retention.Config{Enabled: false}})
	// A Run that waited for the context would fail the check below; the deadline is long so
	// that a loaded machine cannot make the prompt return look like a wait.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, c.Run(ctx))
	require.NoError(t, ctx.Err(), "Run waited for the context")
	assert.NoError(t, c.Check(ctx), "a disabled cleaner is never down")
}

func TestMetricsRecordPerTable(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	d.outboxRows(t, 4, store.OutboxSent, "10 days")
	d.inboxRows(t, 2, store.InboxDead, "40 days")
	reg := metrics.New("test")
	at := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	c := newCleaner(t, retention.Options{
		Store: d.store, Metrics: reg, Now: func() time.Time { return at },
		Config: retention.Config{Enabled: true, Outbox: age(7*24*time.Hour, 100), Inbox: age(30*24*time.Hour, 100)},
	})

	sum := c.RunOnce(context.Background())
	require.NoError(t, sum.Err())
	assert.EqualValues(t, 6, sum.Deleted())

	families, err := reg.Prometheus().Gather()
	require.NoError(t, err)
	values := map[string]float64{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() != "table" {
					continue
				}
				key := f.GetName() + "{" + l.GetValue() + "}"
				switch {
				case m.Counter != nil:
					values[key] = m.GetCounter().GetValue()
				case m.Gauge != nil:
					values[key] = m.GetGauge().GetValue()
				case m.Summary != nil:
					values[key] = float64(m.GetSummary().GetSampleCount())
				}
			}
		}
	}
	assert.Equal(t, map[string]float64{
		"queuebox_cleanup_messages_deleted_total{outbox}": 4,
		"queuebox_cleanup_messages_deleted_total{inbox}":  2,
		"queuebox_cleanup_duration_seconds{outbox}":       1, // one observation
		"queuebox_cleanup_duration_seconds{inbox}":        1,
		"queuebox_cleanup_duration_seconds_max{outbox}":   0, // the fixed clock measures 0 s
		"queuebox_cleanup_duration_seconds_max{inbox}":    0,
		"queuebox_cleanup_last_run_timestamp{outbox}":     float64(at.Unix()),
		"queuebox_cleanup_last_run_timestamp{inbox}":      float64(at.Unix()),
	}, values)
}

func TestRunHonoursEachTableInterval(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	first := d.outboxRows(t, 2, store.OutboxSent, "10 days")
	rec := &recorder{}
	c := newCleaner(t, retention.Options{Store: d.store, Metrics: rec, Config: retention.Config{
		Enabled: true,
		Outbox: retention.TableConfig{Policy: retention.PolicyAge, MaxAge: 7 * 24 * time.Hour,
			CleanupInterval: time.Second, BatchSize: 100},
		Inbox: retention.TableConfig{Policy: retention.PolicyAge, MaxAge: 30 * 24 * time.Hour,
			CleanupInterval: time.Hour, BatchSize: 100},
	}})

	ctx := context.Background()
	stop := startRun(t, c)

	// Both tables run at start.
	waitFor(t, 10*time.Second, "the first run of both tables", func() bool {
		return len(rec.of(retention.TableOutbox)) >= 1 && len(rec.of(retention.TableInbox)) >= 1
	})
	assert.Empty(t, d.remaining(t, "outbox", first))
	require.NoError(t, c.Check(ctx))
	assert.ErrorIs(t, c.Run(ctx), retention.ErrRunning)

	// A row that becomes old after the first run goes with a later one.
	later := d.outboxRows(t, 1, store.OutboxDead, "10 days")
	waitFor(t, 10*time.Second, "two more outbox runs", func() bool { return len(rec.of(retention.TableOutbox)) >= 3 })
	assert.Empty(t, d.remaining(t, "outbox", later))

	runs := rec.of(retention.TableOutbox)
	for i := 1; i < len(runs); i++ {
		gap := runs[i].At.Sub(runs[i-1].At)
		assert.GreaterOrEqual(t, gap, time.Second, "outbox run %d came %s after the previous one", i, gap)
	}
	assert.Len(t, rec.of(retention.TableInbox), 1, "the inbox waits its own interval of 1h")
	st := c.Status()
	require.True(t, st.Running)
	require.Len(t, st.Tables, 2)
	assert.Equal(t, retention.TableInbox, st.Tables[1].Table)
	assert.WithinDuration(t, time.Now().Add(time.Hour), st.Tables[1].NextRun, time.Minute)

	require.NoError(t, stop())
	assert.False(t, c.Status().Running)
	assert.EqualError(t, c.Check(context.Background()), "not running")
}

func TestFailedRunTurnsHealthDownUntilARetrySucceeds(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	ids := d.outboxRows(t, 3, store.OutboxSent, "10 days")
	refused := errors.New("permission denied for table outbox")
	d.store.fail = func(method string, call int) error {
		if call <= 2 {
			return refused
		}
		return nil
	}
	rec := &recorder{}
	c := newCleaner(t, retention.Options{
		Store: d.store, Metrics: rec, RetryDelay: 200 * time.Millisecond,
		Config: retention.Config{Enabled: true, Outbox: age(7*24*time.Hour, 100), Inbox: disabled()},
	})

	// RunOnce reports the failure in its summary and status, and records no metric.
	sum := c.RunOnce(context.Background())
	require.Len(t, sum.Tables, 1)
	require.ErrorIs(t, sum.Err(), refused)
	assert.False(t, sum.Tables[0].Complete)
	assert.Empty(t, rec.of(retention.TableOutbox), "a failed run does not advance the last-run timestamp")
	assert.Contains(t, c.Status().Tables[0].LastError, "permission denied")

	ctx := context.Background()
	stop := startRun(t, c)
	defer func() { require.NoError(t, stop()) }()

	waitFor(t, 10*time.Second, "the loop to start", func() bool { return c.Status().Running })
	// The second statement fails too; the cleaner is down until the retry after 200 ms.
	waitFor(t, 10*time.Second, "the retry to succeed", func() bool { return len(rec.of(retention.TableOutbox)) == 1 })
	assert.NoError(t, c.Check(ctx))
	assert.Empty(t, d.remaining(t, "outbox", ids))
	assert.Equal(t, 3, d.store.Calls("OutboxDeleteFinished"))
}

func TestHealthIsDownWhileTheLastRunFailed(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	d.store.fail = func(string, int) error { return errors.New("relation \"outbox\" does not exist") }
	c := newCleaner(t, retention.Options{
		Store: d.store, RetryDelay: time.Hour,
		Config: retention.Config{Enabled: true, Outbox: age(7*24*time.Hour, 100), Inbox: disabled()},
	})
	ctx := context.Background()
	stop := startRun(t, c)
	defer func() { require.NoError(t, stop()) }()
	waitFor(t, 10*time.Second, "the failed run", func() bool {
		return c.Status().Running && c.Status().Tables[0].LastError != ""
	})
	err := c.Check(ctx)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "cleaning the outbox")
	assert.Contains(t, err.Error(), "does not exist")
}

func TestRunOnceStopsWithoutErrorWhenTheContextEnds(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	ids := d.outboxRows(t, 250, store.OutboxSent, "10 days")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	d.store.after = func(_ string, call int) {
		if call == 1 {
			cancel()
		}
	}
	rec := &recorder{}
	c := newCleaner(t, retention.Options{Store: d.store, Metrics: rec, Config: retention.Config{
		Enabled: true, Outbox: age(7*24*time.Hour, 100), Inbox: age(30*24*time.Hour, 100),
	}})

	sum := c.RunOnce(ctx)

	require.NoError(t, sum.Err())
	require.Len(t, sum.Tables, 1, "the inbox does not start after the context ended")
	got := sum.Tables[0]
	assert.False(t, got.Complete)
	assert.EqualValues(t, 100, got.Deleted)
	assert.Equal(t, 1, got.Statements)
	assert.False(t, sum.Complete())
	assert.Len(t, d.remaining(t, "outbox", ids), 150, "the rest waits for the next run")
	assert.Empty(t, rec.calls, "an interrupted run records no metric")
	assert.Empty(t, c.Status().Tables[0].LastError)
}

func TestNewRefusesAnInvalidPolicy(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		cfg     retention.Config
		wantErr string
	}{
		{
			name:    "no store",
			wantErr: "a store is required",
		},
		{
			name:    "AGE without maxAge",
			cfg:     retention.Config{Enabled: true, Outbox: retention.TableConfig{Policy: retention.PolicyAge}},
			wantErr: "retention.outbox.maxAge is required by policy AGE",
		},
		{
			name:    "COUNT without maxCount",
			cfg:     retention.Config{Enabled: true, Outbox: retention.TableConfig{Policy: retention.PolicyCount}},
			wantErr: "retention.outbox.maxCount is required by policy COUNT",
		},
		{
			name:    "COUNT on the inbox",
			cfg:     retention.Config{Enabled: true, Inbox: retention.TableConfig{Policy: retention.PolicyCount, MaxCount: 3}},
			wantErr: `retention.inbox.policy "COUNT" is not supported for the inbox`,
		},
		{
			name:    "lower-case policy",
			cfg:     retention.Config{Enabled: true, Outbox: retention.TableConfig{Policy: "age", MaxAge: 24 * time.Hour}},
			wantErr: `retention.outbox.policy "age" is not supported`,
		},
		{
			name: "invalid but disabled",
			cfg:  retention.Config{Enabled: false, Outbox: retention.TableConfig{Policy: "age"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			opts := retention.Options{Config: tt.cfg}
			if tt.name != "no store" {
				opts.Store = &countingStore{}
			}
			_, err := retention.New(opts)
			if tt.wantErr == "" {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.wantErr)
		})
	}
}

func TestConfigWithDefaults(t *testing.T) {
	t.Parallel()
	want := retention.TableConfig{Policy: retention.PolicyDisabled, CleanupInterval: time.Hour, BatchSize: 1000}
	assert.Equal(t, retention.Config{Enabled: true, Outbox: want, Inbox: want}, retention.Config{Enabled: true}.WithDefaults())
	set := retention.TableConfig{Policy: retention.PolicyAge, MaxAge: time.Minute, CleanupInterval: time.Second, BatchSize: 5}
	assert.Equal(t, set, set.WithDefaults(), "a set field keeps its value")
}
