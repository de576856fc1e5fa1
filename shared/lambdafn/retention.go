package lambdafn

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/aws/aws-lambda-go/lambdacontext"

	"github.com/alternayte/queuebox/shared/retention"
)

// Cleaner is the retention cycle that RetentionHandler drives; *retention.Cleaner implements
// it. RunOnce is never called concurrently within a container.
type Cleaner interface {
	// RunOnce runs every enabled table's policy once, until a batch comes back short or ctx
	// ends.
	RunOnce(ctx context.Context) retention.Summary
}

var _ Cleaner = (*retention.Cleaner)(nil)

// Cleanup implements retention.Metrics: it discards the run, as NopMetrics discards
// everything (see its doc).
func (NopMetrics) Cleanup(string, int64, time.Duration, time.Time) {}

// RetentionMetrics returns r.Metrics when it records cleanup runs, and NopMetrics otherwise,
// for retention.Options.Metrics.
func (r *Runtime) RetentionMetrics() retention.Metrics {
	if m, ok := r.Metrics.(retention.Metrics); ok {
		return m
	}
	return NopMetrics{}
}

// RetentionHandler returns the handler of the retention function. It ignores the event (an
// EventBridge schedule) and runs every enabled table's policy once per invocation
// (Cleaner.RunOnce): the schedule is the interval, and retention.*.cleanupInterval is not
// read. Schedule the function at the shortest cleanupInterval that the configuration wants;
// a table that runs more often than needed only finds fewer rows, one short statement when
// none is due.
//
// The run stops at the invocation deadline minus s.Margin (s.Mode does not apply): the
// statement in flight rolls back and the next invocation continues where this one stopped,
// which is not an error. Without a deadline in ctx it behaves as if the deadline were
// NoDeadlineBound away.
//
// It returns the summary (per table: deleted, statements, complete) and logs it. When the run
// of a table failed it returns an error instead, after the other tables ran, so that the
// invocation counts in the function's Errors metric: in Lambda nothing else reports a cleanup
// that keeps failing (there is no health route, and Runtime.Metrics is NopMetrics for now).
// A retry of the invocation is harmless, since a delete that runs twice deletes nothing more.
func RetentionHandler(c Cleaner, s Settings, log *slog.Logger) func(context.Context, json.RawMessage) (retention.Summary, error) {
	s = s.WithDefaults()
	if log == nil {
		log = slog.Default()
	}
	return func(ctx context.Context, _ json.RawMessage) (retention.Summary, error) {
		start := time.Now()
		deadline, ok := ctx.Deadline()
		if !ok {
			deadline = start.Add(NoDeadlineBound)
		}
		stopAt := deadline.Add(-s.Margin)

		var attrs []any
		if lc, ok := lambdacontext.FromContext(ctx); ok {
			attrs = append(attrs, "aws_request_id", lc.AwsRequestID)
		}
		if !start.Before(stopAt) {
			log.Warn("the invocation deadline is closer than the margin; cleaning nothing",
				append(attrs, "left_ms", time.Until(deadline).Milliseconds(), "margin_ms", s.Margin.Milliseconds())...)
			return retention.Summary{Tables: []retention.TableSummary{}}, nil
		}
		runCtx, cancel := context.WithDeadline(ctx, stopAt)
		defer cancel()
		sum := c.RunOnce(runCtx)

		// Each table's run logged its own line with its error; this line sums the invocation.
		log.Info("retention invocation finished", append(attrs,
			"tables", len(sum.Tables), "deleted", sum.Deleted(), "complete", sum.Complete(),
			"duration_ms", time.Since(start).Milliseconds())...)
		var failed []error
		for _, t := range sum.Tables {
			if t.Err != nil {
				failed = append(failed, fmt.Errorf("the %s cleanup failed", t.Table))
			}
		}
		if len(failed) > 0 {
			return sum, errors.Join(failed...)
		}
		return sum, nil
	}
}
