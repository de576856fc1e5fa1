package logical_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/alternayte/queuebox/shared/capture"
	"github.com/alternayte/queuebox/shared/health"
	"github.com/alternayte/queuebox/shared/store/changes"
	"github.com/alternayte/queuebox/shared/store/postgres/logical"
	"github.com/alternayte/queuebox/shared/store/postgres/logical/logicaltest"
	"github.com/alternayte/queuebox/shared/waker"
	"github.com/alternayte/queuebox/shared/waker/lambdawaker"
)

// server is the PostgreSQL server with wal_level = logical of this package's tests: a private
// cluster that TestMain starts and stops (the shared server runs with wal_level = replica).
var server *logicaltest.Server

func TestMain(m *testing.M) { os.Exit(logicaltest.Main(m, &server)) }

// env is one test's database and state directory.
type env struct {
	url   string
	admin *pgxpool.Pool
	dir   string
	// slotName is unique: replication slots belong to the whole cluster, which the tests share.
	slotName string
}

// newEnv creates a migrated database; publish creates the publication queuebox_outbox of the
// outbox table, as the operator does.
func newEnv(t *testing.T, publish bool) env {
	t.Helper()
	e := env{url: server.NewDatabase(t), dir: filepath.Join(t.TempDir(), "capture"),
		slotName: fmt.Sprintf("qb_slot_%d", slotSeq.Add(1))}
	e.admin = logicaltest.Pool(t, e.url)
	if publish {
		e.exec(t, `CREATE PUBLICATION queuebox_outbox FOR TABLE outbox`)
	}
	return e
}

func (e env) exec(t *testing.T, sql string, args ...any) {
	t.Helper()
	_, err := e.admin.Exec(context.Background(), sql, args...)
	require.NoError(t, err, sql)
}

func (e env) insert(t *testing.T, key string) {
	t.Helper()
	e.exec(t, `INSERT INTO outbox (topic, key, payload) VALUES ('order.created', $1, '{"n":1}')`, key)
}

