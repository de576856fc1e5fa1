package main

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestRun(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/health":
			w.WriteHeader(http.StatusOK)
		case "/down":
			w.WriteHeader(http.StatusServiceUnavailable)
		case "/slow":
			select {
			case <-r.Context().Done():
			case <-release:
			}
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) })

	tests := []struct {
		name       string
		args       []string
		wantStatus int
		wantErr    string
	}{
		// Seconds, not the default 3 s: a loaded machine may be slow to answer on loopback.
		{name: "healthy", args: []string{"-timeout", "8s", srv.URL + "/health"}, wantStatus: 0},
		{name: "503", args: []string{"-timeout", "8s", srv.URL + "/down"}, wantStatus: 1, wantErr: "503 Service Unavailable"},
		{name: "timeout", args: []string{"-timeout", "100ms", srv.URL + "/slow"}, wantStatus: 1, wantErr: "deadline exceeded"},
		{name: "refused", args: []string{"http://127.0.0.1:1/health"}, wantStatus: 1, wantErr: "probing"},
		{name: "two urls", args: []string{"a", "b"}, wantStatus: 2, wantErr: "at most one URL"},
		{name: "bad flag", args: []string{"-nope"}, wantStatus: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var stderr bytes.Buffer
			start := time.Now()
			assert.Equal(t, tt.wantStatus, run(tt.args, &stderr))
			assert.Less(t, time.Since(start), 10*time.Second)
			assert.Contains(t, stderr.String(), tt.wantErr)
		})
	}
}
