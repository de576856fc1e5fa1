// Package health serves GET /health/live, GET /health/ready and GET /health
// (spec/26-http-api.md): liveness reports the process only; readiness runs every component
// check at once, each bounded by 3 seconds, and answers 503 when a component that decides
// readiness is down.
//
// The routes need no authentication, so the body never carries the text of a check's error,
// which can name the database user, host and database or a broker's address: a down
// component shows the public reason of a Reason error, or a generic one, and the full
// (redacted) error goes to the log.
package health

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/alternayte/queuebox/shared/redact"
)

// CheckTimeout bounds one component check; a check that does not answer in time is down.
const CheckTimeout = 3 * time.Second

// Check is one component of the readiness answer.
type Check struct {
	// Name is the component name: database, outbox-poller, inbox-relay, retention-service,
	// outbox-capture, rabbitmq.<source>, kafka.<source>, nats.<source>.
	Name string
	// Decides is true when a down component makes the process unready.
	Decides bool
	// Probe returns nil when the component is up. It must return when ctx is done. The
	// answer shows the public reason of an error made by Reason, and GenericReason for any
	// other error; the log gets the whole error text after redaction.
	Probe func(ctx context.Context) error
	// Detail, when set, returns the component's details field, or nil for none. It must be
	// cheap (no I/O) and its value free of secrets: the health routes need no credentials.
	Detail func() any
}

// GenericReason is the error of a down component in a health answer when the check's error
// carries no public reason.
const GenericReason = "the check failed; the log has the reason"

// Reason returns an error whose public text may be shown to any caller of the health routes
// and whose detail (nil for none) only reaches the log. Its Error text is the detail's, or
// public when detail is nil, so a check keeps its error text for its other callers.
func Reason(public string, detail error) error {
	return &reasonError{public: public, detail: detail}
}

type reasonError struct {
	public string
	detail error
}

func (e *reasonError) Error() string {
	if e.detail == nil {
		return e.public
	}
	return e.detail.Error()
}

func (e *reasonError) Unwrap() error { return e.detail }

// publicReason returns the text of err that a health answer shows.
func publicReason(err error) string {
	var r *reasonError
	if errors.As(err, &r) {
		return r.public
	}
	return GenericReason
}

// Component is one entry of the components object.
type Component struct {
	Status string `json:"status"`
	// Error is the public reason of a down component, never the text of the check's error.
	Error string `json:"error,omitempty"`
	// Details are what Check.Detail returned; absent when it returned nil.
	Details any `json:"details,omitempty"`
}

// Report is the body of a health answer.
type Report struct {
	Status     string               `json:"status"`
	Components map[string]Component `json:"components"`
}

// Handler serves the health routes.
type Handler struct {
	checks []Check
	log    *slog.Logger

	mu sync.Mutex
	// logged holds the error text last logged for each component that is down, so that a
	// component that stays down for the same reason is logged once, not on every probe.
	logged map[string]string
}

// New returns a handler over the checks. It logs to slog.Default() until WithLogger sets
// its logger.
func New(checks ...Check) *Handler {
	return &Handler{checks: checks, log: slog.Default(), logged: map[string]string{}}
}

// WithLogger makes h log the errors of its checks to log and returns h.
func (h *Handler) WithLogger(log *slog.Logger) *Handler {
	if log != nil {
		h.log = log
	}
	return h
}

// Register mounts GET /health/live, GET /health/ready and GET /health on mux.
func (h *Handler) Register(mux *http.ServeMux) {
	mux.HandleFunc("GET /health/live", h.Live)
	mux.HandleFunc("GET /health/ready", h.Ready)
	mux.HandleFunc("GET /health", h.Ready)
}

// Live answers 200 with the process component; it touches no dependency.
func (h *Handler) Live(w http.ResponseWriter, _ *http.Request) {
	write(w, http.StatusOK, Report{Status: "healthy", Components: map[string]Component{"process": {Status: "up"}}})
}

