// Package localserver is the long-running local process of QueueBox: the data port (the inbox
// routes), the management port (metrics and health), and the outbox poller and the inbox relay
// in loops, all built once by the assembly of shared/service (service.Build) from the
// configuration, which also owns their health checks and their wake chain. With
// outbox.capture.enabled (postgres-logical) it also runs the capture connector of
// shared/capture in-process, which wakes the poller at once on every committed outbox insert.
// The relay wakes the poller after every cycle that forwarded rows into the outbox, capture or
// not: they share the process.
package localserver

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/alternayte/queuebox/shared/capture"
	"github.com/alternayte/queuebox/shared/metrics"
	"github.com/alternayte/queuebox/shared/openapi"
	"github.com/alternayte/queuebox/shared/outbox"
	"github.com/alternayte/queuebox/shared/relay"
	"github.com/alternayte/queuebox/shared/service"
	"github.com/alternayte/queuebox/shared/service/connectors"
	"github.com/alternayte/queuebox/shared/tracing/otlp"
	"github.com/alternayte/queuebox/shared/transform"
	"github.com/alternayte/queuebox/shared/transform/jsonata"
)

// HTTPDrainTimeout is how long the HTTP servers drain requests in flight at shutdown.
const HTTPDrainTimeout = 5 * time.Second

// Local is the long-running local process: the data port, the management port, and the
// workers in loops.
type Local struct {
	log     *slog.Logger
	app     *service.App
	metrics *metrics.Registry

	shuttingDown atomic.Bool

	mu        sync.Mutex
	listeners []net.Listener
	ready     chan struct{}
}

// options are the choices of queuebox serve, whose composition root this package is: every
// loop in-process (the poller, the relay when inbox.relay.enabled, the retention cleanup,
// capture when outbox.capture.enabled), the inbox and the admin routes, and the broker
// destinations of RabbitMQ, Kafka and NATS as well as HTTP.
func options(log *slog.Logger, m service.Recorder, pool service.PoolMetrics, draining func() bool, engine transform.Compiler) service.AppOptions {
	var counters func() map[string]float64
	if r, ok := m.(*metrics.Registry); ok && r != nil {
		counters = r.Totals
	}
	if engine == nil {
		engine = jsonata.NewEngine(jsonata.EngineOptions{})
	}
	return service.AppOptions{
		Counters: counters,
		Logger:   log, Metrics: m, Pool: pool, Engine: engine,
		Poller: true, Brokers: connectors.All(),
		Relay: service.IfEnabled, Retention: true, Admin: service.IfEnabled,
		Inbox: true, Draining: draining, Capture: service.IfEnabled,
		Sources: connectors.Build,
		// The parts' spans go to the OTLP exporters of the tracing section.
		NewTracing: otlp.New,
	}
}

// New builds every worker of the local process once (service.Build), so that a configuration
// that cannot start is refused before the database is waited for, with the text that
// `queuebox config check` prints (Check), then opens the database (waiting for it, migrating
// or checking the schema) and binds the workers to it.
func New(ctx context.Context, cfg *service.Config, log *slog.Logger) (*Local, error) {
	return NewWithEngine(ctx, cfg, log, nil)
}

// NewWithEngine is New with the JSONata engine that compiled the configuration's transforms at
// load (the CompileTransform of its load options), so that the process starts one engine, not
// two. Nil makes a new engine.
func NewWithEngine(ctx context.Context, cfg *service.Config, log *slog.Logger, engine transform.Compiler) (*Local, error) {
	l := &Local{log: log, metrics: metrics.New(service.Version), ready: make(chan struct{})}
	pool := metrics.NewPoolTracer(l.metrics, metrics.PoolName)
	app, err := service.Build(ctx, cfg, options(log, l.metrics, pool, l.shuttingDown.Load, engine))
	if err != nil {
		return nil, err
	}
	if err := app.Open(ctx); err != nil {
		app.Close()
		return nil, err
	}
	l.app = app
	return l, nil
}

// Check runs every start-time refusal of New that depends on the configuration alone, without
// a database: it is the first half of New, service.Build with the choices of serve (the
// routes and their transforms, every destination's publisher, with
// http.blockPrivateAddresses resolving the hosts, the relay, the retention cleanup, the admin
// routes, the inbox sources and the capture connector), and it releases the parts instead of
// opening the database. It returns the error that New would return, with the same text.
// `queuebox config check` calls it, so that it refuses whatever `serve` refuses from the
// configuration.
func Check(ctx context.Context, cfg *service.Config) error { return CheckWithEngine(ctx, cfg, nil) }

