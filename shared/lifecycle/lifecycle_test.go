package lifecycle

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// recorder records the starts and stops of the fake services, in order.
type recorder struct {
	mu     sync.Mutex
	events []string
}

func (r *recorder) add(e string) {
	r.mu.Lock()
	r.events = append(r.events, e)
	r.mu.Unlock()
}

func (r *recorder) list() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.events...)
}

// fake is a Service that records its calls; a Start with err set fails. stopping, when not
// nil, is told when Stop begins, and Stop then waits for release.
type fake struct {
	name     string
	rec      *recorder
	err      error
	stopping chan<- string
	release  <-chan struct{}
}

func (f *fake) Start(context.Context) error {
	if f.err != nil {
		f.rec.add("fail " + f.name)
		return f.err
	}
	f.rec.add("start " + f.name)
	return nil
}

func (f *fake) Stop() {
	if f.stopping != nil {
		f.stopping <- f.name
		<-f.release
	}
	f.rec.add("stop " + f.name)
}

func TestLoopRunsUntilStop(t *testing.T) {
	t.Parallel()
	var runs, running atomic.Int32
	l := NewLoop(func(ctx context.Context) {
		runs.Add(1)
		running.Add(1)
		defer running.Add(-1)
		<-ctx.Done()
	})
	l.Stop() // never started: nothing to do

	require.NoError(t, l.Start(context.Background()))
	require.NoError(t, l.Start(context.Background()), "a second Start of a running loop")
	require.Eventually(t, func() bool { return running.Load() == 1 }, 10*time.Second, time.Millisecond)

	var wg sync.WaitGroup
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l.Stop()
			if running.Load() != 0 {
				t.Error("Stop returned before the function did")
			}
		}()
	}
	wg.Wait()
	require.Equal(t, int32(1), runs.Load(), "the function ran once")

	// A stopped loop starts again.
	require.NoError(t, l.Start(context.Background()))
	require.Eventually(t, func() bool { return runs.Load() == 2 }, 10*time.Second, time.Millisecond)
	l.Stop()
	require.Equal(t, int32(0), running.Load())
}

func TestLoopEndsWithItsContext(t *testing.T) {
	t.Parallel()
	ended := make(chan struct{})
	l := NewLoop(func(ctx context.Context) {
		<-ctx.Done()
		close(ended)
	})
	ctx, cancel := context.WithCancel(context.Background())
	require.NoError(t, l.Start(ctx))
	cancel()
	select {
	case <-ended:
	case <-time.After(10 * time.Second):
		t.Fatal("the function did not see its context end")
	}
	l.Stop() // returned on its own: Stop returns at once
}

func TestLoopStartsAgainAfterReturningOnItsOwn(t *testing.T) {
	t.Parallel()
	var runs atomic.Int32
	l := NewLoop(func(context.Context) { runs.Add(1) })
	require.NoError(t, l.Start(context.Background()))
	require.Eventually(t, func() bool {
		_ = l.Start(context.Background())
		return runs.Load() >= 2
	}, 10*time.Second, time.Millisecond)
	l.Stop()
}

func TestGroupStartsInOrderAndStopsInReverse(t *testing.T) {
	t.Parallel()
	rec := &recorder{}
	var g Group
	g.Add(&fake{name: "a1", rec: rec}, nil, &fake{name: "a2", rec: rec})
	g.Add() // no stage
	g.Add(&fake{name: "b", rec: rec})
	g.Add(&fake{name: "c", rec: rec})
	require.NoError(t, g.Start(context.Background()))
	require.Equal(t, []string{"start a1", "start a2", "start b", "start c"}, rec.list())

	g.Stop()
	got := rec.list()[4:]
	require.Equal(t, []string{"stop c", "stop b"}, got[:2])
	require.ElementsMatch(t, []string{"stop a1", "stop a2"}, got[2:])
}

func TestGroupStopsAStageAtOnce(t *testing.T) {
	t.Parallel()
	rec := &recorder{}
	stopping := make(chan string, 3)
	release := make(chan struct{})
	var g Group
	g.Add(&fake{name: "first", rec: rec})
	g.Add(&fake{name: "x", rec: rec, stopping: stopping, release: release},
		&fake{name: "y", rec: rec, stopping: stopping, release: release})
	require.NoError(t, g.Start(context.Background()))

	stopped := make(chan struct{})
	go func() {
		g.Stop()
		close(stopped)
	}()
	// Both services of the stage begin to stop before either returns.
	var began []string
	for range 2 {
		select {
		case name := <-stopping:
			began = append(began, name)
		case <-time.After(10 * time.Second):
			t.Fatalf("only %v began to stop: the services of a stage stop at the same time", began)
		}
	}
	require.ElementsMatch(t, []string{"x", "y"}, began)
	require.NotContains(t, rec.list(), "stop first", "the earlier stage stops after the later one")
	close(release)
	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
		t.Fatal("Stop did not return")
	}
	require.Equal(t, "stop first", rec.list()[len(rec.list())-1])
}

func TestGroupStartFailureStopsWhatStarted(t *testing.T) {
	t.Parallel()
	rec := &recorder{}
	errBoom := errors.New("boom")
	var g Group
	g.Add(&fake{name: "a", rec: rec})
	g.Add(&fake{name: "b1", rec: rec}, &fake{name: "b2", rec: rec, err: errBoom}, &fake{name: "b3", rec: rec})
	g.Add(&fake{name: "c", rec: rec})
	err := g.Start(context.Background())
	require.ErrorIs(t, err, errBoom)
	require.Equal(t, []string{"start a", "start b1", "fail b2", "stop b1", "stop a"}, rec.list())
}
