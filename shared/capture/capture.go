// Package capture is the change data capture connector of QueueBox
// (outbox.capture.mode postgres-logical and sqlserver-cdc, spec/01-change-data-capture.md and
// spec/08-capture-changes.md). It reads the change log of the database through a Source and
// wakes delivery when an insert into the outbox table commits. Capture delivers nothing:
// delivery still claims every row through SQL, and a lost wake costs latency, never a message.
//
// This package knows no dialect: the Source of Config (the seam of shared/store/changes)
// reads the log (for PostgreSQL, the logical replication slot with the pgoutput plugin,
// shared/store/postgres/logical), and the composition root (shared/service.CaptureConfig)
// builds the Config from QueueBox's configuration. A Fault is a *changes.Fault. The connector
//
//   - refuses to start when the source says that the database is not prepared (for
//     PostgreSQL, a missing publication or one that does not publish the outbox table); it
//     never creates or drops a publication;
//   - creates the slot on the first start when it is missing, and never drops it;
//   - holds a session lock of its identity for the whole run, so a second owner is refused:
//     a connector that finds the lock held before it ever owned the identity retries with its
//     backoff for OwnerGrace (30 s), counted from the first refusal, so that a restarted
//     owner whose old server session is still ending takes over, and then stops with a Fault
//     (QueueBox elects no owner); a connector that owned the identity before retries a
//     refusal without end (its own old session may not have ended yet); Check reports the
//     refusal while it retries;
//   - compares the state directory (offsets.dat, identity) with the row of
//     queuebox_capture_state and the settings, and stops with a Fault that names the reason
//     when they disagree (a decision for the operator, never retried);
//   - confirms a log position to the server (standby status updates) only after it recorded
//     it in offsets.dat, and records only positions whose changes it handled;
//   - wakes delivery on every connection attempt and at least once per
//     ReconciliationInterval (the reconciliation timer), whatever the state of the stream;
//   - reconnects after a lost connection with a backoff from 1 s to 30 s and never exits for
//     it; Check reports the component down meanwhile;
//   - records a "capture wake" span for each committed transaction that woke delivery or the
//     relay when Config.Tracer is set (docs/tracing.md); the attempts' and the
//     reconciliation timer's wakes record none, so an idle connector sends no span.
//
// SQL Server change data capture (sqlserver-cdc) is the Source of
// shared/store/sqlserver/cdc, which polls the change table of the outbox table's capture
// instance.
// spec/28-metrics.md lists no capture metric, so the connector exposes none; Stats counts what
// it saw, for tests and logs.
package capture

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"regexp"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/alternayte/queuebox/shared/health"
	"github.com/alternayte/queuebox/shared/redact"
	"github.com/alternayte/queuebox/shared/store"
	"github.com/alternayte/queuebox/shared/store/changes"
	"github.com/alternayte/queuebox/shared/waker"
)

// Defaults of Config.
const (
	DefaultReconciliationInterval = time.Second
	DefaultStandbyInterval        = 10 * time.Second
	DefaultMinBackoff             = time.Second
	DefaultMaxBackoff             = 30 * time.Second
	DefaultOwnerGrace             = 30 * time.Second
)

// namePattern is the rule of identity, slot and publication (spec/23-configuration.md).
var namePattern = regexp.MustCompile(`^[a-z][a-z0-9_]{0,62}$`)

