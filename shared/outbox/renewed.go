package outbox

import (
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/alternayte/queuebox/shared/redact"
	"github.com/alternayte/queuebox/shared/store"
)

// A renewal that updates zero rows, or that fails with an error (a timeout of its statement, a
// refused or broken connection, a pool that gives no connection in time), means that the
// poller lost the claims it renewed. The publish of each of those rows that still runs, or
// waits for a publisher, is cancelled at once (lease.Local.Lose), as at the claim's local
// deadline: the row spends no attempt and gets no finishing write, not even a fenced one (a
// failed renewal does not tell whether the claim still holds, so a fenced retry could still
// spend an attempt), and returns to pending through the reclaim step when its lease expires. A
// publish that had already succeeded is marked sent as usual; the fence decides. Such a row
// counts as a lost claim (finishExpired). The local deadline stays the backstop for a renewal
// that never answers.

// errNotHeld is the reason of a claim that a renewal found gone: another owner took the row, or
// its lease ran out.
var errNotHeld = errors.New("the lease renewal updated no row: another replica owns the message, or its lease ran out")

// renewed applies the answer of one renewal statement, sent at sent, for the rows of flights:
// it moves the local deadline of each row renewed, and ends the claims of the rows whose
// publish still runs here when the renewal failed (err) or did not find them held.
func (r *run) renewed(flights map[string]*flight, sent time.Time, renewed []store.Claim, err error) {
	p := r.p
	ok := map[string]bool{}
	if err == nil {
		for _, c := range renewed {
			ok[c.ID] = true
			if f := flights[c.ID]; f != nil {
				f.lease.Extend(sent)
			}
		}
	}
	r.mu.Lock()
	var lost []*flight
	for id, f := range flights {
		// A row that the renewal did not find held is lost only while its publish still
		// runs here. Once the publish returned, the row may have been finished (by this
		// process's finisher, between the snapshot and the renewal) and the renewal's
		// fence no longer matches it; a claim that another replica did take is reported
		// by the fenced finishing write instead.
		if !ok[id] && r.inflight[id] == f && !f.finishing {
			lost = append(lost, f)
		}
	}
	r.mu.Unlock()
	if err != nil {
		reason := fmt.Errorf("renewing the lease failed: %s", redact.Error(err))
		cancelled := 0
		for _, f := range lost {
			if f.lease.Lose(reason) {
				cancelled++
			}
		}
		p.log.Error("renewing outbox leases failed, so their claims are lost; cancelling the publishes of the rows it renewed: they spend no attempt and return to pending when their leases expire",
			"rows", len(flights), "cancelled", cancelled, "error", redact.Error(err))
		return
	}
	for _, f := range lost {
		if f.lease.Lose(errNotHeld) {
			p.rowLog(f.row, p.destinationOf(f.row), trace.SpanContext{}).Warn("outbox lease renewal lost the claim; cancelling the publish")
		}
	}
}
