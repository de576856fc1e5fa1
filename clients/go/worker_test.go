package queuebox_test

import (
	"context"
	"database/sql"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	queuebox "github.com/alternayte/queuebox/clients/go"
	"github.com/alternayte/queuebox/clients/go/internal/pgtest"
)

// pgFixture is a migrated database with a business table, and helpers to seed and read it.
type pgFixture struct {
	t  *testing.T
	db *sql.DB
}

func newPGFixture(t *testing.T) pgFixture {
	t.Helper()
	db, _ := pgtest.New(t)
	if _, err := db.Exec(`CREATE TABLE writes (idempotency_key TEXT NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	return pgFixture{t: t, db: db}
}

// seed inserts due pull rows of the source orders, one per key, in order, each its own
// aggregate.
func (f pgFixture) seed(keys ...string) {
	f.t.Helper()
	for i, k := range keys {
		_, err := f.db.Exec(`INSERT INTO inbox (source, idempotency_key, aggregate_id, payload, consumption, created_at, scheduled_at)
			VALUES ('orders', $1, $1, '{}', 'pull', clock_timestamp() - INTERVAL '1 second' + $2 * INTERVAL '1 microsecond',
			        clock_timestamp() - INTERVAL '1 second')`, k, i)
		if err != nil {
			f.t.Fatal(err)
		}
	}
}

type rowState struct {
	state     string
	attempt   int
	lastError sql.NullString
	token     sql.NullString
}

func (f pgFixture) row(key string) rowState {
	f.t.Helper()
	var r rowState
	err := f.db.QueryRow(`SELECT state, attempt, last_error, CAST(claim_token AS TEXT) FROM inbox WHERE idempotency_key = $1`, key).
		Scan(&r.state, &r.attempt, &r.lastError, &r.token)
	if err != nil {
		f.t.Fatal(err)
	}
	return r
}

func (f pgFixture) writes() int {
	f.t.Helper()
	var n int
	if err := f.db.QueryRow(`SELECT count(*) FROM writes`).Scan(&n); err != nil {
		f.t.Fatal(err)
	}
	return n
}

// waitUntil polls cond until it holds or the deadline passes.
func waitUntil(t *testing.T, what string, within time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not true within %s", what, within)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// running starts w.Run in the background and returns a function that stops it and returns
// Run's result.
func running(t *testing.T, w *queuebox.InboxWorker, h queuebox.Handler) (stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx, h) }()
	var once sync.Once
	var result error
	stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case result = <-done:
			case <-time.After(time.Minute):
				t.Fatal("Run did not return within a minute of the stop")
			}
		})
		return result
	}
	t.Cleanup(func() { _ = stop() })
	return stop
}

// TestCompletionThatChangesNoRowRollsBack: another worker takes the row while the handler
// runs (its lease ran out and a new claim issued a new token). The completion then changes no
// row, and the handler's write must not commit.
func TestCompletionThatChangesNoRowRollsBack(t *testing.T) {
	t.Parallel()
	f := newPGFixture(t)
	f.seed("m1")
	w, err := queuebox.NewInboxWorker(f.db, queuebox.Options{Source: "orders", PollInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	var returned atomic.Bool
	stop := running(t, w, func(ctx context.Context, m queuebox.Message, tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO writes VALUES ($1)`, m.IdempotencyKey); err != nil {
			return err
		}
		// Another worker's claim, on another connection: a new token.
		if _, err := f.db.ExecContext(ctx, `UPDATE inbox SET claim_token = gen_random_uuid() WHERE id = CAST($1 AS UUID)`, m.ID); err != nil {
			return err
		}
		returned.Store(true)
		return nil
	})
	waitUntil(t, "the handler returned", 10*time.Second, returned.Load)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if r := f.row("m1"); r.state != "processing" || r.attempt != 0 || r.lastError.Valid {
		t.Errorf("row = %+v, want processing, attempt 0, no last_error (the other worker owns it)", r)
	}
	if n := f.writes(); n != 0 {
		t.Errorf("%d handler writes committed, want 0", n)
	}
}

