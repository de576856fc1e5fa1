// Package service is the composition root of QueueBox: it loads the configuration (Load,
// LoadEnv), maps the tree to each component's own Config, and assembles the parts (Build): the
// database (wait, migrations, schema check, store), the outbox poller with its routes and
// publishers, the inbox relay, the retention cleanup, the admin routes, the HTTP inbox and
// the capture connector, with their health checks, their wake chain and their start errors
// (*StartError). `queuebox serve` (shared/localserver), the Lambda functions
// (shared/lambdafn) and the capture node (shared/capturenode) are thin drivers over the one
// assembly, so they all run exactly the same code.
package service

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"

	"go.opentelemetry.io/otel/trace"

	"github.com/alternayte/queuebox/shared/config"
	"github.com/alternayte/queuebox/shared/connect"
	"github.com/alternayte/queuebox/shared/connect/webhook"
	"github.com/alternayte/queuebox/shared/migrate"
	"github.com/alternayte/queuebox/shared/outbox"
	"github.com/alternayte/queuebox/shared/redact"
	"github.com/alternayte/queuebox/shared/route"
	"github.com/alternayte/queuebox/shared/store"
	"github.com/alternayte/queuebox/shared/store/dialect"
	"github.com/alternayte/queuebox/shared/transform"
)

// Version is the release of this build; the queuebox{version} metric carries it. The build
// sets it with -ldflags "-X github.com/alternayte/queuebox/shared/service.Version=...".
var Version = "0.1.0-dev"

// StartError is a failure of one step of the start. It prints as the original does:
// "QueueBox could not <step>. Reason: <redacted text>".
type StartError struct {
	Step string
	Err  error
}

// Error prints the step and the redacted reason.
func (e *StartError) Error() string {
	return "QueueBox could not " + e.Step + ". Reason: " + redact.Error(e.Err)
}

// Unwrap returns the failure of the step.
func (e *StartError) Unwrap() error { return e.Err }

// NewStartError returns the *StartError of a failed start step: the one constructor of
// StartError, which every driver calls (for a listen that fails, a capture fault, ...).
func NewStartError(step string, err error) error { return &StartError{Step: step, Err: err} }

func startError(step string, err error) error { return NewStartError(step, err) }

// NewLogger returns the process logger: JSON lines through the redaction of shared/redact,
// so no secret reaches a log. level is a slog.Level, or a *slog.LevelVar that the process sets
// from logging.level once the configuration is loaded (see NewLevel).
func NewLogger(w io.Writer, level slog.Leveler) *slog.Logger {
	return slog.New(redact.Handler(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: level})))
}

// NewLevel returns the level of a process logger before its configuration is loaded: info.
// SetLevel moves it to logging.level.
func NewLevel() *slog.LevelVar {
	lv := new(slog.LevelVar)
	lv.Set(slog.LevelInfo)
	return lv
}

// SetLevel sets lv to the configuration's logging.level.
func SetLevel(lv *slog.LevelVar, cfg *config.Config) {
	if lv != nil && cfg != nil {
		lv.Set(cfg.Logging.Level.Slog())
	}
}

// Names maps the configured table and column names to the store's names.
func Names(cfg *config.Config) store.Names {
	t := cfg.Database.Tables()
	o, i := t.OutboxColumns, t.InboxColumns
	return store.Names{
		OutboxTable: t.Outbox,
		InboxTable:  t.Inbox,
		Outbox: store.OutboxColumns{
			ID: o.ID, Topic: o.Topic, Key: o.Key, AggregateType: o.AggregateType,
			Payload: o.Payload, Headers: o.Headers, State: o.State, Attempt: o.Attempt,
			MaxAttempts: o.MaxAttempts, ScheduledAt: o.ScheduledAt, CreatedAt: o.CreatedAt,
			UpdatedAt: o.UpdatedAt, ClaimedAt: o.ClaimedAt, ClaimToken: o.ClaimToken,
			LeaseExpiresAt: o.LeaseExpiresAt, LastError: o.LastError, Sequence: o.Sequence,
		},
		Inbox: store.InboxColumns{
			ID: i.ID, Source: i.Source, IdempotencyKey: i.IdempotencyKey,
			AggregateID: i.AggregateID, EventType: i.EventType, Payload: i.Payload,
			Headers: i.Headers, State: i.State, Consumption: i.Consumption, Attempt: i.Attempt,
			LastError: i.LastError, ScheduledAt: i.ScheduledAt, CreatedAt: i.CreatedAt,
			ProcessedAt: i.ProcessedAt, ClaimedAt: i.ClaimedAt, ClaimToken: i.ClaimToken,
			LeaseExpiresAt: i.LeaseExpiresAt, CorrelationID: i.CorrelationID,
		},
	}
}