// Config is the configuration of a Connector; shared/service.CaptureConfig builds it from
// QueueBox's configuration.
type Config struct {
	// Source reads the change log of the database (for PostgreSQL:
	// shared/store/postgres/logical.Source). Required.
	Source changes.Source
	// ConnString is the connection string of the capture connection, in the form that
	// Source's driver takes: the slot, the publication and the replication stream
	// (postgres.EndpointConnString of the capture connection on PostgreSQL). Required.
	ConnString string
	// StateConnString is the connection of the queuebox_capture_state table: database.url
	// with its credentials. Default: ConnString.
	StateConnString string
	// Identity is the name of the capture owner (outbox.capture.identity). Default: queuebox.
	Identity string
	// Publication is the publication that the operator created. Default: queuebox_outbox.
	Publication string
	// Slot is the replication slot; created when missing. Default: queuebox_outbox.
	Slot string
	// Schema and Table name the outbox table. Defaults: public and outbox.
	Schema, Table string
	// InboxTable, when the publication also publishes it (in Schema), makes an insert into it
	// wake InboxWaker. Default: empty, none.
	InboxTable string
	// StateDirectory is the durable directory of offsets.dat and identity. Required.
	StateDirectory string
	// ReconciliationInterval is the longest time between two wakes. Default 1 s.
	ReconciliationInterval time.Duration
	// StandbyInterval is the longest time between two standby status updates (and writes of
	// offsets.dat). Default 10 s; the server's wal_sender_timeout (60 s by default) must be
	// longer.
	StandbyInterval time.Duration
	// MinBackoff and MaxBackoff bound the wait between two connection attempts; it doubles
	// from MinBackoff after each failed attempt. Defaults 1 s and 30 s.
	MinBackoff, MaxBackoff time.Duration
	// OwnerGrace is how long a connector that never held the lock of its identity retries
	// while another session holds it, counted from the first refusal, before it stops with
	// the Fault of a second owner. It lets a restarted owner take over while its old session
	// still ends on the server (a deploy, or a crash whose backend still terminates). Default
	// 30 s.
	OwnerGrace time.Duration
	// Waker is woken when an insert into the outbox table commits, on every connection
	// attempt, and by the reconciliation timer. Required.
	Waker waker.Waker
	// InboxWaker is woken when an insert into InboxTable commits, and by the reconciliation
	// timer. Optional.
	InboxWaker waker.Waker
	// Logger receives the connector's log. Default slog.Default().
	Logger *slog.Logger
	// Tracer, when set, records the "capture wake" span of each committed transaction that
	// woke delivery or the relay (docs/tracing.md). Default: nil, no span.
	Tracer trace.Tracer
}

