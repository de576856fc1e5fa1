package outbox

import "github.com/alternayte/queuebox/shared/redact"

// The local lease deadline of the poller (shared/lease). A row's claim holds, by the
// database clock, until lease_expires_at; after it another replica may reclaim the row and
// deliver it and the rows behind it on its key. A replica that cannot reach the database (a
// partition, a pool that hangs) cannot renew and cannot know that the claim has gone, so it
// keeps its own deadline: the time it sent the claim, or the last renewal that succeeded, plus
// outbox.claimTimeoutMs, minus lease.Margin. Every flight's context is cancelled at that
// deadline, so that a publish to any destination kind stops there, and a claimed row that
// waits for a publisher past it is never published. Such a row spends no attempt: the publish
// did not fail, the claim ran out. It gets no finishing write either (not even a fenced one:
// the replica could not reach the database anyway, and the row may already be another
// replica's), and returns to pending through the reclaim step when its lease expires.

// finishExpired counts and logs the rows of a batch whose claim reached its local lease
// deadline, or was lost to a renewal that updated zero rows or failed (renewed.go; the renewal
// logged it, and it counts as a lost claim). It writes nothing to the database.
func (r *run) finishExpired(expired []result) {
	if len(expired) == 0 {
		return
	}
	p := r.p
	for _, res := range expired {
		dest := p.destinationOf(res.f.row)
		if res.plan != nil {
			dest = res.plan.name
		}
		log := p.rowLog(res.f.row, dest, res.sc)
		if lost := res.f.lease.Lost(); lost != nil {
			r.mu.Lock()
			r.sum.ClaimsLost++
			r.mu.Unlock()
			p.metrics.ClaimLost()
			log.Debug("outbox publish cancelled: a lease renewal lost its claim; no attempt is spent and the row returns to pending when its lease expires",
				"started", res.started, "cause", redact.Error(lost))
			continue
		}
		r.mu.Lock()
		r.sum.LeaseExpired++
		r.mu.Unlock()
		if p.leaseMetrics != nil {
			p.leaseMetrics.LeaseDeadline("outbox")
		}
		log = log.With("lease_deadline", res.f.lease.Deadline())
		if res.started {
			log.Warn("outbox publish cancelled at its claim's local lease deadline; no attempt is spent and the row returns to pending when its lease expires")
		} else {
			log.Warn("outbox publish not started: its claim passed its local lease deadline; no attempt is spent and the row returns to pending when its lease expires")
		}
	}
}
