package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/alternayte/queuebox/shared/admin"
	"github.com/alternayte/queuebox/shared/capture"
	"github.com/alternayte/queuebox/shared/config"
	"github.com/alternayte/queuebox/shared/connect"
	"github.com/alternayte/queuebox/shared/console"
	"github.com/alternayte/queuebox/shared/health"
	"github.com/alternayte/queuebox/shared/inbox"
	"github.com/alternayte/queuebox/shared/redact"
	"github.com/alternayte/queuebox/shared/relay"
	"github.com/alternayte/queuebox/shared/retention"
	"github.com/alternayte/queuebox/shared/store"
	"github.com/alternayte/queuebox/shared/tracing"
	"github.com/alternayte/queuebox/shared/transform"
	"github.com/alternayte/queuebox/shared/waker"
)

// Want says whether Build builds a part that the configuration can switch off.
type Want int

const (
	// Skip leaves the part out.
	Skip Want = iota
	// IfEnabled builds the part when the configuration switches it on (inbox.relay.enabled,
	// admin.enabled, outbox.capture.enabled), as `queuebox serve` does.
	IfEnabled
	// Always builds the part whatever its switch says: the relay function runs the relay that
	// it exists for.
	Always
	// Required builds the part and refuses a configuration that switches it off, naming the
	// program (AppOptions.Name). The capture node asks for capture with IfEnabled instead,
	// since it may run only the broker sources; it refuses itself a configuration with
	// neither.
	Required
)

// Recorder is what the assembled parts report to: the outbox cycle and its publishers, the
// HTTP inbox and the relay. When it also implements retention.Metrics, the retention cleanup
// reports to it. *metrics.Registry (queuebox serve, the capture node) and emf.Recorder (the
// Lambda functions) implement it.
type Recorder interface {
	Metrics
	InboxMetrics
}

// PoolMetrics observes the connection pool of the database that App.Open opens, and receives
// its statistics (either dialect). *metrics.PoolTracer implements it.
type PoolMetrics interface {
	store.PoolObserver
	AttachStats(stats func() store.PoolStats)
}

// Wakers are the wakers of a poller and a relay that run in another process: the capture
// node's asynchronous invokes of the poll and relay functions.
type Wakers struct {
	// Outbox is woken on every committed outbox insert. Nil: nothing.
	Outbox waker.Waker
	// Inbox is woken on inbox inserts and by the reconciliation timer. Nil: nothing.
	Inbox waker.Waker
	// Close releases them.
	Close func()
}

