// Package capturenode is the standalone capture node of the AWS deployment (capturenode/main.go): a
// small long-running service that loads the same configuration as every other QueueBox
// process and runs, in one process, either or both of:
//
//   - capture (outbox.capture.enabled): the capture connector of shared/capture with the
//     PostgreSQL logical-replication source (shared/store/postgres/logical) or the SQL Server
//     change data capture source (shared/store/sqlserver/cdc), as service.CaptureConfig
//     builds it, which wakes the poll Lambda function (and, optionally,
//     the relay function) with a debounced asynchronous invoke (shared/lambdawaker.Waker);
//   - the broker sources (sources.<name> of type rabbitmq, kafka or nats, built by
//     shared/service/connectors): consumers that store what they read into the inbox table and
//     wake the relay function after they stored push rows.
//
// A node with neither refuses to start. It serves GET /health/live, /health/ready, /health
// and /metrics on server.managementPort, or on server.httpPort when no management port is
// set; /health/ready lists database, outbox-capture (with capture) and rabbitmq.<name>,
// kafka.<name>, nats.<name> (one per broker source).
//
// The node's settings that are not configuration keys come from these environment variables
// (without the QUEUEBOX_ prefix, which the configuration loader reserves for its keys, as
// LAMBDA_MODE does for the functions):
//
//   - CAPTURE_POLL_FUNCTION (required with capture): the name or ARN of the poll function;
//   - CAPTURE_RELAY_FUNCTION: the relay function, woken by the reconciliation timer, by
//     inserts into the inbox table when the publication publishes that table, and after a
//     broker source stored push rows;
//   - CAPTURE_WAKE_INTERVAL_MS: the debounce interval of the invokes (default 1000);
//   - CAPTURE_LAMBDA_ENDPOINT: another Lambda endpoint, for a VPC interface endpoint or a
//     test server;
//   - AWS_REGION and the default AWS credential chain (the ECS task role).
//
// Both capture modes run here: postgres-logical and sqlserver-cdc (the SQL Server source,
// shared/store/sqlserver/cdc; its database health component pings database.url through a
// lazy go-mssqldb pool). spec/28-metrics.md
// lists no capture metric: /metrics shows the process families, and with broker sources the
// inbox families of the sources and those of the database pool.
//
// It is a runtime, like shared/localserver and shared/lambdafn: it sits above the parts it
// assembles (shared/service, shared/capture), and no part imports it.
package capturenode

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/alternayte/queuebox/shared/capture"
	"github.com/alternayte/queuebox/shared/gctune"
	"github.com/alternayte/queuebox/shared/lifecycle"
	"github.com/alternayte/queuebox/shared/metrics"
	"github.com/alternayte/queuebox/shared/redact"
	"github.com/alternayte/queuebox/shared/service"
	"github.com/alternayte/queuebox/shared/service/connectors"
	"github.com/alternayte/queuebox/shared/tracing/otlp"
	"github.com/alternayte/queuebox/shared/transform/jsonata"
	"github.com/alternayte/queuebox/shared/waker/lambdawaker"
)

// The environment variables of the node's settings.
const (
	PollFunctionVariable   = "CAPTURE_POLL_FUNCTION"
	RelayFunctionVariable  = "CAPTURE_RELAY_FUNCTION"
	WakeIntervalVariable   = "CAPTURE_WAKE_INTERVAL_MS"
	LambdaEndpointVariable = "CAPTURE_LAMBDA_ENDPOINT"
)

// Settings are the node's settings that are not configuration keys.
type Settings struct {
	// PollFunction is the poll function to wake. Required when the node runs capture.
	PollFunction string
	// RelayFunction is the relay function to wake. Optional: without it, the relay function's
	// schedule finds the stored rows.
	RelayFunction string
	// WakeInterval is the debounce interval of each function's invokes. Default 1 s.
	WakeInterval time.Duration
	// Endpoint replaces the Lambda endpoint. Optional.
	Endpoint string
}

