package service

import (
	"bytes"
	"io"
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
	// MaxBodyBytes is inbox.maxBodyBytes, which caps the body of every route of the data port:
	// a request whose Content-Length is above it gets 413 {"error":"Request body exceeds N
	// bytes"} before it is routed, and so does a body of unknown length (chunked) that turns
	// out longer. 0 or less: no check here (the inbox still caps the bodies it reads).
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
// In this order, on every path: 503 while opts.Draining reports the shutdown (inbox.Gate),
// and 413 for a Content-Length above opts.MaxBodyBytes. Then GET / answers RunningText;
// /metrics, /health, /health/, /admin/, /console and /openapi.json go to opts.Management when
// it is set; every other path goes to in, the inbox, which answers 404 for a path that no
// source serves. A body of unknown length is counted as it is read: the inbox counts its own,
// and for the other routes the data port reads it first (at most opts.MaxBodyBytes bytes, which
// the route then reads from memory) and answers 413 when it is longer. An admin route keeps its
// own admin.maxPayloadBytes within that.
func DataHandler(in http.Handler, opts DataOptions) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /{$}", capUnknownLength(http.HandlerFunc(Running), opts.MaxBodyBytes))
	if m := opts.Management; m != nil {
		m = capUnknownLength(m, opts.MaxBodyBytes)
		mux.Handle("/metrics", m)
		mux.Handle("/health/", m)
		mux.Handle("/health", m)
		mux.Handle("/admin/", m)
		// The console (docs/console.md) exists only when admin.enabled; otherwise the
		// management mux answers 404 for it.
		mux.Handle("/console", m)
		mux.Handle("/console/", m)
		mux.Handle("/openapi.json", m)
	}
	mux.Handle("/", in)
	return inbox.Gate(mux, opts.Draining, opts.MaxBodyBytes)
}

// capUnknownLength reads a body of unknown length (a chunked body, Content-Length -1) before h:
// at most limit bytes, which h then reads from memory; a longer body gets 413 in the shape of
// inbox.Gate, and a body that breaks off (the client went away, or the body deadline of
// ServerOptions passed) ends the request without an answer and closes the connection. A body
// with a Content-Length is left to inbox.Gate, which has checked it already. limit 0 or less:
// h unchanged.
func capUnknownLength(h http.Handler, limit int64) http.Handler {
	if limit <= 0 {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength >= 0 || r.Body == nil || r.Body == http.NoBody {
			h.ServeHTTP(w, r)
			return
		}
		body, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
		if err != nil {
			panic(http.ErrAbortHandler) // nothing to answer: the body never arrived whole
		}
		if int64(len(body)) > limit {
			inbox.TooLarge(w, limit)
			return
		}
		r.ContentLength = int64(len(body))
		r.Body = io.NopCloser(bytes.NewReader(body))
		h.ServeHTTP(w, r)
	})
}
