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
	"github.com/alternayte/queuebox/shared/tracing/otlp"
)

func main() {
	ctx := context.Background()
	// The relay runs no transform: the function links no JavaScript engine. It records the
	// spans of its forwards with the OTLP tracer provider (docs/tracing.md).
	rt, err := lambdafn.Init(ctx, lambdafn.OSOptions(nil, otlp.New))
	if err != nil {
		lambdafn.Exit(err)
	}
	// The relay runs whatever inbox.relay.enabled says: this function exists for it. Its
	// poller is the poll function, which the relay does not wake.
	app, err := rt.BuildParts(ctx, service.AppOptions{Relay: service.Always}, service.RelayPart())
	if err != nil {
		lambdafn.Exit(err)
	}
	lambdafn.Start(rt, lambdafn.RelayHandler(app.Relay, rt.Settings, rt.Log))
}
