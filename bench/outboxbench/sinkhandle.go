package outboxbench

import (
	"context"
	"net/http"
)

// Sink is a handle on the receiver process for the benches outside this package (bench/peers):
// the same helper as the outbox bench's, the running binary started again with -sink (the
// binary must call ServeSink when it sees that flag). It answers 200 to every POST /events at
// once and records the first arrival of each X-Message-Id.
type Sink struct {
	p *sinkProcess
}

// StartSink starts the receiver process and waits for its address.
func StartSink(ctx context.Context) (*Sink, error) {
	p, err := startSink(ctx)
	if err != nil {
		return nil, err
	}
	return &Sink{p: p}, nil
}

// BaseURL is the receiver's http://127.0.0.1:port; deliveries go to BaseURL + "/events".
func (s *Sink) BaseURL() string { return s.p.base }

// PID is the receiver's process id, for its CPU time (machine.ProcessCPU).
func (s *Sink) PID() int { return s.p.pid() }

// Reset forgets every arrival and zeroes the counters.
func (s *Sink) Reset(ctx context.Context) error { return s.p.reset(ctx) }

// Stats returns the counters since the last reset.
func (s *Sink) Stats(ctx context.Context) (SinkStats, error) { return s.p.stats(ctx) }

// Arrivals returns each message id's first arrival since the last reset, earliest first.
func (s *Sink) Arrivals(ctx context.Context) ([]Arrival, error) {
	var list []Arrival
	err := s.p.call(ctx, http.MethodGet, "/arrivals", nil, &list)
	return list, err
}

// Stop ends the receiver process.
func (s *Sink) Stop() { s.p.stop() }
