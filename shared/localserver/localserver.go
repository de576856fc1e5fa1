// Package localserver is the long-running local process of QueueBox: the data port (the inbox
// routes), the management port (metrics and health), and the outbox poller and the inbox relay
// in loops, all built by shared/service from the configuration. With outbox.capture.enabled
// (postgres-logical) it also runs the capture connector of shared/capture in-process, which
// wakes the poller at once on every committed outbox insert. The relay wakes the poller after
// every cycle that forwarded rows into the outbox, capture or not: they share the process.
package localserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/alternayte/queuebox/shared/admin"
	"github.com/alternayte/queuebox/shared/capture"
	"github.com/alternayte/queuebox/shared/config"
	"github.com/alternayte/queuebox/shared/health"
	"github.com/alternayte/queuebox/shared/inbox"
	"github.com/alternayte/queuebox/shared/metrics"
	"github.com/alternayte/queuebox/shared/outbox"
	"github.com/alternayte/queuebox/shared/relay"
	"github.com/alternayte/queuebox/shared/retention"
	"github.com/alternayte/queuebox/shared/service"
	"github.com/alternayte/queuebox/shared/service/destinations"
	"github.com/alternayte/queuebox/shared/store"
	"github.com/alternayte/queuebox/shared/waker"
)

// HTTPDrainTimeout is how long the HTTP servers drain requests in flight at shutdown.
const HTTPDrainTimeout = 5 * time.Second

// Local is the long-running local process: the data port, the management port, and the
// workers in loops.
type Local struct {
	cfg     *config.Config
	log     *slog.Logger
	db      *service.Database
	metrics *metrics.Registry
	outbox  *service.Outbox
	inbox   *inbox.Handler
	relay   *relay.Relay // nil when inbox.relay.enabled is false
	cleaner *retention.Cleaner
	admin   *admin.Handler     // nil when admin.enabled is false
	capture *capture.Connector // nil when outbox.capture.enabled is false

	shuttingDown atomic.Bool

	mu        sync.Mutex
	listeners []net.Listener
	ready     chan struct{}
}

// New opens the database (waiting for it, migrating or checking the schema) and builds
// every worker of the local process. It runs Check first, so that a configuration that cannot
// start is refused before the database is waited for, with the text that `queuebox config
// check` prints.
func New(ctx context.Context, cfg *config.Config, log *slog.Logger) (*Local, error) {
	if err := Check(ctx, cfg); err != nil {
		return nil, err
	}
	reg := metrics.New(service.Version)
	poolTracer := metrics.NewPoolTracer(reg, metrics.PoolName)
	db, err := service.OpenWith(ctx, cfg, log, service.ConnectOptions{Tracer: poolTracer})
	if err != nil {
		return nil, err
	}
	if cfg.Database.Type != config.SQLServer {
		poolTracer.AttachStats(db.PoolStats)
	}
	ob, err := service.NewOutbox(ctx, pollerConfig(cfg), db.Store, reg, log, brokers()...)
	if err != nil {
		db.Close()
		return nil, err
	}
	l := &Local{cfg: cfg, log: log, db: db, metrics: reg, outbox: ob, ready: make(chan struct{})}
	var waker inbox.Waker
	if cfg.Inbox.Relay.Enabled {
		// The poller claims the rows that a relay cycle forwarded at once, not after
		// outbox.pollIntervalMs.
		if l.relay, err = service.NewRelay(cfg, db.Store, reg, ob.Poller, log); err != nil {
			ob.Close()
			db.Close()
			return nil, err
		}
		waker = l.relay
	}
	if l.cleaner, err = retention.New(retention.Options{Store: db.Store, Config: service.RetentionConfig(cfg), Metrics: reg, Logger: log}); err != nil {
		ob.Close()
		db.Close()
		return nil, &service.StartError{Step: "build the retention cleanup", Err: err}
	}
	if cfg.Admin.Enabled {
		if l.admin, err = service.NewAdmin(cfg, db.Store, log); err != nil {
			ob.Close()
			db.Close()
			return nil, err
		}
	}
	if l.inbox, err = service.NewInboxHandler(cfg, db.Store, reg, waker, l.shuttingDown.Load, log); err != nil {
		ob.Close()
		db.Close()
		return nil, err
	}
	if cfg.Outbox.Capture.Enabled {
		if l.capture, err = newCapture(cfg, l.outbox.Poller, l.relay, log); err != nil {
			ob.Close()
			db.Close()
			return nil, &service.StartError{Step: "start capture", Err: err}
		}
	}
	return l, nil
}