// AppOptions are a runtime's choices: which parts run in this process, what they report to,
// and what the runtime provides (the logger, the JSONata engine, an open database).
type AppOptions struct {
	// Logger receives the log lines of the parts. Nil: slog.Default().
	Logger *slog.Logger
	// Metrics receives the measurements. Nil: the parts discard them.
	Metrics Recorder
	// Pool, when set, observes the pool of the database that Open opens.
	Pool PoolMetrics
	// Engine is the JSONata engine (shared/transform/jsonata) of every transform and of the
	// admin transform test. The runtime passes it, so that a program that runs no transform
	// links no JavaScript engine. Nil: no part can compile a transform, so a configured route,
	// destination or source transform of a part that Build builds is refused
	// (transform.ErrNoEngine), and so are the admin routes.
	Engine transform.Compiler
	// Database is an open database that the parts use at once (the Lambda functions open it
	// in their init). Nil: the parts are bound to the database that Open opens later, so that
	// Build refuses what the configuration alone refuses before the database is waited for.
	Database *Database
	// Name is how a refusal of a Required part names the program ("the capture node").
	Name string

	// Poller builds the outbox poller, with Brokers as the connectors of the broker systems
	// that it delivers to (the connector registry, shared/service/connectors).
	Poller  bool
	Brokers []connect.Connector
	// Relay builds the inbox relay. In-process, it wakes the poller after a forward, and the
	// inbox and capture wake it.
	Relay Want
	// Retention builds the retention cleanup.
	Retention bool
	// Admin builds the admin routes, and the web console with them (docs/console.md).
	Admin Want
	// Counters feed the console's rates (metrics.Registry.Totals); nil shows none.
	Counters func() map[string]float64
	// Inbox builds the HTTP inbox, answering 503 while Draining reports true (nil: never).
	Inbox    bool
	Draining func() bool
	// Capture builds the capture connector. In-process, it wakes the poller (which then waits
	// at most outbox.capture.reconciliationIntervalMs between claims, not
	// outbox.pollIntervalMs) and the relay; otherwise it wakes RemoteWakers.
	Capture Want
	// RemoteWakers, when set, builds the wakers of the poller and the relay of another
	// process; Build calls it after the other parts. A *StartError that it returns is
	// returned as it is.
	RemoteWakers func(ctx context.Context) (Wakers, error)
	// CaptureDecides makes the outbox-capture health component decide readiness (the
	// capture node, where capture is not a side task); otherwise it is advisory
	// (spec/26-http-api.md).
	CaptureDecides bool
	// HealthPool makes the database health component probe a lazy pool of one connection on
	// database.url instead of a store (the capture node without broker sources, which opens
	// no store).
	HealthPool bool
	// Tracing is the tracer provider of the parts' spans (docs/tracing.md). Nil: Build makes
	// one from the tracing section with NewTracing (off, with no SDK, unless an endpoint is
	// configured) and Close shuts it down after the parts, flushing the spans.
	Tracing *tracing.Provider
	// NewTracing makes the tracer provider when Tracing is nil: otlp.New
	// (shared/tracing/otlp), which the runtime passes, so that a program that records no span
	// links no OpenTelemetry SDK. Nil with Tracing nil: the parts record no span, and Build
	// still refuses the tracing settings that NewTracing would refuse (tracing.Check).
	NewTracing tracing.NewFunc
	// Sources builds the broker sources (shared/service/connectors.Build); the runtime passes it,
	// so that only the programs that consume (queuebox serve, the capture node) link the
	// broker clients. Nil: no broker source runs in this process.
	Sources SourceBuilder
}

// SourceStopTimeout bounds the stop of the broker sources at shutdown: a batch whose store
// began is finished (connect.StoreTimeout bounds it) and acknowledged.
const SourceStopTimeout = 35 * time.Second

// SourceBuilder builds the broker sources of a configuration (sources.<name> of kind
// rabbitmq, kafka and nats).
type SourceBuilder func(cfg *Config, o SourceOptions) (SourceGroup, error)

// SourceOptions are what the broker sources of a process share.
type SourceOptions struct {
	// Metrics receives the inbox measurements.
	Metrics inbox.Metrics
	// Waker is told after push rows were stored: the relay of this process, or the remote
	// waker of the relay function.
	Waker inbox.Waker
	// Logger receives the log lines.
	Logger *slog.Logger
	// Engine compiles the source transforms.
	Engine transform.Compiler
	// Tracer creates the span of each stored message; nil when tracing is off.
	Tracer trace.Tracer
}

// SourceGroup is the running broker sources of a process.
type SourceGroup interface {
	// Checks returns their health components (rabbitmq.<name>, kafka.<name>, nats.<name>).
	Checks() []health.Check
	// Len is the number of sources.
	Len() int
	// Start runs every consumer, storing through sink, until Stop.
	Start(ctx context.Context, sink inbox.Inserter)
	// Stop stops the consumers (a batch whose store began is finished and acknowledged) and
	// waits up to timeout; false means one did not return in time.
	Stop(timeout time.Duration) bool
}

