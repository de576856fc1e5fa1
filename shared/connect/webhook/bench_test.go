package webhook_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

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

// BenchmarkSign measures the signature alone, on the 31-byte payload of message() and on a
// 4 KiB body: standard-webhooks with one and two secrets, and hmac.
func BenchmarkSign(b *testing.B) {
	big := make([]byte, 4096)
	for i := range big {
		big[i] = 'a'
	}
	for _, tt := range []struct {
		name    string
		signing webhook.Signing
	}{
		{"standard-webhooks/1-secret", webhook.Signing{Kind: webhook.SigningStandardWebhooks, Secrets: []string{benchSecret1}}},
		{"standard-webhooks/2-secrets", webhook.Signing{Kind: webhook.SigningStandardWebhooks, Secrets: []string{benchSecret1, benchSecret2}}},
		{"hmac-sha256", webhook.Signing{Kind: webhook.SigningHMAC, Secret: "bench-secret", Prefix: "sha256="}},
	} {
		s, err := webhook.NewSigner(tt.signing)
		if err != nil {
			b.Fatal(err)
		}
		for _, body := range []struct {
			name string
			b    []byte
		}{{"31B", message().Payload}, {"4KiB", big}} {
			b.Run(tt.name+"/"+body.name, func(b *testing.B) {
				id := message().ID
				now := time.Now()
				b.ReportAllocs()
				b.SetBytes(int64(len(body.b)))
				b.RunParallel(func(pb *testing.PB) {
					h := http.Header{}
					for pb.Next() {
						if err := s.Sign(h, id, body.b, now); err != nil {
							b.Error(err)
							return
						}
					}
				})
			})
		}
	}
}

// BenchmarkPublishSigned is BenchmarkPublish with standard-webhooks signing and one secret: the
// difference of the two is the cost of signing a publish.
func BenchmarkPublishSigned(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	p, err := webhook.New(webhook.Config{
		Name: "bench", BaseURL: srv.URL, Path: "/events",
		Headers: map[string]string{"X-Source": "queuebox"},
		Auth:    webhook.Auth{Kind: webhook.AuthHeader, Header: webhook.Header{Value: "Bearer bench-token"}},
		Signing: webhook.Signing{Kind: webhook.SigningStandardWebhooks, Secrets: []string{benchSecret1}},
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
}

const (
	benchSecret1 = "whsec_AQIDBAUGBwgJCgsMDQ4PEBESExQVFhcYGRobHB0eHyA="
	benchSecret2 = "whsec_ZWZnaGlqa2xtbm9wcXJzdHV2d3h5ent8fX5/gIGCg4Q="
)
