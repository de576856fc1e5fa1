package service

import (
	"fmt"
	"net/http"
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
// In this order: 503 while opts.Draining reports the shutdown; 413 for a Content-Length
// above opts.MaxBodyBytes; GET / answers RunningText; /metrics, /health, /health/ and /admin/ go to
// opts.Management when it is set; every other path goes to inbox, which answers 404 for a
// path that no source serves.
func DataHandler(inbox http.Handler, opts DataOptions) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", Running)
	if opts.Management != nil {
		mux.Handle("/metrics", opts.Management)
		mux.Handle("/health/", opts.Management)
		mux.Handle("/health", opts.Management)
		mux.Handle("/admin/", opts.Management)
	}
	mux.Handle("/", inbox)
	return Gate(mux, opts.Draining, opts.MaxBodyBytes)
}

// Gate answers 503 {"error":"QueueBox is shutting down"} (with Connection: close) to every
// request while draining reports true, and, when limit is above 0, 413
// {"error":"Request body exceeds <limit> bytes"} to a request whose Content-Length is above
// limit; it hands every other request to h. A nil draining never drains.
func Gate(h http.Handler, draining func() bool, limit int64) http.Handler {
	tooLarge := fmt.Appendf(nil, `{"error":"Request body exceeds %d bytes"}`, limit)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if draining != nil && draining() {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Connection", "close")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(`{"error":"QueueBox is shutting down"}`))
			return
		}
		if limit > 0 && r.ContentLength > limit {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusRequestEntityTooLarge)
			_, _ = w.Write(tooLarge)
			return
		}
		h.ServeHTTP(w, r)
	})
}
