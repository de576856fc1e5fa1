package lambdafn

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/alternayte/queuebox/shared/emf"
	"github.com/alternayte/queuebox/shared/gctune"
	"github.com/alternayte/queuebox/shared/outbox"
	"github.com/alternayte/queuebox/shared/service"
	"github.com/alternayte/queuebox/shared/tracing"
	"github.com/alternayte/queuebox/shared/transform"
)

// Options are the inputs of Init; tests pass their own environment and log output.
type Options struct {
	// Load reads the configuration. Its Env also holds ModeVariable and MarginVariable.
	Load service.LoadOptions
	// LogOutput receives the JSON log lines. Nil means os.Stderr.
	LogOutput io.Writer
	// Engine is the JSONata engine (shared/transform/jsonata) of the function's parts. Nil:
	// the function runs no transform and links no JavaScript engine (the relay and retention
	// functions); its parts refuse a transform that they would have to compile.
	Engine transform.Compiler
	// NewTracing makes the function's tracer provider from the tracing section: otlp.New
	// (shared/tracing/otlp), which the functions whose parts record spans (poll, inbox,
	// relay) pass from their main. Nil: the function records no span and links no
	// OpenTelemetry SDK (the admin and retention functions, whose parts record none); Init
	// still refuses the tracing settings that otlp.New would refuse (tracing.Check).
	NewTracing tracing.NewFunc
}

// OSOptions returns the options of a real function: the process environment, the file
// system and os.Stderr, as the local process uses them, and engine, the JSONata engine that
// compiles every expression at load and then runs the function's transforms. The functions
// that run transforms (poll: route and destination transforms; inbox: source transforms;
// admin: the transform test) pass one from their main; the others pass nil, so that they link
// no JavaScript engine, and then no expression is compiled at load. newTracing is
// Options.NewTracing: otlp.New for the functions that record spans, nil for the others.
func OSOptions(engine transform.Compiler, newTracing tracing.NewFunc) Options {
	return Options{Load: service.OSLoadOptions(engine), LogOutput: os.Stderr, Engine: engine, NewTracing: newTracing}
}

// Runtime is what a function builds once per container, in main before Start, and reuses
// across warm invocations.
type Runtime struct {
	// Config is the loaded and validated configuration.
	Config *service.Config
	// Log is the JSON logger, with secrets redacted.
	Log *slog.Logger
	// DB is the open database: the pool and the store.
	DB *service.Database
	// Metrics receives the measurements of the cycles and of the inbox. Init sets an
	// emf.Recorder, which Start writes as CloudWatch Embedded Metric Format lines after every
	// invocation.
	Metrics Metrics
	// Settings are the driver's settings: the mode and the deadline margin.
	Settings Settings
	// Engine is the JSONata engine of the function's parts (Options.Engine), or nil.
	Engine transform.Compiler
	// Tracing is the container's tracer provider (docs/tracing.md): off unless the
	// configuration names an OTLP endpoint, and nil in a function that records no span
	// (Options.NewTracing nil). Start flushes it before every invocation returns.
	Tracing *tracing.Provider
}

// Build assembles the parts of the function that o asks for (service.Build) over the
// runtime's database, logger, metrics, engine and tracer provider, which it sets in o. It
// links every part's constructor: the functions' mains call BuildParts instead.
func (r *Runtime) Build(ctx context.Context, o service.AppOptions) (*service.App, error) {
	return service.Build(ctx, r.Config, r.options(o))
}

// BuildParts assembles the parts that o asks for among parts (service.BuildParts) over the
// runtime's database, logger, metrics, engine and tracer provider, as Build does, and no
// other: each function's main calls it with its one part instead of Build, so that the
// function links no other part.
func (r *Runtime) BuildParts(ctx context.Context, o service.AppOptions, parts ...service.Part) (*service.App, error) {
	return service.BuildParts(ctx, r.Config, r.options(o), parts...)
}

// options sets the runtime's database, logger, metrics, engine and tracer provider in o.
func (r *Runtime) options(o service.AppOptions) service.AppOptions {
	o.Database, o.Logger, o.Metrics, o.Engine, o.Tracing = r.DB, r.Log, r.Metrics, r.Engine, r.Tracing
	return o
}

