package lambdafn

import (
	"context"
	"encoding/json"
	"log/slog"
	"time"

	"github.com/aws/aws-lambda-go/lambdacontext"

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
		start := time.Now()
		deadline, ok := ctx.Deadline()
		if !ok {
			deadline = start.Add(NoDeadlineBound)
		}
		claimUntil := deadline.Add(-s.Margin)
		runCtx, cancel := context.WithDeadline(ctx, deadline.Add(-s.Margin/4))
		defer cancel()

		attrs := []any{"mode", string(s.Mode)}
		if lc, ok := lambdacontext.FromContext(ctx); ok {
			attrs = append(attrs, "aws_request_id", lc.AwsRequestID)
		}
		if !start.Before(claimUntil) {
			log.Warn("the invocation deadline is closer than the margin; claiming nothing",
				append(attrs, "left_ms", time.Until(deadline).Milliseconds(), "margin_ms", s.Margin.Milliseconds())...)
			return outbox.Summary{}, nil
		}
		// A run that sleeps between empty claims notices ClaimUntil only when it wakes.
		wake := time.AfterFunc(claimUntil.Sub(start), p.Wake)
		sum := p.Run(runCtx, outbox.RunOptions{StopWhenIdle: s.Mode == Drain, ClaimUntil: claimUntil})
		wake.Stop()

		level := slog.LevelDebug
		if sum != (outbox.Summary{}) {
			level = slog.LevelInfo
		}
		log.Log(ctx, level, "poll invocation finished", append(attrs,
			"claimed", sum.Claimed, "sent", sum.Sent, "retried", sum.Retried, "dead", sum.Dead,
			"claims_lost", sum.ClaimsLost, "reclaimed", sum.Reclaimed,
			"duration_ms", time.Since(start).Milliseconds())...)
		return sum, nil
	}
}
