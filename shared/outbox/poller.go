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
	"github.com/alternayte/queuebox/shared/redact"
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

// run is the state of one Run call.
type run struct {
	p *Poller

	pubCtx    context.Context
	pubCancel context.CancelFunc

	results  chan result
	queue    chan *flight  // claimed rows waiting for a publisher
	hungry   chan struct{} // signalled when fewer than lowWater rows wait
	finished chan struct{} // signalled after every flush of finishing writes
	done     chan struct{} // closed when the run stops its helpers

	mu       sync.Mutex
	inflight map[string]*flight
	queued   int // claimed rows not yet taken by a publisher
	// finishing counts the rows of inflight whose publish returned and whose finishing
	// write has not run yet.
	finishing int
	sum       Summary
	abandon   bool
	// window is true when the next claim examines at most its limit of due rows in order
	// and looks past them per key (store.OutboxClaimParams.Window): after a claim that came
	// back short or took a row with a key. A claim comes back short when few rows are due,
	// or when the due rows ahead are held by their keys (few keys with deep backlogs, or
	// every key in flight), and a claim without the window then examines every due row: 10
	// keys and 20 000 rows, 205-235 ms a claim; 1 000 keys all in flight and 100 000 rows,
	// 268 ms. Rows with keys are what can hold the rows ahead. Without keys, and while the
	// claims come back full, the claim keeps the cheaper statement.
	window bool

	// lowWater is the number of queued rows below which the next claim starts, and
	// maxUnpublished the most claimed rows that wait for or run their publish: the claims
	// run a whole batch ahead of the publishers.
	lowWater, maxUnpublished int

	publishers sync.WaitGroup
	helpers    sync.WaitGroup
}

type flight struct {
	row store.OutboxMessage
	// ctx is the publish's context: cancelled at the claim's local lease deadline (lease),
	// when the run abandons its publishes, and when the row is finished.
	ctx context.Context
	// lease is the local deadline of the row's claim, moved by each renewal that succeeded.
	lease *lease.Local
	// claimSpan is the span of the claim that took the row, linked from its delivery span;
	// the zero SpanContext when tracing is off.
	claimSpan trace.SpanContext
	started   time.Time
	cancel    context.CancelFunc
	// finishing is true once the publish returned; renewals skip such rows.
	finishing bool
}

type result struct {
	f    *flight
	err  error
	dead bool // no retry: no route, or no publisher for the destination
	// plan is the destination's controls; nil when the row has no destination.
	plan *destPlan
	// deferBy, when above 0, returns the row to pending unattempted for that long.
	deferBy time.Duration
	reason  string
	// sc is the row's delivery span, for the log lines about it; the zero SpanContext when
	// tracing is off.
	sc trace.SpanContext
	// expired is true when the claim reached its local lease deadline, or was lost to a
	// renewal (renewed.go), before the publish succeeded: the publish was cancelled (started)
	// or never began. Such a row spends no attempt and gets no finishing write; it is left to
	// its lease (leasedeadline.go).
	expired bool
	started bool
}

func newRun(ctx context.Context, p *Poller) *run {
	// The publishes do not inherit ctx's cancellation or deadline: stop() decides when a
	// publish in flight is abandoned, and it marks the run abandoned before it cancels them,
	// so a publish cut short never spends an attempt.
	pubCtx, pubCancel := context.WithCancel(context.WithoutCancel(ctx))
	lowWater := max(p.cfg.Concurrency, p.cfg.BatchSize)
	maxUnpublished := lowWater + p.cfg.BatchSize + p.cfg.Concurrency
	return &run{
		p:              p,
		pubCtx:         pubCtx,
		pubCancel:      pubCancel,
		lowWater:       lowWater,
		maxUnpublished: maxUnpublished,
		results:        make(chan result, maxUnpublished+finishBatch),
		queue:          make(chan *flight, maxUnpublished),
		hungry:         make(chan struct{}, 1),
		finished:       make(chan struct{}, 1),
		done:           make(chan struct{}),
		inflight:       map[string]*flight{},
	}
}

func (r *run) start() {
	r.helpers.Add(2)
	go r.finisher()
	go r.renewer()
	for range r.p.cfg.Concurrency {
		r.publishers.Add(1)
		go r.publisher()
	}
}

// stop ends a run: with release, it returns the claimed rows that no publisher has taken to
// pending (releaseQueued); it waits for the rows in flight up to the shutdown timeout (and
// never past the caller's deadline), then abandons the rest to lease expiry.
func (r *run) stop(ctx context.Context, release bool) {
	p := r.p
	wait := p.cfg.ShutdownTimeout
	if deadline, ok := ctx.Deadline(); ok {
		if left := time.Until(deadline); left < wait {
			wait = left
		}
	}
	if release {
		released := time.Now()
		r.releaseQueued(ctx, wait)
		wait = max(wait-time.Since(released), 0)
	}
	idle := make(chan struct{})
	close(r.queue) // the publishers finish what they took, then end
	go func() {
		r.publishers.Wait()
		for r.inflightCount() > 0 {
			select {
			case <-r.finished:
			case <-time.After(10 * time.Millisecond):
			}
		}
		close(idle)
	}()
	select {
	case <-idle:
	case <-time.After(wait):
		r.mu.Lock()
		r.abandon = true
		n := len(r.inflight)
		r.mu.Unlock()
		p.log.Warn("outbox rows still in flight at stop; they return to pending when their leases expire", "rows", n)
		r.pubCancel()
		<-idle
	}
	r.pubCancel()
	close(r.done)
	r.helpers.Wait()
}

// releaseQueued returns the claimed rows that no publisher has taken to pending at once,
// unattempted (a defer of no delay, fenced by their claims), so that a stopping run neither
// publishes them first nor leaves them processing until their leases expire. The claims run
// up to a batch ahead of the publishers, so at a stop up to 2 x batchSize + concurrency rows
// can wait in the queue; a row that the release cannot change stays to its lease.
func (r *run) releaseQueued(ctx context.Context, wait time.Duration) {
	var left []*flight
	for taking := true; taking; {
		select {
		case f := <-r.queue:
			left = append(left, f)
		default:
			taking = false
		}
	}
	if len(left) == 0 {
		return
	}
	p := r.p
	params := make([]store.OutboxDeferParams, len(left))
	for i, f := range left {
		params[i] = store.OutboxDeferParams{Claim: f.row.Claim()}
	}
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), max(wait, time.Second))
	ids, err := p.store.OutboxDefer(dctx, params)
	cancel()
	if err != nil {
		p.log.Warn("outbox rows not yet published at stop could not be released; they return to pending when their leases expire",
			"rows", len(left), "error", redact.Error(err))
	}
	changed := changedSet(ids)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.queued -= len(left)
	for _, f := range left {
		f.cancel()
		delete(r.inflight, f.row.ID)
		if changed[f.row.ID] {
			r.sum.Released++
		}
	}
}

func (r *run) summary() Summary {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.sum
}

func (r *run) inflightCount() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.inflight)
}