// WithDefaults returns the configuration with its zero values replaced by the defaults.
func (c Config) WithDefaults() Config {
	if c.StateConnString == "" {
		c.StateConnString = c.ConnString
	}
	if c.Identity == "" {
		c.Identity = "queuebox"
	}
	if c.Publication == "" {
		c.Publication = "queuebox_outbox"
	}
	if c.Slot == "" {
		c.Slot = "queuebox_outbox"
	}
	if c.Schema == "" {
		c.Schema = "public"
	}
	if c.Table == "" {
		c.Table = store.DefaultNames().OutboxTable
	}
	if c.ReconciliationInterval == 0 {
		c.ReconciliationInterval = DefaultReconciliationInterval
	}
	if c.StandbyInterval == 0 {
		c.StandbyInterval = DefaultStandbyInterval
	}
	if c.MinBackoff == 0 {
		c.MinBackoff = DefaultMinBackoff
	}
	if c.MaxBackoff == 0 {
		c.MaxBackoff = DefaultMaxBackoff
	}
	if c.OwnerGrace == 0 {
		c.OwnerGrace = DefaultOwnerGrace
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// settings returns what the Source needs of the configuration.
func (c Config) settings() changes.Settings {
	return changes.Settings{
		ConnString: c.ConnString, StateConnString: c.StateConnString, Identity: c.Identity,
		Publication: c.Publication, Slot: c.Slot, Schema: c.Schema, Table: c.Table,
		StateDirectory: c.StateDirectory,
	}
}

func (c Config) validate() error {
	var problems []error
	if c.Source == nil {
		problems = append(problems, errors.New("Source is nil"))
	}
	if c.ConnString == "" {
		problems = append(problems, errors.New("ConnString is empty"))
	}
	if c.StateDirectory == "" {
		problems = append(problems, errors.New("StateDirectory is empty (outbox.capture.stateDirectory)"))
	}
	if c.Waker == nil {
		problems = append(problems, errors.New("Waker is nil"))
	}
	for _, n := range []struct{ key, value string }{{"identity", c.Identity}, {"publication", c.Publication}, {"slot", c.Slot}} {
		if !namePattern.MatchString(n.value) {
			problems = append(problems, fmt.Errorf("outbox.capture.%s is %q; it must be a lower case letter, then lower case letters, digits and _, at most 63 characters", n.key, n.value))
		}
	}
	if c.ReconciliationInterval < 0 || c.StandbyInterval < 0 || c.MinBackoff < 0 || c.MaxBackoff < c.MinBackoff || c.OwnerGrace < 0 {
		problems = append(problems, errors.New("the intervals must not be negative, and MaxBackoff not below MinBackoff"))
	}
	return errors.Join(problems...)
}

// Stats counts what a Connector saw since it was created.
type Stats struct {
	// Inserts counts the inserts into the outbox table that the stream delivered.
	Inserts uint64
	// Wakes counts the wakes of Waker for committed outbox inserts (one per transaction).
	Wakes uint64
	// InboxWakes counts the wakes of InboxWaker for committed inbox inserts.
	InboxWakes uint64
	// Attempts counts the connection attempts.
	Attempts uint64
	// Handled is the log position up to which every change was handled.
	Handled string
}

// The states of a Connector.
const (
	stateStarting     = "starting"
	stateStreaming    = "streaming"
	stateDisconnected = "disconnected"
	stateStopped      = "stopped"
)

// Connector reads the replication stream and wakes delivery. Create it with New and call Run
// once; Check, Stats, Fault and Faulted are safe for concurrent use.
type Connector struct {
	cfg   Config
	log   changes.Log
	files files
	fp    string // the settings' fingerprint

	mu      sync.Mutex
	state   string
	lastErr error
	fault   *changes.Fault
	owned   bool // the identity's lock was taken once: a later refusal is retried without end

	faulted   chan struct{}
	faultOnce sync.Once

	inserts, wakes, inboxWakes, attempts atomic.Uint64
	handled                              atomic.Value     // a changes.Position
	written                              changes.Position // the position in offsets.dat; run goroutine only
}

// New validates cfg and returns a connector that has not connected yet.
func New(cfg Config) (*Connector, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("checking the capture configuration: %w", err)
	}
	log, err := cfg.Source.Open(cfg.settings())
	if err != nil {
		return nil, err
	}
	c := &Connector{
		cfg:     cfg,
		log:     log,
		files:   files{dir: cfg.StateDirectory, log: log},
		fp:      log.Fingerprint(),
		state:   stateStarting,
		faulted: make(chan struct{}),
	}
	c.handled.Store(changes.Position(""))
	return c, nil
}

// handledPosition returns the position up to which every change was handled.
func (c *Connector) handledPosition() changes.Position { return c.handled.Load().(changes.Position) }

// Check is the outbox-capture health check: nil while the stream runs; an error that says
// why otherwise (starting, disconnected with the last error, or stopped by a fault). The
// error is a health.Reason. The unauthenticated health answer shows a fault whole, since a
// Fault is QueueBox's own sentence and says what to fix (spec/20-monitoring.md: read the
// body to see a capture fault), but only the state of a disconnection: the driver's error
// can name the database user, host and database, and only the log gets it.
func (c *Connector) Check(context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch c.state {
	case stateStreaming:
		return nil
	case stateStopped:
		if c.fault != nil {
			return health.Reason(c.fault.Error(), c.fault)
		}
		return health.Reason("capture is stopped", nil)
	case stateDisconnected:
		var refused *ownerRefusal
		if errors.As(c.lastErr, &refused) {
			// QueueBox's own sentence, which names no user, host or database.
			return health.Reason("capture is retrying: "+refused.Error(), nil)
		}
		return health.Reason("capture is disconnected and reconnecting",
			fmt.Errorf("capture is disconnected and reconnecting: %w", c.lastErr))
	default:
		if c.lastErr != nil {
			return health.Reason("capture is starting", fmt.Errorf("capture is starting: %w", c.lastErr))
		}
		return health.Reason("capture is starting", nil)
	}
}

// Faulted is closed when a Fault stopped the stream.
func (c *Connector) Faulted() <-chan struct{} { return c.faulted }

// Fault returns the fault that stopped the stream, or nil.
func (c *Connector) Fault() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fault == nil {
		return nil
	}
	return c.fault
}

