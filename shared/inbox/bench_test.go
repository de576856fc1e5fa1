package inbox_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/alternayte/queuebox/shared/inbox"
)

// BenchmarkHandler measures requests through the handler in process (httptest recorder, no
// network) against the real PostgreSQL store: new keys and duplicates, one goroutine and
// GOMAXPROCS*4 goroutines. It reports requests per second.
func BenchmarkHandler(b *testing.B) {
	e := newEnv(b, []inbox.Source{{
		Name: "bench", Path: "/bench", IdempotencyKeyPath: "$.id", EventTypePath: "$.type", AggregateIDPath: "$.customer",
	}}, nil)
	const payload = `{"id":"%s","type":"order.created","customer":"cus_42","items":[{"sku":"a","qty":2,"price":10.5}],"total":21}`
	post := func(b *testing.B, key string, want int) {
		req := httptest.NewRequest(http.MethodPost, "/inbox/bench", strings.NewReader(fmt.Sprintf(payload, key)))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("User-Agent", "bench")
		rec := httptest.NewRecorder()
		e.handler.ServeHTTP(rec, req)
		if rec.Code != want {
			b.Fatalf("status %d, want %d: %s", rec.Code, want, rec.Body)
		}
	}
	var seq atomic.Int64
	post(b, "dup", http.StatusAccepted)
	for _, parallel := range []bool{false, true} {
		suffix := "/serial"
		if parallel {
			suffix = "/parallel"
		}
		b.Run("new"+suffix, func(b *testing.B) {
			run(b, parallel, func() { post(b, fmt.Sprintf("k-%d", seq.Add(1)), http.StatusAccepted) })
		})
		b.Run("duplicate"+suffix, func(b *testing.B) {
			run(b, parallel, func() { post(b, "dup", http.StatusOK) })
		})
	}
}

func run(b *testing.B, parallel bool, f func()) {
	b.ReportAllocs()
	if parallel {
		b.SetParallelism(4)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				f()
			}
		})
	} else {
		for b.Loop() {
			f()
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "req/s")
}
