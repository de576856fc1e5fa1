// Package lease keeps the local deadline of a claim: the time after which a worker that holds
// the claim (the outbox poller, the inbox relay) must not start, nor go on with, the work that
// the claim protects.
//
// The database computes a claim's lease_expires_at with its own clock when the claim (or a
// renewal) statement runs, and any replica may reclaim the row once it has passed. A worker
// cut off from the database cannot read that value, and its renewals fail, but it knows when
// it sent the statement: the lease cannot end before that time plus the lease. The local
// deadline is that time plus the lease minus a safety margin (Margin), so a worker stops its
// work before the database lets anyone else take the row, even when the statement's answer
// never arrives. Only a renewal that succeeded moves the deadline, to the time the renewal was
// sent plus the lease minus the margin.
//
// A renewal that updates zero rows, or that fails with an error, means that the worker lost
// the claim: the worker calls Lose, which ends the claim's work at once, before its deadline.
// The deadline stays the backstop for a renewal that never answers.
//
// The deadline is kept with the monotonic clock of this process: it does not depend on the
// offset between this host's clock and the database's, only on their rates.
package lease

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// ErrDeadline is the cause (context.Cause) of a context that Start returned when the claim
// reached its local deadline.
var ErrDeadline = errors.New("the claim reached its local lease deadline")

// ErrLost is the cause (context.Cause) of a context that Start returned when the worker lost
// the claim before its deadline (Lose): a renewal updated zero rows or failed. The cause wraps
// ErrLost and the reason that Lose was given.
var ErrLost = errors.New("the claim was lost")

// The bounds of Margin.
const (
	// MarginFloor is the smallest margin, for a lease of at least three times it.
	MarginFloor = 250 * time.Millisecond
	// MarginCeiling is the largest margin, reached with a lease of 50 s.
	MarginCeiling = 10 * time.Second
)

// Margin is the safety margin of a lease: a fifth of it, at least MarginFloor (but never more
// than a third of the lease, so that a renewal sent every third of the lease still has time
// to return before the deadline) and at most MarginCeiling. A 3 s lease has a margin of
// 600 ms, the default 300 s lease one of 10 s.
//
// The margin covers what happens between the local deadline and the moment another replica
// can act: the time this process takes to notice the deadline and to stop the work (a timer
// that fires late on a loaded machine, a garbage collection, closing a connection) and the
// difference in rate between this host's clock and the database's.
func Margin(lease time.Duration) time.Duration {
	m := lease / 5
	if floor := min(MarginFloor, lease/3); m < floor {
		m = floor
	}
	return min(m, MarginCeiling)
}

// RenewEvery is the interval at which a worker renews the leases of the claims it holds: a
// third of the lease (at least 10 ms), so that a renewal that fails leaves time for the next
// before the local deadline.
func RenewEvery(lease time.Duration) time.Duration { return max(lease/3, 10*time.Millisecond) }

// RenewTimeout bounds one renewal statement: a third of the lease, at least 1 s.
func RenewTimeout(lease time.Duration) time.Duration { return max(lease/3, time.Second) }

// Metrics is implemented by a metrics recorder that counts
// queuebox_lease_deadline_total{component}: the publishes (component outbox) and forwards
// (component inbox) that a worker stopped, or did not start, at their claim's local deadline.
// The outbox poller and the inbox relay use it when their Metrics implements it.
type Metrics interface {
	LeaseDeadline(component string)
}

// Local is the local deadline of one claim. Its methods are safe for concurrent use.
type Local struct {
	span   time.Duration // lease - margin: what one statement's send time buys
	cancel context.CancelCauseFunc

	mu       sync.Mutex
	deadline time.Time
	timer    *time.Timer
	expired  bool
	stopped  bool
	lost     error // the cause given by Lose; nil until then
}

// Start returns the local deadline of a claim whose statement was sent at sent, with the given
// lease, and a context, derived from parent, that is cancelled with the cause ErrDeadline when
// the deadline passes. The context reports no Deadline: the deadline moves with each
// successful renewal, and a context's deadline cannot move (a publisher that derives its own
// timeout from the context keeps it). Call Stop when the work is finished.
func Start(parent context.Context, sent time.Time, lease time.Duration) (context.Context, *Local) {
	ctx, cancel := context.WithCancelCause(parent)
	l := &Local{span: lease - Margin(lease), cancel: cancel}
	l.deadline = sent.Add(l.span)
	l.mu.Lock()
	l.timer = time.AfterFunc(time.Until(l.deadline), l.fire)
	l.mu.Unlock()
	return ctx, l
}

// fire expires the claim, unless a renewal moved the deadline; then it waits for the new one.
func (l *Local) fire() {
	l.mu.Lock()
	if l.expired || l.stopped || l.lost != nil {
		l.mu.Unlock()
		return
	}
	if left := time.Until(l.deadline); left > 0 {
		l.timer.Reset(left)
		l.mu.Unlock()
		return
	}
	l.expired = true
	l.mu.Unlock()
	l.cancel(ErrDeadline)
}

// Extend moves the deadline after a renewal that succeeded and that was sent at sent: to
// sent + lease - margin, when that is later. It does nothing, and returns false, once the
// deadline has passed (the claim is expired, or about to be) or Stop was called: the work was
// stopped, or is being stopped, and a renewal does not resume it.
func (l *Local) Extend(sent time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.expired || l.stopped || l.lost != nil || !time.Now().Before(l.deadline) {
		return false
	}
	if d := sent.Add(l.span); d.After(l.deadline) {
		l.deadline = d
	}
	return true
}

// Expired reports whether the local deadline has passed: the work must not start, and work
// under way has been cancelled. A claim that was lost first (Lose) does not expire.
func (l *Local) Expired() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.expiredLocked()
}

func (l *Local) expiredLocked() bool {
	if l.expired {
		return true
	}
	return !l.stopped && l.lost == nil && !time.Now().Before(l.deadline)
}

// Lose ends the claim before its deadline because the worker lost it: a renewal updated zero
// rows, or failed with an error (reason says which). The context is cancelled with a cause
// that wraps ErrLost and reason, and the deadline moves no more. Lose returns false, and does
// nothing, when the claim already expired, was lost or was stopped.
func (l *Local) Lose(reason error) bool {
	l.mu.Lock()
	if l.lost != nil || l.stopped || l.expiredLocked() {
		l.mu.Unlock()
		return false
	}
	l.lost = fmt.Errorf("%w: %w", ErrLost, reason)
	l.timer.Stop()
	cause := l.lost
	l.mu.Unlock()
	l.cancel(cause)
	return true
}

// Lost returns the cause of Lose (it wraps ErrLost) when the worker lost the claim before its
// deadline, and nil otherwise.
func (l *Local) Lost() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lost
}

// Ended reports whether the claim's work must stop: the local deadline passed (Expired) or the
// claim was lost (Lose).
func (l *Local) Ended() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lost != nil || l.expiredLocked()
}

// Deadline is the current local deadline.
func (l *Local) Deadline() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.deadline
}

// Stop ends the claim's deadline: its timer stops and its context is cancelled (with the
// cause context.Canceled, unless it expired or was lost first). Stop may be called more than
// once.
func (l *Local) Stop() {
	l.mu.Lock()
	l.stopped = true
	l.timer.Stop()
	l.mu.Unlock()
	l.cancel(context.Canceled)
}