func (e env) config(w waker.Waker) capture.Config {
	return capture.Config{
		Source:                 logical.Source{},
		ConnString:             e.url,
		Slot:                   e.slotName,
		StateDirectory:         e.dir,
		ReconciliationInterval: time.Hour, // only inserts and attempts wake, unless a test says otherwise
		StandbyInterval:        200 * time.Millisecond,
		MinBackoff:             50 * time.Millisecond,
		MaxBackoff:             400 * time.Millisecond,
		Waker:                  w,
		Logger:                 slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
}

// slot returns the plugin and the confirmed position of the slot, or ok false.
func (e env) slot(t *testing.T, name string) (plugin string, confirmed string, ok bool) {
	t.Helper()
	var c *string
	err := e.admin.QueryRow(context.Background(),
		`SELECT plugin, confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = $1`, name).Scan(&plugin, &c)
	if err != nil {
		return "", "", false
	}
	if c != nil {
		confirmed = *c
	}
	return plugin, confirmed, true
}

var slotSeq atomic.Int64

// counter is a Waker that counts its wakes.
type counter struct{ n atomic.Int64 }

func (c *counter) Wake() { c.n.Add(1) }

// running is a connector whose Run runs in a goroutine.
type running struct {
	*capture.Connector
	cancel context.CancelFunc
	done   chan error
}

func run(t *testing.T, cfg capture.Config) *running {
	t.Helper()
	c, err := capture.New(cfg)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{Connector: c, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- c.Run(ctx) }()
	t.Cleanup(func() { _ = r.stop(t) })
	return r
}

// stop cancels the run and returns what Run returned.
func (r *running) stop(t *testing.T) error {
	t.Helper()
	r.cancel()
	select {
	case err, ok := <-r.done:
		if ok {
			close(r.done)
		}
		return err
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return within 30 s of its cancellation")
		return nil
	}
}

func (r *running) waitStreaming(t *testing.T) {
	t.Helper()
	var last error
	deadline := time.Now().Add(60 * time.Second)
	for last = r.Check(context.Background()); last != nil; last = r.Check(context.Background()) {
		if time.Now().After(deadline) {
			t.Fatalf("capture is not streaming after 60 s: %v", last)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitFor polls cond until it holds or the timeout passes.
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

func TestRefusesToStartWithoutThePublication(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	w := &counter{}
	r := run(t, e.config(w))
	select {
	case <-r.Faulted():
	case <-time.After(60 * time.Second):
		t.Fatal("capture did not refuse to start")
	}
	const want = "capture cannot start: the publication queuebox_outbox does not exist; create it with: " +
		"CREATE PUBLICATION queuebox_outbox FOR TABLE public.outbox (QueueBox never creates or drops a publication)"
	require.EqualError(t, r.Fault(), want)
	require.EqualError(t, r.Check(context.Background()), want, "the health check reports the reason")
	var f *changes.Fault
	require.ErrorAs(t, r.Fault(), &f)
	assert.False(t, f.Recovery)

	var pubs, slots int
	require.NoError(t, e.admin.QueryRow(context.Background(), `SELECT count(*) FROM pg_publication`).Scan(&pubs))
	require.NoError(t, e.admin.QueryRow(context.Background(), `SELECT count(*) FROM pg_replication_slots WHERE database = current_database()`).Scan(&slots))
	assert.Zero(t, pubs, "QueueBox never creates a publication")
	assert.Zero(t, slots, "no slot without a publication")
	assert.EqualValues(t, 1, r.Stats().Attempts, "a fault is not retried")
	err := r.stop(t)
	require.ErrorAs(t, err, &f, "Run returns the fault")
}

func TestRefusesAPublicationWithoutTheOutboxTable(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	e.exec(t, `CREATE TABLE other (id int PRIMARY KEY)`)
	e.exec(t, `CREATE PUBLICATION queuebox_outbox FOR TABLE other`)
	r := run(t, e.config(&counter{}))
	waitFor(t, 60*time.Second, "the fault", func() bool { return r.Fault() != nil })
	require.EqualError(t, r.Fault(), "capture cannot start: the publication queuebox_outbox does not publish the outbox table "+
		`public.outbox; add it with: ALTER PUBLICATION queuebox_outbox ADD TABLE public.outbox`)
}

func TestCreatesTheSlotAndWakesOnCommittedInserts(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	w := &counter{}
	r := run(t, e.config(w))
	r.waitStreaming(t)

	plugin, _, ok := e.slot(t, e.slotName)
	require.True(t, ok, "the connector created the slot")
	assert.Equal(t, "pgoutput", plugin)

	// The state: the identity file, the row of queuebox_capture_state, offsets.dat.
	id, err := os.ReadFile(filepath.Join(e.dir, capture.IdentityFile))
	require.NoError(t, err)
	var stateID, fp string
	require.NoError(t, e.admin.QueryRow(context.Background(),
		`SELECT state_id, config_fingerprint FROM queuebox_capture_state WHERE identity_name = 'queuebox'`).Scan(&stateID, &fp))
	assert.Equal(t, stateID+"\n", string(id))
	assert.Len(t, stateID, 36)
	assert.Len(t, fp, 64)
	_, err = os.Stat(filepath.Join(e.dir, capture.OffsetsFile))
	require.NoError(t, err, "offsets.dat records the slot's starting position")

	attempts := r.Stats().Attempts
	require.EqualValues(t, 1, attempts)
	require.EqualValues(t, 1, w.n.Load(), "the attempt woke delivery once")

	e.insert(t, "k1")
	waitFor(t, 30*time.Second, "the wake of the insert", func() bool { return w.n.Load() >= 2 })

	// Updates, deletes, an uncommitted insert and a table outside the publication wake nothing;
	// a transaction with many inserts wakes once.
	e.exec(t, `UPDATE outbox SET state = 'sent'`)
	e.exec(t, `DELETE FROM outbox`)
	e.exec(t, `CREATE TABLE other (id int)`)
	e.exec(t, `INSERT INTO other VALUES (1)`)
	tx, err := e.admin.Begin(context.Background())
	require.NoError(t, err)
	_, err = tx.Exec(context.Background(), `INSERT INTO outbox (topic, payload) VALUES ('rolled.back', '{}')`)
	require.NoError(t, err)
	require.NoError(t, tx.Rollback(context.Background()))
	e.exec(t, `INSERT INTO outbox (topic, payload) SELECT 'many', '{}' FROM generate_series(1, 5)`)
	// Inserts counts each insert as it streams, the wake comes at its commit: wait for the
	// waker's own count, which follows the connector's Wakes.
	waitFor(t, 30*time.Second, "the wake of the multi-row insert", func() bool { return r.Stats().Inserts == 6 && w.n.Load() >= 3 })
	st := r.Stats()
	assert.EqualValues(t, 2, st.Wakes, "one wake per committed transaction with outbox inserts")
	assert.EqualValues(t, 3, w.n.Load(), "the attempt and the two transactions")

	// The position moves forward in offsets.dat and on the slot.
	handled, err := pglogrepl.ParseLSN(st.Handled)
	require.NoError(t, err)
	waitFor(t, 30*time.Second, "offsets.dat at the handled position", func() bool {
		lsn, ok := readOffsets(t, e)
		return ok && lsn >= handled
	})
	waitFor(t, 30*time.Second, "the slot's confirmed position", func() bool {
		_, confirmed, _ := e.slot(t, e.slotName)
		c, err := pglogrepl.ParseLSN(confirmed)
		return err == nil && c >= handled
	})
	require.NoError(t, r.stop(t))
	_, _, ok = e.slot(t, e.slotName)
	assert.True(t, ok, "QueueBox never drops the slot")
}

func readOffsets(t *testing.T, e env) (pglogrepl.LSN, bool) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(e.dir, capture.OffsetsFile))
	if err != nil {
		return 0, false
	}
	var o capture.Offsets
	require.NoError(t, json.Unmarshal(b, &o))
	lsn, err := pglogrepl.ParseLSN(o.LSN)
	require.NoError(t, err)
	assert.Equal(t, e.slotName, o.Slot)
	assert.Equal(t, "queuebox_outbox", o.Publication)
	return lsn, true
}

// fakeLambda records the Lambda Invoke calls that reach it and answers as Lambda answers an
// asynchronous invoke.
type fakeLambda struct {
	srv   *httptest.Server
	mu    sync.Mutex
	paths []string
	types []string
	at    []time.Time
}

func newFakeLambda(t *testing.T) *fakeLambda {
	f := &fakeLambda{}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		f.mu.Lock()
		f.paths = append(f.paths, r.URL.Path)
		f.types = append(f.types, r.Header.Get("X-Amz-Invocation-Type"))
		f.at = append(f.at, time.Now())
		f.mu.Unlock()
		w.WriteHeader(http.StatusAccepted)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeLambda) calls() (paths, types []string, at []time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.paths...), append([]string(nil), f.types...), append([]time.Time(nil), f.at...)
}

// TestABurstOfInsertsCostsFewInvokes commits 1 000 single-row transactions from 10
// connections while capture wakes the poll function through the debounced Lambda waker, which
// a local server records: the 1 000 wakes cost at most one invoke per debounce interval plus
// the leading and the trailing one, and the last wake is followed by an invoke.
func TestABurstOfInsertsCostsFewInvokes(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	fake := newFakeLambda(t)
	const interval = 500 * time.Millisecond
	inv, err := lambdawaker.New(context.Background(), lambdawaker.Config{
		FunctionName: "queuebox-poll", Interval: interval,
		// A real Lambda client with static credentials, pointed at the local server.
		Client: lambda.New(lambda.Options{
			Region:       "eu-west-1",
			Credentials:  credentials.NewStaticCredentialsProvider("AKIDQUEUEBOXTEST", "queuebox-test-secret", ""),
			BaseEndpoint: aws.String(fake.srv.URL),
		}),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	require.NoError(t, err)
	t.Cleanup(inv.Close)

	began := time.Now()
	r := run(t, e.config(inv))
	r.waitStreaming(t)

	const writers, each = 10, 100
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for i := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range each {
				if _, err := e.admin.Exec(context.Background(),
					`INSERT INTO outbox (topic, key, payload) VALUES ('burst', $1, '{}')`, fmt.Sprint(i*each+j)); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	waitFor(t, 60*time.Second, "1 000 insert wakes", func() bool { return r.Stats().Wakes >= writers*each })
	lastWake := time.Now()
	// The invoker always follows the last wake with an invoke that starts after it.
	waitFor(t, 30*time.Second, "the invoke after the last wake", func() bool {
		_, _, at := fake.calls()
		return len(at) > 0 && !at[len(at)-1].Before(lastWake.Add(-interval))
	})
	waitFor(t, 30*time.Second, "the invoker to count its invokes", func() bool {
		paths, _, _ := fake.calls()
		return inv.Stats().Invokes == uint64(len(paths))
	})
	elapsed := time.Since(began)
	paths, types, _ := fake.calls()
	st := inv.Stats()
	bound := 2 + int(elapsed/interval) + 1
	t.Logf("%d wakes (1 000 inserts, %d attempts) cost %d invokes in %s with a %s debounce (bound %d)",
		st.Wakes, r.Stats().Attempts, len(paths), elapsed.Round(time.Millisecond), interval, bound)
	assert.GreaterOrEqual(t, st.Wakes, uint64(writers*each))
	assert.LessOrEqual(t, len(paths), bound, "at most one invoke per interval, plus the leading and trailing")
	assert.Less(t, len(paths), 100, "a burst of 1 000 wakes costs few invokes")
	for i := range paths {
		assert.Equal(t, "/2015-03-31/functions/queuebox-poll/invocations", paths[i])
		assert.Equal(t, "Event", types[i])
	}
}

// TestRestartResumesFromOffsets stops the connector after one insert and starts a new one on
// the same state directory at once: it resumes from offsets.dat and sees only the changes
// after it. The first connector's server session may still hold the identity's lock, or the
// slot, for a moment after its stop (more so on a loaded machine): the new connector retries
// with its backoff meanwhile, so it may take more than one attempt.
func TestRestartResumesFromOffsets(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	first := run(t, e.config(&counter{}))
	first.waitStreaming(t)
	for i := range 3 {
		e.insert(t, "before-"+string(rune('a'+i)))
	}
	waitFor(t, 30*time.Second, "the first connector's wakes", func() bool { return first.Stats().Wakes >= 3 })
	handled, err := pglogrepl.ParseLSN(first.Stats().Handled)
	require.NoError(t, err)
	require.NoError(t, first.stop(t))
	recorded, ok := readOffsets(t, e)
	require.True(t, ok)
	assert.GreaterOrEqual(t, recorded, handled, "the stop recorded the handled position")
	idBefore, err := os.ReadFile(filepath.Join(e.dir, capture.IdentityFile))
	require.NoError(t, err)

	w := &counter{}
	second := run(t, e.config(w))
	second.waitStreaming(t)
	e.insert(t, "after")
	// The insert is counted before its wake and the wake before the waker's call: wait for
	// all three, then check that nothing more was read.
	waitFor(t, 30*time.Second, "the second connector's insert, its wake and the waker's call", func() bool {
		st := second.Stats()
		return st.Inserts >= 1 && st.Wakes >= 1 && w.n.Load() >= int64(st.Attempts)+1
	})
	st := second.Stats()
	t.Logf("the second connector streamed after %d attempts", st.Attempts)
	assert.EqualValues(t, 1, st.Inserts, "the changes before offsets.dat are not read again")
	assert.EqualValues(t, 1, st.Wakes)
	assert.EqualValues(t, st.Attempts+1, w.n.Load(), "the attempts and the new insert")
	idAfter, err := os.ReadFile(filepath.Join(e.dir, capture.IdentityFile))
	require.NoError(t, err)
	assert.Equal(t, string(idBefore), string(idAfter), "the identity is kept")
	require.NoError(t, second.Fault())
}

// TestReconnectsAfterTheServerEndsTheStream ends the walsender with pg_terminate_backend while
// the capture account may not log in: the connector reports the component down and retries,
// then reconnects when the account may log in again, and wakes on the next insert.
func TestReconnectsAfterTheServerEndsTheStream(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	role := fmt.Sprintf("capture_%d", time.Now().UnixNano())
	e.exec(t, `CREATE ROLE `+role+` LOGIN REPLICATION`)
	t.Cleanup(func() {
		_, _ = e.admin.Exec(context.Background(), `DROP OWNED BY `+role)
		_, _ = e.admin.Exec(context.Background(), `DROP ROLE IF EXISTS `+role)
	})
	e.exec(t, `GRANT SELECT ON outbox TO `+role)
	cfg := e.config(&counter{})
	cfg.ConnString = logicaltest.WithUser(t, e.url, role)
	cfg.StateConnString = e.url
	w := &counter{}
	cfg.Waker = w
	r := run(t, cfg)
	r.waitStreaming(t)

	e.exec(t, `ALTER ROLE `+role+` NOLOGIN`)
	var ended bool
	require.NoError(t, e.admin.QueryRow(context.Background(),
		`SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE slot_name = $1 AND active_pid IS NOT NULL`, e.slotName).Scan(&ended))
	require.True(t, ended, "the walsender was ended")

	waitFor(t, 30*time.Second, "the component down", func() bool { return r.Check(context.Background()) != nil })
	waitFor(t, 30*time.Second, "two more connection attempts", func() bool { return r.Stats().Attempts >= 3 })
	err := r.Check(context.Background())
	require.Error(t, err)
	assert.NotContains(t, err.Error(), "recovery", "a lost connection is not a fault")
	require.NoError(t, r.Fault(), "a lost connection is retried, never a fault")
	assert.GreaterOrEqual(t, w.n.Load(), int64(3), "every attempt wakes delivery")

	e.exec(t, `ALTER ROLE `+role+` LOGIN`)
	r.waitStreaming(t)
	before := r.Stats().Wakes
	e.insert(t, "after-reconnect")
	waitFor(t, 30*time.Second, "the wake after the reconnect", func() bool { return r.Stats().Wakes >= before+1 })
	_, _, ok := e.slot(t, e.slotName)
	assert.True(t, ok)
}

// sprintf fills %[1]s with the state directory, %[2]s with the state_id and %[3]s with the
// slot.
func sprintf(format, dir, stateID, slot string) string {
	return strings.NewReplacer("%[1]s", dir, "%[2]s", stateID, "%[3]s", slot).Replace(format)
}

// TestReconciliationTimerWakesWithoutEvents: with no insert at all, the timer wakes delivery.
func TestReconciliationTimerWakesWithoutEvents(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false) // no publication: capture is stopped, and the timer still wakes
	cfg := e.config(nil)
	w := &counter{}
	cfg.Waker = w
	cfg.ReconciliationInterval = 20 * time.Millisecond
	r := run(t, cfg)
	waitFor(t, 30*time.Second, "the fault", func() bool { return r.Fault() != nil })
	n := w.n.Load()
	waitFor(t, 30*time.Second, "five timer wakes after the fault", func() bool { return w.n.Load() >= n+5 })
}

// TestStateFaults: a disagreement of the state directory, queuebox_capture_state, the
// settings and the slot stops capture with the reason, and so does a second owner.
func TestStateFaults(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		// change prepares the fault after a first run recorded the state; it returns the
		// configuration of the second run.
		change func(t *testing.T, e env, cfg capture.Config) capture.Config
		want   string
	}{
		{
			name: "the state volume is missing",
			change: func(t *testing.T, e env, cfg capture.Config) capture.Config {
				cfg.StateDirectory = filepath.Join(t.TempDir(), "empty")
				return cfg
			},
			want: "capture needs recovery: the state directory %[1]s holds no capture state, but queuebox_capture_state says that the capture identity queuebox ran before (state_id %[2]s): the state volume is missing or empty",
		},
		{
			name: "the files belong to a different instance",
			change: func(t *testing.T, e env, cfg capture.Config) capture.Config {
				require.NoError(t, os.WriteFile(filepath.Join(cfg.StateDirectory, capture.IdentityFile), []byte("00000000-0000-4000-8000-000000000000\n"), 0o600))
				return cfg
			},
			want: "capture needs recovery: the state files in %[1]s belong to a different instance: they name state_id 00000000-0000-4000-8000-000000000000, and queuebox_capture_state records state_id %[2]s for the capture identity queuebox",
		},
		{
			name: "the settings changed",
			change: func(t *testing.T, e env, cfg capture.Config) capture.Config {
				e.exec(t, `CREATE PUBLICATION queuebox_outbox_v2 FOR TABLE outbox`)
				cfg.Publication = "queuebox_outbox_v2"
				return cfg
			},
			want: "capture needs recovery: the capture settings changed since the capture identity queuebox recorded its position (a new slot, publication, schema, table, host or database): the recorded position is meaningless",
		},
		{
			name: "the slot is gone",
			change: func(t *testing.T, e env, cfg capture.Config) capture.Config {
				// The server ends the stopped capture's walsender on its own time; until
				// then the slot is active and cannot be dropped (SQLSTATE 55006).
				waitFor(t, 60*time.Second, "the slot to be released by the stopped capture", func() bool {
					var active bool
					err := e.admin.QueryRow(context.Background(),
						`SELECT active FROM pg_replication_slots WHERE slot_name = $1`, e.slotName).Scan(&active)
					require.NoError(t, err)
					return !active
				})
				e.exec(t, `SELECT pg_drop_replication_slot($1)`, e.slotName)
				return cfg
			},
			want: "capture needs recovery: the replication slot %[3]s is gone, but the state files in %[1]s remain",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, true)
			cfg := e.config(&counter{})
			first := run(t, cfg)
			first.waitStreaming(t)
			require.NoError(t, first.stop(t))
			var stateID string
			require.NoError(t, e.admin.QueryRow(context.Background(),
				`SELECT state_id FROM queuebox_capture_state WHERE identity_name = 'queuebox'`).Scan(&stateID))

			cfg = tt.change(t, e, cfg)
			second := run(t, cfg)
			waitFor(t, 60*time.Second, "the fault", func() bool { return second.Fault() != nil })
			require.EqualError(t, second.Fault(), sprintf(tt.want, cfg.StateDirectory, stateID, e.slotName))
			var f *changes.Fault
			require.True(t, errors.As(second.Fault(), &f) && f.Recovery)
			require.Error(t, second.Check(context.Background()))
		})
	}
}

