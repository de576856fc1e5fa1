package capture_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/alternayte/queuebox/shared/capture"
	"github.com/alternayte/queuebox/shared/health"
	"github.com/alternayte/queuebox/shared/store"
	"github.com/alternayte/queuebox/shared/store/changes"
	"github.com/alternayte/queuebox/shared/tracing"
	"github.com/alternayte/queuebox/shared/tracing/otlp"
	"github.com/alternayte/queuebox/shared/tracing/tracingtest"
)

// The connector knows no dialect: these tests drive it through a fake Source. The tests of
// the PostgreSQL source, on a real server, are in shared/store/postgres/logical.

// fakeSource is a Source whose sessions fail to connect while connectErr is set, find the
// identity's lock taken while held is set, and otherwise stream the events of events until
// the end of the context or an error of recvErr.
type fakeSource struct {
	mu         sync.Mutex
	connectErr error
	held       bool // another session holds the lock of the identity
	inspectErr error
	events     chan changes.Event
	recvErr    chan error
	slot       bool // CreateSlot created the slot
	states     *fakeStates
	confirmed  atomic.Uint64
}

func (s *fakeSource) Open(changes.Settings) (changes.Log, error) { return s, nil }
func (s *fakeSource) Fingerprint() string                        { return "fp" }
func (s *fakeSource) ParsePosition(v string) (changes.Position, error) {
	n, err := strconv.ParseUint(v, 10, 64)
	return changes.PositionOf(n), err
}
func (s *fakeSource) FormatPosition(p changes.Position) string {
	return strconv.FormatUint(p.Uint64(), 10)
}

func (s *fakeSource) Connect(context.Context) (changes.Session, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.connectErr != nil {
		return nil, s.connectErr
	}
	return fakeSession{s}, nil
}

type fakeSession struct{ s *fakeSource }

func (f fakeSession) Lock(context.Context) (bool, error) {
	f.s.mu.Lock()
	defer f.s.mu.Unlock()
	return !f.s.held, nil
}
func (f fakeSession) Inspect(context.Context) (*changes.Inspection, error) {
	if f.s.inspectErr != nil {
		return nil, f.s.inspectErr
	}
	f.s.mu.Lock()
	defer f.s.mu.Unlock()
	return &changes.Inspection{SlotExists: f.s.slot, States: f.s.states, Close: func() {}}, nil
}
func (f fakeSession) CreateSlot(context.Context) (changes.Position, error) {
	f.s.mu.Lock()
	defer f.s.mu.Unlock()
	f.s.slot = true
	return changes.PositionOf(10), nil
}
func (f fakeSession) Start(context.Context, changes.Position) error { return nil }
func (f fakeSession) Receive(ctx context.Context) (changes.Event, error) {
	select {
	case ev := <-f.s.events:
		return ev, nil
	case err := <-f.s.recvErr:
		return changes.Event{}, err
	case <-ctx.Done():
		if ctx.Err() == context.DeadlineExceeded {
			return changes.Event{}, fmt.Errorf("%w: %w", changes.ErrReceiveTimeout, ctx.Err())
		}
		return changes.Event{}, ctx.Err()
	}
}
func (f fakeSession) Confirm(_ context.Context, pos changes.Position) error {
	f.s.confirmed.Store(pos.Uint64())
	return nil
}
func (f fakeSession) Close() {}

// fakeStates is queuebox_capture_state in memory.
type fakeStates struct {
	mu   sync.Mutex
	rows map[string]store.CaptureStateRow
}

func (f *fakeStates) Exists(context.Context) (bool, error) { return true, nil }
func (f *fakeStates) Read(_ context.Context, id string) (*store.CaptureStateRow, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r, ok := f.rows[id]
	if !ok {
		return nil, nil
	}
	return &r, nil
}
func (f *fakeStates) Insert(ctx context.Context, id string, r store.CaptureStateRow) (*store.CaptureStateRow, error) {
	f.mu.Lock()
	if _, ok := f.rows[id]; !ok {
		f.rows[id] = r
	}
	f.mu.Unlock()
	return f.Read(ctx, id)
}

type counter struct{ n atomic.Int64 }

func (c *counter) Wake() { c.n.Add(1) }

func newFake() *fakeSource {
	return &fakeSource{events: make(chan changes.Event, 16), recvErr: make(chan error, 1), states: &fakeStates{rows: map[string]store.CaptureStateRow{}}}
}

