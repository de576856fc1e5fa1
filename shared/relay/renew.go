package relay

import (
	"context"
	"time"

	"github.com/alternayte/queuebox/shared/lease"
)

// renewer extends the leases of the claimed rows that are not finished, every third of the
// lease, and marks a row whose fence is gone so that it is not forwarded; a renewal that
// fails loses the claim too (renewalFailed).
func (rn *run) renewer() {
	defer rn.helpers.Done()
	r := rn.r
	tick := time.NewTicker(lease.RenewEvery(r.cfg.ClaimTimeout))
	defer tick.Stop()
	for {
		select {
		case <-rn.stop:
			return
		case <-tick.C:
		}
		rn.mu.Lock()
		rows := make([]*heldRow, 0, len(rn.held))
		for _, h := range rn.held {
			// A row past its lease's local deadline is not renewed: it is not forwarded,
			// whatever a renewal would say.
			if !h.lost && !h.lease.Ended() {
				rows = append(rows, h)
			}
		}
		rn.mu.Unlock()
		for _, h := range rows {
			ctx, cancel := context.WithTimeout(rn.work, lease.RenewTimeout(r.cfg.ClaimTimeout))
			// The renewed lease starts when the statement runs, after it was sent: the local
			// deadline counts from the send.
			sent := time.Now()
			ok, err := r.store.InboxRelayRenew(ctx, h.claim, r.cfg.ClaimTimeout)
			cancel()
			if err == nil && ok {
				h.lease.Extend(sent)
			}
			if err != nil {
				if rn.work.Err() == nil {
					rn.renewalFailed(h, err) // leasedeadline.go
				}
				continue
			}
			if !ok {
				// The row may have been finished a moment ago; the forward loop only reads the
				// mark of a row it has not finished yet.
				rn.mu.Lock()
				h.lost = true
				rn.mu.Unlock()
			}
		}
	}
}
