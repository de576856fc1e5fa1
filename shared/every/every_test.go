package every

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestGateLetsTheFirstStepThroughThenWaitsForTheInterval(t *testing.T) {
	var g Gate
	if !g.Take(time.Hour) {
		t.Fatal("the first Take of a zero Gate was refused")
	}
	if g.Take(time.Hour) {
		t.Fatal("a second Take within the interval was let through")
	}
	if !g.Take(0) {
		t.Fatal("a Take with the interval passed was refused")
	}
}

func TestGateForgetLetsTheNextStepThrough(t *testing.T) {
	var g Gate
	g.Take(time.Hour)
	g.Forget()
	if !g.Take(time.Hour) {
		t.Fatal("Take after Forget was refused")
	}
}

func TestGateLetsOneOfManyConcurrentStepsThrough(t *testing.T) {
	var g Gate
	var through atomic.Int32
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() {
			if g.Take(time.Hour) {
				through.Add(1)
			}
		})
	}
	wg.Wait()
	if n := through.Load(); n != 1 {
		t.Fatalf("%d of 50 concurrent Takes were let through, want 1", n)
	}
}
