package lambdafn

import (
	"context"
	"io"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/alternayte/queuebox/shared/emf"
	"github.com/alternayte/queuebox/shared/redact"
)

// Start hands handler to the Lambda runtime and serves invocations until the runtime ends
// the process; it never returns, so a main puts nothing after it. When rt's Metrics is the
// emf.Recorder that Init sets, Start writes it to stdout as CloudWatch Embedded Metric
// Format lines at the end of every invocation, since nothing scrapes a Lambda function. It
// is the only call of aws-lambda-go's lambda package in the project. Build the functions
// with -tags lambda.norpc: the runtime API loop needs no net/rpc.
func Start[TIn, TOut any](rt *Runtime, handler func(context.Context, TIn) (TOut, error)) {
	lambda.StartHandlerFunc(withInvocationMetrics(rt, os.Stdout, withSpanFlush(rt, handler)))
}

// withSpanFlush wraps handler so that the spans of an invocation are exported before it
// returns: Lambda may freeze the container as soon as the handler returns, and a span left in
// the batch would wait for the next invocation or be lost. The flush is bounded by the
// invocation's deadline. It returns handler itself when tracing is off.
func withSpanFlush[TIn, TOut any](rt *Runtime, handler func(context.Context, TIn) (TOut, error)) func(context.Context, TIn) (TOut, error) {
	if rt == nil || !rt.Tracing.Enabled() {
		return handler
	}
	return func(ctx context.Context, in TIn) (TOut, error) {
		out, err := handler(ctx, in)
		fctx := context.WithoutCancel(ctx)
		if deadline, ok := ctx.Deadline(); ok {
			var cancel context.CancelFunc
			fctx, cancel = context.WithDeadline(fctx, deadline)
			defer cancel()
		}
		if ferr := rt.Tracing.ForceFlush(fctx); ferr != nil && rt.Log != nil {
			rt.Log.Warn("exporting the invocation's spans failed", "error", redact.Error(ferr))
		}
		return out, err
	}
}

// withInvocationMetrics wraps handler so that every invocation ends with the EMF lines of
// rt's recorder, written to w; it returns handler itself when rt reports to no emf.Recorder.
func withInvocationMetrics[TIn, TOut any](rt *Runtime, w io.Writer, handler func(context.Context, TIn) (TOut, error)) func(context.Context, TIn) (TOut, error) {
	if rt == nil {
		return handler
	}
	rec, ok := rt.Metrics.(*emf.Recorder)
	if !ok || rec == nil {
		return handler
	}
	return emf.Wrap(rec, w, handler)
}
