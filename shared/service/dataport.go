package service

import (
	"net/http"

	"github.com/alternayte/queuebox/shared/inbox"
)

// RunningText is the answer to GET / on the data port (and on the management port).
const RunningText = "QueueBox is running!"

// Running answers RunningText as text/plain.
func Running(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = w.Write([]byte(RunningText))
}

// DataOptions are the settings of DataHandler.
type DataOptions struct {
	// MaxBodyBytes is inbox.maxBodyBytes: a request whose Content-Length is above it gets
	// 413 {"error":"Request body exceeds N bytes"} before it is routed. 0 or less: no check
	// here (the inbox still caps the bodies it reads).
	MaxBodyBytes int64
	// Draining reports the shutdown: while it is true every request gets
	// 503 {"error":"QueueBox is shutting down"}. Nil: never.
	Draining func() bool
	// Management, when not nil, serves /metrics, /health, /health/ and /admin/ on the data port: the local
	// process mounts its management routes there when server.managementPort is not set.
	Management http.Handler
}

// DataHandler returns the data port as QueueBox serves it, in one place for both drivers:
// the local process listens with it, and the inbox Lambda function adapts API Gateway
// events to it, so that both answer every request with the same status, headers and body.
//
// In this order: 503 while opts.Draining reports the shutdown (inbox.Gate) on every path, and
// 413 for a Content-Length above opts.MaxBodyBytes on the inbox's paths only (the check
// that the inbox handler runs itself); GET /
// answers RunningText; /metrics, /health, /health/, /admin/ and /console go to opts.Management when it
// is set; every other path goes to in, the inbox, which answers 404 for a path that no source
// serves.
func DataHandler(in http.Handler, opts DataOptions) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", Running)
	if opts.Management != nil {
		mux.Handle("/metrics", opts.Management)
		mux.Handle("/health/", opts.Management)
		mux.Handle("/health", opts.Management)
		mux.Handle("/admin/", opts.Management)
		// The console (docs/console.md) exists only when admin.enabled; otherwise the
		// management mux answers 404 for it.
		mux.Handle("/console", opts.Management)
		mux.Handle("/console/", opts.Management)
		mux.Handle("/openapi.json", opts.Management)
	}
	// inbox.maxBodyBytes caps the inbox's bodies only: an admin request on the data port
	// (no management port) keeps admin.maxPayloadBytes and the admin routes' own 413 answer.
	mux.Handle("/", inbox.Gate(in, nil, opts.MaxBodyBytes))
	return inbox.Gate(mux, opts.Draining, 0)
}
