package outbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/alternayte/queuebox/shared/every"
	"github.com/alternayte/queuebox/shared/health"
	"github.com/alternayte/queuebox/shared/lease"
	"github.com/alternayte/queuebox/shared/route"
	"github.com/alternayte/queuebox/shared/store"
	"github.com/alternayte/queuebox/shared/transform"
)

// Options build a Poller.
type Options struct {
	Store  store.OutboxStore
	Config Config
	Routes *route.Table
	// RouteTransforms holds the transform of each route by its Index; a route without one
	// is absent.
	RouteTransforms map[int]*transform.Step
	Destinations    []Destination
	// Metrics receives the measurements; nil means NopMetrics.
	Metrics Metrics
	// Logger receives the log lines; nil means slog.Default().
	Logger *slog.Logger
	// States holds the destination state (pause, circuit breaker, rate limit). Nil means the
	// Store, when it is a store.DestinationStateStore; otherwise no destination is ever
	// paused, open or limited.
	States store.DestinationStateStore
	// Tracer creates the spans of the claims and deliveries (docs/tracing.md); nil, the
	// default, means tracing is off: no span is created and no trace header is read or
	// written.
	Tracer trace.Tracer
}

// Poller claims and delivers outbox rows. One Poller serves one process; Run may be called
// again after it returns (a warm Lambda container), but not concurrently.
type Poller struct {
	store   store.OutboxStore
	locker  store.OutboxLocker // the store's claim mode lock, set in that mode alone
	cfg     Config
	routes  *route.Table
	routeTx map[int]*transform.Step
	dests   map[string]Destination
	plans   map[string]*destPlan
	defPlan *destPlan // the plan of a row that no destination takes
	ctl     *controls
	dedup   dedupReader // the replay generations of rows for a deduplication id (dedup.go)
	metrics Metrics
	log     *slog.Logger
	tracer  trace.Tracer // nil when tracing is off
	wake    chan struct{}

	// leaseMetrics counts the publishes stopped at their lease's local deadline; nil when
	// Metrics does not implement lease.Metrics.
	leaseMetrics lease.Metrics

	beat health.Heartbeat

	reclaimGate every.Gate // the reclaim, at most once per ClaimTimeout / 5
	gaugeGate   every.Gate // the pending gauges, at most once per PendingGaugeInterval

	mu        sync.Mutex
	depthSeen map[string]bool

	headerNotes headerNotes // the uncarried headers already logged at warn level (headers.go)
}

