package lambdafn

import (
	"context"
	"encoding/json"
	"log/slog"

	"github.com/alternayte/queuebox/shared/relay"
)

// Relayer is the inbox relay cycle that RelayHandler drives; *relay.Relay implements it. Run
// is never called concurrently: Lambda gives a container one invocation at a time.
type Relayer interface {
	// Run claims and forwards push inbox rows until ctx is done or opts end the run.
	Run(ctx context.Context, opts relay.RunOptions) relay.Summary
	// Wake makes a waiting run claim at once; it never blocks.
	Wake()
}

var _ Relayer = (*relay.Relay)(nil)

// RelayHandler returns the handler of the relay function. It ignores the event (an
// EventBridge schedule, or an asynchronous wake) and runs the inbox relay within the
// invocation's deadline, as PollHandler runs the outbox cycle:
//
//   - it claims until the deadline minus s.Margin; in Drain mode it returns earlier, as soon
//     as a claim finds nothing;
//   - the batch it holds then has until the deadline minus a quarter of the margin; rows
//     still unfinished are abandoned to lease expiry (they stay processing and another
//     invocation reclaims them after inbox.relay.claimTimeoutMs), so it never outlives the
//     deadline with a claim in hand;
//   - without a deadline in ctx it behaves as if the deadline were NoDeadlineBound away.
//
// It returns the summary of the run (claimed, forwarded, dead, claims lost, reclaimed,
// failed, abandoned), which Lambda serialises as JSON, and logs it. Database errors are
// logged and retried inside the run; the handler itself returns no error.
func RelayHandler(r Relayer, s Settings, log *slog.Logger) func(context.Context, json.RawMessage) (relay.Summary, error) {
	s = s.WithDefaults()
	if log == nil {
		log = slog.Default()
	}
	return func(ctx context.Context, _ json.RawMessage) (relay.Summary, error) {
		b, ok := newBudget(ctx, s, log, r.Wake)
		if !ok {
			return relay.Summary{}, nil
		}
		defer b.done()
		sum := r.Run(b.runCtx, relay.RunOptions{StopWhenIdle: s.Mode == Drain, ClaimUntil: b.claimUntil})
		b.finished(ctx, log, "relay invocation finished", sum != (relay.Summary{}),
			"claimed", sum.Claimed, "forwarded", sum.Forwarded, "dead", sum.Dead,
			"claims_lost", sum.ClaimsLost, "reclaimed", sum.Reclaimed, "failed", sum.Failed,
			"abandoned", sum.Abandoned, "lease_expired", sum.LeaseExpired)
		return sum, nil
	}
}