// App is an assembly: the parts that one runtime runs, each built once from the
// configuration, their health checks and their wake chain. Build makes it; a part that was
// not asked for (or that the configuration switches off) is nil.
type App struct {
	// Outbox is the poller and its publishers.
	Outbox *Outbox
	// Relay is the inbox relay.
	Relay *relay.Relay
	// Cleaner is the retention cleanup.
	Cleaner *retention.Cleaner
	// Admin is the admin routes.
	Admin *admin.Handler
	// Console is the web console under /console; nil when the admin routes are off or
	// admin.auth has no secret that a person can type (docs/console.md).
	Console *console.Console
	// Inbox is the HTTP inbox.
	Inbox *inbox.Handler
	// Capture is the capture connector.
	Capture *capture.Connector
	// Sources are the broker sources; nil when AppOptions.Sources is nil or none is
	// configured.
	Sources SourceGroup
	// DB is the open database: AppOptions.Database, or what Open opened.
	DB *Database

	cfg    *config.Config
	opts   AppOptions
	log    *slog.Logger
	engine transform.Compiler
	store  *boundStore
	health *store.Driver // the capture node's lazy health pool
	wakers Wakers
	// checks are the health checks of the parts that the assembly owns beyond the fixed
	// components of Checks. The broker sources (inbox consumers of RabbitMQ, Kafka and NATS)
	// add theirs here, named rabbitmq.<name>, kafka.<name> and nats.<name>.
	checks  []health.Check
	closers []func()
	tracing *tracing.Provider
}

// TracingShutdownTimeout bounds the flush of the spans when an App closes.
const TracingShutdownTimeout = 5 * time.Second

// Tracing returns the tracer provider of the parts' spans; its Tracer is nil when tracing is
// off. The Lambda functions flush it before a handler returns.
func (a *App) Tracing() *tracing.Provider { return a.tracing }

// boundStore is the store that the parts keep: it forwards to the store that Open binds, so
// that Build can build every part before the database answers. Nothing calls it before Open;
// a call would panic on the nil interface.
type boundStore struct{ store.Store }

// errNoClaimLock is the error of a lock claim on a store whose dialect does not offer the claim
// mode lock; the validation refuses outbox.claimMode lock for such a dialect first.
var errNoClaimLock = errors.New("the store does not offer outbox.claimMode lock")

// OutboxLockClaim forwards to the bound store (store.OutboxLocker).
func (b *boundStore) OutboxLockClaim(ctx context.Context, params store.OutboxClaimParams) (store.OutboxLock, []store.OutboxMessage, error) {
	if l, ok := b.Store.(store.OutboxLocker); ok {
		return l.OutboxLockClaim(ctx, params)
	}
	return nil, nil, errNoClaimLock
}

// errNoReplayStatements is the error of a replay statement on a store without them.
var errNoReplayStatements = errors.New("the store has no replay statements")

// replay returns the bound store's replay statements, or nil.
func (b *boundStore) replay() store.ReplayStore {
	rs, _ := b.Store.(store.ReplayStore)
	return rs
}

// OutboxSelectionCount forwards to the bound store (store.ReplayStore).
func (b *boundStore) OutboxSelectionCount(ctx context.Context, sel store.OutboxSelection) (int64, error) {
	if rs := b.replay(); rs != nil {
		return rs.OutboxSelectionCount(ctx, sel)
	}
	return 0, errNoReplayStatements
}

// OutboxSelectionScan forwards to the bound store (store.ReplayStore).
func (b *boundStore) OutboxSelectionScan(ctx context.Context, sel store.OutboxSelection, page store.ScanParams) ([]store.FinishedRow, error) {
	if rs := b.replay(); rs != nil {
		return rs.OutboxSelectionScan(ctx, sel, page)
	}
	return nil, errNoReplayStatements
}

// OutboxReplayBatch forwards to the bound store (store.ReplayStore).
func (b *boundStore) OutboxReplayBatch(ctx context.Context, sel store.OutboxSelection, after string, limit int) (store.ReplayBatchResult, error) {
	if rs := b.replay(); rs != nil {
		return rs.OutboxReplayBatch(ctx, sel, after, limit)
	}
	return store.ReplayBatchResult{}, errNoReplayStatements
}

