package outbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/alternayte/queuebox/shared/every"
	"github.com/alternayte/queuebox/shared/health"
	"github.com/alternayte/queuebox/shared/lease"
	"github.com/alternayte/queuebox/shared/redact"
	"github.com/alternayte/queuebox/shared/route"
	"github.com/alternayte/queuebox/shared/store"
	"github.com/alternayte/queuebox/shared/tracing"
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

// finishBatch is the most rows one finishing flush takes.
const finishBatch = 500

// finishGather and finishLinger: the finisher waits up to finishLinger for a statement of
// finishGather rows while that many rows are being published.
const (
	finishGather = 64
	finishLinger = 2 * time.Millisecond
)

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

// publisher takes claimed rows from the queue and publishes them, one at a time, until the
// queue is closed. Concurrency publishers run, so at most Concurrency publishes are in flight.
func (r *run) publisher() {
	defer r.publishers.Done()
	for f := range r.queue {
		r.mu.Lock()
		r.queued--
		hungry := r.queued < r.lowWater
		r.mu.Unlock()
		if hungry {
			select {
			case r.hungry <- struct{}{}:
			default:
			}
		}
		var res result
		if f.lease.Ended() {
			// Claimed ahead, it waited in the queue past its lease's local deadline, or a
			// renewal lost its claim meanwhile.
			res = result{f: f, expired: true}
		} else {
			res = r.p.deliver(f.ctx, f)
		}
		r.mu.Lock()
		f.finishing = true
		r.finishing++
		r.mu.Unlock()
		r.results <- res
	}
}

// claimLoop claims while slots are free, until ctx is done or the options end the run.
func (r *run) claimLoop(ctx context.Context, opts RunOptions) {
	p := r.p
	pause := time.NewTimer(0)
	defer pause.Stop()
	for ctx.Err() == nil {
		if !opts.ClaimUntil.IsZero() && !time.Now().Before(opts.ClaimUntil) {
			return
		}
		// Claim a whole batch as soon as less than a batch (or one round of publishes, if
		// that is more) waits, so that the publishers never idle while a claim runs and
		// each claim takes many rows: under load a claim of 100 rows took 10 ms, about as
		// long as the publishers need for a batch, and claiming only when less than one
		// round waited left them idle for a third of the time. At most 2 x BatchSize +
		// Concurrency claimed rows (lowWater + BatchSize + Concurrency) wait for or run
		// their publish; the rows whose publish returned wait for the finisher apart from
		// them (at most finishBatch more), so a slow finishing write does not stop the
		// claims: the finisher's next statement simply takes more rows.
		r.mu.Lock()
		inflight, queued := len(r.inflight), r.queued
		unpublished := inflight - r.finishing
		r.mu.Unlock()
		lowWater, maxInflight := r.lowWater, r.maxUnpublished
		if queued >= lowWater || unpublished >= maxInflight || inflight >= maxInflight+finishBatch {
			select {
			case <-ctx.Done():
			case <-r.finished:
				p.beat.Beat("")
			case <-r.hungry:
				p.beat.Beat("")
			}
			continue
		}
		limit := min(p.cfg.BatchSize, maxInflight-unpublished, maxInflight+finishBatch-inflight)
		claimed, err := r.claimBatch(ctx, limit)
		if err != nil {
			p.beat.Beat("the last claim failed: " + redact.Error(err))
			if ctx.Err() == nil {
				p.log.Error("outbox cycle failed; retrying after a pause", "error", redact.Error(err))
			}
			r.sleep(ctx, pause, max(p.cfg.PollInterval, time.Second), false)
			continue
		}
		p.beat.Beat("")
		if claimed == limit {
			continue
		}
		// Idle only when nothing was in flight when the claim began: a row finished while the
		// claim ran can free the next row of its key, which that claim could not see yet.
		if claimed == 0 && opts.StopWhenIdle && inflight == 0 && r.inflightCount() == 0 {
			return
		}
		// A finished row can free the next row of its key, so a flush also ends the wait:
		// also a flush that came while the claim ran, when rows were in flight then or were
		// just claimed, even if none is left in flight now (its signal is still buffered).
		r.sleep(ctx, pause, p.cfg.PollInterval, claimed > 0 || inflight > 0 || r.inflightCount() > 0)
	}
}