// TestASecondOwnerIsRefused: a second connector of the identity retries the refused lock for
// its grace window, then stops with the fault of a second owner; the owner keeps streaming.
func TestASecondOwnerIsRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	first := run(t, e.config(&counter{}))
	first.waitStreaming(t)
	cfg := e.config(&counter{})
	const grace = 2 * time.Second
	cfg.OwnerGrace = grace
	began := time.Now()
	second := run(t, cfg)
	waitFor(t, 60*time.Second, "the second owner's fault", func() bool { return second.Fault() != nil })
	assert.GreaterOrEqual(t, time.Since(began), grace, "the refusal was retried for the grace window")
	assert.Greater(t, second.Stats().Attempts, uint64(1), "the refusal was retried")
	const want = "capture cannot start: the capture identity queuebox already has an owner: " +
		"another process holds its lock; set outbox.capture.enabled to false on every replica but the one that owns capture"
	require.EqualError(t, second.Fault(), want)
	assert.Equal(t, want, publicReason(second.Connector), "the health answer shows the fault")
	var f *changes.Fault
	require.ErrorAs(t, second.stop(t), &f, "Run returns the fault")
	require.NoError(t, first.Check(context.Background()), "the owner keeps streaming")
}

// identityLock is the statement that takes the lock of the capture identity queuebox, as a
// connector's session takes it, from another connection.
const identityLock = `SELECT pg_advisory_lock(hashtextextended('queuebox.capture.queuebox', 0))`