// InboxSelectionCount forwards to the bound store (store.ReplayStore).
func (b *boundStore) InboxSelectionCount(ctx context.Context, sel store.InboxSelection) (int64, error) {
	if rs := b.replay(); rs != nil {
		return rs.InboxSelectionCount(ctx, sel)
	}
	return 0, errNoReplayStatements
}

// InboxSelectionScan forwards to the bound store (store.ReplayStore).
func (b *boundStore) InboxSelectionScan(ctx context.Context, sel store.InboxSelection, page store.ScanParams) ([]store.FinishedRow, error) {
	if rs := b.replay(); rs != nil {
		return rs.InboxSelectionScan(ctx, sel, page)
	}
	return nil, errNoReplayStatements
}

// InboxReplayBatch forwards to the bound store (store.ReplayStore).
func (b *boundStore) InboxReplayBatch(ctx context.Context, sel store.InboxSelection, after string, limit int) (store.ReplayBatchResult, error) {
	if rs := b.replay(); rs != nil {
		return rs.InboxReplayBatch(ctx, sel, after, limit)
	}
	return store.ReplayBatchResult{}, errNoReplayStatements
}

// Build builds the parts that o asks for from cfg, each once: in this order the capture
// settings (outbox.capture), the health pool, the outbox poller (routes, transforms,
// publishers), the relay, the retention cleanup, the admin routes, the inbox sources, the
// remote wakers and the capture connector. It refuses, with the *StartError that the start
// prints, whatever the configuration alone makes impossible; `queuebox config check` runs it
// for that without a database. Without o.Database, call Open before running a part.
func Build(ctx context.Context, cfg *Config, o AppOptions) (*App, error) {
	a := newApp(cfg, o)
	if err := a.startTracing(ctx); err != nil {
		return nil, err
	}
	if err := a.build(ctx); err != nil {
		a.Close()
		return nil, err
	}
	return a, nil
}

// newApp returns the assembly of cfg and o before any part is built.
func newApp(cfg *Config, o AppOptions) *App {
	a := &App{cfg: cfg, opts: o, log: o.Logger, engine: o.Engine, DB: o.Database, tracing: o.Tracing}
	if a.log == nil {
		a.log = slog.Default()
	}
	return a
}

// startTracing makes the tracer provider with AppOptions.NewTracing when the runtime gave
// none, and shuts it down when the App closes; without NewTracing it only checks the tracing
// settings, so that every program refuses the same ones.
func (a *App) startTracing(ctx context.Context) error {
	if a.tracing != nil {
		return nil
	}
	if a.opts.NewTracing == nil {
		if err := tracing.Check(TracingConfig(a.cfg)); err != nil {
			return startError("start tracing", err)
		}
		return nil
	}
	tp, err := a.opts.NewTracing(ctx, TracingConfig(a.cfg))
	if err != nil {
		return startError("start tracing", err)
	}
	a.tracing = tp
	a.closers = append(a.closers, func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), TracingShutdownTimeout)
		defer cancel()
		if err := tp.Shutdown(sctx); err != nil {
			a.log.Warn("flushing the spans at shutdown failed", "error", redact.Error(err))
		}
	})
	return nil
}

// wanted reports whether a part with the switch enabled is built.
func wanted(w Want, enabled bool) bool {
	return w == Always || w == Required || (w == IfEnabled && enabled)
}

func (a *App) build(ctx context.Context) error {
	st := a.bindStore()
	ccfg, withCapture, err := a.captureSettings()
	if err != nil {
		return err
	}
	steps := []func() error{
		func() error { return a.openHealthPool(ctx) },
		func() error { return a.buildOutbox(ctx, st, withCapture) },
		func() error { return a.buildRelay(st) },
		func() error { return a.buildRetention(st) },
		func() error { return a.buildAdmin(st) },
		func() error { return a.buildInbox(st) },
		func() error { return a.buildWakers(ctx) },
		a.buildSources,
	}
	for _, step := range steps {
		if err := step(); err != nil {
			return err
		}
	}
	if withCapture {
		return a.buildCapture(ccfg)
	}
	return nil
}