// claimWindow times the limit is the Window of a windowed claim: twice the limit lets a
// claim fill from the window alone when keys have a row or two each (the common case: one
// key per entity, a few events each), without the walk of keys past the window.
const claimWindow = 2

// hasKey tells whether any of rows has a key.
func hasKey(rows []store.OutboxMessage) bool {
	for i := range rows {
		if rows[i].Key != "" {
			return true
		}
	}
	return false
}

func (r *run) claimOnce(ctx context.Context) {
	if _, err := r.claimBatch(ctx, r.p.cfg.BatchSize); err != nil {
		r.p.log.Error("outbox cycle failed", "error", redact.Error(err))
	}
}

// sleep waits for d, a wake, ctx, and (when onFinish) the next flush of finishing writes.
func (r *run) sleep(ctx context.Context, t *time.Timer, d time.Duration, onFinish bool) {
	t.Reset(d)
	var finished <-chan struct{}
	if onFinish {
		finished = r.finished
	}
	select {
	case <-ctx.Done():
	case <-t.C:
		return
	case <-r.p.wake:
	case <-finished:
	}
	if !t.Stop() {
		select {
		case <-t.C:
		default:
		}
	}
}

// claimBatch runs the maintenance steps that are due, claims up to limit rows and starts
// their publishes. It returns the number of rows claimed.
func (r *run) claimBatch(ctx context.Context, limit int) (int, error) {
	p := r.p
	if err := p.maybeReclaim(ctx, r); err != nil {
		return 0, err
	}
	p.maybeRefreshGauges(ctx)
	p.ctl.refresh(ctx, p.plans)
	var claimStart time.Time
	if p.tracer != nil {
		claimStart = time.Now()
	}
	params := store.OutboxClaimParams{Limit: limit, Lease: p.cfg.ClaimTimeout}
	r.mu.Lock()
	if r.window {
		params.Window = claimWindow * limit
	}
	r.mu.Unlock()
	// The lease that the database gives each row starts when the statement runs, after it was
	// sent: the local deadline counts from the send.
	sent := time.Now()
	rows, err := p.store.OutboxClaim(ctx, params)
	claimSpan := p.claimSpan(ctx, claimStart, limit, len(rows), err)
	if err != nil {
		return 0, fmt.Errorf("claiming outbox batch: %w", err)
	}
	r.mu.Lock()
	r.sum.Claimed += len(rows)
	r.window = len(rows) < limit || hasKey(rows)
	r.mu.Unlock()
	rows = r.withReplayGenerations(ctx, rows)
	debug := p.log.Enabled(ctx, slog.LevelDebug)
	for _, row := range rows {
		if debug {
			p.rowLog(row, p.destinationOf(row), trace.SpanContext{}).Debug("outbox row claimed")
		}
		r.launch(row, claimSpan, sent)
	}
	return len(rows), nil
}

// claimSpan records the span of a claim that took rows or failed, from start to now, and
// returns its context; a claim that found nothing (the idle poll) records none, so that an
// idle poller does not fill the tracing backend. It returns the zero SpanContext when tracing
// is off.
func (p *Poller) claimSpan(ctx context.Context, start time.Time, limit, rows int, err error) trace.SpanContext {
	if p.tracer == nil || (rows == 0 && err == nil) {
		return trace.SpanContext{}
	}
	_, span := p.tracer.Start(ctx, "outbox claim", trace.WithSpanKind(trace.SpanKindInternal), trace.WithTimestamp(start),
		trace.WithAttributes(attribute.Int("queuebox.batch.limit", limit), attribute.Int("queuebox.batch.rows", rows)))
	if err != nil {
		span.RecordError(errors.New(redact.Error(err)))
		span.SetStatus(codes.Error, "claiming outbox batch failed")
	}
	span.End()
	return span.SpanContext()
}

