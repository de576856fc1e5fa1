package service

import (
	"net/http"
	"time"
)

// ServerOptions are the read deadlines of an HTTP port of queuebox serve and of the capture
// node (server.readHeaderTimeoutMs and server.readBodyTimeoutMs, docs/http-server.md).
type ServerOptions struct {
	// ReadHeaderTimeout bounds the reading of a request's line and headers; past it the
	// server closes the connection. 0: no bound.
	ReadHeaderTimeout time.Duration
	// ReadBodyTimeout bounds the reading of a request's body after its headers. 0: no bound.
	ReadBodyTimeout time.Duration
}

// ServerOptions returns the read deadlines of the configuration.
func (a *App) ServerOptions() ServerOptions {
	return ServerOptions{
		ReadHeaderTimeout: a.cfg.Server.ReadHeaderTimeoutMs.Duration(),
		ReadBodyTimeout:   a.cfg.Server.ReadBodyTimeoutMs.Duration(),
	}
}

// NewHTTPServer returns the server of one port, serving h with the read deadlines of o:
// net/http's ReadHeaderTimeout, and its ReadTimeout (the whole request) set to the header
// deadline plus the body deadline, so that a body gets at least o.ReadBodyTimeout after its
// headers. A body that has not arrived by then fails to read (the inbox answers it as a body
// that broke off, 400), and a body that the route did not read is not waited for after the
// answer: the connection is closed. The deadline ends once the body has been read: net/http
// lifts it when it starts watching for the client going away, so a long request (a paced
// replay) keeps its context. An idle kept-alive connection is closed after the same time
// (net/http's IdleTimeout follows ReadTimeout when it is not set).
func NewHTTPServer(h http.Handler, o ServerOptions) *http.Server {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: o.ReadHeaderTimeout}
	if o.ReadBodyTimeout > 0 {
		srv.ReadTimeout = o.ReadHeaderTimeout + o.ReadBodyTimeout
	}
	return srv
}