// bindStore returns the store the parts use: the open database's, or a bound store that Open
// binds later.
func (a *App) bindStore() store.Store {
	if a.DB != nil {
		return a.DB.Store
	}
	a.store = &boundStore{}
	return a.store
}

// captureSettings returns the capture settings when capture runs in this program, refusing a
// program that requires capture while it is off.
func (a *App) captureSettings() (capture.Config, bool, error) {
	cfg, o := a.cfg, a.opts
	if !wanted(o.Capture, cfg.Outbox.Capture.Enabled) {
		return capture.Config{}, false, nil
	}
	if o.Capture == Required && !cfg.Outbox.Capture.Enabled {
		return capture.Config{}, false, startError("start capture", fmt.Errorf(
			"outbox.capture.enabled is false (QUEUEBOX_OUTBOX_CAPTURE_ENABLED); %s needs it true and outbox.capture.mode %s", o.Name, captureModes()))
	}
	ccfg, err := CaptureConfig(cfg, waker.Nop{}, a.log)
	if err != nil {
		return capture.Config{}, false, startError("start capture", err)
	}
	return ccfg, true, nil
}

// openHealthPool opens the one-connection pool of the database health check, when asked.
func (a *App) openHealthPool(ctx context.Context) error {
	if !a.opts.HealthPool {
		return nil
	}
	cfg := a.cfg
	d, dsn, err := databaseConnString(cfg)
	if err == nil {
		a.health, err = d.OpenHealth(ctx, store.OpenConfig{
			ConnString: dsn, PoolSize: 1, ConnectTimeout: cfg.Database.ConnectionTimeoutMs.Duration(),
		})
	}
	if err != nil {
		return startError("connect to the database", err)
	}
	a.closers = append(a.closers, a.health.Close)
	return nil
}

// buildOutbox builds the outbox poller and its publishers, when asked.
func (a *App) buildOutbox(ctx context.Context, st store.Store, withCapture bool) error {
	if !a.opts.Poller {
		return nil
	}
	cfg, o := a.cfg, a.opts
	oc := OutboxConfig(cfg)
	if withCapture {
		// With capture in-process, the poller waits at most
		// outbox.capture.reconciliationIntervalMs between two claims when no event arrives,
		// instead of outbox.pollIntervalMs.
		oc.PollInterval = cfg.Outbox.Capture.ReconciliationIntervalMs.Duration()
		oc = oc.WithDefaults()
	}
	var err error
	if a.Outbox, err = newOutbox(ctx, cfg, oc, st, o.Metrics, a.engine, a.log, a.tracing.Tracer(), o.Brokers...); err != nil {
		return err
	}
	a.closers = append(a.closers, a.Outbox.Close)
	return nil
}

// buildRelay builds the inbox relay, when it runs in this program. It wakes the poller of this
// process after a cycle that forwarded rows: the poller claims them at once, not after its
// poll interval.
func (a *App) buildRelay(st store.Store) error {
	if !wanted(a.opts.Relay, a.cfg.Inbox.Relay.Enabled) {
		return nil
	}
	var outboxWaker waker.Waker
	if a.Outbox != nil {
		outboxWaker = a.Outbox.Poller
	}
	var err error
	a.Relay, err = newRelay(a.cfg, st, a.opts.Metrics, outboxWaker, a.log, a.tracing.Tracer())
	return err
}

// buildRetention builds the retention cleaner, when asked.
func (a *App) buildRetention(st store.Store) error {
	if !a.opts.Retention {
		return nil
	}
	var rm retention.Metrics
	if m, ok := a.opts.Metrics.(retention.Metrics); ok {
		rm = m
	}
	var err error
	if a.Cleaner, err = retention.New(retention.Options{Store: st, Config: RetentionConfig(a.cfg), Metrics: rm, Logger: a.log}); err != nil {
		return startError("build the retention cleanup", err)
	}
	return nil
}