// launch queues a claimed row for a publisher. sent is when the claim statement was sent: the
// row's local lease deadline counts from it.
func (r *run) launch(row store.OutboxMessage, claimSpan trace.SpanContext, sent time.Time) {
	fctx, l := lease.Start(r.pubCtx, sent, r.p.cfg.ClaimTimeout)
	f := &flight{row: row, ctx: fctx, lease: l, started: time.Now(), cancel: l.Stop, claimSpan: claimSpan}
	r.mu.Lock()
	r.inflight[row.ID] = f
	r.queued++
	r.mu.Unlock()
	r.queue <- f // never blocks: the queue holds BatchSize + Concurrency
}

func (r *run) inflightCount() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.inflight)
}

// deliver routes and publishes one row. With tracing on, the delivery has its span: the child
// of the row's trace context (its traceparent header) or the root of a new trace, linked to
// the claim's span; the message carries that span's traceparent.
func (p *Poller) deliver(ctx context.Context, f *flight) result {
	if p.tracer == nil {
		return p.deliverRow(ctx, f, nil)
	}
	// One attribute slice and one option slice, each allocated once at its final size.
	attrs := make([]attribute.KeyValue, 3, 4)
	attrs[0] = attribute.String("queuebox.message_id", f.row.ID)
	attrs[1] = attribute.String("queuebox.topic", f.row.Topic)
	attrs[2] = attribute.Int("queuebox.attempt", f.row.Attempt)
	if f.row.Key != "" {
		attrs = append(attrs, attribute.String("queuebox.key", f.row.Key))
	}
	opts := make([]trace.SpanStartOption, 2, 3)
	opts[0] = trace.WithSpanKind(trace.SpanKindProducer)
	opts[1] = trace.WithAttributes(attrs...)
	if f.claimSpan.IsValid() {
		opts = append(opts, trace.WithLinks(trace.Link{SpanContext: f.claimSpan}))
	}
	ctx, span := p.tracer.Start(tracing.ContextFromJSON(ctx, f.row.Headers), "outbox deliver", opts...)
	defer span.End()
	res := p.deliverRow(ctx, f, span)
	res.sc = span.SpanContext()
	var outcome string
	switch {
	case res.expired:
		var cause error
		outcome, cause = "lease_expired", lease.ErrDeadline
		if lost := f.lease.Lost(); lost != nil {
			outcome, cause = "claim_lost", lost
		}
		span.SetStatus(codes.Error, cause.Error())
	case res.deferBy > 0:
		outcome = "deferred"
		span.SetAttributes(attribute.String("queuebox.defer_reason", res.reason))
	case res.err == nil:
		outcome = "sent"
	default:
		pl := res.plan
		if pl == nil {
			pl = p.defPlan
		}
		outcome = "retry"
		if res.dead || isTerminal(res.err) || pl.retry.exhausted(f.row.Attempt, f.row.MaxAttempts) {
			outcome = "dead"
		}
		span.SetStatus(codes.Error, redact.Error(res.err))
	}
	span.SetAttributes(attribute.String("queuebox.result", outcome))
	return res
}

