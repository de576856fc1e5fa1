package lambdafn

import (
	"context"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/alternayte/queuebox/shared/emf"
)

// invocationMetrics is the recorder that Init gave Runtime.Metrics; Start writes it to stdout
// as CloudWatch Embedded Metric Format lines at the end of every invocation, since nothing
// scrapes a Lambda function.
var invocationMetrics *emf.Recorder

// Start hands handler to the Lambda runtime and serves invocations until the runtime ends
// the process; it never returns, so a main puts nothing after it. It is the only call of
// aws-lambda-go's lambda package in the project. Build the functions with
// -tags lambda.norpc: the runtime API loop needs no net/rpc.
func Start[TIn, TOut any](handler func(context.Context, TIn) (TOut, error)) {
	if invocationMetrics != nil {
		handler = emf.Wrap(invocationMetrics, os.Stdout, handler)
	}
	lambda.StartHandlerFunc(handler)
}
