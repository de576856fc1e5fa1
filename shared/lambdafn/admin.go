package lambdafn

import (
	"context"
	"net/http"

	"github.com/alternayte/queuebox/shared/service"
)

// AdminRoutes returns what the admin function serves: the management port of the local
// process (spec/26-http-api.md) as far as it exists on Lambda, built from rt with the same
// handlers:
//
//   - GET /health/live, GET /health/ready and GET /health (shared/health) over the checks
//     of the function's assembly (service.App.Checks): database (a ping through the store),
//     which decides readiness. It is the one component of the local process's readiness
//     answer that this function reaches. The outbox poller, the inbox relay and the retention
//     cleanup are loops of the local process, but on Lambda they are the poll, relay and
//     retention functions; their heartbeats (shared/health.Heartbeat) live in the memory of
//     those functions' containers, which this function cannot read, so outbox-poller,
//     inbox-relay and retention-service are not part of its answer. Their health is the
//     Errors metric of each function and the EMF gauges of spec/28-metrics.md (see
//     deploy/README.md, "The admin function");
//   - POST /admin/transform/test, POST /admin/replay, and the destination routes
//     GET /admin/destinations and POST /admin/destinations/{name}/pause|resume
//     (docs/delivery-controls.md) (shared/admin, built by
//     the assembly of service.Build as the local process builds them, so admin.auth, admin.insecure,
//     admin.maxPayloadBytes and admin.maxTransformTimeoutMs apply exactly as there), when
//     admin.enabled is true. Otherwise they do not exist, which is logged once;
//   - GET / answers service.RunningText.
//
// GET /metrics does not exist on Lambda: the functions write their metrics as CloudWatch
// Embedded Metric Format lines, and nothing scrapes a function. It answers 404 like every
// path that no route serves, with net/http's answer, as the management port does for an
// unknown path.
func AdminRoutes(rt *Runtime) (http.Handler, error) {
	app, err := rt.BuildParts(context.Background(), service.AppOptions{Admin: service.IfEnabled}, service.AdminPart())
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	app.Health().Register(mux)
	mux.HandleFunc("GET /{$}", service.Running)
	if app.Console != nil {
		app.Console.Register(mux)
	}
	if app.Admin != nil {
		app.Admin.Register(mux)
	} else {
		rt.Log.Warn("admin.enabled is false: this function serves the health routes only, and /admin/* answers 404")
	}
	return mux, nil
}

// AdminHandler returns the handler of the admin function behind an API Gateway HTTP API
// (payload format 2.0): HTTPHandler over AdminRoutes, so that each route answers with the
// status, headers and body of the local management port. IAM authorization of the API runs
// before the function; the function still checks admin.auth, whose credential travels in
// its own header (the SigV4 signature occupies Authorization, so admin.auth of type bearer
// cannot be sent through an IAM-authorized API; deploy/README.md).
func AdminHandler(rt *Runtime) (func(context.Context, HTTPRequest) (HTTPResponse, error), error) {
	h, err := AdminRoutes(rt)
	if err != nil {
		return nil, err
	}
	return HTTPHandler(h, rt.Log), nil
}