// deliverRow routes and publishes one row; span is the delivery's span, nil when tracing is
// off.
func (p *Poller) deliverRow(ctx context.Context, f *flight, span trace.Span) result {
	msg := messageOf(f.row, p)
	rt, ok := p.routes.Match(msg.Topic)
	if !ok {
		return result{f: f, err: noRouteError(msg.Topic), dead: true}
	}
	msg.Route = rt
	if span != nil {
		span.SetAttributes(attribute.String("queuebox.destination", rt.Destination))
		if msg.Headers == nil {
			msg.Headers = make(map[string]string, 2)
		}
		tracing.SetHeaders(ctx, msg.Headers)
	}
	dest, ok := p.dests[rt.Destination]
	if !ok || dest.Publisher == nil {
		return result{f: f, err: fmt.Errorf("no publisher supports destination %s", rt.Destination), dead: true}
	}
	pl := p.plans[dest.Name]
	if res, stop := p.fitHeaders(ctx, f, dest, pl, &msg, span); stop {
		return res // an application row with a header that dest cannot carry (headers.go)
	}
	adm := p.ctl.admit(ctx, pl)
	if f.lease.Ended() {
		// The admission (a rate-limit slot) waited past the lease's local deadline.
		p.ctl.endTrial(pl, adm.trial)
		return result{f: f, plan: pl, expired: true}
	}
	if adm.deferBy > 0 {
		return result{f: f, plan: pl, deferBy: adm.deferBy, reason: adm.reason}
	}
	if routeStep, destStep := p.routeTx[rt.Index], dest.Transform; routeStep != nil || destStep != nil {
		vars := transform.DeliveryVars(msg.ID, msg.Topic, msg.Attempt, msg.CreatedAt)
		out, err := transform.RunDelivery(ctx, routeStep, destStep, msg.Payload, vars)
		if err != nil {
			p.ctl.endTrial(pl, adm.trial)
			return result{f: f, plan: pl, err: fmt.Errorf("transforming the payload: %w", err)}
		}
		if out.Failure != nil {
			p.metrics.TransformFailure(string(out.Failure.OnError))
		}
		switch out.Action {
		case transform.ActionRetry:
			p.ctl.endTrial(pl, adm.trial)
			return result{f: f, plan: pl, err: fmt.Errorf("%s transform failed: %w", out.Failure.Stage, out.Failure.Err)}
		case transform.ActionDead:
			p.ctl.endTrial(pl, adm.trial)
			return result{f: f, plan: pl, err: fmt.Errorf("%s transform failed: %w", out.Failure.Stage, out.Failure.Err), dead: true}
		}
		msg.Payload = out.Body
	}
	if f.lease.Ended() {
		p.ctl.endTrial(pl, adm.trial)
		return result{f: f, plan: pl, expired: true}
	}
	start := time.Now()
	err := dest.Publisher.Publish(ctx, msg)
	took := time.Since(start)
	p.metrics.PublishDuration(dest.Publisher.Type(), took)
	// A publish that the lease's deadline cancelled says nothing of the destination: the
	// breaker does not count it (outcome skips a publish whose context ended).
	p.ctl.outcome(ctx, pl, adm, err)
	if err != nil && f.lease.Ended() {
		return result{f: f, plan: pl, expired: true, started: true}
	}
	if p.log.Enabled(ctx, slog.LevelDebug) {
		sc := trace.SpanContext{}
		if span != nil {
			sc = span.SpanContext()
		}
		if err != nil {
			p.rowLog(f.row, dest.Name, sc).Debug("outbox delivery failed", "duration_ms", took.Milliseconds(), "error", redact.Error(err))
		} else {
			p.rowLog(f.row, dest.Name, sc).Debug("outbox delivery succeeded", "duration_ms", took.Milliseconds())
		}
	}
	if err != nil {
		p.metrics.DestinationOutcome(dest.Name, "failure")
		return result{f: f, plan: pl, err: err}
	}
	p.metrics.DestinationOutcome(dest.Name, "success")
	return result{f: f, plan: pl}
}

// messageOf turns a claimed row into the message a publisher sees.
func messageOf(row store.OutboxMessage, p *Poller) Message {
	m := Message{
		ID: row.ID, Topic: row.Topic, Key: row.Key, AggregateType: row.AggregateType,
		Payload: row.Payload, Attempt: row.Attempt, CreatedAt: row.CreatedAt,
		ReplayGeneration: row.ReplayGeneration,
	}
	if len(row.Headers) > 0 && string(row.Headers) != "{}" {
		var raw map[string]json.RawMessage
		if err := json.Unmarshal(row.Headers, &raw); err != nil {
			p.rowLog(row, p.destinationOf(row), trace.SpanContext{}).Warn("outbox row headers are not a JSON object; sending none", "error", err)
		} else if len(raw) > 0 {
			m.Headers = make(map[string]string, len(raw))
			for k, v := range raw {
				var s string
				if json.Unmarshal(v, &s) == nil {
					m.Headers[k] = s
				} else {
					m.Headers[k] = string(v)
				}
			}
		}
	}
	return m
}