// ParseSettings reads the settings from env, the environment as service.EnvMap returns it.
// withCapture says whether the node runs capture (outbox.capture.enabled): the poll function
// is required then, and only then (a node that runs only broker sources wakes the relay
// function alone).
func ParseSettings(env map[string]string, withCapture bool) (Settings, error) {
	s := Settings{
		PollFunction:  strings.TrimSpace(env[PollFunctionVariable]),
		RelayFunction: strings.TrimSpace(env[RelayFunctionVariable]),
		Endpoint:      strings.TrimSpace(env[LambdaEndpointVariable]),
		WakeInterval:  lambdawaker.DefaultInterval,
	}
	var problems []error
	if withCapture && s.PollFunction == "" {
		problems = append(problems, fmt.Errorf("%s is not set; it names the poll function that capture wakes", PollFunctionVariable))
	}
	if v := strings.TrimSpace(env[WakeIntervalVariable]); v != "" {
		ms, err := strconv.ParseInt(v, 10, 64)
		if err != nil || ms <= 0 {
			problems = append(problems, fmt.Errorf("%s is %q; it must be a whole number of milliseconds above 0", WakeIntervalVariable, v))
		}
		s.WakeInterval = time.Duration(ms) * time.Millisecond
	}
	return s, errors.Join(problems...)
}

// Options are the parts of a Node that tests replace.
type Options struct {
	// Addr is the listen address. Default: ":" + the management port, or the HTTP port.
	Addr string
	// Client makes the Lambda calls. Default: a client from the AWS default chain.
	Client lambdawaker.Invoker
}

// Node is the capture node.
type Node struct {
	log      *slog.Logger
	app      *service.App // capture, the broker sources, the database and the Lambda wakers
	metrics  *metrics.Registry
	addr     string
	listener net.Listener
	ready    chan struct{}
	mu       sync.Mutex
}

// errNothingToRun refuses a node with neither capture nor a broker source.
var errNothingToRun = errors.New("outbox.capture.enabled is false (QUEUEBOX_OUTBOX_CAPTURE_ENABLED) and no broker source " +
	"is configured (sources.<name> of type rabbitmq, kafka or nats); the capture node runs capture, the broker sources or both: " +
	"set outbox.capture.enabled true with outbox.capture.mode postgres-logical (PostgreSQL) or sqlserver-cdc (SQL Server), or configure a broker source")

// HasBrokerSources reports whether cfg configures a broker source (sources.<name> of type
// rabbitmq, kafka or nats), which the node then runs.
func HasBrokerSources(cfg *service.Config) bool {
	for _, s := range cfg.Sources {
		if s != nil && s.Broker() != nil {
			return true
		}
	}
	return false
}

