package connect

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/alternayte/queuebox/shared/health"
)

// SourceState is the health of one broker source: down until its consumer runs, down with a
// reason while it reconnects, up while it consumes, and down for good once it stopped. It is
// safe for concurrent use; its Check is the probe of the source's health component
// (rabbitmq.<name>, kafka.<name>, nats.<name>).
type SourceState struct {
	mu      sync.Mutex
	err     error
	started bool
}

// errNotStarted is the state of a source whose consumer has not connected yet.
var errNotStarted = health.Reason("the consumer has not connected yet", nil)

// Up marks the consumer as consuming.
func (s *SourceState) Up() {
	s.mu.Lock()
	s.err, s.started = nil, true
	s.mu.Unlock()
}

// Down marks the consumer as not consuming; public is the reason that the health answer
// shows (it must hold no secret), err the detail that only the log gets.
func (s *SourceState) Down(public string, err error) {
	s.mu.Lock()
	s.err, s.started = health.Reason(public, err), true
	s.mu.Unlock()
}

// Check returns nil while the consumer consumes.
func (s *SourceState) Check(context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.started {
		return errNotStarted
	}
	return s.err
}

// Backoff is the wait between two attempts of a consumer to connect or to store: it
// doubles from Min to Max, with up to a quarter of random jitter, and Reset starts again
// from Min.
type Backoff struct {
	// Min is the first wait. Default: 250 ms.
	Min time.Duration
	// Max is the longest wait. Default: 30 s.
	Max  time.Duration
	next time.Duration
}

// Wait waits for the next delay, or until ctx ends; it returns ctx's error then.
func (b *Backoff) Wait(ctx context.Context) error {
	if b.Min <= 0 {
		b.Min = 250 * time.Millisecond
	}
	if b.Max < b.Min {
		b.Max = max(b.Min, 30*time.Second)
	}
	if b.next < b.Min {
		b.next = b.Min
	}
	d := b.next
	d += time.Duration(rand.Int64N(int64(d)/4 + 1))
	b.next = min(b.next*2, b.Max)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Reset makes the next wait Min again.
func (b *Backoff) Reset() { b.next = 0 }

// StoreTimeout bounds the store of one batch of received messages. The store runs on after
// the consumer's context ends, so that a shutdown finishes and acknowledges what it began
// to store.
const StoreTimeout = 30 * time.Second

// StoreContext returns the context of one store: ctx's values without its cancellation,
// bounded by StoreTimeout.
func StoreContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), StoreTimeout)
}

// ErrStopped marks an error that stops a source for good (a missing queue or stream, a
// refused configuration): the consumer does not reconnect.
var ErrStopped = errors.New("the source stopped")

// Reconnect is the outer loop of a broker source: it runs session until ctx ends or session
// returns an error that wraps ErrStopped, and after any other error marks the source down
// with the public reason reconnecting and waits with b before it runs session again. It keeps
// state: down with "the source stopped" when ctx ends, down with the stop's text after
// ErrStopped. kind (rabbitmq, nats) starts its log lines; text gives an error's text for the
// log with the source's credentials removed. It returns ctx's error or the stop.
func Reconnect(ctx context.Context, state *SourceState, b *Backoff, log *slog.Logger, kind, reconnecting string,
	text func(error) string, session func(context.Context) error) error {
	for {
		err := session(ctx)
		if ctx.Err() != nil {
			state.Down("the source stopped", nil)
			return ctx.Err()
		}
		if errors.Is(err, ErrStopped) {
			state.Down(err.Error(), nil)
			log.Error(kind+" source stopped", slog.String("error", text(err)))
			return err
		}
		state.Down(reconnecting, err)
		log.Warn(kind+" source: the consumer failed; reconnecting", slog.String("error", text(err)))
		if b.Wait(ctx) != nil {
			state.Down("the source stopped", nil)
			return ctx.Err()
		}
	}
}
