// Command inbox is the HTTP inbox Lambda function behind an API Gateway HTTP API (Lambda
// integration, payload format version 2.0). It serves the data port of the local process,
// service.DataHandler over the inbox of the configured HTTP sources, so every request gets
// the same status, headers and body as on the local data port: GET / answers
// "QueueBox is running!", a Content-Length above inbox.maxBodyBytes gets 413, and every
// other path goes to the inbox. The configuration comes from the function's environment
// exactly as for the local process. Build it with -tags lambda.norpc.
package main

import (
	"context"

	"github.com/alternayte/queuebox/shared/lambdafn"
	"github.com/alternayte/queuebox/shared/service"
	"github.com/alternayte/queuebox/shared/tracing/otlp"
	"github.com/alternayte/queuebox/shared/transform/builtin"
)

func main() {
	ctx := context.Background()
	// The inbox applies the source transforms (sources.<name>.transform) on the JSONata engine;
	// built with the tag queuebox_no_jsonata, it refuses a configuration that holds one.
	rt, err := lambdafn.Init(ctx, lambdafn.OSOptions(builtin.Engine(), otlp.New))
	if err != nil {
		lambdafn.Exit(err)
	}
	h, err := newHandler(rt)
	if err != nil {
		lambdafn.Exit(err)
	}
	lambdafn.Start(rt, h)
}

// newHandler builds the function's handler once per container.
//
// The inbox has no waker: a push row stored here waits for the relay function's next
// scheduled invocation. A later change wakes the relay function asynchronously (an Event
// invoke, debounced, as the capture node wakes poll) after a push row is stored. Nothing
// drains either: Lambda ends a container between invocations, never during one.
func newHandler(rt *lambdafn.Runtime) (func(context.Context, lambdafn.HTTPRequest) (lambdafn.HTTPResponse, error), error) {
	app, err := rt.BuildParts(context.Background(), service.AppOptions{Inbox: true}, service.InboxPart())
	if err != nil {
		return nil, err
	}
	return lambdafn.HTTPHandler(app.DataHandler(nil), rt.Log), nil
}
