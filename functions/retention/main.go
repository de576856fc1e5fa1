// Command retention is the retention Lambda function: each invocation, scheduled by
// EventBridge, runs every enabled table's retention policy once (retention.outbox and
// retention.inbox), deleting finished rows in batches until a batch comes back short or the
// invocation's deadline minus a margin. The schedule is the interval: cleanupInterval is not
// read. The configuration comes from the function's environment exactly as for the local
// process; LAMBDA_MARGIN_MS sets the margin (see shared/lambdafn). Build it with
// -tags lambda.norpc.
package main

import (
	"context"

	"github.com/alternayte/queuebox/shared/lambdafn"
	"github.com/alternayte/queuebox/shared/service"
)

func main() {
	ctx := context.Background()
	// The retention cleanup runs no transform and records no span: the function links no
	// JavaScript engine and no OpenTelemetry SDK.
	rt, err := lambdafn.Init(ctx, lambdafn.OSOptions(nil, nil))
	if err != nil {
		lambdafn.Exit(err)
	}
	app, err := rt.BuildParts(ctx, service.AppOptions{Retention: true}, service.RetentionPart())
	if err != nil {
		lambdafn.Exit(err)
	}
	if !app.Cleaner.Enabled() {
		rt.Log.Warn("retention.enabled is false: every invocation of this function deletes nothing")
	}
	lambdafn.Start(rt, lambdafn.RetentionHandler(app.Cleaner, rt.Settings, rt.Log))
}
