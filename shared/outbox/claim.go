package outbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/alternayte/queuebox/shared/lease"
	"github.com/alternayte/queuebox/shared/redact"
	"github.com/alternayte/queuebox/shared/store"
)

// Claiming: the claim loop takes due rows ahead of the publishers and queues them, and the
// maintenance steps run before a claim: the reclaim, and the start of the pending gauges' query
// (beside the claims).

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
		// claims: the finisher's next statement simply takes more rows. In the claim mode
		// lock, a claim also waits while the run holds Config.HeldBatches claims.
		r.mu.Lock()
		inflight, queued := len(r.inflight), r.queued
		unpublished := inflight - r.finishing
		heldFull := r.heldFull()
		r.mu.Unlock()
		lowWater, maxInflight := r.lowWater, r.maxUnpublished
		if queued >= lowWater || unpublished >= maxInflight || inflight >= maxInflight+finishBatch || heldFull {
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

// sleep waits for d, a wake, ctx, and (when onFinish) the next flush of finishing writes that
// may have freed a key (r.freed).
func (r *run) sleep(ctx context.Context, t *time.Timer, d time.Duration, onFinish bool) {
	t.Reset(d)
	var finished <-chan struct{}
	if onFinish {
		finished = r.freed
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
	r.refreshGaugesApart(ctx)
	p.ctl.refresh(ctx, p.plans)
	var claimStart time.Time
	if p.tracer != nil {
		claimStart = time.Now()
	}
	params := store.OutboxClaimParams{Limit: limit, Lease: p.cfg.ClaimTimeout}
	r.mu.Lock()
	if r.window {
		params.Window = claimWindow * limit
		if r.held != nil {
			// The rows that the run's other lock claims hold are still pending, first in
			// the window: the claim's window passes over them.
			params.Skip = r.heldIDs()
		}
	}
	r.mu.Unlock()
	// The lease that the database gives each row starts when the statement runs, after it was
	// sent: the local deadline counts from the send.
	sent := time.Now()
	var rows []store.OutboxMessage
	var hb *heldBatch
	var err error
	if r.held != nil {
		rows, hb, err = r.claimHeld(ctx, params)
	} else {
		rows, err = p.store.OutboxClaim(ctx, params)
	}
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
		r.launch(row, hb, claimSpan, sent)
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

// launch queues a claimed row for a publisher; hb is its lock claim, nil in the lease mode.
// sent is when the claim statement was sent: the row's local lease deadline counts from it.
func (r *run) launch(row store.OutboxMessage, hb *heldBatch, claimSpan trace.SpanContext, sent time.Time) {
	fctx, l := lease.Start(r.pubCtx, sent, r.p.cfg.ClaimTimeout)
	f := &flight{row: row, ctx: fctx, lease: l, started: time.Now(), cancel: l.Stop, claimSpan: claimSpan, held: hb}
	r.mu.Lock()
	r.inflight[row.ID] = f
	r.queued++
	r.mu.Unlock()
	r.queue <- f // never blocks: the queue holds BatchSize + Concurrency
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

// refreshGaugesApart queries the pending figures at most once per PendingGaugeInterval, on a
// helper of the run beside the claims: the query reads every pending row (45-140 ms on a
// backlog of 100 000 here) and used to hold up the claim that ran it, and with it every
// publisher, once per interval. At most one such query runs at a time; the run's stop waits
// for it.
func (r *run) refreshGaugesApart(ctx context.Context) {
	p := r.p
	if r.gauging.Load() || !p.gaugeGate.Take(p.cfg.PendingGaugeInterval) {
		return
	}
	r.gauging.Store(true)
	r.helpers.Add(1)
	go func() {
		defer r.helpers.Done()
		defer r.gauging.Store(false)
		p.refreshGauges(ctx)
	}()
}

// refreshGauges queries the pending figures and sets the gauges.
func (p *Poller) refreshGauges(ctx context.Context) {
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
