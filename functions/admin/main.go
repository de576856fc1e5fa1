// Command admin is the admin Lambda function behind its own API Gateway HTTP API with IAM
// authorization (Lambda integration, payload format version 2.0). It serves the routes of
// the local process's management port that exist on Lambda, with the same handlers, so
// every request gets the same status, headers and body: GET /health/live, GET /health/ready
// and GET /health (readiness checks the database: the poll, relay and retention loops are
// other functions), and, when admin.enabled is true, POST /admin/transform/test and
// POST /admin/replay with the credential check of admin.auth. GET /metrics answers 404: on
// Lambda the metrics are CloudWatch Embedded Metric Format lines. The configuration comes
// from the function's environment exactly as for the local process (see shared/lambdafn,
// AdminRoutes). Build it with -tags lambda.norpc.
package main

import (
	"context"

	"github.com/alternayte/queuebox/shared/lambdafn"
	"github.com/alternayte/queuebox/shared/transform/builtin"
)

func main() {
	ctx := context.Background()
	// The admin function runs the transform test (POST /admin/transform/test) on the JSONata
	// engine, unless it is built with the tag queuebox_no_jsonata. Its parts record no span:
	// it passes no tracer provider, so it links no OpenTelemetry SDK.
	rt, err := lambdafn.Init(ctx, lambdafn.OSOptions(builtin.Engine(), nil))
	if err != nil {
		lambdafn.Exit(err)
	}
	h, err := lambdafn.AdminHandler(rt)
	if err != nil {
		lambdafn.Exit(err)
	}
	lambdafn.Start(rt, h)
}
