// Package node is the standalone capture node of the AWS deployment (capturenode/main.go): a
// small long-running service that loads the same configuration as every other QueueBox
// process, runs the capture connector of shared/capture with the PostgreSQL logical-replication
// source (shared/store/postgres/logical, as service.CaptureConfig builds it), and wakes the poll
// Lambda function (and, optionally, the relay function) with a debounced asynchronous invoke
// (shared/waker.LambdaInvoker). It serves GET /health/live, /health/ready, /health and
// /metrics on server.managementPort, or on server.httpPort when no management port is set.
//
// The node's settings that are not configuration keys come from these environment variables
// (without the QUEUEBOX_ prefix, which the configuration loader reserves for its keys, as
// LAMBDA_MODE does for the functions):
//
//   - CAPTURE_POLL_FUNCTION (required): the name or ARN of the poll function;
//   - CAPTURE_RELAY_FUNCTION: the relay function, woken by the reconciliation timer and by
//     inserts into the inbox table when the publication publishes that table;
//   - CAPTURE_WAKE_INTERVAL_MS: the debounce interval of the invokes (default 1000);
//   - CAPTURE_LAMBDA_ENDPOINT: another Lambda endpoint, for a VPC interface endpoint or a
//     test server;
//   - AWS_REGION and the default AWS credential chain (the ECS task role).
//
// sqlserver-cdc is not implemented in this build and is refused at start. The broker sources
// (RabbitMQ, Kafka, NATS) that DESIGN.md also places in the capture node are not part of it
// yet. spec/28-metrics.md lists no capture metric: /metrics shows the process families.
package node

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
	"github.com/alternayte/queuebox/shared/metrics"
	"github.com/alternayte/queuebox/shared/redact"
	"github.com/alternayte/queuebox/shared/service"
	"github.com/alternayte/queuebox/shared/waker"
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
	// PollFunction is the poll function to wake. Required.
	PollFunction string
	// RelayFunction is the relay function to wake. Optional.
	RelayFunction string
	// WakeInterval is the debounce interval of each function's invokes. Default 1 s.
	WakeInterval time.Duration
	// Endpoint replaces the Lambda endpoint. Optional.
	Endpoint string
}

// ParseSettings reads the settings from env, the environment as service.EnvMap returns it.
func ParseSettings(env map[string]string) (Settings, error) {
	s := Settings{
		PollFunction:  strings.TrimSpace(env[PollFunctionVariable]),
		RelayFunction: strings.TrimSpace(env[RelayFunctionVariable]),
		Endpoint:      strings.TrimSpace(env[LambdaEndpointVariable]),
		WakeInterval:  waker.DefaultInterval,
	}
	var problems []error
	if s.PollFunction == "" {
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
	Client waker.Invoker
}

// Node is the capture node.
type Node struct {
	log      *slog.Logger
	app      *service.App // capture, the health pool and the Lambda wakers
	metrics  *metrics.Registry
	addr     string
	listener net.Listener
	ready    chan struct{}
	mu       sync.Mutex
}

// New builds the node's assembly (service.Build): capture, which it requires (it refuses a
// configuration without postgres-logical capture, and sqlserver-cdc, which this build does
// not implement), a lazy pool of one connection on database.url (not the capture account's
// replication connection) for the database health component, and the Lambda wakers of the
// poll function and, with s.RelayFunction, the relay function, which capture wakes.
func New(ctx context.Context, cfg *service.Config, s Settings, o Options, log *slog.Logger) (*Node, error) {
	n := &Node{log: log, metrics: metrics.New(service.Version), ready: make(chan struct{}), addr: o.Addr}
	lc := func(function string) waker.LambdaConfig {
		return waker.LambdaConfig{FunctionName: function, Interval: s.WakeInterval, Endpoint: s.Endpoint,
			Client: o.Client, Payload: []byte(`{"source":"queuebox.capture"}`), Logger: log}
	}
	app, err := service.Build(ctx, cfg, service.AppOptions{
		Logger: log, Name: "the capture node",
		Capture: service.Required, CaptureDecides: true, HealthPool: true,
		RemoteWakers: func(ctx context.Context) (service.Wakers, error) {
			poll, err := waker.NewLambdaInvoker(ctx, lc(s.PollFunction))
			if err != nil {
				return service.Wakers{}, service.NewStartError("build the Lambda waker", err)
			}
			w := service.Wakers{Outbox: poll, Close: poll.Close}
			if s.RelayFunction != "" {
				relay, err := waker.NewLambdaInvoker(ctx, lc(s.RelayFunction))
				if err != nil {
					poll.Close()
					return service.Wakers{}, service.NewStartError("build the Lambda waker", err)
				}
				w.Inbox = relay
				w.Close = func() { poll.Close(); relay.Close() }
			}
			return w, nil
		},
	})
	if err != nil {
		return nil, err
	}
	n.app = app
	if n.addr == "" {
		n.addr = app.ListenAddr()
	}
	return n, nil
}

// Connector returns the capture connector.
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

// Handler serves the health routes and /metrics. The database component decides readiness
// as everywhere (spec/26-http-api.md); outbox-capture decides it too in the node, since
// capture is all that the node does.
func (n *Node) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", n.metrics.Handler())
	n.app.Health().Register(mux)
	mux.HandleFunc("GET /{$}", service.Running)
	return mux
}