// Stats returns the counts so far.
func (c *Connector) Stats() Stats {
	return Stats{
		Inserts: c.inserts.Load(), Wakes: c.wakes.Load(), InboxWakes: c.inboxWakes.Load(),
		Attempts: c.attempts.Load(), Handled: c.log.FormatPosition(c.handledPosition()),
	}
}

func (c *Connector) setState(state string, err error) {
	c.mu.Lock()
	c.state, c.lastErr = state, err
	c.mu.Unlock()
}

// wakeAll wakes delivery (and the relay, when an inbox waker is set).
func (c *Connector) wakeAll() {
	c.cfg.Waker.Wake()
	if c.cfg.InboxWaker != nil {
		c.cfg.InboxWaker.Wake()
	}
}

// reconcileAll is the reconciliation timer's wake of delivery and of the relay
// (waker.Reconcile: a Lambda waker skips it when it invoked within its interval, and lets a
// wake of new work that follows invoke at once).
func (c *Connector) reconcileAll() {
	waker.Reconcile(c.cfg.Waker)
	if c.cfg.InboxWaker != nil {
		waker.Reconcile(c.cfg.InboxWaker)
	}
}

// Run streams until ctx is done, reconnecting after every lost connection with a backoff.
// The reconciliation timer wakes delivery throughout. A Fault stops the stream (Check then
// reports it and Faulted is closed) but not the timer; Run then returns the Fault when ctx is
// done, and nil otherwise.
func (c *Connector) Run(ctx context.Context) error {
	var timer sync.WaitGroup
	timer.Add(1)
	go func() {
		defer timer.Done()
		c.reconcile(ctx)
	}()
	defer timer.Wait()

	backoff := c.cfg.MinBackoff
	var refusedSince time.Time // the first refusal of the lock, while the identity was never owned
	for {
		c.attempts.Add(1)
		c.wakeAll() // every attempt wakes delivery: nothing waits for capture to recover
		streamed, err := c.session(ctx)
		if ctx.Err() != nil {
			c.setState(stateStopped, nil)
			return nil
		}
		wait := backoff
		var refused *ownerRefusal
		if errors.As(err, &refused) {
			wait, err = c.refusal(refused, &refusedSince, backoff)
		}
		var f *changes.Fault
		if errors.As(err, &f) {
			c.mu.Lock()
			c.state, c.fault = stateStopped, f
			c.mu.Unlock()
			c.faultOnce.Do(func() { close(c.faulted) })
			c.cfg.Logger.Error("capture stopped; delivery goes on through SQL at the reconciliation interval",
				"identity", c.cfg.Identity, "reason", f.Error())
			<-ctx.Done()
			return f
		}
		if streamed {
			backoff, wait = c.cfg.MinBackoff, c.cfg.MinBackoff
		}
		c.setState(stateDisconnected, err)
		if refused == nil {
			c.cfg.Logger.Warn("capture lost its connection; reconnecting", "identity", c.cfg.Identity,
				"retry_in", wait.String(), "error", redact.Error(err))
		}
		select {
		case <-ctx.Done():
			c.setState(stateStopped, nil)
			return nil
		case <-time.After(wait):
		}
		backoff = min(2*backoff, c.cfg.MaxBackoff)
	}
}

// reconcile wakes delivery once per ReconciliationInterval until ctx is done.
func (c *Connector) reconcile(ctx context.Context) {
	t := time.NewTicker(c.cfg.ReconciliationInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			c.reconcileAll()
		}
	}
}

