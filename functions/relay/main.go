// Command relay is the inbox relay Lambda function: each invocation, scheduled by
// EventBridge, forwards the stored push inbox rows into the outbox (one transaction per row,
// in order per aggregate) until the invocation's deadline minus a margin, or, in drain mode,
// until a claim finds nothing. The configuration comes from the function's environment
// exactly as for the local process; LAMBDA_MODE and LAMBDA_MARGIN_MS set the driver (see
// shared/lambdafn). Build it with -tags lambda.norpc.
package main

import (
	"context"

	"github.com/alternayte/queuebox/shared/lambdafn"
	"github.com/alternayte/queuebox/shared/service"
)

func main() {
	ctx := context.Background()
	rt, err := lambdafn.Init(ctx, lambdafn.OSOptions())
	if err != nil {
		lambdafn.Exit(err)
	}
	r, err := service.NewRelay(rt.Config, rt.DB.Store, rt.Metrics, nil, rt.Log)
	if err != nil {
		lambdafn.Exit(err)
	}
	lambdafn.Start(rt, lambdafn.RelayHandler(r, rt.Settings, rt.Log))
}