// TestHandlerPanicFailsTheRow: a panic is a failure: the writes roll back and the policy
// retries the row with the panic as last_error.
func TestHandlerPanicFailsTheRow(t *testing.T) {
	t.Parallel()
	f := newPGFixture(t)
	f.seed("m1")
	w, err := queuebox.NewInboxWorker(f.db, queuebox.Options{
		Source: "orders", PollInterval: 20 * time.Millisecond,
		RetryPolicy: queuebox.RetryPolicyFunc(func(queuebox.Message, error) queuebox.FailureAction {
			return queuebox.RetryAfter(time.Hour)
		}),
	})
	if err != nil {
		t.Fatal(err)
	}
	running(t, w, func(ctx context.Context, m queuebox.Message, tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO writes VALUES ($1)`, m.IdempotencyKey); err != nil {
			return err
		}
		panic("boom with secret=s3cr3t")
	})
	waitUntil(t, "the row is retried", 10*time.Second, func() bool { return f.row("m1").attempt == 1 })
	r := f.row("m1")
	if r.state != "pending" || r.lastError.String != "handler panicked: boom with secret=[REDACTED]" {
		t.Errorf("row = %+v", r)
	}
	if n := f.writes(); n != 0 {
		t.Errorf("%d handler writes committed, want 0", n)
	}
}

// TestStopLeavesUnstartedRowsToTheirLeases: with one handler at a time, a claimed row that
// has not started when the worker stops is not started; it spends no attempt.
func TestStopLeavesUnstartedRowsToTheirLeases(t *testing.T) {
	t.Parallel()
	f := newPGFixture(t)
	f.seed("first", "second")
	w, err := queuebox.NewInboxWorker(f.db, queuebox.Options{Source: "orders", ShutdownGrace: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var ran []string
	stop := running(t, w, func(ctx context.Context, m queuebox.Message, _ *sql.Tx) error {
		mu.Lock()
		ran = append(ran, m.IdempotencyKey)
		mu.Unlock()
		<-ctx.Done()
		return ctx.Err()
	})
	waitUntil(t, "the first handler runs", 10*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(ran) == 1
	})
	if r := f.row("second"); r.state != "processing" {
		t.Fatalf("second row = %+v, want it claimed in the same batch", r)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(ran) != 1 || ran[0] != "first" {
		t.Errorf("handlers ran for %q, want only the first row", ran)
	}
	for _, k := range []string{"first", "second"} {
		if r := f.row(k); r.state != "processing" || r.attempt != 0 || r.lastError.Valid {
			t.Errorf("row %s = %+v, want processing at attempt 0 until its lease expires", k, r)
		}
	}
}

// TestWorkerHoldsAtMostBatchPlusConcurrencyMinusOneRows: with BatchSize 3 and MaxConcurrency
// 2, the worker claims the next rows while its two handlers run, up to 3 + 2 - 1 = 4 rows held,
// and no more; the rows that wait are not started by a stop and spend no attempt.
func TestWorkerHoldsAtMostBatchPlusConcurrencyMinusOneRows(t *testing.T) {
	t.Parallel()
	f := newPGFixture(t)
	keys := []string{"r0", "r1", "r2", "r3", "r4", "r5", "r6", "r7", "r8", "r9"}
	f.seed(keys...)
	w, err := queuebox.NewInboxWorker(f.db, queuebox.Options{
		Source: "orders", BatchSize: 3, MaxConcurrency: 2, PollInterval: 20 * time.Millisecond,
		ShutdownGrace: 50 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	var started atomic.Int64
	stop := running(t, w, func(ctx context.Context, _ queuebox.Message, _ *sql.Tx) error {
		started.Add(1)
		<-ctx.Done()
		return ctx.Err()
	})
	processing := func() int {
		var n int
		if err := f.db.QueryRow(`SELECT count(*) FROM inbox WHERE state = 'processing'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	waitUntil(t, "two handlers run and four rows are held", 10*time.Second, func() bool {
		return started.Load() == 2 && processing() == 4
	})
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if n := started.Load(); n != 2 {
		t.Errorf("%d handlers started, want 2", n)
	}
	if n := processing(); n != 4 {
		t.Errorf("%d rows held after the stop, want 4 (BatchSize + MaxConcurrency - 1)", n)
	}
	var spent int
	if err := f.db.QueryRow(`SELECT count(*) FROM inbox WHERE attempt <> 0 OR last_error IS NOT NULL`).Scan(&spent); err != nil {
		t.Fatal(err)
	}
	if spent != 0 {
		t.Errorf("%d rows spent an attempt, want 0", spent)
	}
}

func TestRunMisuse(t *testing.T) {
	t.Parallel()
	f := newPGFixture(t)
	w, err := queuebox.NewInboxWorker(f.db, queuebox.Options{Source: "orders", PollInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Run(context.Background(), nil); err == nil || !strings.Contains(err.Error(), "handler") {
		t.Errorf("Run(nil handler) = %v", err)
	}
	started := make(chan struct{})
	var once sync.Once
	f.seed("m1")
	stop := running(t, w, func(context.Context, queuebox.Message, *sql.Tx) error {
		once.Do(func() { close(started) })
		return nil
	})
	<-started
	if err := w.Run(context.Background(), func(context.Context, queuebox.Message, *sql.Tx) error { return nil }); err == nil {
		t.Error("a second Run at the same time returned no error")
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	// After a stop, the worker can run again.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := w.Run(ctx, func(context.Context, queuebox.Message, *sql.Tx) error { return nil }); err != nil {
		t.Errorf("Run after a stop = %v", err)
	}
}

// TestClaimErrorsAreLoggedAndRetried: while the inbox table is missing, claims fail; the
// worker logs and keeps going, and handles the row once the table is back.
func TestClaimErrorsAreLoggedAndRetried(t *testing.T) {
	t.Parallel()
	f := newPGFixture(t)
	f.seed("m1")
	if _, err := f.db.Exec(`ALTER TABLE inbox RENAME TO inbox_away`); err != nil {
		t.Fatal(err)
	}
	var errorsLogged atomic.Int32
	logger := funcLogger(func(level, msg string, _ map[string]any) {
		if level == "ERROR" && strings.Contains(msg, "claiming") {
			errorsLogged.Add(1)
		}
	})
	w, err := queuebox.NewInboxWorker(f.db, queuebox.Options{Source: "orders", PollInterval: 20 * time.Millisecond, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	var handled atomic.Bool
	running(t, w, func(context.Context, queuebox.Message, *sql.Tx) error {
		handled.Store(true)
		return nil
	})
	waitUntil(t, "a claim error is logged", 10*time.Second, func() bool { return errorsLogged.Load() > 0 })
	if _, err := f.db.Exec(`ALTER TABLE inbox_away RENAME TO inbox`); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the row is handled", 10*time.Second, handled.Load)
	waitUntil(t, "the row is processed", 10*time.Second, func() bool { return f.row("m1").state == "processed" })
}

type funcLogger func(level, msg string, fields map[string]any)

func (f funcLogger) Info(msg string, fields map[string]any)  { f("INFO", msg, fields) }
func (f funcLogger) Warn(msg string, fields map[string]any)  { f("WARN", msg, fields) }
func (f funcLogger) Error(msg string, fields map[string]any) { f("ERROR", msg, fields) }