func config(t *testing.T, src changes.Source, w *counter) capture.Config {
	return capture.Config{
		Source: src, ConnString: "fake", StateDirectory: filepath.Join(t.TempDir(), "capture"),
		ReconciliationInterval: time.Hour, StandbyInterval: 20 * time.Millisecond,
		MinBackoff: 5 * time.Millisecond, MaxBackoff: 20 * time.Millisecond,
		Waker: w, Logger: slog.New(slog.DiscardHandler),
	}
}

func start(t *testing.T, cfg capture.Config) (*capture.Connector, func() error) {
	t.Helper()
	c, err := capture.New(cfg)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	var once sync.Once
	var runErr error
	stop := func() error {
		once.Do(func() { cancel(); runErr = <-done })
		return runErr
	}
	t.Cleanup(func() { _ = stop() })
	return c, stop
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func TestNewRefusesAConfigurationWithoutSource(t *testing.T) {
	t.Parallel()
	cfg := config(t, nil, &counter{})
	_, err := capture.New(cfg)
	require.EqualError(t, err, "checking the capture configuration: Source is nil")
}

// settingsSource records the Settings that it was opened with.
type settingsSource struct {
	*fakeSource
	got changes.Settings
}

func (s *settingsSource) Open(set changes.Settings) (changes.Log, error) {
	s.got = set
	return s.fakeSource, nil
}

// The source opens with the connector's settings, their defaults applied.
func TestNewOpensTheSourceWithTheSettingsAndTheirDefaults(t *testing.T) {
	t.Parallel()
	src := &settingsSource{fakeSource: newFake()}
	cfg := config(t, src, &counter{})
	cfg.Identity, cfg.Schema = "node_a", "queue"
	_, err := capture.New(cfg)
	require.NoError(t, err)
	assert.Equal(t, changes.Settings{
		ConnString: "fake", StateConnString: "fake", Identity: "node_a",
		Publication: "queuebox_outbox", Slot: "queuebox_outbox", Schema: "queue", Table: "outbox",
		StateDirectory: cfg.StateDirectory,
	}, src.got)
}

// A committed transaction with outbox inserts wakes once; an insert into another table
// wakes nothing; the handled position is confirmed.
func TestWakesOnCommittedOutboxInserts(t *testing.T) {
	t.Parallel()
	src, w := newFake(), &counter{}
	c, stop := start(t, config(t, src, w))
	waitFor(t, "streaming", func() bool { return c.Check(context.Background()) == nil })
	assert.EqualValues(t, 1, w.n.Load(), "the attempt woke delivery")
	for _, ev := range []changes.Event{
		{Kind: changes.EventBegin},
		{Kind: changes.EventInsert, Schema: "public", Table: "outbox"},
		{Kind: changes.EventInsert, Schema: "public", Table: "outbox"},
		{Kind: changes.EventCommit, Position: changes.PositionOf(20)},
		{Kind: changes.EventBegin},
		{Kind: changes.EventInsert, Schema: "other", Table: "outbox"},
		{Kind: changes.EventCommit, Position: changes.PositionOf(30)},
	} {
		src.events <- ev
	}
	waitFor(t, "the confirmation of position 30", func() bool { return src.confirmed.Load() == 30 })
	st := c.Stats()
	assert.EqualValues(t, 2, st.Inserts)
	assert.EqualValues(t, 1, st.Wakes)
	assert.Equal(t, "30", st.Handled)
	assert.EqualValues(t, 2, w.n.Load())
	require.NoError(t, stop())
}

// A lost connection is retried with a backoff, and every attempt wakes delivery; it is never
// a fault.
func TestRetriesALostConnection(t *testing.T) {
	t.Parallel()
	src, w := newFake(), &counter{}
	src.connectErr = errors.New("connection refused")
	c, stop := start(t, config(t, src, w))
	waitFor(t, "three attempts", func() bool { return c.Stats().Attempts >= 3 })
	waitFor(t, "the component down and disconnected", func() bool {
		err := c.Check(context.Background())
		return err != nil && err.Error() == "capture is disconnected and reconnecting: connection refused"
	})
	require.NoError(t, c.Fault())
	assert.GreaterOrEqual(t, w.n.Load(), int64(3))
	src.mu.Lock()
	src.connectErr = nil
	src.mu.Unlock()
	waitFor(t, "streaming", func() bool { return c.Check(context.Background()) == nil })
	require.NoError(t, stop())
}

// A Fault of the source stops the stream without a retry; Run returns it.
func TestAFaultStopsTheStream(t *testing.T) {
	t.Parallel()
	src, w := newFake(), &counter{}
	src.inspectErr = changes.Faultf(false, "the database is not prepared")
	c, stop := start(t, config(t, src, w))
	select {
	case <-c.Faulted():
	case <-time.After(10 * time.Second):
		t.Fatal("no fault")
	}
	require.EqualError(t, c.Fault(), "capture cannot start: the database is not prepared")
	require.EqualError(t, c.Check(context.Background()), "capture cannot start: the database is not prepared")
	assert.EqualValues(t, 1, c.Stats().Attempts)
	var f *changes.Fault
	require.ErrorAs(t, stop(), &f)
}

// hold sets whether another session holds the lock of the identity.
func (s *fakeSource) hold(held bool) {
	s.mu.Lock()
	s.held = held
	s.mu.Unlock()
}

// publicReason returns the reason that the health answer shows for the connector's check,
// or "" while the component is up.
func publicReason(c *capture.Connector) string {
	h := health.New(health.Check{Name: "outbox-capture", Probe: c.Check}).WithLogger(slog.New(slog.DiscardHandler))
	rep, _ := h.Run(context.Background())
	return rep.Components["outbox-capture"].Error
}

// The documented refusal of a second owner, and the public reason while the connector
// retries it.
const (
	refusal = "the capture identity queuebox already has an owner: another process holds its lock; " +
		"set outbox.capture.enabled to false on every replica but the one that owns capture"
	retrying = "capture is retrying: " + refusal
)

// A connector that finds its identity's lock held at start (a restarted owner's old session
// still ending) retries with its backoff, reports the refusal, and takes over once the lock
// is free.
func TestARefusedLockAtStartIsRetriedUntilTheOwnerEnds(t *testing.T) {
	t.Parallel()
	src, w := newFake(), &counter{}
	src.hold(true)
	cfg := config(t, src, w)
	cfg.OwnerGrace = time.Minute
	c, stop := start(t, cfg)
	waitFor(t, "three refused attempts", func() bool { return c.Stats().Attempts >= 3 })
	require.NoError(t, c.Fault(), "a refusal within the grace window is no fault")
	waitFor(t, "the refusal as the public reason", func() bool { return publicReason(c) == retrying })
	assert.Equal(t, retrying, c.Check(context.Background()).Error())
	assert.EqualValues(t, c.Stats().Attempts, w.n.Load(), "every attempt woke delivery")
	src.hold(false)
	waitFor(t, "streaming", func() bool { return c.Check(context.Background()) == nil })
	require.NoError(t, c.Fault())
	require.NoError(t, stop())
}

// A connector that never owned its identity stops with the Fault of a second owner when the
// lock is still held OwnerGrace after its first refusal, and retries no more.
func TestARefusedLockStopsAtTheEndOfTheGraceWindow(t *testing.T) {
	t.Parallel()
	src, w := newFake(), &counter{}
	src.hold(true)
	cfg := config(t, src, w)
	// A grace of a second: the refusal is retried every 5 to 20 ms, and the assertion of more
	// than two attempts must not depend on a loaded machine running the second one in time.
	const grace = time.Second
	cfg.OwnerGrace = grace
	began := time.Now()
	c, stop := start(t, cfg)
	select {
	case <-c.Faulted():
	case <-time.After(10 * time.Second):
		t.Fatal("no fault after the grace window")
	}
	assert.GreaterOrEqual(t, time.Since(began), grace, "the refusal was retried for the grace window")
	require.EqualError(t, c.Fault(), "capture cannot start: "+refusal)
	require.EqualError(t, c.Check(context.Background()), "capture cannot start: "+refusal)
	assert.Equal(t, "capture cannot start: "+refusal, publicReason(c))
	attempts := c.Stats().Attempts
	assert.GreaterOrEqual(t, attempts, uint64(2), "the refusal was retried with the backoff")
	src.hold(false)
	time.Sleep(4 * cfg.MaxBackoff)
	assert.Equal(t, attempts, c.Stats().Attempts, "a fault is not retried, even once the lock is free")
	var f *changes.Fault
	require.ErrorAs(t, stop(), &f)
	assert.False(t, f.Recovery)
}

// A connector that owned its identity and lost its connection retries a refused lock without
// end: its own old session may still hold the lock on the server.
func TestAnOwnerRetriesARefusedLockWithoutEnd(t *testing.T) {
	t.Parallel()
	src, w := newFake(), &counter{}
	cfg := config(t, src, w)
	cfg.OwnerGrace = 50 * time.Millisecond
	c, stop := start(t, cfg)
	waitFor(t, "streaming", func() bool { return c.Check(context.Background()) == nil })
	src.hold(true)
	src.recvErr <- errors.New("connection reset")
	waitFor(t, "the refusal as the public reason", func() bool { return publicReason(c) == retrying })
	past := time.Now().Add(4 * cfg.OwnerGrace)
	waitFor(t, "retries beyond the grace window", func() bool { return time.Now().After(past) && c.Stats().Attempts >= 6 })
	require.NoError(t, c.Fault(), "an owner's refusal is never a fault")
	src.hold(false)
	waitFor(t, "streaming again", func() bool { return c.Check(context.Background()) == nil })
	require.NoError(t, stop())
}

// With a tracer, each committed transaction that woke delivery or the relay is one
// "capture wake" span that names the position and counts the inserts; a transaction that
// touched neither table, and the wake of the connection attempt, record none.
func TestEachWakingCommitIsACaptureWakeSpan(t *testing.T) {
	t.Parallel()
	rcv := tracingtest.NewReceiver(t)
	tp, err := otlp.New(context.Background(), tracing.Config{Endpoint: rcv.Endpoint(), ServiceName: "capture-test"})
	require.NoError(t, err)
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })

	src, w, relay := newFake(), &counter{}, &counter{}
	cfg := config(t, src, w)
	cfg.InboxTable, cfg.InboxWaker, cfg.Identity = "inbox", relay, "node_a"
	cfg.Tracer = tp.Tracer()
	c, stop := start(t, cfg)
	waitFor(t, "streaming", func() bool { return c.Check(context.Background()) == nil })
	for _, ev := range []changes.Event{
		{Kind: changes.EventBegin},
		{Kind: changes.EventInsert, Schema: "public", Table: "outbox"},
		{Kind: changes.EventInsert, Schema: "public", Table: "outbox"},
		{Kind: changes.EventCommit, Position: changes.PositionOf(20)},
		{Kind: changes.EventBegin},
		{Kind: changes.EventInsert, Schema: "public", Table: "orders"},
		{Kind: changes.EventCommit, Position: changes.PositionOf(30)},
		{Kind: changes.EventBegin},
		{Kind: changes.EventInsert, Schema: "public", Table: "inbox"},
		{Kind: changes.EventInsert, Schema: "public", Table: "outbox"},
		{Kind: changes.EventInsert, Schema: "public", Table: "inbox"},
		{Kind: changes.EventCommit, Position: changes.PositionOf(40)},
	} {
		src.events <- ev
	}
	waitFor(t, "the confirmation of position 40", func() bool { return src.confirmed.Load() == 40 })
	require.NoError(t, stop())
	require.NoError(t, tp.ForceFlush(context.Background()))

	spans := tracingtest.ByName(rcv.WaitFor(t, 10*time.Second, func(s []tracingtest.Span) bool {
		return len(tracingtest.ByName(s, "capture wake")) >= 2
	}), "capture wake")
	require.Len(t, spans, 2, "one span per commit that woke; none for the attempt or for the orders commit")
	got := map[string]map[string]string{}
	for _, s := range spans {
		assert.Empty(t, s.ParentSpanID, "a capture wake is a root span")
		assert.Equal(t, "SPAN_KIND_INTERNAL", s.Kind)
		assert.Equal(t, "capture-test", s.Service)
		assert.False(t, s.Error)
		got[s.Attributes["queuebox.capture.position"]] = s.Attributes
	}
	assert.Equal(t, map[string]map[string]string{
		"20": {"queuebox.capture.identity": "node_a", "queuebox.capture.position": "20",
			"queuebox.capture.outbox_inserts": "2", "queuebox.capture.inbox_inserts": "0"},
		"40": {"queuebox.capture.identity": "node_a", "queuebox.capture.position": "40",
			"queuebox.capture.outbox_inserts": "1", "queuebox.capture.inbox_inserts": "2"},
	}, got)
	assert.EqualValues(t, 3, w.n.Load(), "the attempt and the two commits with outbox inserts woke delivery")
	assert.EqualValues(t, 2, relay.n.Load(), "the attempt and the commit with inbox inserts woke the relay")
}