// buildAdmin builds the admin routes and the console, when they run in this program.
func (a *App) buildAdmin(st store.Store) error {
	if !wanted(a.opts.Admin, a.cfg.Admin.Enabled) {
		return nil
	}
	var err error
	if a.Admin, err = newAdmin(a.cfg, st, a.engine, a.log); err != nil {
		return err
	}
	a.Console, err = newConsole(a.cfg, st, st, a.opts.Metrics, a.opts.Counters, a.log)
	return err
}

// buildInbox builds the HTTP inbox, when asked. It wakes the relay of this process after it
// stored a push row.
func (a *App) buildInbox(st store.Store) error {
	if !a.opts.Inbox {
		return nil
	}
	var inboxWaker inbox.Waker
	if a.Relay != nil {
		inboxWaker = a.Relay
	}
	var err error
	a.Inbox, err = newInboxHandler(a.cfg, st, a.opts.Metrics, inboxWaker, a.opts.Draining, a.engine, a.log, a.tracing.Tracer())
	return err
}

// buildWakers builds the wakers of another process (the capture node's Lambda invokes), when
// the runtime gives them.
func (a *App) buildWakers(ctx context.Context) error {
	if a.opts.RemoteWakers == nil {
		return nil
	}
	var err error
	if a.wakers, err = a.opts.RemoteWakers(ctx); err != nil {
		var se *StartError
		if errors.As(err, &se) {
			return err
		}
		return startError("build the wakers", err)
	}
	if a.wakers.Close != nil {
		a.closers = append(a.closers, a.wakers.Close)
	}
	return nil
}

// buildSources builds the broker sources, when the runtime gives their builder. They wake the
// relay of this process, or that of another.
func (a *App) buildSources() error {
	o := a.opts
	if o.Sources == nil {
		return nil
	}
	so := SourceOptions{Logger: a.log, Engine: a.engine, Tracer: a.tracing.Tracer()}
	if o.Metrics != nil {
		so.Metrics = o.Metrics
	}
	switch {
	case a.Relay != nil:
		so.Waker = a.Relay
	case a.wakers.Inbox != nil:
		so.Waker = a.wakers.Inbox
	}
	g, err := o.Sources(a.cfg, so)
	if err != nil {
		return startError("build the inbox sources", err)
	}
	if g != nil && g.Len() > 0 {
		a.Sources = g
		a.checks = append(a.checks, g.Checks()...)
	}
	return nil
}

// buildCapture builds the capture connector. Capture wakes the poller and the relay of this
// process, or those of another.
func (a *App) buildCapture(ccfg capture.Config) error {
	switch {
	case a.Outbox != nil:
		ccfg.Waker = waker.Func(a.Outbox.Poller.Wake)
	case a.wakers.Outbox != nil:
		ccfg.Waker = a.wakers.Outbox
	}
	switch {
	case a.Relay != nil:
		ccfg.InboxWaker = waker.Func(a.Relay.Wake)
	case a.wakers.Inbox != nil:
		ccfg.InboxWaker = a.wakers.Inbox
	}
	ccfg.Tracer = a.tracing.Tracer()
	var err error
	if a.Capture, err = capture.New(ccfg); err != nil {
		return startError("start capture", err)
	}
	return nil
}

// Open opens the database of an App built without AppOptions.Database (waiting for it, then
// migrating or checking the schema, as service.Open does) and binds the parts to it. The
// pool reports to AppOptions.Pool.
func (a *App) Open(ctx context.Context) error {
	if a.DB != nil {
		return nil
	}
	co := ConnectOptions{}
	if a.opts.Pool != nil {
		co.Tracer = a.opts.Pool
	}
	db, err := OpenWith(ctx, a.cfg, a.log, co)
	if err != nil {
		return err
	}
	if a.opts.Pool != nil {
		a.opts.Pool.AttachStats(db.PoolStats)
	}
	a.DB = db
	if a.store != nil {
		a.store.Store = db.Store
	}
	return nil
}

