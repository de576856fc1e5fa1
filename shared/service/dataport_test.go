package service_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/alternayte/queuebox/shared/service"
)

// named answers its name, so a test sees which handler a request reached.
type named string

func (n named) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain")
	_, _ = io.WriteString(w, string(n))
}

func TestDataHandler(t *testing.T) {
	t.Parallel()
	draining := func() bool { return true }
	tests := []struct {
		name          string
		opts          service.DataOptions
		method, path  string
		contentLength int64
		wantStatus    int
		wantBody      string
		wantType      string
		wantClose     bool
	}{
		{name: "GET / is running", method: "GET", path: "/", wantStatus: 200,
			wantBody: "QueueBox is running!", wantType: "text/plain; charset=utf-8"},
		{name: "POST / goes to the inbox", method: "POST", path: "/", wantStatus: 200, wantBody: "inbox", wantType: "text/plain"},
		{name: "a source path goes to the inbox", method: "POST", path: "/inbox/orders", wantStatus: 200, wantBody: "inbox", wantType: "text/plain"},
		{name: "metrics without management routes go to the inbox", method: "GET", path: "/metrics", wantStatus: 200, wantBody: "inbox", wantType: "text/plain"},
		{name: "metrics with management routes", opts: service.DataOptions{Management: named("management")},
			method: "GET", path: "/metrics", wantStatus: 200, wantBody: "management", wantType: "text/plain"},
		{name: "health with management routes", opts: service.DataOptions{Management: named("management")},
			method: "GET", path: "/health", wantStatus: 200, wantBody: "management", wantType: "text/plain"},
		{name: "health/ready with management routes", opts: service.DataOptions{Management: named("management")},
			method: "GET", path: "/health/ready", wantStatus: 200, wantBody: "management", wantType: "text/plain"},
		{name: "Content-Length above the cap", opts: service.DataOptions{MaxBodyBytes: 10},
			method: "POST", path: "/inbox/orders", contentLength: 11, wantStatus: 413,
			wantBody: `{"error":"Request body exceeds 10 bytes"}`, wantType: "application/json"},
		{name: "Content-Length at the cap", opts: service.DataOptions{MaxBodyBytes: 10},
			method: "POST", path: "/inbox/orders", contentLength: 10, wantStatus: 200, wantBody: "inbox", wantType: "text/plain"},
		{name: "no cap", method: "POST", path: "/inbox/orders", contentLength: 1 << 40, wantStatus: 200, wantBody: "inbox", wantType: "text/plain"},
		{name: "draining", opts: service.DataOptions{Draining: draining}, method: "GET", path: "/", wantStatus: 503,
			wantBody: `{"error":"QueueBox is shutting down"}`, wantType: "application/json", wantClose: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := httptest.NewRequest(tt.method, tt.path, strings.NewReader(""))
			r.ContentLength = tt.contentLength
			w := httptest.NewRecorder()
			service.DataHandler(named("inbox"), tt.opts).ServeHTTP(w, r)
			if w.Code != tt.wantStatus || w.Body.String() != tt.wantBody {
				t.Errorf("answer = %d %q, want %d %q", w.Code, w.Body.String(), tt.wantStatus, tt.wantBody)
			}
			if got := w.Header().Get("Content-Type"); got != tt.wantType {
				t.Errorf("Content-Type = %q, want %q", got, tt.wantType)
			}
			if got := w.Header().Get("Connection") == "close"; got != tt.wantClose {
				t.Errorf("Connection: close is %v, want %v", got, tt.wantClose)
			}
		})
	}
}