// Ready runs every check and answers 200 healthy or 503 unhealthy.
func (h *Handler) Ready(w http.ResponseWriter, r *http.Request) {
	rep, ok := h.Run(r.Context())
	status := http.StatusOK
	if !ok {
		status = http.StatusServiceUnavailable
	}
	write(w, status, rep)
}

// Run runs every check concurrently, each bounded by CheckTimeout, and reports whether every
// component that decides readiness is up.
func (h *Handler) Run(ctx context.Context) (Report, bool) {
	rep := Report{Status: "healthy", Components: make(map[string]Component, len(h.checks))}
	var mu sync.Mutex
	var wg sync.WaitGroup
	ready := true
	for _, c := range h.checks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			comp := Component{Status: "up"}
			err := probe(ctx, c)
			if err != nil {
				comp = Component{Status: "down", Error: publicReason(err)}
			}
			if c.Detail != nil {
				comp.Details = c.Detail()
			}
			h.logResult(c.Name, err)
			mu.Lock()
			defer mu.Unlock()
			rep.Components[c.Name] = comp
			if comp.Status == "down" && c.Decides {
				ready = false
			}
		}()
	}
	wg.Wait()
	if !ready {
		rep.Status = "unhealthy"
	}
	return rep, ready
}

// logResult logs a down component with its whole (redacted) error when the error differs
// from the one last logged for it, and a component that is up again.
func (h *Handler) logResult(name string, err error) {
	text := ""
	if err != nil {
		text = redact.Error(err)
	}
	h.mu.Lock()
	last, seen := h.logged[name]
	if text == "" {
		delete(h.logged, name)
	} else {
		h.logged[name] = text
	}
	h.mu.Unlock()
	switch {
	case text != "" && text != last:
		h.log.Warn("health check: component is down", "component", name, "error", text)
	case text == "" && seen:
		h.log.Info("health check: component is up again", "component", name)
	}
}

// probe runs one check under the timeout, and counts a check that does not answer as down
// even when it ignores its context.
func probe(ctx context.Context, c Check) error {
	ctx, cancel := context.WithTimeout(ctx, CheckTimeout)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- c.Probe(ctx) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return errTimeout
	}
}

var errTimeout = Reason("no answer within 3 s", nil)

func write(w http.ResponseWriter, status int, rep Report) {
	b, _ := json.Marshal(rep)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// Heartbeat tells whether a worker loop is alive: the loop beats on every iteration, and a
// readiness check finds it down when no run is active, when the last beat is older than its
// bound, or when the last cycle failed. It is safe for concurrent use.
type Heartbeat struct {
	mu      sync.Mutex
	running int
	last    time.Time
	lastErr string
}

// Start marks a run as active.
func (b *Heartbeat) Start() {
	b.mu.Lock()
	b.running++
	b.last = time.Now()
	b.mu.Unlock()
}

// Stop marks a run as ended.
func (b *Heartbeat) Stop() {
	b.mu.Lock()
	b.running--
	b.mu.Unlock()
}

// Beat records a live iteration; failure is the text of the cycle's error, or empty.
func (b *Heartbeat) Beat(failure string) {
	b.mu.Lock()
	b.last = time.Now()
	b.lastErr = failure
	b.mu.Unlock()
}

// Check returns nil when a run is active, its last beat is younger than maxAge and its last
// cycle succeeded. Its error is a Reason: "not running", "no cycle for <age>", or "the last
// cycle failed" with the cycle's error as the detail that only the log shows.
func (b *Heartbeat) Check(maxAge time.Duration) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case b.running <= 0:
		return Reason("not running", nil)
	case time.Since(b.last) > maxAge:
		return Reason("no cycle for "+time.Since(b.last).Truncate(time.Second).String(), nil)
	case b.lastErr != "":
		return Reason("the last cycle failed", errors.New(b.lastErr))
	}
	return nil
}