// brokers are the broker destinations of queuebox serve, whose composition root this
// package is: it delivers to RabbitMQ, Kafka and NATS as well as HTTP.
func brokers() []service.Broker {
	return destinations.All()
}

// Check runs every start-time refusal of New that depends on the configuration alone, without
// a database: it builds the routes and their transforms, every destination's publisher (with
// http.blockPrivateAddresses, resolving the hosts as New does), the relay, the retention
// cleanup, the admin routes, the inbox sources and the capture connector, with the
// constructors that New calls, then releases them. It returns the error that New would return,
// with the same text. `queuebox config check` calls it, so that it refuses whatever `serve`
// refuses from the configuration.
func Check(ctx context.Context, cfg *config.Config) error {
	if cfg.Outbox.Capture.Enabled && cfg.Outbox.Capture.Mode == config.CaptureSQLServerCDC {
		return &service.StartError{Step: "start capture", Err: capture.ErrSQLServerCDCNotImplemented}
	}
	// The check builds the parts and runs none, so its log lines (a destination kind without a
	// publisher, for example) would repeat those of the start: it logs nothing.
	quiet := slog.New(slog.DiscardHandler)
	st := unusedStore{}
	ob, err := service.NewOutbox(ctx, pollerConfig(cfg), st, nil, quiet, brokers()...)
	if err != nil {
		return err
	}
	defer ob.Close()
	var rl *relay.Relay
	if cfg.Inbox.Relay.Enabled {
		if rl, err = service.NewRelay(cfg, st, nil, nil, quiet); err != nil {
			return err
		}
	}
	if _, err := retention.New(retention.Options{Store: st, Config: service.RetentionConfig(cfg), Logger: quiet}); err != nil {
		return &service.StartError{Step: "build the retention cleanup", Err: err}
	}
	if cfg.Admin.Enabled {
		if _, err := service.NewAdmin(cfg, st, quiet); err != nil {
			return err
		}
	}
	if _, err := service.NewInboxHandler(cfg, st, nil, nil, func() bool { return false }, quiet); err != nil {
		return err
	}
	if cfg.Outbox.Capture.Enabled {
		if _, err := newCapture(cfg, ob.Poller, rl, quiet); err != nil {
			return &service.StartError{Step: "start capture", Err: err}
		}
	}
	return nil
}

// unusedStore is the store of the parts that Check builds: the constructors keep it and call
// none of its methods, and Check runs none of the parts. A call would panic on the nil
// interface, which a test would show.
type unusedStore struct{ store.Store }

// pollerConfig is the configuration of the poller: with capture on, the poller waits at most
// outbox.capture.reconciliationIntervalMs between two claims when no event arrives
// (spec/23-configuration.md), instead of outbox.pollIntervalMs.
func pollerConfig(cfg *config.Config) *config.Config {
	if !cfg.Outbox.Capture.Enabled {
		return cfg
	}
	c := *cfg
	c.Outbox.PollIntervalMs = cfg.Outbox.Capture.ReconciliationIntervalMs
	return &c
}

// newCapture builds the capture connector that wakes the poller (and the relay, for inserts
// into the inbox table when the publication publishes it). sqlserver-cdc is refused.
func newCapture(cfg *config.Config, poller *outbox.Poller, rl *relay.Relay, log *slog.Logger) (*capture.Connector, error) {
	ccfg, err := service.CaptureConfig(cfg, waker.Func(poller.Wake), log)
	if err != nil {
		return nil, err
	}
	if rl != nil {
		ccfg.InboxWaker = waker.Func(rl.Wake)
	}
	return capture.New(ccfg)
}

// Capture returns the capture connector, or nil when capture is off.
func (l *Local) Capture() *capture.Connector { return l.capture }

// Relay returns the inbox relay, or nil when it is disabled.
func (l *Local) Relay() *relay.Relay { return l.relay }

