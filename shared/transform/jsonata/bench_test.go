package jsonata

import (
	"context"
	"encoding/json"
	"syscall"
	"testing"
	"time"

	"github.com/alternayte/queuebox/shared/transform"
)

// cpuTime is the CPU time of the process so far, user and system, every thread (GC included).
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// measureCPU reports cpu-ns/op beside ns/op: on a machine that other work shares, the wall
// time per operation says more about the load than about the code.
func measureCPU(b *testing.B) func() {
	start := cpuTime(b)
	return func() {
		b.ReportMetric(float64(cpuTime(b)-start)/float64(b.N), "cpu-ns/op")
	}
}

// benchExpr is the route example of spec/12: a small, typical transform.
const benchExpr = `{ "orderId": id, "customer": customer.name, "total": items.(price * quantity) ~> $sum(), "id": $messageId }`

// benchLimits keep a busy machine from failing a benchmark with a timeout: it measures cost.
var benchLimits = transform.Limits{Timeout: 10 * time.Second}

var benchInput = json.RawMessage(`{"id":"1001","customer":{"name":"Ada"},"items":[{"price":10,"quantity":2},{"price":5,"quantity":3}]}`)

// BenchmarkEvaluate is the cost of one evaluation of a small expression on a warm runtime,
// including the JSON in and out and the pool.
func BenchmarkEvaluate(b *testing.B) {
	e := NewEngine(EngineOptions{PoolSize: 1})
	x, err := e.Compile(benchExpr, benchLimits)
	if err != nil {
		b.Fatal(err)
	}
	vars := transform.DeliveryVars("6b1f0c1e-9a7d-4f0e-8a1c-2f3d4e5f6a7b", "order.created", 0, time.Now())
	b.ReportAllocs()
	defer measureCPU(b)()
	for b.Loop() {
		if _, err := x.Evaluate(context.Background(), benchInput, vars); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkEvaluateParallel runs evaluations from as many goroutines as GOMAXPROCS, on a pool
// of that size.
func BenchmarkEvaluateParallel(b *testing.B) {
	e := NewEngine(EngineOptions{})
	x, err := e.Compile(benchExpr, benchLimits)
	if err != nil {
		b.Fatal(err)
	}
	vars := transform.DeliveryVars("6b1f0c1e-9a7d-4f0e-8a1c-2f3d4e5f6a7b", "order.created", 0, time.Now())
	b.ReportAllocs()
	defer measureCPU(b)()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := x.Evaluate(context.Background(), benchInput, vars); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkEvaluateIdentity is the floor: `$` on a tiny input.
func BenchmarkEvaluateIdentity(b *testing.B) {
	e := NewEngine(EngineOptions{PoolSize: 1})
	x, err := e.Compile(`$`, benchLimits)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	defer measureCPU(b)()
	for b.Loop() {
		if _, err := x.Evaluate(context.Background(), json.RawMessage(`{"a":1}`), nil); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkNewRuntime is the cost of one goja runtime with JSONata loaded.
func BenchmarkNewRuntime(b *testing.B) {
	b.ReportAllocs()
	defer measureCPU(b)()
	for b.Loop() {
		if _, err := newJSRuntime(1); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCompileOnARuntime is the cost of compiling the small expression once on a runtime.
func BenchmarkCompileOnARuntime(b *testing.B) {
	rt, err := newJSRuntime(1)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	defer measureCPU(b)()
	for b.Loop() {
		if _, err := rt.compile(nil, rt.vm.ToValue(benchExpr), rt.vm.ToValue(100)); err != nil {
			b.Fatal(err)
		}
	}
}
