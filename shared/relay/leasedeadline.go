package relay

import (
	"context"
	"errors"

	"github.com/alternayte/queuebox/shared/lease"
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

// batchContext returns the context of the forward of rows: it ends with the first of their
// contexts that reaches its lease's local deadline, and with the run's work. Call stop when
// the forward returned.
func (rn *run) batchContext(rows []store.InboxMessage) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(rn.work)
	stops := make([]func() bool, 0, len(rows))
	for _, row := range rows {
		h := rn.heldRow(row)
		stops = append(stops, context.AfterFunc(h.ctx, func() {
			if cause := context.Cause(h.ctx); errors.Is(cause, lease.ErrDeadline) {
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

// abandonExpired records the rows of a batch forward that their lease's local deadline ended
// as not forwarded, and returns the others, which are forwarded row by row.
func (rn *run) abandonExpired(rows []store.InboxMessage) []store.InboxMessage {
	var rest []store.InboxMessage
	for _, row := range rows {
		if h := rn.heldRow(row); h != nil && h.lease.Expired() {
			rn.leaseExpired(row, h, true)
			rn.release(row)
			continue
		}
		rest = append(rest, row)
	}
	return rest
}
