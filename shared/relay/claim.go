package relay

import (
	"context"
	"log/slog"
	"time"

	"github.com/alternayte/queuebox/shared/lease"
	"github.com/alternayte/queuebox/shared/redact"
	"github.com/alternayte/queuebox/shared/store"
)

// claimResult is what one claim returned.
type claimResult struct {
	rows []store.InboxMessage
	err  error
	// sent is when the claim statement was sent: the rows' local lease deadlines count from it.
	sent time.Time
}

// startClaim runs the maintenance steps that are due and starts a claim on its own
// goroutine, whose result the returned channel delivers once. The claim sees every row
// committed before it, so a pending wake is spent.
func (rn *run) startClaim() (<-chan claimResult, error) {
	r := rn.r
	select {
	case <-r.wake:
	default:
	}
	if err := rn.maybeReclaim(); err != nil {
		return nil, err
	}
	r.maybeRefreshGauges(rn.work)
	out := make(chan claimResult, 1)
	go func() {
		sent := time.Now()
		rows, err := r.store.InboxRelayClaim(rn.work, store.InboxRelayClaimParams{Limit: r.cfg.BatchSize, Lease: r.cfg.ClaimTimeout})
		out <- claimResult{rows: rows, err: err, sent: sent}
	}()
	return out, nil
}

// claim runs the maintenance steps that are due and claims a batch.
func (rn *run) claim() claimResult {
	next, err := rn.startClaim()
	if err != nil {
		return claimResult{err: err}
	}
	return <-next
}

// claimed counts the claimed rows of a claim and holds them, so that the renewer renews their
// leases until they are finished, and starts their local lease deadlines.
func (rn *run) claimed(res claimResult) []store.InboxMessage {
	rows := res.rows
	rn.sum.Claimed += len(rows)
	if rn.r.log.Enabled(rn.work, slog.LevelDebug) {
		for _, row := range rows {
			rn.rowLog(row).Debug("inbox row claimed by the relay")
		}
	}
	rn.mu.Lock()
	for _, row := range rows {
		ctx, l := lease.Start(rn.work, res.sent, rn.r.cfg.ClaimTimeout)
		rn.held[row.ID] = &heldRow{claim: row.Claim(), ctx: ctx, lease: l}
	}
	rn.mu.Unlock()
	return rows
}

// cycle claims a batch and forwards it. It returns the number of rows claimed.
func (rn *run) cycle() (int, error) {
	res := rn.claim()
	if res.err != nil {
		return 0, res.err
	}
	rows := rn.claimed(res)
	rn.forward(rows)
	return len(rows), nil
}

// maybeReclaim returns expired relay claims to pending at most once per ClaimTimeout / 5.
func (rn *run) maybeReclaim() error {
	r := rn.r
	if !r.reclaimGate.Take(r.cfg.ClaimTimeout / 5) {
		return nil
	}
	n, err := r.store.InboxRelayReclaim(rn.work)
	if err != nil {
		r.reclaimGate.Forget()
		return err
	}
	if n > 0 {
		rn.sum.Reclaimed += int(n)
		r.log.Info("inbox relay claims reclaimed after their leases expired", "rows", n)
	}
	return nil
}

// maybeRefreshGauges queries the oldest pending inbox row at most once per
// PendingGaugeInterval.
func (r *Relay) maybeRefreshGauges(ctx context.Context) {
	if !r.gaugeGate.Take(r.cfg.PendingGaugeInterval) {
		return
	}
	stats, err := r.store.InboxStats(ctx)
	if err != nil {
		r.log.Warn("reading the inbox pending gauge failed", "error", redact.Error(err))
		return
	}
	r.metrics.InboxOldestPendingAge(stats.OldestPendingAge)
}