// Close releases the database connections. A function never calls it (nothing runs after
// Start); tests do.
func (r *Runtime) Close() {
	if r.DB != nil {
		r.DB.Close()
	}
	if r.Tracing != nil {
		ctx, cancel := context.WithTimeout(context.Background(), service.TracingShutdownTimeout)
		defer cancel()
		_ = r.Tracing.Shutdown(ctx) // tests only: nothing is left to report to
	}
}

// Init builds the Runtime exactly as the local process builds its parts: it loads the
// configuration with service.Load (logging every warning), reads the driver's settings,
// builds the logger, and opens the database with service.Open, which waits up to
// database.startupTimeoutMs for it and, when database.migrate is true, applies the pending
// migrations (an advisory lock keeps concurrent cold starts from applying a version twice).
//
// Lambda gives a function's init phase 10 s; a database that answers later than that (within
// database.startupTimeoutMs) makes Lambda retry the init within the first invocation.
//
// Every error is a *service.StartError that prints as
// "QueueBox could not <step>. Reason: <redacted text>"; pass it to Exit.
func Init(ctx context.Context, opts Options) (*Runtime, error) {
	out := opts.LogOutput
	if out == nil {
		out = os.Stderr
	}
	level := service.NewLevel()
	log := service.NewLogger(out, level)
	cfg, warnings, err := service.Load(opts.Load)
	for _, w := range warnings {
		log.Warn("configuration warning", "warning", w.String())
	}
	if err != nil {
		return nil, service.NewStartError("load the configuration", err)
	}
	service.SetLevel(level, cfg)
	settings, err := ParseSettings(opts.Load.Env)
	if err != nil {
		return nil, service.NewStartError("read the Lambda settings", err)
	}
	log.Info("configuration loaded", "config", cfg.LogValue(),
		"lambda_mode", string(settings.Mode), "lambda_margin_ms", settings.Margin.Milliseconds(),
		"runtime", gctune.Apply(opts.Load.Env))
	db, err := service.Open(ctx, cfg, log)
	if err != nil {
		return nil, err
	}
	tp, err := startTracing(ctx, opts.NewTracing, service.TracingConfig(cfg))
	if err != nil {
		db.Close()
		return nil, service.NewStartError("start tracing", err)
	}
	return &Runtime{Config: cfg, Log: log, DB: db, Metrics: emf.New(emf.Options{}), Settings: settings, Engine: opts.Engine, Tracing: tp}, nil
}

// startTracing returns the tracer provider that newTracing makes of cfg, or, without
// newTracing, nil once cfg passes the same checks.
func startTracing(ctx context.Context, newTracing tracing.NewFunc, cfg tracing.Config) (*tracing.Provider, error) {
	if newTracing == nil {
		return nil, tracing.Check(cfg)
	}
	return newTracing(ctx, cfg)
}

// Exit prints err to stderr as "QueueBox could not <step>. Reason: ..." and ends the process
// with status 1, which makes Lambda report an init error. A main calls it when Init or the
// assembly of its cycle fails.
func Exit(err error) {
	fmt.Fprintln(os.Stderr, startErrorText(err))
	os.Exit(1)
}

func startErrorText(err error) string {
	var se *service.StartError
	if !errors.As(err, &se) {
		return service.NewStartError("start", err).Error()
	}
	return se.Error()
}

// NopMetrics discards every measurement, for tests and tools that build a handler without
// Init. A function started by Init reports through the emf.Recorder that Init sets instead.
type NopMetrics struct {
	outbox.NopMetrics
}

// HTTPResponse implements webhook.Metrics.
func (NopMetrics) HTTPResponse(string) {}

// InboxMessage implements inbox.Metrics and relay.Metrics.
func (NopMetrics) InboxMessage(string) {}

// InboxRejection implements inbox.Metrics.
func (NopMetrics) InboxRejection(string) {}

// InboxFiltered implements inbox.Metrics.
func (NopMetrics) InboxFiltered(string) {}

// InboxRelayError implements relay.Metrics.
func (NopMetrics) InboxRelayError() {}

// InboxClaimLost implements relay.Metrics.
func (NopMetrics) InboxClaimLost() {}

// InboxOldestPendingAge implements relay.Metrics.
func (NopMetrics) InboxOldestPendingAge(time.Duration) {}

// Metrics is what the functions report to: the outbox cycle and its publishers
// (service.Metrics), the HTTP inbox and the relay (service.InboxMetrics).
type Metrics interface {
	service.Metrics
	service.InboxMetrics
}

var _ Metrics = NopMetrics{}
