package relay

import (
	"context"
	"log/slog"

	"github.com/alternayte/queuebox/shared/redact"
	"github.com/alternayte/queuebox/shared/store"
)

// release forgets a row that is finished, so that the renewer stops renewing it.
func (rn *run) release(row store.InboxMessage) {
	rn.mu.Lock()
	h := rn.held[row.ID]
	delete(rn.held, row.ID)
	rn.mu.Unlock()
	if h != nil {
		h.lease.Stop()
	}
	endSpan(h, "not_forwarded")
}

// abandon leaves the rows of a stopped run to lease expiry.
func (rn *run) abandon(rows []store.InboxMessage) {
	rn.mu.Lock()
	for _, row := range rows {
		if h := rn.held[row.ID]; h != nil {
			h.lease.Stop()
		}
		endSpan(rn.held[row.ID], "abandoned")
		delete(rn.held, row.ID)
	}
	rn.mu.Unlock()
	rn.sum.Abandoned += len(rows)
	rn.r.log.Warn("inbox relay stopped with claimed rows; they return to pending when their leases expire",
		"rows", len(rows))
}

// deadLetter marks a row dead with reason as its last_error.
func (rn *run) deadLetter(log *slog.Logger, row store.InboxMessage, reason string) {
	r := rn.r
	reason = redact.String(reason)
	h := rn.heldRow(row)
	dead, err := rn.write(h.ctx, func(ctx context.Context) (bool, error) {
		return r.store.InboxRelayDead(ctx, row.Claim(), reason)
	})
	switch {
	case err != nil && h.lease.Ended():
		rn.leaseEnded(row, h, true)
	case err != nil:
		rn.writeFailed(log, "marking dead", err)
	case !dead:
		rn.claimLost(log, "mark the message dead")
	default:
		rn.sum.Dead++
		r.metrics.InboxRelayError()
		rn.spanResult(row, "dead")
		log.Error("inbox message is dead: it can reach no destination; fix the source configuration, then requeue the row",
			"last_error", reason)
	}
}

func (rn *run) claimLost(log *slog.Logger, action string) {
	rn.sum.ClaimsLost++
	rn.r.metrics.InboxClaimLost()
	log.Warn("inbox relay claim was lost, so the relay did not " + action + "; another replica owns the message. " +
		"Raise inbox.relay.claimTimeoutMs above the slowest relay cycle if this repeats")
}

// writeFailed records a row whose write failed. The row stays processing; the reclaim step
// returns it to pending when its lease expires.
func (rn *run) writeFailed(log *slog.Logger, what string, err error) {
	if rn.work.Err() != nil {
		rn.sum.Abandoned++
		log.Warn("inbox relay stopped while "+what+" a row; it returns to pending when its lease expires",
			"error", redact.Error(err))
		return
	}
	rn.sum.Failed++
	rn.lastWriteErr = what + " failed: " + redact.Error(err)
	rn.r.metrics.InboxRelayError()
	log.Error("inbox relay failed "+what+" a row; it returns to pending when its lease expires",
		"error", redact.Error(err))
}

// write runs a fenced write under ctx (a row's context, which ends at its lease's local
// deadline) and the relay's write-retry policy (writeretry.Row): a failure is tried again a few
// times, unless the previous row's writes failed too.
func (rn *run) write(ctx context.Context, fn func(context.Context) (bool, error)) (bool, error) {
	var ok bool
	err := rn.writer.Do(ctx, func(ctx context.Context) error {
		var err error
		ok, err = fn(ctx)
		return err
	})
	if err != nil {
		return false, err
	}
	return ok, nil
}
