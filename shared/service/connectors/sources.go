// This file builds the broker sources, the RabbitMQ, Kafka and NATS JetStream consumers of
// spec/07-bridge-a-broker.md: FromConfig maps each sources.<name> entry of a broker kind to its
// system's SourceConfig, once, with the source constructor of the kind's connector, and Group
// runs them: one health component each (rabbitmq.<name>, kafka.<name>, nats.<name>, deciding
// readiness), started together and stopped first at shutdown.

package connectors

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/alternayte/queuebox/shared/config"
	"github.com/alternayte/queuebox/shared/connect"
	"github.com/alternayte/queuebox/shared/health"
	"github.com/alternayte/queuebox/shared/inbox"
	"github.com/alternayte/queuebox/shared/service"
	"github.com/alternayte/queuebox/shared/transform"
)

// Source is one broker source: its consumer, which stores through the sink it runs with.
type Source = connect.Consumer

// Runner is one source with its kind, the prefix of its health component.
type Runner struct {
	// Kind is rabbitmq, kafka or nats.
	Kind config.SourceKind
	Source
}

// Component is the name of the source's health component: <kind>.<name>.
func (r Runner) Component() string { return string(r.Kind) + "." + r.Name() }

// Options are what every source of a program shares.
type Options struct {
	// Metrics receives the inbox measurements. Default: inbox.NopMetrics.
	Metrics inbox.Metrics
	// Waker is told after push rows were stored (the relay). Default: none.
	Waker inbox.Waker
	// Logger receives the log lines. Default: slog.Default().
	Logger *slog.Logger
	// Engine compiles the source transforms (the JSONata engine of shared/transform/jsonata).
	// Without one, a source with a transform is refused with transform.ErrNoEngine.
	Engine transform.Compiler
	// Tracer creates the span of each stored message (docs/tracing.md). Default: none,
	// tracing off.
	Tracer trace.Tracer
}

// Build is the service.SourceBuilder of the programs that consume: the sources of cfg as a
// Group.
func Build(cfg *service.Config, o service.SourceOptions) (service.SourceGroup, error) {
	runners, err := FromConfig(cfg, Options{Metrics: o.Metrics, Waker: o.Waker, Logger: o.Logger, Engine: o.Engine, Tracer: o.Tracer})
	if err != nil {
		return nil, err
	}
	return NewGroup(runners, o.Logger), nil
}

var _ service.SourceBuilder = Build

// FromConfig builds the broker sources of cfg, in name order; it makes no connection.
func FromConfig(cfg *config.Config, o Options) ([]Runner, error) {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	byKind := map[config.SourceKind]connect.Connector{}
	for _, c := range All() {
		byKind[c.Kind] = c
	}
	names := make([]string, 0, len(cfg.Sources))
	for name, s := range cfg.Sources {
		if s != nil && s.Broker() != nil {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	var out []Runner
	for _, name := range names {
		s := cfg.Sources[name]
		intake, err := intakeOf(o.Engine, name, s)
		if err != nil {
			return nil, err
		}
		opts := inbox.IntakeOptions{Metrics: o.Metrics, Waker: o.Waker, Logger: o.Logger, Tracer: o.Tracer, KeyLength: service.KeyLength(cfg)}
		c, ok := byKind[s.Kind]
		if !ok || c.Source == nil {
			return nil, fmt.Errorf("building source %s: no connector of this build consumes a source of kind %s", name, s.Kind)
		}
		src, err := c.Source(connect.SourceParams{Name: name, Source: s, Intake: intake, IntakeOptions: opts, Logger: o.Logger})
		if err != nil {
			return nil, fmt.Errorf("building source %s: %w", name, err)
		}
		out = append(out, Runner{Kind: s.Kind, Source: src})
	}
	return out, nil
}

// intakeOf maps the keys that every broker source shares to the inbox intake's rules.
func intakeOf(engine transform.Compiler, name string, s *config.Source) (inbox.BrokerSource, error) {
	b := s.Broker()
	in := inbox.BrokerSource{
		Name:               name,
		Consumption:        string(s.Consumption),
		IdempotencyKeyPath: s.IdempotencyKeyPath,
		AggregateIDPath:    s.AggregateIDPath,
		EventTypePath:      s.EventTypePath,
		AttributeHeaders: inbox.AttributeHeaders{
			IdempotencyKey: b.AttributeHeaders.IdempotencyKey,
			AggregateID:    b.AttributeHeaders.AggregateID,
			EventType:      b.AttributeHeaders.EventType,
		},
		Filter: service.FilterConfig(s.Filter),
	}
	if b.MaxBodyBytes != nil {
		in.MaxBodyBytes = *b.MaxBodyBytes
	}
	if s.Transform != nil {
		t, err := inbox.CompileTransform(engine, service.TransformConfig(s.Transform))
		if err != nil {
			return inbox.BrokerSource{}, fmt.Errorf("building the transform of source %s: %w", name, err)
		}
		in.Transform = t
		in.OnError = inbox.OnError(s.Transform.OnError)
	}
	return in, nil
}

// Group runs the sources of a program.
type Group struct {
	runners []Runner
	log     *slog.Logger

	mu     sync.Mutex
	cancel context.CancelFunc
	done   chan struct{}
	errs   []error
}

// NewGroup returns the group of runners.
func NewGroup(runners []Runner, log *slog.Logger) *Group {
	if log == nil {
		log = slog.Default()
	}
	return &Group{runners: runners, log: log}
}

// Checks returns the health components of the sources; each decides readiness.
func (g *Group) Checks() []health.Check {
	out := make([]health.Check, 0, len(g.runners))
	for _, r := range g.runners {
		out = append(out, health.Check{Name: r.Component(), Decides: true, Probe: r.Check})
	}
	return out
}

// Len returns the number of sources.
func (g *Group) Len() int { return len(g.runners) }

// Start runs every source in the background, storing through sink, until Stop. A source that
// stops for good (a missing queue or stream) stays down in its health component; the others
// go on.
func (g *Group) Start(ctx context.Context, sink inbox.Inserter) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.done != nil || len(g.runners) == 0 {
		return
	}
	ctx, g.cancel = context.WithCancel(ctx)
	g.done = make(chan struct{})
	var wg sync.WaitGroup
	for _, r := range g.runners {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := r.Run(ctx, sink)
			if err != nil && !errors.Is(err, context.Canceled) {
				g.log.Error("inbox source stopped", slog.String("component", r.Component()), slog.String("error", err.Error()))
				g.mu.Lock()
				g.errs = append(g.errs, err)
				g.mu.Unlock()
			}
		}()
	}
	go func() { wg.Wait(); close(g.done) }()
}

// Stop stops every consumer and waits up to timeout for them to return: a batch whose store
// began is finished and acknowledged first. It returns false when a consumer did not return
// in time.
func (g *Group) Stop(timeout time.Duration) bool {
	g.mu.Lock()
	cancel, done := g.cancel, g.done
	g.mu.Unlock()
	if done == nil {
		return true
	}
	cancel()
	select {
	case <-done:
		return true
	case <-time.After(timeout):
		return false
	}
}