// session makes one connection: it takes the identity's lock, checks the database and the
// state, creates the slot when needed, and streams until ctx is done or the connection
// fails. streamed tells whether the stream started.
func (c *Connector) session(ctx context.Context) (streamed bool, err error) {
	c.setState(stateStarting, nil)
	sess, err := c.log.Connect(ctx)
	if err != nil {
		return false, err
	}
	defer sess.Close()
	if err := c.lock(ctx, sess); err != nil {
		return false, err
	}
	start, create, err := c.prepare(ctx, sess)
	if err != nil {
		return false, err
	}
	if create {
		if start, err = sess.CreateSlot(ctx); err != nil {
			return false, err
		}
		if err := c.files.writeOffsets(start, c.cfg.Slot, c.cfg.Publication); err != nil {
			return false, err
		}
		c.cfg.Logger.Info("capture created the replication slot", "slot", c.cfg.Slot, "position", c.log.FormatPosition(start))
	}
	if start > c.handledPosition() {
		c.handled.Store(start)
	}
	c.written = start
	if err := sess.Start(ctx, start); err != nil {
		return false, err
	}
	c.setState(stateStreaming, nil)
	c.cfg.Logger.Info("capture is streaming", "identity", c.cfg.Identity, "slot", c.cfg.Slot,
		"publication", c.cfg.Publication, "position", c.log.FormatPosition(start))
	return true, c.stream(ctx, sess)
}

// lock takes the session lock of the identity on the session's connection, which holds it
// for the whole run.
func (c *Connector) lock(ctx context.Context, sess changes.Session) error {
	taken, err := sess.Lock(ctx)
	if err != nil {
		return err
	}
	if taken {
		c.mu.Lock()
		c.owned = true
		c.mu.Unlock()
		return nil
	}
	return &ownerRefusal{identity: c.cfg.Identity}
}

// ownerRefusal is the error of a session that found the lock of its identity held by another
// session.
type ownerRefusal struct{ identity string }

// Error returns the documented sentence of a second owner.
func (e *ownerRefusal) Error() string {
	return "the capture identity " + e.identity + " already has an owner: another process holds its lock; " +
		"set outbox.capture.enabled to false on every replica but the one that owns capture"
}

// refusal decides what a refused lock means, and returns the wait before the next attempt
// (at most backoff) and the error to report. A connector that owned the identity before
// retries without end: its own old session may not have ended on the server yet. One that
// never owned it retries until OwnerGrace has passed since its first refusal (*since), since
// a restarted owner's old session may still be ending; then the refusal becomes the Fault of a
// second owner, because QueueBox elects no owner (spec/01-change-data-capture.md, One owner).
func (c *Connector) refusal(refused *ownerRefusal, since *time.Time, backoff time.Duration) (time.Duration, error) {
	c.mu.Lock()
	owned := c.owned
	c.mu.Unlock()
	if owned {
		c.cfg.Logger.Warn("capture waits for the lock of its identity, which its previous session may still hold; retrying",
			"identity", c.cfg.Identity, "retry_in", backoff.String(), "error", refused.Error())
		return backoff, refused
	}
	now := time.Now()
	if since.IsZero() {
		*since = now
	}
	left := c.cfg.OwnerGrace - now.Sub(*since)
	if left <= 0 {
		return 0, &changes.Fault{Reason: refused.Error()}
	}
	wait := min(backoff, left)
	c.cfg.Logger.Warn("capture waits for the lock of its identity, which another session holds; retrying",
		"identity", c.cfg.Identity, "retry_in", wait.String(), "gives_up_in", left.Round(time.Millisecond).String(),
		"error", refused.Error())
	return wait, refused
}