// CheckWithEngine is Check on the JSONata engine that compiled the configuration at load (nil
// makes a new one), as NewWithEngine is New.
func CheckWithEngine(ctx context.Context, cfg *service.Config, engine transform.Compiler) error {
	// The check builds the parts and runs none, so its log lines (a destination kind without a
	// publisher, for example) would repeat those of the start: it logs nothing.
	app, err := service.Build(ctx, cfg, options(slog.New(slog.DiscardHandler), nil, nil, nil, engine))
	if err != nil {
		return err
	}
	app.Close()
	return nil
}

// Capture returns the capture connector, or nil when capture is off.
func (l *Local) Capture() *capture.Connector { return l.app.Capture }

// Relay returns the inbox relay, or nil when it is disabled.
func (l *Local) Relay() *relay.Relay { return l.app.Relay }

// Poller returns the outbox poller, for tests and wakes.
func (l *Local) Poller() *outbox.Poller { return l.app.Outbox.Poller }

// Addrs returns the addresses that the servers listen on once Ready is closed: the data port
// first, then the management port when one is configured.
func (l *Local) Addrs() []net.Addr {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []net.Addr
	for _, ln := range l.listeners {
		out = append(out, ln.Addr())
	}
	return out
}

// Ready is closed when the servers listen.
func (l *Local) Ready() <-chan struct{} { return l.ready }

// Run serves and works until ctx is cancelled, then shuts down in the documented order: the
// broker sources stop consuming (finishing and acknowledging a batch whose store began), the
// HTTP servers refuse new requests with 503 and drain for up to 5 s, the workers stop (the
// poller waits up to outbox.shutdownTimeoutMs for publishes in flight), then the publishers
// and the pool close. The order is that of the stages of services (services.go).
func (l *Local) Run(ctx context.Context) error {
	defer l.app.Close()

	servers, err := l.listen()
	close(l.ready)
	if err != nil {
		return err
	}
	serveErr := make(chan error, len(servers))
	group := l.services(servers, serveErr)
	// The services run until the shutdown stops them, stage by stage, not until ctx ends.
	if err := group.Start(context.WithoutCancel(ctx)); err != nil {
		return err
	}
	l.log.Info("QueueBox started", "version", service.Version, "addresses", addrStrings(l.Addrs()))

	var runErr error
	select {
	case <-ctx.Done():
	case runErr = <-serveErr:
	}
	l.log.Info("QueueBox is shutting down")
	l.shuttingDown.Store(true)
	group.Stop()
	l.log.Info("QueueBox stopped")
	return runErr
}

type server struct {
	srv *http.Server
	ln  net.Listener
}

func (l *Local) listen() ([]server, error) {
	data, mgmt := l.handlers()
	var out []server
	bind := func(port int, h http.Handler) error {
		ln, err := net.Listen("tcp", net.JoinHostPort("", strconv.Itoa(port)))
		if err != nil {
			return service.NewStartError("listen on port "+strconv.Itoa(port), err)
		}
		l.mu.Lock()
		l.listeners = append(l.listeners, ln)
		l.mu.Unlock()
		out = append(out, server{srv: service.NewHTTPServer(h, l.app.ServerOptions()), ln: ln})
		return nil
	}
	dataPort, mgmtPort := l.app.Ports()
	if err := bind(dataPort, data); err != nil {
		return nil, err
	}
	if mgmt != nil {
		if err := bind(mgmtPort, mgmt); err != nil {
			for _, s := range out {
				_ = s.ln.Close()
			}
			return nil, err
		}
	}
	return out, nil
}

// handlers returns the data port handler and, when server.managementPort is set, the
// management port handler; otherwise the data port serves the management routes too. The
// data port is service.DataHandler, which the inbox Lambda function serves as well; both
// ports answer 503 once the shutdown began. The readiness checks are those of the assembly.
func (l *Local) handlers() (data http.Handler, mgmt http.Handler) {
	management := http.NewServeMux()
	management.Handle("GET /metrics", l.metrics.Handler())
	l.app.Health().Register(management)
	management.HandleFunc("GET /{$}", service.Running)
	if l.app.Admin != nil {
		l.app.Admin.Register(management)
	}
	if l.app.Console != nil {
		l.app.Console.Register(management)
	}
	// The embedded description always parses (openapi's tests); a failure would only drop the
	// route, so it is logged, not fatal.
	if err := openapi.Register(management); err != nil {
		l.log.Error("GET /openapi.json is off", "error", err)
	}
	return l.app.Handlers(management)
}

func addrStrings(addrs []net.Addr) []string {
	out := make([]string, len(addrs))
	for i, a := range addrs {
		out[i] = a.String()
	}
	return out
}
