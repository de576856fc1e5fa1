package outbox

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/alternayte/queuebox/shared/lease"
	"github.com/alternayte/queuebox/shared/redact"
	"github.com/alternayte/queuebox/shared/store"
	"github.com/alternayte/queuebox/shared/writeretry"
)

// The run: the state of one Run or RunOnce call, the goroutines of its stages (claim.go,
// deliver.go, finish.go, renew.go) and its stop, which releases the rows no publisher took and
// waits for the rows in flight.

// run is the state of one Run call.
type run struct {
	p *Poller

	pubCtx    context.Context
	pubCancel context.CancelFunc

	results  chan result
	queue    chan *flight  // claimed rows waiting for a publisher
	hungry   chan struct{} // signalled when fewer than lowWater rows wait
	finished chan struct{} // signalled after every flush of finishing writes
	freed    chan struct{} // signalled after a flush that may have freed keys (signalFreed)
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

	// writer runs the finishing writes under the write-retry policy (finish.go).
	writer *writeretry.Writer

	// gauging is true while a query of the pending gauges runs (refreshGaugesApart).
	gauging atomic.Bool

	// held is the lock claims that the run holds (held.go); nil in the lease mode.
	held map[*heldBatch]bool

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
	// held is the lock claim that holds the row (held.go); nil in the lease mode.
	held *heldBatch
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
	var held map[*heldBatch]bool
	if p.locker != nil {
		held = map[*heldBatch]bool{}
	}
	return &run{
		held:           held,
		p:              p,
		pubCtx:         pubCtx,
		pubCancel:      pubCancel,
		lowWater:       lowWater,
		maxUnpublished: maxUnpublished,
		results:        make(chan result, maxUnpublished+finishBatch),
		queue:          make(chan *flight, maxUnpublished),
		hungry:         make(chan struct{}, 1),
		finished:       make(chan struct{}, 1),
		freed:          make(chan struct{}, 1),
		done:           make(chan struct{}),
		inflight:       map[string]*flight{},
		writer:         writeretry.New(writeretry.Batch),
	}
}

func (r *run) start() {
	r.helpers.Add(1)
	go r.finisher()
	if r.held == nil {
		// A lock claim's rows need no renewal: the transaction holds them.
		r.helpers.Add(1)
		go r.renewer()
	}
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
	if r.held != nil {
		r.releaseHeld()
	}
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
	if r.held != nil {
		r.releaseHeldQueued(left)
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

// releaseHeldQueued takes the claimed rows that no publisher took out of their lock claims
// without a write: the commit of each claim leaves them pending, unattempted.
func (r *run) releaseHeldQueued(left []*flight) {
	r.mu.Lock()
	r.queued -= len(left)
	for _, f := range left {
		f.cancel()
		delete(r.inflight, f.row.ID)
		r.sum.Released++
	}
	completed := r.dropHeld(left)
	abandon := r.abandon
	r.mu.Unlock()
	for _, hb := range completed {
		r.finishHeld(hb, abandon)
	}
	if len(completed) > 0 {
		r.signalFreed()
	}
	r.signalFinished()
}
