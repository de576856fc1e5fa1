// Package lifecycle is the one shape of the long-running parts of a QueueBox process (the
// outbox poller, the inbox relay, the retention cleanup, the capture connector, the broker
// sources and the HTTP servers) and the group that starts and stops them in order.
//
// A Service starts in the background and stops on request; its Start and Stop may be called
// more than once, as river's start/stop services may. Loop turns a function that runs until
// its context ends (the Run of a worker) into a Service. A Group holds the services of a
// process in stages: Start starts the stages in the order they were added, and Stop stops them
// in the reverse order, the services of one stage at the same time, so that the last stage to
// start is the first to stop and the first stage is stopped last, all of it at once.
package lifecycle

import (
	"context"
	"sync"
)

// Service is a long-running part of a process.
type Service interface {
	// Start starts the service in the background and returns once it runs, or with the error
	// that kept it from starting. The service's work runs under ctx: a process that stops its
	// services in an order of its own, with Stop, passes a context that is never cancelled
	// (context.WithoutCancel). Start on a service that runs does nothing.
	Start(ctx context.Context) error
	// Stop stops the service and returns once it has stopped: the service first finishes or
	// gives up what it holds, within its own timeout (a poller waits for its publishes in
	// flight, a broker source for the batch it is storing). Stop on a service that never
	// started, or that stopped, does nothing. It is safe to call from several goroutines.
	Stop()
}

// Loop is a Service that runs a function on its own goroutine until the function's context
// ends: Stop cancels the context and waits for the function to return. A Loop whose function
// returned on its own may be started again.
type Loop struct {
	run func(ctx context.Context)

	mu     sync.Mutex
	cancel context.CancelFunc
	done   chan struct{} // closed when run returned; nil when the Loop is not running
}

// NewLoop returns a Loop of run. run returns when its context ends, after it has finished or
// given up its work; what it has to report (a summary, an error) it logs itself.
func NewLoop(run func(ctx context.Context)) *Loop { return &Loop{run: run} }

// Start runs the function on a new goroutine under a context derived from ctx. It never fails.
func (l *Loop) Start(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.done != nil {
		select {
		case <-l.done: // the function returned on its own: run it again
		default:
			return nil
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	l.cancel, l.done = cancel, done
	go func() {
		defer close(done)
		l.run(ctx)
	}()
	return nil
}

// Stop cancels the function's context and waits for it to return.
func (l *Loop) Stop() {
	l.mu.Lock()
	cancel, done := l.cancel, l.done
	l.mu.Unlock()
	if done == nil {
		return
	}
	cancel()
	<-done
	l.mu.Lock()
	if l.done == done {
		l.cancel, l.done = nil, nil
	}
	l.mu.Unlock()
}

// Group starts and stops the services of a process in stages. Add the stages before Start.
type Group struct {
	mu     sync.Mutex
	stages [][]Service
}

// Add appends a stage: services that start after those of the stages added before, in the
// order given, and stop before them, all at the same time. Nil services are left out, and a
// stage with none is not added.
func (g *Group) Add(services ...Service) {
	var stage []Service
	for _, s := range services {
		if s != nil {
			stage = append(stage, s)
		}
	}
	if len(stage) == 0 {
		return
	}
	g.mu.Lock()
	g.stages = append(g.stages, stage)
	g.mu.Unlock()
}

// Start starts the stages in order, passing ctx to every service. When a service fails to
// start, Start stops the services it started, in the order of Stop, and returns the error.
func (g *Group) Start(ctx context.Context) error {
	g.mu.Lock()
	stages := g.stages
	g.mu.Unlock()
	for i, stage := range stages {
		for j, s := range stage {
			if err := s.Start(ctx); err != nil {
				stopStage(stage[:j])
				stopStages(stages[:i])
				return err
			}
		}
	}
	return nil
}

// Stop stops the stages in the reverse order of Start. The services of one stage stop at the
// same time, and the next stage stops once all of them have stopped.
func (g *Group) Stop() {
	g.mu.Lock()
	stages := g.stages
	g.mu.Unlock()
	stopStages(stages)
}

// stopStages stops stages, the last first.
func stopStages(stages [][]Service) {
	for i := len(stages) - 1; i >= 0; i-- {
		stopStage(stages[i])
	}
}

// stopStage stops the services of a stage at the same time and waits for all of them.
func stopStage(stage []Service) {
	var wg sync.WaitGroup
	for _, s := range stage {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.Stop()
		}()
	}
	wg.Wait()
}
