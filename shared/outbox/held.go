package outbox

import (
	"context"
	"time"

	"github.com/alternayte/queuebox/shared/redact"
	"github.com/alternayte/queuebox/shared/store"
)

// The claim mode lock (Config.ClaimMode, docs/claim-modes.md): each claim holds its rows under
// a transaction of its own (store.OutboxLock) instead of moving them to processing, and the
// rows of one claim are finished together, by one write per kind of outcome and the commit,
// once every one of them has its result. A batch whose commit fails writes nothing: its rows
// stay pending and are delivered again. At most Config.HeldBatches claims are held at once,
// each on a connection of the pool.

// Claim modes.
const (
	// ClaimModeLease moves each claimed row to processing under a lease, and finishes it
	// through the claim fence: the documented claim.
	ClaimModeLease = "lease"
	// ClaimModeLock holds the claimed rows under row locks in an open transaction and
	// writes each row once, with its outcome.
	ClaimModeLock = "lock"
)

// heldBatch is the rows of one lock claim. Its fields are guarded by the run's mutex.
type heldBatch struct {
	lock store.OutboxLock
	// ids are the rows that the claim holds.
	ids []string
	// left counts the rows of the claim without a result yet.
	left int
	// results are the results of its rows that came so far; a row released at a stop has
	// none, and stays pending.
	results []result
}

// holdResults adds each result of a held row to its batch and returns the batches that it
// completed, and the results of the rows of the lease mode.
func (r *run) holdResults(batch []result) (completed []*heldBatch, leased []result) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, res := range batch {
		hb := res.f.held
		if hb == nil {
			leased = append(leased, res)
			continue
		}
		hb.results = append(hb.results, res)
		if hb.left--; hb.left == 0 {
			completed = append(completed, hb)
		}
	}
	return completed, leased
}

// dropHeld takes the rows of flights out of their batches without a result (a stop releases
// them) and returns the batches that it completed.
func (r *run) dropHeld(flights []*flight) []*heldBatch {
	var completed []*heldBatch
	for _, f := range flights {
		if hb := f.held; hb != nil {
			if hb.left--; hb.left == 0 {
				completed = append(completed, hb)
			}
		}
	}
	return completed
}

// finishHeld writes the outcomes of a completed batch and commits (Release, when the run
// abandons its rows), then counts and logs them as the lease mode's writes do.
func (r *run) finishHeld(hb *heldBatch, abandon bool) {
	p := r.p
	defer func() {
		r.mu.Lock()
		delete(r.held, hb)
		r.mu.Unlock()
	}()
	if abandon {
		hb.lock.Release()
		return
	}
	o := r.classify(hb.results)
	written := len(o.sent) + len(o.retries) + len(o.deads) + len(o.defers)
	if written == 0 {
		hb.lock.Release()
		r.finishExpired(o.expired)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	ids, err := hb.lock.Finish(ctx, store.OutboxOutcomes{Sent: o.sent, Retries: o.retries, Deads: o.deads, Defers: deferParams(o.defers)})
	cancel()
	if err != nil {
		p.log.Error("outbox finishing commit failed; the rows stay pending and are delivered again",
			"rows", written, "error", redact.Error(err))
		for range written {
			p.metrics.ProcessError()
		}
	} else {
		r.accountSent(o.sent, o.sentRows, ids.Sent)
		r.accountRetries(o.retries, o.retryRows, ids.Retried)
		r.accountDeads(o.deads, o.deadRows, ids.Dead)
		r.accountDefers(o.defers, ids.Deferred)
	}
	r.finishExpired(o.expired)
}

// claimHeld lock-claims up to params.Limit rows and returns them with their batch; no batch
// when none came.
func (r *run) claimHeld(ctx context.Context, params store.OutboxClaimParams) ([]store.OutboxMessage, *heldBatch, error) {
	lock, rows, err := r.p.locker.OutboxLockClaim(ctx, params)
	if err != nil || len(rows) == 0 {
		return nil, nil, err
	}
	hb := &heldBatch{lock: lock, left: len(rows), ids: make([]string, len(rows))}
	for i := range rows {
		hb.ids[i] = rows[i].ID
	}
	r.mu.Lock()
	r.held[hb] = true
	r.mu.Unlock()
	return rows, hb, nil
}

// heldIDs returns the ids of the rows that the run's lock claims hold, which the window of
// its next lock claim passes over (store.OutboxClaimParams.Skip). The caller holds r.mu.
func (r *run) heldIDs() []string {
	var ids []string
	for hb := range r.held {
		ids = append(ids, hb.ids...)
	}
	return ids
}

// heldFull tells whether the run holds as many lock claims as it may. The caller holds r.mu.
func (r *run) heldFull() bool {
	return r.held != nil && len(r.held) >= r.p.cfg.HeldBatches
}

// releaseHeld rolls back every batch still held when a run ends; none should be, since every
// row of a batch gets a result or is dropped before the run's stop returns.
func (r *run) releaseHeld() {
	r.mu.Lock()
	left := make([]*heldBatch, 0, len(r.held))
	for hb := range r.held {
		left = append(left, hb)
	}
	clear(r.held)
	r.mu.Unlock()
	for _, hb := range left {
		r.p.log.Warn("outbox lock claim still held at stop; its rows stay pending", "rows", hb.left)
		hb.lock.Release()
	}
}