// New returns a Poller.
func New(opts Options) (*Poller, error) {
	if opts.Store == nil {
		return nil, errors.New("outbox: a store is required")
	}
	if opts.Routes == nil {
		opts.Routes = route.NewTable(nil)
	}
	if opts.Metrics == nil {
		opts.Metrics = NopMetrics{}
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	cfg := opts.Config.WithDefaults()
	var locker store.OutboxLocker
	switch cfg.ClaimMode {
	case ClaimModeLease:
	case ClaimModeLock:
		var ok bool
		if locker, ok = opts.Store.(store.OutboxLocker); !ok {
			return nil, errors.New("outbox: the claim mode lock needs a store that offers it (PostgreSQL)")
		}
	default:
		return nil, fmt.Errorf("outbox: unknown claim mode %q (lease or lock)", cfg.ClaimMode)
	}
	dests := make(map[string]Destination, len(opts.Destinations))
	plans := make(map[string]*destPlan, len(opts.Destinations))
	for _, d := range opts.Destinations {
		dests[d.Name] = d
		pl, err := newPlan(cfg, d)
		if err != nil {
			return nil, err
		}
		plans[d.Name] = pl
	}
	log := opts.Logger.With("component", "outbox")
	ctl := &controls{st: opts.States, log: log}
	if ctl.st == nil {
		ctl.st, _ = opts.Store.(store.DestinationStateStore)
	}
	ctl.metrics, _ = opts.Metrics.(ControlMetrics)
	leaseMetrics, _ := opts.Metrics.(lease.Metrics)
	return &Poller{
		leaseMetrics: leaseMetrics,

		store:     opts.Store,
		locker:    locker,
		cfg:       cfg,
		routes:    opts.Routes,
		routeTx:   opts.RouteTransforms,
		dests:     dests,
		plans:     plans,
		defPlan:   &destPlan{retry: resolveRetry(cfg, nil)},
		ctl:       ctl,
		dedup:     newDedupReader(opts.Store, dests),
		metrics:   opts.Metrics,
		log:       log,
		tracer:    opts.Tracer,
		wake:      make(chan struct{}, 1),
		depthSeen: map[string]bool{},
	}, nil
}

// newPlan resolves the controls of a destination and checks them.
func newPlan(cfg Config, d Destination) (*destPlan, error) {
	pl := &destPlan{name: d.Name, retry: resolveRetry(cfg, d.Retry), breaker: d.Breaker, rate: d.RateLimit}
	for i, s := range pl.retry.schedule {
		if s <= 0 {
			return nil, fmt.Errorf("outbox: destination %s: retry schedule entry %d is not above 0", d.Name, i)
		}
	}
	if b := d.Breaker; b != nil && (b.Threshold < 1 || b.Window <= 0 || b.CoolDown <= 0) {
		return nil, fmt.Errorf("outbox: destination %s: the circuit breaker needs a threshold of at least 1, a window and a cool-down", d.Name)
	}
	if r := d.RateLimit; r != nil {
		if r.RequestsPerSecond < 1 || r.Burst < 1 {
			return nil, fmt.Errorf("outbox: destination %s: the rate limit needs at least 1 request a second and a burst of at least 1", d.Name)
		}
		pl.interval = time.Second / time.Duration(r.RequestsPerSecond)
	}
	return pl, nil
}

// Destinations returns what the poller last read of each destination's pause and circuit
// breaker: the health detail of the outbox.
func (p *Poller) Destinations() []DestinationStatus { return p.ctl.snapshot(p.plans) }

// HeldDestinations is the health detail of the outbox poller: {"destinations": [...]} with the
// destinations that are paused or whose circuit is not closed, or nil (no details field) when
// every destination delivers.
func (p *Poller) HeldDestinations() any {
	var held []DestinationStatus
	for _, s := range p.Destinations() {
		if s.Paused || s.Circuit != "closed" {
			held = append(held, s)
		}
	}
	if len(held) == 0 {
		return nil
	}
	return map[string]any{"destinations": held}
}

// Wake makes a waiting run claim at once. It never blocks; a wake that finds the run busy is
// merged with the pending one. A lost wake costs latency, never a message.
func (p *Poller) Wake() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// RunOptions choose how a run ends.
type RunOptions struct {
	// StopWhenIdle ends the run as soon as a claim finds nothing and no row is in flight
	// (the drain mode of the Lambda driver).
	StopWhenIdle bool
	// ClaimUntil, when not zero, is the time after which the run claims nothing more. The
	// run then waits for the rows in flight and returns.
	ClaimUntil time.Time
}

// Run claims and delivers rows until ctx is done or the options end the run. When it stops
// claiming, it waits up to Config.ShutdownTimeout (and never past ctx's deadline) for the
// rows in flight; a row still in flight after that stays processing, and the reclaim step
// recovers it when its lease expires. Database errors are logged and the claim is retried
// after a pause; a run never ends because of them.
func (p *Poller) Run(ctx context.Context, opts RunOptions) Summary {
	p.beat.Start()
	defer p.beat.Stop()
	r := newRun(ctx, p)
	r.start()
	r.claimLoop(ctx, opts)
	r.stop(ctx, true)
	return r.summary()
}

// Check is the outbox-poller health check: it fails when no run is active, when the loop has
// not turned for a minute (or three poll intervals, when longer), or when its last claim
// failed.
func (p *Poller) Check(context.Context) error {
	return p.beat.Check(max(time.Minute, 3*p.cfg.PollInterval))
}

// RunOnce claims one batch, delivers it and waits for it to finish. Tests and tools use it.
func (p *Poller) RunOnce(ctx context.Context) Summary {
	r := newRun(ctx, p)
	r.start()
	r.claimOnce(ctx)
	// The batch is delivered: the rows that no publisher has taken yet stay queued for them.
	r.stop(ctx, false)
	return r.summary()
}
