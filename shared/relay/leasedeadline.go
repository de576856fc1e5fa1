package relay

import (
	"context"
	"errors"
	"fmt"

	"github.com/alternayte/queuebox/shared/lease"
	"github.com/alternayte/queuebox/shared/redact"
	"github.com/alternayte/queuebox/shared/store"
)

// The local lease deadline of the relay (shared/lease). A forward is one fenced statement
// (or transaction) whose fence the database checks with its own clock and under the row's
// lock, so a forward that reaches the database after the lease expired, or after another
// replica took the row, writes nothing: no forward commits past the lease by the database
// clock. The relay keeps the local deadline as the outbox poller does, so that the two
// workers follow one rule: a claimed row whose deadline has passed is not forwarded (nor
// marked dead), and a forward still waiting for the database at the deadline is abandoned
// (its statement, if it arrives later, meets the fence). Such a row gets no write and
// returns to pending through the reclaim step when its lease expires.
//
// A renewal that fails with an error (its statement refused or timed out, the database out of
// reach) means that the relay lost the claim, as a renewal that updates zero rows does: the
// row's context is cancelled at once (lease.Local.Lose), so that its forward does not start,
// or is abandoned if it waits for the database, and the row gets no write. It counts as a lost
// claim, and the reclaim step returns it to pending when its lease expires. The local deadline
// stays the backstop for a renewal that never answers.

// leaseMetricsOf returns m as a lease.Metrics, or nil when it is none.
func leaseMetricsOf(m Metrics) lease.Metrics {
	lm, _ := m.(lease.Metrics)
	return lm
}

// heldRow returns the held state of a claimed row that is not finished yet.
func (rn *run) heldRow(row store.InboxMessage) *heldRow {
	rn.mu.Lock()
	defer rn.mu.Unlock()
	return rn.held[row.ID]
}

// leaseEnded reports whether cause ends a claim's work: its local deadline passed, or a renewal
// lost it.
func leaseEnded(cause error) bool {
	return errors.Is(cause, lease.ErrDeadline) || errors.Is(cause, lease.ErrLost)
}

// batchContext returns the context of the forward of rows: it ends with the first of their
// contexts that reaches its lease's local deadline or loses its claim to a failed renewal,
// and with the run's work. Call stop when the forward returned.
func (rn *run) batchContext(rows []store.InboxMessage) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(rn.work)
	stops := make([]func() bool, 0, len(rows))
	for _, row := range rows {
		h := rn.heldRow(row)
		stops = append(stops, context.AfterFunc(h.ctx, func() {
			if cause := context.Cause(h.ctx); leaseEnded(cause) {
				cancel(cause)
			}
		}))
	}
	return ctx, func() {
		for _, s := range stops {
			s()
		}
		cancel(nil)
	}
}

// leaseExpired records a row that is not forwarded because its claim reached its local lease
// deadline: before its forward started, or while the forward waited for the database.
func (rn *run) leaseExpired(row store.InboxMessage, h *heldRow, started bool) {
	rn.sum.LeaseExpired++
	rn.spanResult(row, "lease_expired")
	if rn.r.leaseMetrics != nil {
		rn.r.leaseMetrics.LeaseDeadline("inbox")
	}
	log := rn.rowLog(row).With("lease_deadline", h.lease.Deadline())
	if started {
		log.Warn("inbox relay forward abandoned at its claim's local lease deadline; the row returns to pending when its lease expires")
		return
	}
	log.Warn("inbox relay forward not started: its claim passed its local lease deadline; the row returns to pending when its lease expires")
}

// abandonExpired records the rows of a batch forward that their lease's local deadline, or a
// failed renewal, ended as not forwarded, and returns the others, which are forwarded row by
// row.
func (rn *run) abandonExpired(rows []store.InboxMessage) []store.InboxMessage {
	var rest []store.InboxMessage
	for _, row := range rows {
		if h := rn.heldRow(row); h != nil && h.lease.Ended() {
			rn.leaseEnded(row, h, true)
			rn.release(row)
			continue
		}
		rest = append(rest, row)
	}
	return rest
}

// renewalFailed loses the claim of a row whose renewal failed with err: the row's context is
// cancelled, so that its forward does not start and a forward that waits for the database is
// abandoned. It logs the failure once, redacted.
func (rn *run) renewalFailed(h *heldRow, err error) {
	if !h.lease.Lose(fmt.Errorf("renewing the lease failed: %s", redact.Error(err))) {
		// The row was finished, or reached its deadline, meanwhile.
		rn.r.log.Debug("renewing an inbox relay lease failed after its row was finished or reached its lease deadline", "inbox_id", h.claim.ID, "error", redact.Error(err))
		return
	}
	rn.r.log.Warn("renewing an inbox relay lease failed, so its claim is lost; the row is not forwarded and returns to pending when its lease expires",
		"message_id", h.claim.ID, "inbox_id", h.claim.ID, "error", redact.Error(err))
}

// leaseEnded records a row that is not forwarded because its claim ended: it reached its local
// lease deadline (leaseExpired) or a failed renewal lost it (renewalLost).
func (rn *run) leaseEnded(row store.InboxMessage, h *heldRow, started bool) {
	if h.lease.Lost() != nil {
		rn.renewalLost(row, h, started)
		return
	}
	rn.leaseExpired(row, h, started)
}

// renewalLost records a row that is not forwarded because a renewal that failed lost its claim:
// before its forward started, or while the forward waited for the database. The renewal logged
// the failure; the row counts as a lost claim.
func (rn *run) renewalLost(row store.InboxMessage, h *heldRow, started bool) {
	rn.sum.ClaimsLost++
	rn.r.metrics.InboxClaimLost()
	rn.spanResult(row, "claim_lost")
	rn.rowLog(row).Debug("inbox relay forward not made: a lease renewal failed, so its claim is lost; the row returns to pending when its lease expires",
		"started", started, "cause", redact.Error(h.lease.Lost()))
}
