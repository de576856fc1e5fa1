package lambdafn

import (
	"context"
	"encoding/json"
	"log/slog"
	"time"

	"github.com/alternayte/queuebox/shared/outbox"
)

// NoDeadlineBound bounds an invocation whose context has no deadline (a handler called
// outside the Lambda runtime), as if the function had this timeout.
const NoDeadlineBound = 60 * time.Second

// Poller is the outbox cycle that PollHandler drives; *outbox.Poller implements it. Run is
// never called concurrently: Lambda gives a container one invocation at a time.
type Poller interface {
	// Run claims and delivers rows until ctx is done or opts end the run.
	Run(ctx context.Context, opts outbox.RunOptions) outbox.Summary
	// Wake makes a waiting run claim at once; it never blocks.
	Wake()
}

var _ Poller = (*outbox.Poller)(nil)

// PollHandler returns the handler of the poll function. It ignores the event (an
// EventBridge schedule, or the capture node's asynchronous wake) and runs the outbox cycle
// within the invocation's deadline:
//
//   - it claims until the deadline minus s.Margin; in Drain mode it returns earlier, as soon
//     as a claim finds nothing and no row is in flight;
//   - it then waits for the rows in flight until the deadline minus a quarter of the margin,
//     abandons what is still in flight to lease expiry (the row stays processing and another
//     invocation reclaims it), and returns; so it never outlives the deadline with a claim
//     in hand;
//   - without a deadline in ctx it behaves as if the deadline were NoDeadlineBound away.
//
// It returns the summary of the run (claimed, sent, retried, dead, claims lost, reclaimed),
// which Lambda serialises as JSON, and logs it, since a scheduled or asynchronous invocation
// discards its result. Database errors are logged and retried inside the run; the handler
// itself returns no error.
func PollHandler(p Poller, s Settings, log *slog.Logger) func(context.Context, json.RawMessage) (outbox.Summary, error) {
	s = s.WithDefaults()
	if log == nil {
		log = slog.Default()
	}
	return func(ctx context.Context, _ json.RawMessage) (outbox.Summary, error) {
		b, ok := newBudget(ctx, s, log, p.Wake)
		if !ok {
			return outbox.Summary{}, nil
		}
		defer b.done()
		sum := p.Run(b.runCtx, outbox.RunOptions{StopWhenIdle: s.Mode == Drain, ClaimUntil: b.claimUntil})
		b.finished(ctx, log, "poll invocation finished", sum != (outbox.Summary{}),
			"claimed", sum.Claimed, "sent", sum.Sent, "retried", sum.Retried, "dead", sum.Dead,
			"claims_lost", sum.ClaimsLost, "reclaimed", sum.Reclaimed, "deferred", sum.Deferred, "released", sum.Released,
			"lease_expired", sum.LeaseExpired)
		return sum, nil
	}
}
