// Package health serves GET /health/live, GET /health/ready and GET /health
// (spec/26-http-api.md): liveness reports the process only; readiness runs every component
// check at once, each bounded by 3 seconds, and answers 503 when a component that decides
// readiness is down.
package health

import (
	"context"
	"encoding/json"
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
	// Probe returns nil when the component is up. It must return when ctx is done. The error
	// text is shown in the answer after redaction.
	Probe func(ctx context.Context) error
}

// Component is one entry of the components object.
type Component struct {
	Status string `json:"status"`
	Error  string `json:"error,omitempty"`
}

// Report is the body of a health answer.
type Report struct {
	Status     string               `json:"status"`
	Components map[string]Component `json:"components"`
}

// Handler serves the health routes.
type Handler struct {
	checks []Check
}

// New returns a handler over the checks.
func New(checks ...Check) *Handler { return &Handler{checks: checks} }

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
			if err := probe(ctx, c); err != nil {
				comp = Component{Status: "down", Error: redact.Error(err)}
			}
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

type timeoutError struct{}

func (timeoutError) Error() string { return "no answer within 3 s" }

var errTimeout error = timeoutError{}

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
// cycle succeeded.
func (b *Heartbeat) Check(maxAge time.Duration) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case b.running <= 0:
		return stateError("not running")
	case time.Since(b.last) > maxAge:
		return stateError("no cycle for " + time.Since(b.last).Truncate(time.Second).String())
	case b.lastErr != "":
		return stateError(b.lastErr)
	}
	return nil
}

type stateError string

func (e stateError) Error() string { return string(e) }
