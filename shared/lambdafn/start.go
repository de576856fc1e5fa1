package lambdafn

import (
	"context"

	"github.com/aws/aws-lambda-go/lambda"
)

// Start hands handler to the Lambda runtime and serves invocations until the runtime ends
// the process; it never returns, so a main puts nothing after it. It is the only call of
// aws-lambda-go's lambda package in the project. Build the functions with
// -tags lambda.norpc: the runtime API loop needs no net/rpc.
func Start[TIn, TOut any](handler func(context.Context, TIn) (TOut, error)) {
	lambda.StartHandlerFunc(handler)
}