// publicReason returns the reason that the health answer shows for the connector's check,
// or "" while the component is up.
func publicReason(c *capture.Connector) string {
	h := health.New(health.Check{Name: "outbox-capture", Probe: c.Check}).WithLogger(slog.New(slog.DiscardHandler))
	rep, _ := h.Run(context.Background())
	return rep.Components["outbox-capture"].Error
}

// TestTakesOverWhenTheOwnersSessionEnds holds the identity's lock from a separate connection
// (a previous owner whose server session is still ending) while a connector starts: the
// connector reports the refusal and retries with its backoff, then takes the identity over
// and captures once the lock is released.
func TestTakesOverWhenTheOwnersSessionEnds(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	holder, err := e.admin.Acquire(context.Background())
	require.NoError(t, err)
	defer holder.Release()
	_, err = holder.Exec(context.Background(), identityLock)
	require.NoError(t, err)

	w := &counter{}
	r := run(t, e.config(w))
	waitFor(t, 60*time.Second, "three refused attempts", func() bool { return r.Stats().Attempts >= 3 || r.Fault() != nil })
	require.NoError(t, r.Fault(), "a refusal at start is retried during the grace window")
	const refusal = "capture is retrying: the capture identity queuebox already has an owner: another process holds its lock; " +
		"set outbox.capture.enabled to false on every replica but the one that owns capture"
	waitFor(t, 30*time.Second, "the refusal as the public reason", func() bool { return publicReason(r.Connector) == refusal })
	_, _, ok := e.slot(t, e.slotName)
	assert.False(t, ok, "nothing is created before the lock is taken")

	_, err = holder.Exec(context.Background(), `SELECT pg_advisory_unlock_all()`)
	require.NoError(t, err)
	r.waitStreaming(t)
	e.insert(t, "after-takeover")
	waitFor(t, 30*time.Second, "the wake of the insert", func() bool { return r.Stats().Wakes >= 1 })
	assert.EqualValues(t, r.Stats().Attempts+1, w.n.Load(), "every attempt and the insert woke delivery")
	require.NoError(t, r.Fault())
}