// Close releases what the assembly holds: the publishers, the wakers, the health pool and the
// database.
func (a *App) Close() {
	for i := len(a.closers) - 1; i >= 0; i-- {
		a.closers[i]()
	}
	a.closers = nil
	if a.DB != nil && a.DB != a.opts.Database {
		a.DB.Close()
	}
}

// Engine returns the JSONata engine of the assembly (AppOptions.Engine), or nil.
func (a *App) Engine() transform.Compiler { return a.engine }

// Checks returns the readiness checks of the parts that this process runs, in this order:
// database (the store's ping, or the health pool's), outbox-poller, inbox-relay,
// retention-service (when retention.enabled), outbox-capture (advisory, or deciding with
// AppOptions.CaptureDecides), then the checks that the parts added (see App.checks).
func (a *App) Checks() []health.Check {
	checks := []health.Check{{Name: "database", Decides: true, Probe: a.pingDatabase}}
	if a.Outbox != nil {
		checks = append(checks, health.Check{Name: "outbox-poller", Decides: true, Probe: a.Outbox.Poller.Check, Detail: a.Outbox.Poller.HeldDestinations})
	}
	if a.Relay != nil {
		checks = append(checks, health.Check{Name: "inbox-relay", Decides: true, Probe: a.Relay.Check})
	}
	if a.Cleaner != nil && a.cfg.Retention.Enabled {
		checks = append(checks, health.Check{Name: "retention-service", Decides: true, Probe: a.Cleaner.Check})
	}
	if a.Capture != nil {
		checks = append(checks, health.Check{Name: "outbox-capture", Decides: a.opts.CaptureDecides, Probe: a.Capture.Check})
	}
	return append(checks, a.checks...)
}

func (a *App) pingDatabase(ctx context.Context) error {
	if a.health != nil {
		return a.health.Ping(ctx)
	}
	return a.DB.Store.Ping(ctx)
}

// Health returns the health routes (shared/health) over Checks, logging through the
// assembly's logger.
func (a *App) Health() *health.Handler { return health.New(a.Checks()...).WithLogger(a.log) }

// Ports returns server.httpPort and server.managementPort (0: the data port serves the
// management routes).
func (a *App) Ports() (data, management int) {
	return a.cfg.Server.HTTPPort, a.cfg.Server.ManagementPort
}

// ListenAddr is the address of a process with one port: ":" and server.managementPort, or
// server.httpPort when no management port is set (the capture node).
func (a *App) ListenAddr() string {
	port := a.cfg.Server.ManagementPort
	if port == 0 {
		port = a.cfg.Server.HTTPPort
	}
	return fmt.Sprintf(":%d", port)
}

// CaptureNames returns outbox.capture.identity and outbox.capture.slot, for a start line.
func (a *App) CaptureNames() (identity, slot string) {
	return a.cfg.Outbox.Capture.Identity, a.cfg.Outbox.Capture.Slot
}

// DataHandler returns the data port (DataHandler) over the inbox: inbox.maxBodyBytes, the
// Draining of AppOptions, and management when it is not nil.
func (a *App) DataHandler(management http.Handler) http.Handler {
	return DataHandler(a.Inbox, DataOptions{MaxBodyBytes: a.cfg.Inbox.MaxBodyBytes, Draining: a.opts.Draining, Management: management})
}

// Handlers returns the handler of the data port and, when server.managementPort is set, that
// of the management port, which answers 503 too while AppOptions.Draining reports true;
// without a management port, the data port serves the management routes and mgmt is nil.
func (a *App) Handlers(management http.Handler) (data, mgmt http.Handler) {
	if a.cfg.Server.ManagementPort == 0 {
		return a.DataHandler(management), nil
	}
	return a.DataHandler(nil), inbox.Gate(management, a.opts.Draining, 0)
}