// Database is an open database: the store, the migrations and the pool statistics.
type Database struct {
	Store store.Store
	// Migrations runs and checks the bundled migrations.
	Migrations *migrate.Runner
	// PoolStats returns a snapshot of the connection pool.
	PoolStats func() store.PoolStats
}

// Close releases the connections.
func (d *Database) Close() {
	if d.Store != nil {
		d.Store.Close()
	}
}

// ConnectOptions are the optional parts of a connection that only some processes use.
type ConnectOptions struct {
	// Tracer, when set, observes the pool of either dialect (see store.OpenConfig.Tracer):
	// the local process passes the pool tracer of shared/metrics here, so this package does
	// not link Prometheus. Default: nil, no tracer.
	Tracer store.PoolObserver
}

// Connect waits up to database.startupTimeoutMs for the database to answer and opens the
// store. It neither migrates nor checks the schema; see Prepare.
func Connect(ctx context.Context, cfg *config.Config, log *slog.Logger) (*Database, error) {
	return ConnectWith(ctx, cfg, log, ConnectOptions{})
}

// ConnectWith is Connect with options.
func ConnectWith(ctx context.Context, cfg *config.Config, log *slog.Logger, o ConnectOptions) (*Database, error) {
	drv, err := OpenDriver(ctx, cfg, log, o)
	if err != nil {
		return nil, err
	}
	runner, err := migrate.New(drv.Migration, migrate.Options{Names: drv.Names, Logger: log})
	if err != nil {
		drv.Close()
		return nil, startError("connect to the database", err)
	}
	return &Database{Store: drv.Store, Migrations: runner, PoolStats: drv.PoolStats}, nil
}

// Driver is an open dialect driver together with the names it was opened with.
type Driver struct {
	*store.Driver
	Names store.Names
}

// databaseConnString returns the dialect of database.type (the dialect table,
// shared/store/dialect) and its driver's connection string for database.url,
// database.username and database.password. The string holds the password: never log it.
func databaseConnString(cfg *config.Config) (dialect.Dialect, string, error) {
	return dialect.ConnString(string(cfg.Database.Type), cfg.Database.URL.Reveal(), cfg.Database.Username, cfg.Database.Password.Reveal())
}

// OpenDriver opens the dialect driver of database.type (the dialect table,
// shared/store/dialect), waiting up to database.startupTimeoutMs for the database to
// answer. An error is a *StartError.
func OpenDriver(ctx context.Context, cfg *config.Config, log *slog.Logger, o ConnectOptions) (*Driver, error) {
	names := Names(cfg)
	ocfg := store.OpenConfig{
		PoolSize:        cfg.Database.PoolSize,
		ConnectTimeout:  cfg.Database.ConnectionTimeoutMs.Duration(),
		AcquireTimeout:  cfg.Database.ConnectionTimeoutMs.Duration(),
		StartupTimeout:  cfg.Database.StartupTimeoutMs.Duration(),
		WaitForDatabase: migrate.LoggedWait(log, config.MaskURL(cfg.Database.URL.Reveal())),
		Names:           names,
		Tracer:          o.Tracer,
		Logger:          log,
	}
	// The dialect of database.type parses database.url into its driver's connection string.
	d, connString, err := databaseConnString(cfg)
	if err != nil {
		return nil, startError("connect to the database", err)
	}
	ocfg.ConnString = connString
	drv, err := d.Open(ctx, ocfg)
	if err != nil {
		var oe *store.OpenError
		if errors.As(err, &oe) {
			return nil, startError(oe.Step, oe.Err)
		}
		return nil, startError("connect to the database", err)
	}
	return &Driver{Driver: drv, Names: names}, nil
}

// Prepare runs the start checks of the schema: it applies the pending migrations when
// database.migrate is true (or refuses tables without a history), then checks that the inbox
// headers column and the outbox sequence column exist, and, when a destination sets a
// circuit breaker or a rate limit, that the table of their state (V1 of the QueueBox track)
// exists.
func Prepare(ctx context.Context, cfg *config.Config, db *Database, log *slog.Logger) error {
	res, err := db.Migrations.CheckStart(ctx, cfg.Database.Migrate)
	if err != nil {
		return startError("apply the database migrations", err)
	}
	if res.Message != "" {
		if res.Level == migrate.LevelWarning {
			log.Warn(res.Message)
		} else {
			log.Info(res.Message)
		}
	}
	db.withoutTrackFiles(res.Missing, log)
	if err := db.Store.CheckSchema(ctx); err != nil {
		return startError("check the database schema", err)
	}
	if err := checkDestinationState(ctx, cfg, db.Store); err != nil {
		return startError("check the database schema", err)
	}
	return nil
}