// Run serves and captures until ctx is done, then stops the server (draining for up to 5 s),
// capture and the wakers. It returns an error when the node cannot listen, and when a capture
// fault stops the stream: the node exists for capture, so it exits and says why.
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
	srv := &http.Server{Handler: n.Handler(), ReadHeaderTimeout: 10 * time.Second}
	serveErr := make(chan error, 1)
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			serveErr <- fmt.Errorf("serving %s: %w", ln.Addr(), err)
		}
	}()
	capCtx, stopCapture := context.WithCancel(context.WithoutCancel(ctx))
	defer stopCapture()
	capDone := make(chan error, 1)
	conn := n.app.Capture
	go func() { capDone <- conn.Run(capCtx) }()
	identity, slot := n.app.CaptureNames()
	n.log.Info("QueueBox capture node started", "version", service.Version, "address", ln.Addr().String(),
		"identity", identity, "slot", slot)

	var runErr error
	select {
	case <-ctx.Done():
	case runErr = <-serveErr:
	case <-conn.Faulted():
		runErr = service.NewStartError("run capture", conn.Fault())
	}
	n.log.Info("QueueBox capture node is shutting down")
	drainCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	if err := srv.Shutdown(drainCtx); err != nil {
		n.log.Warn("HTTP server did not drain in time", "error", redact.Error(err))
	}
	cancel()
	stopCapture()
	<-capDone
	n.log.Info("QueueBox capture node stopped")
	return runErr
}

// Main runs the capture node of capturenode/main.go and returns its exit code: 0 after a
// clean stop, 1 when the configuration, the settings or the start fail, or capture faults.
func Main(ctx context.Context, environ []string, readFile func(string) ([]byte, error), stderr io.Writer) int {
	log := service.NewLogger(stderr, slog.LevelInfo)
	env := service.EnvMap(environ)
	cfg, warnings, err := service.Load(service.LoadOptions{Env: env, ReadFile: readFile})
	for _, w := range warnings {
		log.Warn("configuration warning", "warning", w.String())
	}
	if err != nil {
		fmt.Fprint(stderr, service.LoadErrorText(err))
		return 1
	}
	settings, err := ParseSettings(env)
	if err != nil {
		fmt.Fprintf(stderr, "QueueBox could not read the capture node settings. Reason: %s\n", redact.Error(err))
		return 1
	}
	log.Info("configuration loaded", "config", cfg.LogValue())
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
