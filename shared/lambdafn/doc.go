// Package lambdafn is the Lambda driver of QueueBox's cycles: everything a
// functions/<name>/main.go needs, so that each main only wires. It is the one package besides
// functions/ that imports aws-lambda-go.
//
// A main builds the Runtime once per container with Init (configuration, logger, database,
// the JSONata engine that the main passes when the function runs transforms, and the tracer
// provider whose constructor, otlp.New, it passes when its parts record spans; the same code
// the local process runs), assembles its one part with the assembly of shared/service
// (Runtime.BuildParts, which is service.BuildParts over the runtime's database, logger,
// metrics, engine and tracer provider, so that the function links no other part), and hands
// a handler to Start:
//
//	rt, err := lambdafn.Init(ctx, lambdafn.OSOptions(jsonata.NewEngine(jsonata.EngineOptions{}), otlp.New))
//	if err != nil {
//		lambdafn.Exit(err)
//	}
//	app, err := rt.BuildParts(ctx, service.AppOptions{Poller: true, Brokers: connectors.All()}, service.PollerPart())
//	if err != nil {
//		lambdafn.Exit(err)
//	}
//	lambdafn.Start(rt, lambdafn.PollHandler(app.Outbox.Poller, rt.Settings, rt.Log))
//
// The relay function hands RelayHandler to Start the same way; the inbox function hands it
// HTTPHandler over service.DataHandler, which adapts API Gateway HTTP API events to the
// data port that the local process serves; the admin function hands it AdminHandler, the
// health and admin routes of the local management port.
//
// Each invocation repeats the cycle within the invocation's deadline (see PollHandler and
// Settings); warm invocations reuse the pools and publishers that main built. Concurrent
// invocations are separate containers, kept apart by the claims, leases and fence of the
// database exactly as container replicas are.
package lambdafn
