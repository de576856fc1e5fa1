package lambdafn

import (
	"context"
	"log/slog"
	"time"

	"github.com/aws/aws-lambda-go/lambdacontext"
)

// budget is the time plan of one invocation of a cycle: claim until the deadline minus the
// margin, let the run's work go on until the deadline minus a quarter of the margin, and wake
// a sleeping run when claiming must stop. PollHandler and RelayHandler share it.
type budget struct {
	start      time.Time
	claimUntil time.Time
	runCtx     context.Context
	attrs      []any
	cancel     context.CancelFunc
	wake       *time.Timer
}

// newBudget plans the invocation of ctx. It returns false, after a warning, when the
// deadline is already inside the margin: then the handler claims nothing.
func newBudget(ctx context.Context, s Settings, log *slog.Logger, wake func()) (*budget, bool) {
	b := &budget{start: time.Now(), attrs: []any{"mode", string(s.Mode)}}
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = b.start.Add(NoDeadlineBound)
	}
	if lc, ok := lambdacontext.FromContext(ctx); ok {
		b.attrs = append(b.attrs, "aws_request_id", lc.AwsRequestID)
	}
	b.claimUntil = deadline.Add(-s.Margin)
	if !b.start.Before(b.claimUntil) {
		log.Warn("the invocation deadline is closer than the margin; claiming nothing",
			append(b.attrs, "left_ms", time.Until(deadline).Milliseconds(), "margin_ms", s.Margin.Milliseconds())...)
		return nil, false
	}
	b.runCtx, b.cancel = context.WithDeadline(ctx, deadline.Add(-s.Margin/4))
	// A run that sleeps between empty claims notices ClaimUntil only when it wakes.
	b.wake = time.AfterFunc(b.claimUntil.Sub(b.start), wake)
	return b, true
}

// done releases the budget's timer and context.
func (b *budget) done() {
	b.wake.Stop()
	b.cancel()
}

// finished logs the summary of the invocation: at info level when it did something.
func (b *budget) finished(ctx context.Context, log *slog.Logger, msg string, didWork bool, fields ...any) {
	level := slog.LevelDebug
	if didWork {
		level = slog.LevelInfo
	}
	attrs := append(append(append([]any{}, b.attrs...), fields...), "duration_ms", time.Since(b.start).Milliseconds())
	log.Log(ctx, level, msg, attrs...)
}
