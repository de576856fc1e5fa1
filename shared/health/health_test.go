package health

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
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
		{"all up", []Check{{"database", true, up}, {"outbox-poller", true, up}}, 200, "healthy"},
		{"a deciding component down", []Check{{"database", true, down}, {"outbox-poller", true, up}}, 503, "unhealthy"},
		{"an advisory component down", []Check{{"database", true, up}, {"outbox-capture", false, down}}, 200, "healthy"},
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
	if d := time.Since(start); d < CheckTimeout || d > CheckTimeout+2*time.Second {
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