// New builds the node's assembly (service.Build). With outbox.capture.enabled it builds
// capture (postgres-logical or sqlserver-cdc, service.CaptureConfig), which wakes the Lambda
// wakers of the poll function and, with s.RelayFunction, the relay function. With broker sources (connectors.Build) it builds them,
// waking the relay function after they stored push rows, and opens the database (waiting for
// it, migrating or checking the schema) for the inbox store they write to. A node without
// broker sources opens no store: the database health component probes a lazy pool of one
// connection on database.url (not the capture account's replication connection). A
// configuration with neither capture nor a broker source is refused.
func New(ctx context.Context, cfg *service.Config, s Settings, o Options, log *slog.Logger) (*Node, error) {
	n := &Node{log: log, metrics: metrics.New(service.Version), ready: make(chan struct{}), addr: o.Addr}
	withSources := HasBrokerSources(cfg)
	if !cfg.Outbox.Capture.Enabled && !withSources {
		return nil, service.NewStartError("start the capture node", errNothingToRun)
	}
	if cfg.Outbox.Capture.Enabled && s.PollFunction == "" {
		return nil, service.NewStartError("start capture", fmt.Errorf("%s is not set; it names the poll function that capture wakes", PollFunctionVariable))
	}
	lc := func(function string) lambdawaker.Config {
		return lambdawaker.Config{FunctionName: function, Interval: s.WakeInterval, Endpoint: s.Endpoint,
			Client: o.Client, Payload: []byte(`{"source":"queuebox.capture"}`), Logger: log}
	}
	ao := service.AppOptions{
		Logger: log, Name: "the capture node",
		// The broker sources run their transforms on the JSONata engine.
		Engine: jsonata.NewEngine(jsonata.EngineOptions{}),
		// Capture runs when outbox.capture.enabled; without it, the broker sources are all
		// that the node runs (the refusal above needs one of them).
		Capture: service.IfEnabled, CaptureDecides: true,
		Sources:    connectors.Build,
		NewTracing: otlp.New, // the spans of capture and of the broker sources
		// Without broker sources the node opens no store, so the database component probes a
		// health pool of its own.
		HealthPool: !withSources,
		RemoteWakers: func(ctx context.Context) (service.Wakers, error) {
			var w service.Wakers
			var closers []func()
			if s.PollFunction != "" {
				poll, err := lambdawaker.New(ctx, lc(s.PollFunction))
				if err != nil {
					return service.Wakers{}, service.NewStartError("build the Lambda waker", err)
				}
				w.Outbox = poll
				closers = append(closers, poll.Close)
			}
			if s.RelayFunction != "" {
				relay, err := lambdawaker.New(ctx, lc(s.RelayFunction))
				if err != nil {
					for _, c := range closers {
						c()
					}
					return service.Wakers{}, service.NewStartError("build the Lambda waker", err)
				}
				w.Inbox = relay
				closers = append(closers, relay.Close)
			}
			w.Close = func() {
				for _, c := range closers {
					c()
				}
			}
			return w, nil
		},
	}
	if withSources {
		// The sources report the inbox families, and the store's pool its own.
		ao.Metrics = n.metrics
		ao.Pool = metrics.NewPoolTracer(n.metrics, metrics.PoolName)
	}
	app, err := service.Build(ctx, cfg, ao)
	if err != nil {
		return nil, err
	}
	if app.Sources != nil {
		if s.RelayFunction == "" {
			log.Warn("the broker sources wake no relay function: " + RelayFunctionVariable + " is not set, so the relay " +
				"function's schedule forwards their push rows")
		}
		if err := app.Open(ctx); err != nil {
			app.Close()
			return nil, err
		}
	}
	n.app = app
	if n.addr == "" {
		n.addr = app.ListenAddr()
	}
	return n, nil
}

// Connector returns the capture connector, or nil when the node runs only broker sources.
func (n *Node) Connector() *capture.Connector { return n.app.Capture }

// Ready is closed when the node listens.
func (n *Node) Ready() <-chan struct{} { return n.ready }

// Addr returns the listen address once Ready is closed.
func (n *Node) Addr() net.Addr {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.listener == nil {
		return nil
	}
	return n.listener.Addr()
}

// Sources returns the broker sources, or nil when none is configured.
func (n *Node) Sources() service.SourceGroup { return n.app.Sources }

// Handler serves the health routes and /metrics. The database component decides readiness
// as everywhere (spec/26-http-api.md); outbox-capture decides it too in the node, since
// capture is one of the two things that the node does, and so does each broker source's
// component (rabbitmq.<name>, kafka.<name>, nats.<name>).
func (n *Node) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", n.metrics.Handler())
	n.app.Health().Register(mux)
	mux.HandleFunc("GET /{$}", service.Running)
	return mux
}