// prepare checks the server, the publication, the slot and the recorded state, and records a
// fresh state. It returns the position to start from and whether the slot must be created.
func (c *Connector) prepare(ctx context.Context, sess changes.Session) (start changes.Position, create bool, err error) {
	in, err := sess.Inspect(ctx)
	if err != nil {
		return "", false, err
	}
	defer in.Close()
	row, hasTable, err := c.recordedState(ctx, in.States)
	if err != nil {
		return "", false, err
	}
	if err := os.MkdirAll(c.cfg.StateDirectory, 0o700); err != nil {
		return "", false, fmt.Errorf("creating the capture state directory: %w", err)
	}
	id, err := c.files.readIdentity()
	if err != nil {
		return "", false, err
	}
	offsets, hasOffsets, err := c.files.readOffsets()
	if err != nil {
		return "", false, err
	}
	if id == "" {
		if err := c.firstStart(ctx, in.States, row, hasTable, hasOffsets); err != nil {
			return "", false, err
		}
		return "", !in.SlotExists, nil
	}
	if hasTable {
		if err := c.checkRecorded(id, row); err != nil {
			return "", false, err
		}
	}
	if !in.SlotExists {
		if hasOffsets {
			return "", false, changes.Faultf(true, "the replication slot %s is gone, but the state files in %s remain", c.cfg.Slot, c.cfg.StateDirectory)
		}
		return "", true, nil // the identity was recorded, the slot not yet created
	}
	return offsets, false, nil
}

// recordedState reads the row of the identity in the state table; hasTable is false (and row
// nil) when the table does not exist.
func (c *Connector) recordedState(ctx context.Context, states store.CaptureStateStore) (row *store.CaptureStateRow, hasTable bool, err error) {
	hasTable, err = states.Exists(ctx)
	if err != nil {
		return nil, false, err
	}
	if !hasTable {
		c.cfg.Logger.Warn("the table " + StateTable + " does not exist (migration V7); capture cannot compare its state with the database")
		return nil, false, nil
	}
	if row, err = states.Read(ctx, c.cfg.Identity); err != nil {
		return nil, true, err
	}
	return row, true, nil
}

// firstStart records a new state for a state directory without an identity file: in the
// directory first, then in the state table. A directory with offsets but no identity, and an
// empty directory for an identity that the table says ran before, are Faults.
func (c *Connector) firstStart(ctx context.Context, states store.CaptureStateStore, row *store.CaptureStateRow, hasTable, hasOffsets bool) error {
	dir := c.cfg.StateDirectory
	if hasOffsets {
		return changes.Faultf(true, "the state directory %s holds %s but no %s file", dir, OffsetsFile, IdentityFile)
	}
	if row != nil {
		return changes.Faultf(true, "the state directory %s holds no capture state, but %s says that the capture identity %s ran before (state_id %s): the state volume is missing or empty",
			dir, StateTable, c.cfg.Identity, row.StateID)
	}
	id := newStateID()
	if err := c.files.writeIdentity(id); err != nil {
		return err
	}
	if hasTable {
		got, err := states.Insert(ctx, c.cfg.Identity, store.CaptureStateRow{StateID: id, Fingerprint: c.fp})
		if err != nil {
			return err
		}
		if got == nil || got.StateID != id {
			return changes.Faultf(true, "another process recorded the capture identity %s in %s at the same time", c.cfg.Identity, StateTable)
		}
	}
	c.cfg.Logger.Info("capture recorded a new state", "identity", c.cfg.Identity, "state_id", id, "directory", dir)
	return nil
}

// checkRecorded checks the identity file's state_id id against the identity's row of the
// state table: the row must exist, name the same state and have the same settings.
func (c *Connector) checkRecorded(id string, row *store.CaptureStateRow) error {
	dir := c.cfg.StateDirectory
	switch {
	case row == nil:
		return changes.Faultf(true, "the state files in %s belong to state_id %s, but %s has no row for the capture identity %s",
			dir, id, StateTable, c.cfg.Identity)
	case row.StateID != id:
		return changes.Faultf(true, "the state files in %s belong to a different instance: they name state_id %s, and %s records state_id %s for the capture identity %s",
			dir, id, StateTable, row.StateID, c.cfg.Identity)
	case row.Fingerprint != c.fp:
		return changes.Faultf(true, "the capture settings changed since the capture identity %s recorded its position (a new slot, publication, schema, table, host or database): the recorded position is meaningless",
			c.cfg.Identity)
	}
	return nil
}
