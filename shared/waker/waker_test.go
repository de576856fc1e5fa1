package waker_test

import (
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/alternayte/queuebox/shared/waker"
)

func TestSignalCoalesces(t *testing.T) {
	t.Parallel()
	s := waker.NewSignal()
	for range 100 {
		s.Wake()
	}
	select {
	case <-s.C():
	default:
		t.Fatal("no signal after wakes")
	}
	select {
	case <-s.C():
		t.Fatal("100 wakes left more than one signal")
	default:
	}
}

func TestFuncAndNop(t *testing.T) {
	t.Parallel()
	var n atomic.Int32
	var w waker.Waker = waker.Func(func() { n.Add(1) })
	w.Wake()
	w.Wake()
	assert.Equal(t, int32(2), n.Load())
	waker.Func(nil).Wake()
	waker.Nop{}.Wake()
}

func TestReconcileFallsBackToWake(t *testing.T) {
	n := 0
	waker.Reconcile(waker.Func(func() { n++ }))
	waker.Reconcile(nil)
	assert.Equal(t, 1, n)
}
