package outbox

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/alternayte/queuebox/shared/redact"
	"github.com/alternayte/queuebox/shared/store"
	"github.com/alternayte/queuebox/shared/writeretry"
)

// Finishing: the finisher groups the results of the publishes and writes each row as sent,
// retried, dead or deferred through the claim fence, retrying a failed write.

// finishBatch is the most rows one finishing flush takes.
const finishBatch = 500

// finishGather and finishLinger: the finisher waits up to finishLinger for a statement of
// finishGather rows while that many rows are being published.
const (
	finishGather = 64
	finishLinger = 2 * time.Millisecond
)

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
	completed, leased := r.holdResults(batch)
	if !abandon && len(leased) > 0 {
		set := r.classify(leased)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		r.finishSent(ctx, set.sent, set.sentRows)
		r.finishRetries(ctx, set.retries, set.retryRows)
		r.finishDeads(ctx, set.deads, set.deadRows)
		r.finishDefers(ctx, set.defers)
		cancel()
		r.finishExpired(set.expired)
	}
	for _, hb := range completed {
		r.finishHeld(hb, abandon)
	}
	r.mu.Lock()
	for _, res := range batch {
		res.f.cancel()
		delete(r.inflight, res.f.row.ID)
		r.finishing--
		p.metrics.ProcessingDuration(time.Since(res.f.started))
	}
	r.mu.Unlock()
	// After the rows left r.inflight: a claim loop woken before would still count them in
	// flight and sleep again, its wake spent.
	if r.held == nil || len(completed) > 0 {
		r.signalFreed()
	}
	r.signalFinished()
}

// signalFinished tells the claim loop (and a stop) that rows were finished.
func (r *run) signalFinished() {
	select {
	case r.finished <- struct{}{}:
	default:
	}
}

// signalFreed tells a claim loop that waits after a short claim that finishing writes may have
// freed the next rows of their keys: after every flush in the lease mode, and in the claim mode
// lock only after a commit, since a key stays held until its claim commits. A claim after each
// flush of a lock claim's rows found nothing new, and with every key in flight each such claim
// walked the keys of its window in vain.
func (r *run) signalFreed() {
	select {
	case r.freed <- struct{}{}:
	default:
	}
}

// outcomes are the results of a flush sorted by the write that finishes them.
type outcomes struct {
	// Nearly every row of a busy batch is sent: its slices are sized once.
	sent    []store.Claim
	retries []store.OutboxRetryParams
	deads   []store.OutboxDeadParams
	defers  []deferral
	// The rows of sent, retries and deads, in their order, for the log lines.
	sentRows            []rowLine
	retryRows, deadRows []rowLine
	// expired are the rows that get no write (leasedeadline.go).
	expired []result
}

// classify sorts results by their outcome: sent, retried, dead, deferred or expired.
func (r *run) classify(results []result) outcomes {
	p := r.p
	o := outcomes{sent: make([]store.Claim, 0, len(results)), sentRows: make([]rowLine, 0, len(results))}
	for _, res := range results {
		row := &res.f.row
		pl := res.plan
		if pl == nil {
			pl = p.defPlan
		}
		switch {
		case res.expired:
			o.expired = append(o.expired, res)
		case res.deferBy > 0:
			o.defers = append(o.defers, deferral{OutboxDeferParams: store.OutboxDeferParams{Claim: row.Claim(), Delay: res.deferBy}, dest: pl.name, reason: res.reason, row: row, sc: res.sc})
		case res.err == nil:
			o.sent = append(o.sent, row.Claim())
			o.sentRows = append(o.sentRows, rowLine{row, pl.name, res.sc})
		case res.dead || isTerminal(res.err) || pl.retry.exhausted(row.Attempt, row.MaxAttempts):
			o.deads = append(o.deads, store.OutboxDeadParams{Claim: row.Claim(), LastError: redact.Error(res.err)})
			o.deadRows = append(o.deadRows, rowLine{row, pl.name, res.sc})
		default:
			delay := pl.retry.delay(row.Attempt, res.err)
			o.retries = append(o.retries, store.OutboxRetryParams{Claim: row.Claim(), Delay: delay, LastError: redact.Error(res.err)})
			o.retryRows = append(o.retryRows, rowLine{row, pl.name, res.sc})
		}
	}
	return o
}

// withRetries runs a finishing write under the poller's write-retry policy (writeretry.Batch):
// a failed statement is tried again a few times while the leases are still young. A write that
// keeps failing leaves the rows processing; the reclaim step recovers them after their leases
// expire. A write whose context ended before a retry was due gives up without a line.
func withRetries[T any](ctx context.Context, r *run, what string, n int, write func(context.Context) (T, error)) (T, bool) {
	var v T
	err := r.writer.Do(ctx, func(ctx context.Context) error {
		var err error
		v, err = write(ctx)
		return err
	})
	if err == nil {
		return v, true
	}
	var zero T
	if writeretry.Stopped(err) {
		return zero, false
	}
	p := r.p
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
	ids, ok := withRetries(ctx, r, "mark sent", len(claims), func(ctx context.Context) ([]string, error) {
		return p.store.OutboxMarkSent(ctx, claims)
	})
	if ok {
		r.accountSent(claims, rows, ids)
	}
}

// accountSent counts and logs the rows of claims whose mark sent changed ids; the others lost
// their claims.
func (r *run) accountSent(claims []store.Claim, rows []rowLine, ids []string) {
	p := r.p
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
	ids, ok := withRetries(ctx, r, "retry", len(retries), func(ctx context.Context) ([]string, error) {
		return p.store.OutboxRetry(ctx, retries)
	})
	if ok {
		r.accountRetries(retries, rows, ids)
	}
}

// accountRetries counts and logs the retries whose write changed ids.
func (r *run) accountRetries(retries []store.OutboxRetryParams, rows []rowLine, ids []string) {
	p := r.p
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
	ids, ok := withRetries(ctx, r, "mark dead", len(deads), func(ctx context.Context) ([]string, error) {
		return p.store.OutboxMarkDead(ctx, deads)
	})
	if ok {
		r.accountDeads(deads, rows, ids)
	}
}

// accountDeads counts and logs the dead letters whose write changed ids.
func (r *run) accountDeads(deads []store.OutboxDeadParams, rows []rowLine, ids []string) {
	p := r.p
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
	params := deferParams(defers)
	ids, ok := withRetries(ctx, r, "defer", len(defers), func(ctx context.Context) ([]string, error) {
		return p.store.OutboxDefer(ctx, params)
	})
	if ok {
		r.accountDefers(defers, ids)
	}
}

// deferParams returns the store's parameters of defers.
func deferParams(defers []deferral) []store.OutboxDeferParams {
	params := make([]store.OutboxDeferParams, len(defers))
	for i, d := range defers {
		params[i] = d.OutboxDeferParams
	}
	return params
}

// accountDefers counts the deferrals whose write changed ids.
func (r *run) accountDefers(defers []deferral, ids []string) {
	p := r.p
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