// finisher groups the results that are ready and finishes them with one fenced statement per
// kind, then frees their slots.
func (r *run) finisher() {
	defer r.helpers.Done()
	gatherTimer := time.NewTimer(time.Hour)
	gatherTimer.Stop()
	for {
		var batch []result
		select {
		case res := <-r.results:
			batch = append(batch, res)
		case <-r.done:
			return
		}
	drain:
		for len(batch) < finishBatch {
			select {
			case res := <-r.results:
				batch = append(batch, res)
			default:
				break drain
			}
		}
		if len(batch) < finishGather {
			batch = r.gather(batch, gatherTimer)
		}
		r.finish(batch)
	}
}

// gather waits up to finishLinger for more results while enough rows are being published to
// fill a statement of finishGather rows, so that a busy poller finishes its rows with fewer,
// larger statements; an idle one (few rows in flight) finishes at once.
func (r *run) gather(batch []result, t *time.Timer) []result {
	r.mu.Lock()
	publishing := len(r.inflight) - r.finishing
	r.mu.Unlock()
	if publishing < finishGather-len(batch) {
		return batch
	}
	t.Reset(finishLinger)
	defer t.Stop()
	for len(batch) < finishGather {
		select {
		case res := <-r.results:
			batch = append(batch, res)
		case <-t.C:
			return batch
		case <-r.done:
			return batch
		}
	}
	return batch
}