// Poller returns the outbox poller, for tests and wakes.
func (l *Local) Poller() *outbox.Poller { return l.outbox.Poller }

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
// HTTP servers refuse new requests with 503 and drain for up to 5 s, the workers stop (the
// poller waits up to outbox.shutdownTimeoutMs for publishes in flight), then the publishers
// and the pool close.
func (l *Local) Run(ctx context.Context) error {
	defer l.db.Close()
	defer l.outbox.Close()

	servers, err := l.listen()
	if err != nil {
		close(l.ready)
		return err
	}
	close(l.ready)
	serveErr := make(chan error, len(servers))
	for _, s := range servers {
		go func() {
			if err := s.srv.Serve(s.ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				serveErr <- fmt.Errorf("serving %s: %w", s.ln.Addr(), err)
			}
		}()
	}

	workCtx, stopWork := context.WithCancel(context.WithoutCancel(ctx))
	defer stopWork()
	var workers sync.WaitGroup
	workers.Add(1)
	go func() {
		defer workers.Done()
		sum := l.outbox.Poller.Run(workCtx, outbox.RunOptions{})
		l.log.Info("outbox poller stopped", "sent", sum.Sent, "retried", sum.Retried, "dead", sum.Dead, "claims_lost", sum.ClaimsLost)
	}()
	if l.cleaner.Enabled() {
		workers.Add(1)
		go func() {
			defer workers.Done()
			if err := l.cleaner.Run(workCtx); err != nil {
				l.log.Error("retention cleanup stopped", "error", err)
			}
		}()
	}
	if l.capture != nil {
		workers.Add(1)
		go func() {
			defer workers.Done()
			_ = l.capture.Run(workCtx) // it logs a fault; delivery goes on through SQL
		}()
	}
	if l.relay != nil {
		workers.Add(1)
		go func() {
			defer workers.Done()
			sum := l.relay.Run(workCtx, relay.RunOptions{})
			l.log.Info("inbox relay stopped", "forwarded", sum.Forwarded, "dead", sum.Dead, "claims_lost", sum.ClaimsLost)
		}()
	}
	l.log.Info("QueueBox started", "version", service.Version, "addresses", addrStrings(l.Addrs()))

	var runErr error
	select {
	case <-ctx.Done():
	case runErr = <-serveErr:
	}
	l.log.Info("QueueBox is shutting down")
	l.shuttingDown.Store(true)
	drainCtx, cancel := context.WithTimeout(context.Background(), HTTPDrainTimeout)
	for _, s := range servers {
		if err := s.srv.Shutdown(drainCtx); err != nil {
			l.log.Warn("HTTP server did not drain in time", "address", s.ln.Addr().String(), "error", err)
		}
	}
	cancel()
	stopWork()
	workers.Wait()
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
			return &service.StartError{Step: "listen on port " + strconv.Itoa(port), Err: err}
		}
		l.mu.Lock()
		l.listeners = append(l.listeners, ln)
		l.mu.Unlock()
		out = append(out, server{srv: &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}, ln: ln})
		return nil
	}
	if err := bind(l.cfg.Server.HTTPPort, data); err != nil {
		return nil, err
	}
	if mgmt != nil {
		if err := bind(l.cfg.Server.ManagementPort, mgmt); err != nil {
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
// ports answer 503 once the shutdown began.
func (l *Local) handlers() (data http.Handler, mgmt http.Handler) {
	management := http.NewServeMux()
	management.Handle("GET /metrics", l.metrics.Handler())
	l.health().Register(management)
	management.HandleFunc("GET /{$}", service.Running)
	if l.admin != nil {
		l.admin.Register(management)
	}

	opts := service.DataOptions{MaxBodyBytes: l.cfg.Inbox.MaxBodyBytes, Draining: l.shuttingDown.Load}
	if l.cfg.Server.ManagementPort == 0 {
		opts.Management = management
		return service.DataHandler(l.inbox, opts), nil
	}
	return service.DataHandler(l.inbox, opts), service.Gate(management, l.shuttingDown.Load, 0)
}

// health builds the readiness checks of the components that this process runs.
func (l *Local) health() *health.Handler {
	checks := []health.Check{
		{Name: "database", Decides: true, Probe: l.db.Store.Ping},
		{Name: "outbox-poller", Decides: true, Probe: l.outbox.Poller.Check},
	}
	if l.relay != nil {
		checks = append(checks, health.Check{Name: "inbox-relay", Decides: true, Probe: l.relay.Check})
	}
	if l.cfg.Retention.Enabled {
		checks = append(checks, health.Check{Name: "retention-service", Decides: true, Probe: l.cleaner.Check})
	}
	if l.capture != nil {
		// Advisory: a capture fault never makes the process unready (spec/26-http-api.md).
		checks = append(checks, health.Check{Name: "outbox-capture", Decides: false, Probe: l.capture.Check})
	}
	return health.New(checks...).WithLogger(l.log)
}

func addrStrings(addrs []net.Addr) []string {
	out := make([]string, len(addrs))
	for i, a := range addrs {
		out[i] = a.String()
	}
	return out
}
