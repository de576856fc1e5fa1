package lambdafn

import (
	"context"
	"io"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/alternayte/queuebox/shared/emf"
)

// Start hands handler to the Lambda runtime and serves invocations until the runtime ends
// the process; it never returns, so a main puts nothing after it. When rt's Metrics is the
// emf.Recorder that Init sets, Start writes it to stdout as CloudWatch Embedded Metric
// Format lines at the end of every invocation, since nothing scrapes a Lambda function. It
// is the only call of aws-lambda-go's lambda package in the project. Build the functions
// with -tags lambda.norpc: the runtime API loop needs no net/rpc.
func Start[TIn, TOut any](rt *Runtime, handler func(context.Context, TIn) (TOut, error)) {
	lambda.StartHandlerFunc(withInvocationMetrics(rt, os.Stdout, handler))
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