func (r *run) finish(batch []result) {
	p := r.p
	r.mu.Lock()
	abandon := r.abandon
	r.mu.Unlock()
	if !abandon {
		// Nearly every row of a busy batch is sent: its slices are sized once.
		sent := make([]store.Claim, 0, len(batch))
		var retries []store.OutboxRetryParams
		var deads []store.OutboxDeadParams
		var defers []deferral
		// The rows of sent, retries and deads, in their order, for the log lines.
		sentRows := make([]rowLine, 0, len(batch))
		var retryRows, deadRows []rowLine
		var expired []result
		for _, res := range batch {
			row := &res.f.row
			pl := res.plan
			if pl == nil {
				pl = p.defPlan
			}
			switch {
			case res.expired:
				expired = append(expired, res)
			case res.deferBy > 0:
				defers = append(defers, deferral{OutboxDeferParams: store.OutboxDeferParams{Claim: row.Claim(), Delay: res.deferBy}, dest: pl.name, reason: res.reason, row: row, sc: res.sc})
			case res.err == nil:
				sent = append(sent, row.Claim())
				sentRows = append(sentRows, rowLine{row, pl.name, res.sc})
			case res.dead || isTerminal(res.err) || pl.retry.exhausted(row.Attempt, row.MaxAttempts):
				deads = append(deads, store.OutboxDeadParams{Claim: row.Claim(), LastError: redact.Error(res.err)})
				deadRows = append(deadRows, rowLine{row, pl.name, res.sc})
			default:
				delay := pl.retry.delay(row.Attempt, res.err)
				retries = append(retries, store.OutboxRetryParams{Claim: row.Claim(), Delay: delay, LastError: redact.Error(res.err)})
				retryRows = append(retryRows, rowLine{row, pl.name, res.sc})
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		r.finishSent(ctx, sent, sentRows)
		r.finishRetries(ctx, retries, retryRows)
		r.finishDeads(ctx, deads, deadRows)
		r.finishDefers(ctx, defers)
		cancel()
		r.finishExpired(expired)
	}
	r.mu.Lock()
	for _, res := range batch {
		res.f.cancel()
		delete(r.inflight, res.f.row.ID)
		r.finishing--
		p.metrics.ProcessingDuration(time.Since(res.f.started))
	}
	r.mu.Unlock()
	select {
	case r.finished <- struct{}{}:
	default:
	}
}

// withRetries runs a finishing write, retrying a failed statement a few times while the
// leases are still young. A write that keeps failing leaves the rows processing; the reclaim
// step recovers them after their leases expire.
func withRetries[T any](ctx context.Context, p *Poller, what string, n int, write func(context.Context) (T, error)) (T, bool) {
	var zero T
	delays := []time.Duration{0, 100 * time.Millisecond, 500 * time.Millisecond, 2 * time.Second}
	var err error
	for _, d := range delays {
		if d > 0 {
			select {
			case <-ctx.Done():
				return zero, false
			case <-time.After(d):
			}
		}
		var v T
		if v, err = write(ctx); err == nil {
			return v, true
		}
	}
	p.log.Error("outbox finishing write failed; the rows return to pending when their leases expire",
		"write", what, "rows", n, "error", redact.Error(err))
	for range n {
		p.metrics.ProcessError()
	}
	return zero, false
}

func changedSet(ids []string) map[string]bool {
	m := make(map[string]bool, len(ids))
	for _, id := range ids {
		m[id] = true
	}
	return m
}

// rowLine is a finished row and its destination, for the log lines about it. row points at
// the row of its flight, which outlives the finishing writes.
type rowLine struct {
	row  *store.OutboxMessage
	dest string
	sc   trace.SpanContext // the delivery span, when tracing is on
}

func (r *run) finishSent(ctx context.Context, claims []store.Claim, rows []rowLine) {
	if len(claims) == 0 {
		return
	}
	p := r.p
	ids, ok := withRetries(ctx, p, "mark sent", len(claims), func(ctx context.Context) ([]string, error) {
		return p.store.OutboxMarkSent(ctx, claims)
	})
	if !ok {
		return
	}
	changed := changedSet(ids)
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, c := range claims {
		if changed[c.ID] {
			r.sum.Sent++
			p.metrics.Outcome("sent")
			continue
		}
		r.sum.ClaimsLost++
		p.metrics.ClaimLost()
		p.rowLog(*rows[i].row, rows[i].dest, rows[i].sc).Error("outbox message was delivered after its claim was lost; the new owner delivers it again, a duplicate")
	}
}

func (r *run) finishRetries(ctx context.Context, retries []store.OutboxRetryParams, rows []rowLine) {
	if len(retries) == 0 {
		return
	}
	p := r.p
	ids, ok := withRetries(ctx, p, "retry", len(retries), func(ctx context.Context) ([]string, error) {
		return p.store.OutboxRetry(ctx, retries)
	})
	if !ok {
		return
	}
	changed := changedSet(ids)
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, rt := range retries {
		log := p.rowLog(*rows[i].row, rows[i].dest, rows[i].sc)
		if changed[rt.ID] {
			r.sum.Retried++
			p.metrics.Outcome("failed")
			log.Warn("outbox delivery failed; retrying later",
				"retry_in_ms", rt.Delay.Milliseconds(), "error", rt.LastError)
			continue
		}
		r.sum.ClaimsLost++
		p.metrics.ClaimLost()
		log.Warn("outbox retry lost its claim; another replica owns the message")
	}
}

func (r *run) finishDeads(ctx context.Context, deads []store.OutboxDeadParams, rows []rowLine) {
	if len(deads) == 0 {
		return
	}
	p := r.p
	ids, ok := withRetries(ctx, p, "mark dead", len(deads), func(ctx context.Context) ([]string, error) {
		return p.store.OutboxMarkDead(ctx, deads)
	})
	if !ok {
		return
	}
	changed := changedSet(ids)
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, d := range deads {
		log := p.rowLog(*rows[i].row, rows[i].dest, rows[i].sc)
		if changed[d.ID] {
			r.sum.Dead++
			p.metrics.Outcome("dead")
			log.Warn("outbox message is dead", "error", d.LastError)
			continue
		}
		r.sum.ClaimsLost++
		p.metrics.ClaimLost()
		log.Warn("outbox dead letter lost its claim; another replica owns the message")
	}
}

// deferral is one row returned to pending unattempted, with what its metric needs.
type deferral struct {
	store.OutboxDeferParams
	dest   string
	reason string
	row    *store.OutboxMessage // the row of its flight
	sc     trace.SpanContext    // the delivery span, when tracing is on
}

func (r *run) finishDefers(ctx context.Context, defers []deferral) {
	if len(defers) == 0 {
		return
	}
	p := r.p
	params := make([]store.OutboxDeferParams, len(defers))
	for i, d := range defers {
		params[i] = d.OutboxDeferParams
	}
	ids, ok := withRetries(ctx, p, "defer", len(defers), func(ctx context.Context) ([]string, error) {
		return p.store.OutboxDefer(ctx, params)
	})
	if !ok {
		return
	}
	changed := changedSet(ids)
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, d := range defers {
		if changed[d.ID] {
			r.sum.Deferred++
			if p.ctl.metrics != nil {
				p.ctl.metrics.Deferred(d.dest, d.reason)
			}
			continue
		}
		r.sum.ClaimsLost++
		p.metrics.ClaimLost()
		p.rowLog(*d.row, d.dest, d.sc).Warn("outbox deferral lost its claim; another replica owns the message")
	}
}

// renewer extends the leases of rows whose publish still runs, every third of the lease,
// and cancels the publish of a row whose claim was lost: a renewal that updated zero rows or
// failed (renewed.go).
func (r *run) renewer() {
	defer r.helpers.Done()
	p := r.p
	tick := time.NewTicker(max(p.cfg.ClaimTimeout/3, 10*time.Millisecond))
	defer tick.Stop()
	for {
		select {
		case <-r.done:
			return
		case <-tick.C:
		}
		r.mu.Lock()
		var claims []store.Claim
		flights := map[string]*flight{}
		for id, f := range r.inflight {
			// A row past its lease's local deadline, or lost, is not renewed: its publish was
			// stopped, or will not start, whatever the renewal would say.
			if !f.finishing && !f.lease.Ended() {
				claims = append(claims, f.row.Claim())
				flights[id] = f
			}
		}
		r.mu.Unlock()
		if len(claims) == 0 {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), max(p.cfg.ClaimTimeout/3, time.Second))
		// The renewed leases start when the statement runs, after it was sent: the local
		// deadlines count from the send.
		sent := time.Now()
		renewed, err := p.store.OutboxRenew(ctx, store.OutboxRenewParams{Claims: claims, Lease: p.cfg.ClaimTimeout})
		cancel()
		r.renewed(flights, sent, renewed, err) // renewed.go
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

// maybeReclaim returns expired claims to pending at most once per ClaimTimeout / 5.
func (p *Poller) maybeReclaim(ctx context.Context, r *run) error {
	if !p.reclaimGate.Take(p.cfg.ClaimTimeout / 5) {
		return nil
	}
	n, err := p.store.OutboxReclaim(ctx)
	if err != nil {
		p.reclaimGate.Forget()
		return fmt.Errorf("reclaiming expired outbox claims: %w", err)
	}
	if n > 0 {
		p.metrics.Reclaimed(int(n))
		p.log.Info("outbox claims reclaimed after their leases expired", "rows", n)
		r.mu.Lock()
		r.sum.Reclaimed += int(n)
		r.mu.Unlock()
	}
	return nil
}

// maybeRefreshGauges queries the pending figures at most once per PendingGaugeInterval.
func (p *Poller) maybeRefreshGauges(ctx context.Context) {
	if !p.gaugeGate.Take(p.cfg.PendingGaugeInterval) {
		return
	}
	stats, err := p.store.OutboxStats(ctx)
	if err != nil {
		p.log.Warn("reading the outbox pending gauges failed", "error", redact.Error(err))
		return
	}
	p.metrics.Pending(stats.Pending, stats.OldestPendingAge)
	depth := map[string]int64{}
	for topic, n := range stats.PendingByTopic {
		if rt, ok := p.routes.Match(topic); ok {
			depth[rt.Destination] += n
		}
	}
	p.mu.Lock()
	for d := range depth {
		p.depthSeen[d] = true
	}
	seen := make([]string, 0, len(p.depthSeen))
	for d := range p.depthSeen {
		seen = append(seen, d)
	}
	p.mu.Unlock()
	for _, d := range seen {
		p.metrics.QueueDepth(d, depth[d])
	}
}
