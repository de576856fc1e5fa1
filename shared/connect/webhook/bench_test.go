package webhook_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/alternayte/queuebox/shared/connect/webhook"
)

// BenchmarkPublish publishes to a loopback receiver that answers 204, from GOMAXPROCS
// goroutines (go test -bench Publish -cpu 1,8,64 varies the number in flight). It reports the
// connections the receiver accepted, which stays near the parallelism when keep-alive works.
func BenchmarkPublish(b *testing.B) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusNoContent)
	}))
	var conns atomic.Int64
	srv.Config.ConnState = func(_ net.Conn, state http.ConnState) {
		if state == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()

	p, err := webhook.New(webhook.Config{
		Name:    "bench",
		BaseURL: srv.URL,
		Path:    "/events",
		Headers: map[string]string{"X-Source": "queuebox"},
		Auth:    webhook.Auth{Kind: webhook.AuthHeader, Header: webhook.Header{Value: "Bearer bench-token"}},
	}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = p.Close() }()

	m := message()
	m.Headers = map[string]string{"x-correlation-id": "c-1"}
	b.ReportAllocs()
	b.SetBytes(int64(len(m.Payload)))
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := p.Publish(context.Background(), m); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
	b.ReportMetric(float64(conns.Load()), "conns")
}