// checkDestinationState refuses to start when a destination sets circuitBreaker or rateLimit
// and the database has no table queuebox_destination_state: without it the poller could not
// keep their state, and the controls would silently be off.
func checkDestinationState(ctx context.Context, cfg *config.Config, st store.DestinationStateStore) error {
	names := cfg.StatefulDestinations()
	if len(names) == 0 {
		return nil
	}
	_, err := st.DestinationStates(ctx)
	switch {
	case errors.Is(err, store.ErrNoDestinationState):
		return fmt.Errorf("destinations %s set circuitBreaker or rateLimit, which keep their state in the table of QueueBox's own migration V1 "+
			"(migrations/queuebox, V1__add_destination_state.sql; database.migrate: true applies it at start): apply it, or remove those keys: %w",
			strings.Join(names, ", "), err)
	case err != nil:
		return fmt.Errorf("reading the table %s for the circuitBreaker and rateLimit of destinations %s: %w",
			store.DestinationStateTable, strings.Join(names, ", "), err)
	}
	return nil
}

// Open is Connect followed by Prepare.
func Open(ctx context.Context, cfg *config.Config, log *slog.Logger) (*Database, error) {
	return OpenWith(ctx, cfg, log, ConnectOptions{})
}

// OpenWith is ConnectWith followed by Prepare.
func OpenWith(ctx context.Context, cfg *config.Config, log *slog.Logger, o ConnectOptions) (*Database, error) {
	db, err := ConnectWith(ctx, cfg, log, o)
	if err != nil {
		return nil, err
	}
	if err := Prepare(ctx, cfg, db, log); err != nil {
		db.Close()
		return nil, err
	}
	return db, nil
}

// Metrics is what the assembled parts report to: the outbox measurements and the HTTP
// response classes.
type Metrics interface {
	outbox.Metrics
	webhook.Metrics
}

// Routes compiles the configured routes.
func Routes(cfg *config.Config) (*route.Table, error) {
	var routes []route.Route
	for i, r := range cfg.Routes {
		p, err := route.Compile(r.TopicPattern)
		if err != nil {
			return nil, fmt.Errorf("routes[%d].topicPattern: %w", i, err)
		}
		routes = append(routes, route.Route{
			Pattern: p, Destination: r.Destination, Index: i,
			RoutingKeyTemplate:            r.RoutingKeyTemplate,
			RoutingKeyMissingFieldDefault: r.RoutingKeyMissingFieldDefault,
		})
	}
	return route.NewTable(routes), nil
}

// Publishers builds one publisher per destination whose kind this program has a connector
// for: HTTP (shared/connect/webhook) always, as a built-in connector, and each kind of
// brokers, the connectors of the other external systems that the program's composition root
// passes (the programs that deliver outbox rows, queuebox serve and the poll function, pass
// connectors.All; the others leave the broker clients out of their binaries). The broker
// publishers connect on their first publish, so a broker that is down at start makes rows
// retry. A destination without a publisher is left out, so its rows go dead with a clear
// reason. The destination transforms compile on engine.
func Publishers(ctx context.Context, cfg *config.Config, m webhook.Metrics, engine transform.Compiler, log *slog.Logger, brokers ...connect.Connector) ([]outbox.Destination, func(), error) {
	byKind := make(map[config.DestinationKind]connect.Connector, len(brokers)+1)
	for _, c := range append(builtinConnectors(), brokers...) {
		byKind[c.Kind] = c
	}
	var dests []outbox.Destination
	var closers []func()
	closeAll := func() {
		for _, c := range closers {
			c()
		}
	}
	for name, d := range cfg.Destinations {
		c, ok := byKind[d.Kind]
		if !ok || c.Publisher == nil {
			if slices.Contains(config.DestinationKinds(Components()), d.Kind) {
				log.Warn("this program has no broker publishers (its composition root passes none of this kind); the destination's rows go dead",
					"destination", name, "kind", string(d.Kind))
			} else {
				log.Warn("no publisher in this build supports the destination kind; its rows go dead",
					"destination", name, "kind", string(d.Kind))
			}
			continue
		}
		p, closer, err := c.Publisher(ctx, connect.PublisherParams{Name: name, Destination: d, Config: cfg, Metrics: m})
		if err != nil {
			closeAll()
			return nil, nil, err
		}
		closers = append(closers, closer)
		step, err := transform.CompileStep(engine, TransformConfig(d.Transform))
		if err != nil {
			closeAll()
			return nil, nil, fmt.Errorf("destinations.%s.transform: %w", name, err)
		}
		dests = append(dests, withControls(cfg, d, outbox.Destination{Name: name, Publisher: p, Transform: step,
			Headers: Components().HeaderRule(d.Kind)}))
	}
	return dests, closeAll, nil
}

