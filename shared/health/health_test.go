package health

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

func get(t *testing.T, h http.Handler, path string) (int, Report) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
	var rep Report
	if err := json.Unmarshal(rec.Body.Bytes(), &rep); err != nil {
		t.Fatalf("%s: body %q: %v", path, rec.Body.String(), err)
	}
	if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
		t.Errorf("%s: Content-Type %q", path, ct)
	}
	return rec.Code, rep
}

func TestLiveTouchesNoDependency(t *testing.T) {
	t.Parallel()
	h := New(Check{Name: "database", Decides: true, Probe: func(context.Context) error { return errors.New("down") }})
	mux := http.NewServeMux()
	h.Register(mux)
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest("GET", "/health/live", nil))
	if rec.Code != 200 || rec.Body.String() != `{"status":"healthy","components":{"process":{"status":"up"}}}` {
		t.Errorf("live = %d %s", rec.Code, rec.Body.String())
	}
}

func TestReadyAndTheAlias(t *testing.T) {
	t.Parallel()
	up := func(context.Context) error { return nil }
	down := func(context.Context) error { return errors.New("dial tcp: connection refused password=hunter2") }
	tests := []struct {
		name   string
		checks []Check
		want   int
		status string
	}{
		{"all up", []Check{{Name: "database", Decides: true, Probe: up}, {Name: "outbox-poller", Decides: true, Probe: up}}, 200, "healthy"},
		{"a deciding component down", []Check{{Name: "database", Decides: true, Probe: down}, {Name: "outbox-poller", Decides: true, Probe: up}}, 503, "unhealthy"},
		{"an advisory component down", []Check{{Name: "database", Decides: true, Probe: up}, {Name: "outbox-capture", Decides: false, Probe: down}}, 200, "healthy"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mux := http.NewServeMux()
			New(tt.checks...).Register(mux)
			for _, path := range []string{"/health/ready", "/health"} {
				code, rep := get(t, mux, path)
				if code != tt.want || rep.Status != tt.status || len(rep.Components) != len(tt.checks) {
					t.Errorf("%s = %d %+v", path, code, rep)
				}
				for _, c := range rep.Components {
					if c.Status == "down" && (c.Error == "" || strings.Contains(c.Error, "hunter2")) {
						t.Errorf("down component error = %q", c.Error)
					}
				}
			}
		})
	}
}

func TestACheckThatHangsIsDownAfterThreeSeconds(t *testing.T) {
	t.Parallel()
	block := make(chan struct{})
	defer close(block)
	h := New(Check{Name: "rabbitmq.orders", Decides: true, Probe: func(context.Context) error { <-block; return nil }})
	start := time.Now()
	rep, ok := h.Run(context.Background())
	if ok || rep.Components["rabbitmq.orders"].Status != "down" {
		t.Errorf("report = %+v", rep)
	}
	// The probe never returns: returning at all is the timeout. The upper bound leaves a loaded
	// machine room; the lower bound holds the check to its full timeout.
	if d := time.Since(start); d < CheckTimeout || d > CheckTimeout+10*time.Second {
		t.Errorf("the check took %s, want about %s", d, CheckTimeout)
	}
}

func TestHeartbeat(t *testing.T) {
	t.Parallel()
	var b Heartbeat
	if err := b.Check(time.Minute); err == nil || err.Error() != "not running" {
		t.Errorf("before start: %v", err)
	}
	b.Start()
	if err := b.Check(time.Minute); err != nil {
		t.Errorf("after start: %v", err)
	}
	b.Beat("the last claim failed: connection refused")
	if err := b.Check(time.Minute); err == nil {
		t.Error("a failed cycle is up")
	}
	b.Beat("")
	if err := b.Check(0); err == nil {
		t.Error("a stale beat is up")
	}
	b.Stop()
	if err := b.Check(time.Minute); err == nil {
		t.Error("a stopped run is up")
	}
}

func TestDownReasonsAndTheirLog(t *testing.T) {
	t.Parallel()
	var logs strings.Builder
	var mu sync.Mutex
	probeErr := error(Reason("the last cycle failed", errors.New("claiming: host db.internal user queuebox")))
	h := New(
		Check{Name: "outbox-poller", Decides: true, Probe: func(context.Context) error {
			mu.Lock()
			defer mu.Unlock()
			return probeErr
		}},
		Check{Name: "database", Decides: true, Probe: func(context.Context) error { return errors.New("host db.internal") }},
	).WithLogger(slog.New(slog.NewTextHandler(lockedWriter{&mu, &logs}, nil)))
	set := func(err error) {
		mu.Lock()
		probeErr = err
		mu.Unlock()
	}
	read := func() string {
		mu.Lock()
		defer mu.Unlock()
		return logs.String()
	}

	rep, ok := h.Run(context.Background())
	if ok || rep.Components["outbox-poller"].Error != "the last cycle failed" || rep.Components["database"].Error != GenericReason {
		t.Fatalf("report = %+v", rep)
	}
	h.Run(context.Background())
	if n := strings.Count(read(), "component is down"); n != 2 {
		t.Errorf("a component down for the same reason was logged again: %d lines\n%s", n, read())
	}
	if !strings.Contains(read(), "claiming: host db.internal user queuebox") {
		t.Errorf("the log lacks the detail:\n%s", read())
	}
	set(Reason("not running", nil))
	rep, _ = h.Run(context.Background())
	if rep.Components["outbox-poller"].Error != "not running" || strings.Count(read(), "component is down") != 3 {
		t.Errorf("a new reason: report %+v, log\n%s", rep, read())
	}
	set(nil)
	rep, _ = h.Run(context.Background())
	if rep.Components["outbox-poller"].Status != "up" || !strings.Contains(read(), "component is up again") {
		t.Errorf("recovery: report %+v, log\n%s", rep, read())
	}
}

// lockedWriter writes to b under mu.
type lockedWriter struct {
	mu *sync.Mutex
	b  *strings.Builder
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func TestAComponentShowsTheDetailsItsCheckGives(t *testing.T) {
	up := func(context.Context) error { return nil }
	h := New(
		Check{Name: "outbox-poller", Decides: true, Probe: up, Detail: func() any { return map[string]any{"destinations": []string{"orders"}} }},
		Check{Name: "database", Decides: true, Probe: up, Detail: func() any { return nil }},
	)
	rep, ok := h.Run(context.Background())
	if !ok {
		t.Fatal("not ready")
	}
	body, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"status":"healthy","components":{"database":{"status":"up"},"outbox-poller":{"status":"up","details":{"destinations":["orders"]}}}}`
	if string(body) != want {
		t.Errorf("body\n got %s\nwant %s", body, want)
	}
}
