package outbox

import (
	"context"
	"time"

	"github.com/alternayte/queuebox/shared/lease"
	"github.com/alternayte/queuebox/shared/store"
)

// Renewing: the renewer extends the leases of the rows whose publish still runs; what a
// renewal's answer means is in renewed.go.

// renewer extends the leases of rows whose publish still runs, every third of the lease,
// and cancels the publish of a row whose claim was lost: a renewal that updated zero rows or
// failed (renewed.go).
func (r *run) renewer() {
	defer r.helpers.Done()
	p := r.p
	tick := time.NewTicker(lease.RenewEvery(p.cfg.ClaimTimeout))
	defer tick.Stop()
	for {
		select {
		case <-r.done:
			return
		case <-tick.C:
		}
		r.mu.Lock()
		var claims []store.Claim
		flights := map[string]*flight{}
		for id, f := range r.inflight {
			// A row past its lease's local deadline, or lost, is not renewed: its publish was
			// stopped, or will not start, whatever the renewal would say.
			if !f.finishing && !f.lease.Ended() {
				claims = append(claims, f.row.Claim())
				flights[id] = f
			}
		}
		r.mu.Unlock()
		if len(claims) == 0 {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), lease.RenewTimeout(p.cfg.ClaimTimeout))
		// The renewed leases start when the statement runs, after it was sent: the local
		// deadlines count from the send.
		sent := time.Now()
		renewed, err := p.store.OutboxRenew(ctx, store.OutboxRenewParams{Claims: claims, Lease: p.cfg.ClaimTimeout})
		cancel()
		r.renewed(flights, sent, renewed, err) // renewed.go
	}
}
