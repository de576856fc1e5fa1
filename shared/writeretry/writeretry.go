// Package writeretry is the retry policy of the fenced writes that finish claimed rows: the
// finishing writes of the outbox poller (sent, retry, dead, defer) and the forward and
// dead-letter writes of the inbox relay.
//
// A fenced write is safe to repeat: when an earlier attempt committed, the fence of the next
// one no longer matches and the store writes nothing. So a write that failed is tried again a
// few times after short pauses while the leases of its rows are still young; a write that keeps
// failing leaves its rows processing, and the reclaim step returns them to pending when their
// leases expire.
//
// The two workers share the policy and differ in two settings, each stated by its Policy
// value: the number and length of the pauses (Batch, Row), and whether a write after one that
// failed every retry is retried at all (Policy.OnceAfterFailure).
package writeretry

import (
	"context"
	"errors"
	"time"
)

// Policy says when a failed write is tried again.
type Policy struct {
	// Delays are the pauses before the retries, in order: a write runs at most len(Delays)+1
	// times.
	Delays []time.Duration
	// OnceAfterFailure makes a write that follows a write that failed every retry run once,
	// without retries, until a write succeeds again: an outage then costs one write's retries,
	// not the retries of every write that follows.
	OnceAfterFailure bool
}

// Batch is the policy of the outbox poller's finishing writes. Each of them finishes up to a
// flush of rows with one statement, so a failure is tried three more times, after 100 ms,
// 500 ms and 2 s.
var Batch = Policy{Delays: []time.Duration{100 * time.Millisecond, 500 * time.Millisecond, 2 * time.Second}}

// Row is the policy of the inbox relay's writes. Each of them finishes one row, and the rows
// of a batch are written one after the other, so a failure is tried twice more, after 100 ms
// and 500 ms, and after a row whose writes failed every retry the next rows are written once
// until one succeeds.
var Row = Policy{Delays: []time.Duration{100 * time.Millisecond, 500 * time.Millisecond}, OnceAfterFailure: true}

// Writer runs writes under a Policy and remembers whether the last of them failed every retry.
// It is not safe for concurrent use: one goroutine makes the writes of a run.
type Writer struct {
	policy  Policy
	failing bool
}

// New returns a Writer of policy.
func New(policy Policy) *Writer { return &Writer{policy: policy} }

// Do runs write, and again after each of the policy's pauses while it fails. It makes no retry
// once ctx is done. It returns nil when an attempt succeeded, else the error of the last
// attempt, unchanged in its text; Stopped tells whether ctx ended before a retry was due.
func (w *Writer) Do(ctx context.Context, write func(context.Context) error) error {
	err := write(ctx)
	if err == nil {
		w.failing = false
		return nil
	}
	if w.failing && w.policy.OnceAfterFailure {
		return err
	}
	for _, d := range w.policy.Delays {
		if ctx.Err() != nil {
			return stoppedError{err}
		}
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return stoppedError{err}
		case <-t.C:
		}
		if err = write(ctx); err == nil {
			w.failing = false
			return nil
		}
	}
	w.failing = true
	return err
}

// Succeeded records a write made outside the Writer that succeeded (a batch statement that is
// not retried), so that the next write gets its retries again.
func (w *Writer) Succeeded() { w.failing = false }

// Stopped reports whether err is an error of Do that ended because its context ended before a
// retry was due, rather than after every retry failed.
func Stopped(err error) bool {
	var s stoppedError
	return errors.As(err, &s)
}

// stoppedError is the last error of a write whose retries the context cut short; its text is
// that error's.
type stoppedError struct{ err error }

func (e stoppedError) Error() string { return e.err.Error() }
func (e stoppedError) Unwrap() error { return e.err }