// Run serves, captures and consumes until ctx is done. The broker sources start once the
// node listens, storing into the inbox through the database that New opened. At shutdown
// the broker sources stop first (a batch whose store began is finished and acknowledged,
// within service.SourceStopTimeout), then capture, then the server (draining for up to 5 s)
// and the wakers. It returns an error when the node cannot listen, and when a capture fault
// stops the stream: capture needs a decision then, so the node exits and says why. A broker
// source that stops for good (a missing queue or stream) stays down in its health component
// and the node goes on.
func (n *Node) Run(ctx context.Context) error {
	defer n.app.Close()
	ln, err := net.Listen("tcp", n.addr)
	if err != nil {
		close(n.ready)
		return service.NewStartError("listen on "+n.addr, err)
	}
	n.mu.Lock()
	n.listener = ln
	n.mu.Unlock()
	close(n.ready)
	srv := service.NewHTTPServer(n.Handler(), n.app.ServerOptions())
	serveErr := make(chan error, 1)
	var faulted <-chan struct{} // nil without capture: never ready
	conn := n.app.Capture
	if conn != nil {
		faulted = conn.Faulted()
	}
	srcs := n.app.Sources
	// The services run until the shutdown stops them, stage by stage, not until ctx ends.
	group := n.services(srv, ln, serveErr)
	if err := group.Start(context.WithoutCancel(ctx)); err != nil {
		return err
	}
	attrs := []any{"version", service.Version, "address", ln.Addr().String(), "capture", conn != nil}
	if conn != nil {
		identity, slot := n.app.CaptureNames()
		attrs = append(attrs, "identity", identity, "slot", slot)
	}
	if srcs != nil {
		attrs = append(attrs, "broker_sources", srcs.Len())
	}
	n.log.Info("QueueBox capture node started", attrs...)

	var runErr error
	select {
	case <-ctx.Done():
	case runErr = <-serveErr:
	case <-faulted:
		runErr = service.NewStartError("run capture", conn.Fault())
	}
	n.log.Info("QueueBox capture node is shutting down")
	group.Stop()
	n.log.Info("QueueBox capture node stopped")
	return runErr
}

// services returns the node's services in their stages (lifecycle.Group): the HTTP server,
// which reports a failure to serve on serveErr and drains for up to 5 s when it stops; capture
// (outbox.capture.enabled); the broker sources, which store into the inbox through the
// database that New opened. They stop in the reverse order: the broker sources first (a batch
// whose store began is finished and acknowledged, within service.SourceStopTimeout), then
// capture, then the server.
func (n *Node) services(srv *http.Server, ln net.Listener, serveErr chan<- error) *lifecycle.Group {
	var g lifecycle.Group
	g.Add(lifecycle.NewLoop(func(ctx context.Context) {
		go func() {
			if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				serveErr <- fmt.Errorf("serving %s: %w", ln.Addr(), err)
			}
		}()
		<-ctx.Done()
		drainCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := srv.Shutdown(drainCtx); err != nil {
			n.log.Warn("HTTP server did not drain in time", "error", redact.Error(err))
		}
	}))
	if conn := n.app.Capture; conn != nil {
		g.Add(lifecycle.NewLoop(func(ctx context.Context) {
			_ = conn.Run(ctx) // a fault ends the node's Run through Faulted
		}))
	}
	if srcs := n.app.Sources; srcs != nil {
		g.Add(service.SourcesService(srcs, n.app.DB.Store, n.log))
	}
	return &g
}

// Main runs the capture node of capturenode/main.go and returns its exit code: 0 after a
// clean stop, 1 when the configuration, the settings or the start fail (a configuration with
// neither capture nor a broker source among them), or capture faults.
func Main(ctx context.Context, environ []string, readFile func(string) ([]byte, error), stderr io.Writer) int {
	level := service.NewLevel()
	log := service.NewLogger(stderr, level)
	env := service.EnvMap(environ)
	cfg, warnings, err := service.Load(service.LoadOptions{Env: env, ReadFile: readFile})
	for _, w := range warnings {
		log.Warn("configuration warning", "warning", w.String())
	}
	if err != nil {
		fmt.Fprint(stderr, service.LoadErrorText(err))
		return 1
	}
	service.SetLevel(level, cfg)
	settings, err := ParseSettings(env, cfg.Outbox.Capture.Enabled)
	if err != nil {
		fmt.Fprintf(stderr, "QueueBox could not read the capture node settings. Reason: %s\n", redact.Error(err))
		return 1
	}
	log.Info("configuration loaded", "config", cfg.LogValue(), "runtime", gctune.Apply(env))
	n, err := New(ctx, cfg, settings, Options{}, log)
	if err != nil {
		fmt.Fprintln(stderr, err.Error())
		return 1
	}
	if err := n.Run(ctx); err != nil {
		fmt.Fprintln(stderr, err.Error())
		return 1
	}
	return 0
}
