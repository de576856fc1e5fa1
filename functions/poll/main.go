// Command poll is the poll Lambda function: each invocation, scheduled by EventBridge or
// woken by the capture node, delivers outbox rows until the invocation's deadline minus a
// margin, or, in drain mode, until a claim finds nothing. The configuration comes from the
// function's environment exactly as for the local process; LAMBDA_MODE and LAMBDA_MARGIN_MS
// set the driver (see shared/lambdafn). Build it with -tags lambda.norpc; the tags
// queuebox_no_rabbitmq, queuebox_no_kafka and queuebox_no_nats leave that broker destination
// out (`make lambda LAMBDA_DESTINATIONS=...`, deploy/README.md).
package main

import (
	"context"

	"github.com/alternayte/queuebox/shared/lambdafn"
	"github.com/alternayte/queuebox/shared/service"
	"github.com/alternayte/queuebox/shared/service/connectors"
	"github.com/alternayte/queuebox/shared/tracing/otlp"
	"github.com/alternayte/queuebox/shared/transform/builtin"
)

func main() {
	ctx := context.Background()
	// The poll function applies the route and destination transforms on the JSONata engine;
	// built with the tag queuebox_no_jsonata, it refuses a configuration that holds one.
	rt, err := lambdafn.Init(ctx, lambdafn.OSOptions(builtin.Engine(), otlp.New))
	if err != nil {
		lambdafn.Exit(err)
	}
	// The poll function delivers to RabbitMQ, Kafka and NATS destinations too; the other
	// functions pass none and so leave the broker clients out of their binaries.
	app, err := rt.BuildParts(ctx, service.AppOptions{Poller: true, Brokers: connectors.All()}, service.PollerPart())
	if err != nil {
		lambdafn.Exit(err)
	}
	lambdafn.Start(rt, lambdafn.PollHandler(app.Outbox.Poller, rt.Settings, rt.Log))
}