// OutboxConfig maps outbox.* to the poller's settings.
func OutboxConfig(cfg *config.Config) outbox.Config {
	o := cfg.Outbox
	return outbox.Config{
		PollInterval:         o.PollIntervalMs.Duration(),
		BatchSize:            o.BatchSize,
		Concurrency:          o.Concurrency,
		RetryBaseDelay:       o.RetryBaseDelayMs.Duration(),
		ClaimTimeout:         o.ClaimTimeoutMs.Duration(),
		PendingGaugeInterval: o.PendingGaugeIntervalMs.Duration(),
		ShutdownTimeout:      o.ShutdownTimeoutMs.Duration(),
		Retry:                RetryPolicy(cfg.EffectiveRetry(nil)),
		ClaimMode:            string(o.ClaimMode),
		HeldBatches:          heldBatches(cfg.Database.PoolSize),
	}.WithDefaults()
}

// heldBatches is how many lock claims a poller holds at once in the claim mode lock, each on a
// connection of the pool: up to 4, leaving two connections for the other statements.
func heldBatches(poolSize int) int {
	return min(max(poolSize-2, 1), 4)
}

// RetryPolicy maps a resolved retry block (outbox.retry, or a destination's over it) to the
// poller's policy. An unset maxDelayMs stays zero: the poller then caps at 60 s, or with a
// schedule at its largest entry.
func RetryPolicy(r config.EffectiveRetry) outbox.RetryPolicy {
	p := outbox.RetryPolicy{MaxDelay: r.MaxDelayMs.Duration(), NoJitter: !r.Jitter, HonorRetryAfter: r.HonorRetryAfter}
	for _, s := range r.ScheduleMs {
		p.Schedule = append(p.Schedule, s.Duration())
	}
	return p
}

// withControls sets the delivery controls of destination d on its outbox destination: its
// retry policy when it sets a retry key (each key falling back to outbox.retry's; nil leaves
// the outbox's), its circuit breaker and its rate limit.
func withControls(cfg *config.Config, d *config.Destination, od outbox.Destination) outbox.Destination {
	if d.Retry != nil && !d.Retry.IsZero() {
		p := RetryPolicy(cfg.EffectiveRetry(d))
		od.Retry = &p
	}
	if b := d.CircuitBreaker; b != nil {
		od.Breaker = &outbox.BreakerPolicy{Threshold: b.FailureThreshold, Window: b.WindowMs.Duration(), CoolDown: b.CoolDownMs.Duration()}
	}
	if r := d.RateLimit; r != nil {
		od.RateLimit = &outbox.RateLimit{RequestsPerSecond: r.RequestsPerSecond, Burst: r.Burst}
	}
	return od
}

// Outbox is the assembled outbox: the poller and what closes its publishers.
type Outbox struct {
	Poller *outbox.Poller
	close  func()
}

// Close releases the publishers.
func (o *Outbox) Close() {
	if o.close != nil {
		o.close()
	}
}

// newOutbox builds the poller with the settings oc, its routes and publishers; brokers are the
// broker destinations the program delivers to (see Publishers). Build calls it.
func newOutbox(ctx context.Context, cfg *config.Config, oc outbox.Config, st store.OutboxStore, m Metrics, engine transform.Compiler, log *slog.Logger, tracer trace.Tracer, brokers ...connect.Connector) (*Outbox, error) {
	routes, err := Routes(cfg)
	if err != nil {
		return nil, startError("build the routes", err)
	}
	routeTx := map[int]*transform.Step{}
	for i, r := range cfg.Routes {
		step, err := transform.CompileStep(engine, TransformConfig(r.Transform))
		if err != nil {
			return nil, startError("build the routes", fmt.Errorf("routes[%d].transform: %w", i, err))
		}
		if step != nil {
			routeTx[i] = step
		}
	}
	dests, closeAll, err := Publishers(ctx, cfg, m, engine, log, brokers...)
	if err != nil {
		return nil, startError("build the destinations", err)
	}
	p, err := outbox.New(outbox.Options{
		Store: st, Config: oc, Routes: routes, RouteTransforms: routeTx,
		Destinations: dests, Metrics: m, Logger: log, Tracer: tracer,
	})
	if err != nil {
		closeAll()
		return nil, startError("build the outbox poller", err)
	}
	return &Outbox{Poller: p, close: closeAll}, nil
}
