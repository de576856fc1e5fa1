package queuebox

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// The local deadline. The database ends a lease on its own clock, lease_expires_at, counted
// from when the claim or the renewal ran there; after it, another worker may claim the row. A
// worker cannot read that clock, so it keeps a deadline of its own, counted from when it sent
// the claim or the last renewal that succeeded, which is earlier than when the database ran
// it, minus a margin for a timer that fires late and for clocks that run at slightly different
// rates. The handler's context ends at that deadline, before any other worker can take the
// row; only a renewal that succeeds moves it. A row whose deadline passed before its handler
// started is not handed to the handler, and nothing of the handler's transaction is committed
// after it. A renewal that changes no row, or that fails with an error, loses the lease at
// once: the deadline is the backstop for a renewal that never answers.

// maxLeaseMargin is the largest margin between the local deadline and the end of the lease.
const maxLeaseMargin = 10 * time.Second

// errLeaseDeadline is the cause of a handler's cancellation when its local deadline passed: no
// renewal succeeded in time, so another worker may own the row.
var errLeaseDeadline = errors.New("queuebox: the lease's local deadline passed before a renewal succeeded; another worker may take the row")

// leaseMargin is the part of the lease that a worker gives up: a fifth of it, at most 10
// seconds.
func leaseMargin(lease time.Duration) time.Duration {
	return min(lease/5, maxLeaseMargin)
}

// hold gives c its handler's context, a child of hard, and its local deadline: sent plus span
// (the lease minus its margin). A timer cancels the context at the deadline.
func (c *claimed) hold(hard context.Context, sent time.Time, span time.Duration) {
	c.ctx, c.cancel = context.WithCancelCause(hard)
	c.dmu.Lock()
	defer c.dmu.Unlock()
	c.span = span
	c.deadline = sent.Add(span)
	c.timer = time.AfterFunc(time.Until(c.deadline), c.expire)
}

// expire runs at the deadline that the timer was set for; when a renewal has moved the deadline
// since, it waits for the new one instead.
func (c *claimed) expire() {
	c.dmu.Lock()
	if left := time.Until(c.deadline); left > 0 && !c.released {
		c.timer.Reset(left)
		c.dmu.Unlock()
		return
	}
	c.dmu.Unlock()
	c.cancel(errLeaseDeadline)
}

// extend moves the deadline after a renewal, sent at sent, succeeded. A deadline that has
// already passed stays passed: the handler has been told to stop.
func (c *claimed) extend(sent time.Time) {
	c.dmu.Lock()
	defer c.dmu.Unlock()
	if c.ctx.Err() != nil || !time.Now().Before(c.deadline) {
		return
	}
	if d := sent.Add(c.span); d.After(c.deadline) {
		c.deadline = d // the timer finds it when it fires
	}
}

// untilDeadline is the time left before the local deadline.
func (c *claimed) untilDeadline() time.Duration {
	c.dmu.Lock()
	defer c.dmu.Unlock()
	return time.Until(c.deadline)
}

// live reports whether the work on c may go on: its context has not ended and its local
// deadline has not passed. It does not trust the timer alone, which may fire late: a deadline
// found passed here cancels the context at once.
func (c *claimed) live() bool {
	if c.ctx.Err() != nil {
		return false
	}
	if c.untilDeadline() > 0 {
		return true
	}
	c.cancel(errLeaseDeadline)
	return false
}

// release ends the context of c and stops its deadline timer: the row is finished or given up.
func (c *claimed) release() {
	c.dmu.Lock()
	c.released = true
	if c.timer != nil {
		c.timer.Stop()
	}
	c.dmu.Unlock()
	c.cancel(nil)
}

// renewals holds the rows that a Run renews. One goroutine, renewLoop, extends the lease of
// each row every third of the lease duration, so a row whose handler finishes sooner costs no
// goroutine, timer or statement for its renewal.
type renewals struct {
	mu       sync.Mutex
	rows     map[*claimed]struct{}
	interval time.Duration // a third of the lease
}

// newRenewals returns an empty set of renewals, each row renewed every interval.
func newRenewals(interval time.Duration) *renewals {
	return &renewals{rows: map[*claimed]struct{}{}, interval: interval}
}

// renewInterval is the time between two renewals of a row: a third of the lease.
func (w *InboxWorker) renewInterval() time.Duration {
	return time.Duration(w.opts.LeaseMS) * time.Millisecond / 3
}

// add starts renewing the rows of a claim: the first renewal of each is due a third of the
// lease from now. It need not wake renewLoop, which never sleeps past the interval.
func (r *renewals) add(batch []*claimed) {
	if len(batch) == 0 {
		return
	}
	next := time.Now().Add(r.interval)
	r.mu.Lock()
	for _, c := range batch {
		c.ren = r
		c.next = next
		r.rows[c] = struct{}{}
	}
	r.mu.Unlock()
}

// renewLoop renews every row that is due, each on its own connection and all at once, and
// then sleeps until the next row is due. It returns when quit closes or hard ends. A renewal
// in flight is never cancelled by a stop; it is bounded by its own timeout.
func (w *InboxWorker) renewLoop(hard context.Context, r *renewals, quit <-chan struct{}) {
	interval := r.interval
	timer := time.NewTimer(interval)
	defer timer.Stop()
	var due []*claimed
	var renewing sync.WaitGroup
	for {
		now := time.Now()
		next := now.Add(interval)
		due = due[:0]
		r.mu.Lock()
		for c := range r.rows {
			if c.ctx.Err() != nil {
				delete(r.rows, c)
				continue
			}
			if !c.next.After(now) {
				due = append(due, c)
				c.next = now.Add(interval)
			}
			if c.next.Before(next) {
				next = c.next
			}
		}
		r.mu.Unlock()
		for _, c := range due {
			renewing.Add(1)
			go func() {
				defer renewing.Done()
				w.renew(hard, c, interval)
			}()
		}
		renewing.Wait()
		if len(due) > 0 {
			continue // the renewals took time: look again
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		timer.Reset(time.Until(next))
		select {
		case <-quit:
			return
		case <-hard.Done():
			return
		case <-timer.C:
		}
	}
}

// renew extends the lease of c once. A renewal that succeeds moves the local deadline to the
// time it was sent plus the lease minus the margin. A renewal that changes no row, or that
// fails with an error (a timeout, a refused or broken connection), means that the lease is
// lost: it cancels the handler's context, so that the handler stops, its transaction rolls
// back and nothing is written to the row, and renews the row no more. A renewal that fails
// while a hard stop ends the run changes nothing: the stop cancels the handler.
func (w *InboxWorker) renew(hard context.Context, c *claimed, interval time.Duration) {
	c.renewing.Lock()
	defer c.renewing.Unlock()
	c.ren.mu.Lock()
	stopped := c.stopped
	c.ren.mu.Unlock()
	if stopped || c.ctx.Err() != nil || hard.Err() != nil {
		return
	}
	args, err := w.stmts.renew.args(map[string]any{"id": c.msg.ID, "token": c.token, "lease_ms": int64(w.opts.LeaseMS)})
	if err != nil {
		w.log.error("renewing a lease", c.fields(err))
		return
	}
	// The database extends the lease from when it runs the renewal, after this moment.
	sent := time.Now()
	rctx, cancel := context.WithTimeout(hard, max(interval, time.Second))
	res, err := w.db.ExecContext(rctx, w.stmts.renew.text, args...)
	cancel()
	if err != nil {
		if hard.Err() != nil {
			return
		}
		c.ren.mu.Lock()
		c.stopped = true
		delete(c.ren.rows, c)
		c.ren.mu.Unlock()
		if c.ctx.Err() == nil {
			c.cancel(fmt.Errorf("%w: renewing it failed: %s", errLeaseLost, SanitizeError(err)))
			w.log.warn("renewing a lease failed, so the lease is lost; cancelling its handler: its writes roll back, it spends no attempt, and the lease expires", c.fields(err))
		}
		return
	}
	if n, err := res.RowsAffected(); err == nil && n == 1 {
		c.extend(sent)
		return
	}
	c.ren.mu.Lock()
	c.stopped = true
	delete(c.ren.rows, c)
	c.ren.mu.Unlock()
	c.cancel(errLeaseLost)
	w.log.warn("lost the lease: another worker owns the row, or the lease ran out; cancelling its handler", c.fields(nil))
}

// stopRenewal stops the renewal of c and waits for a renewal of c in flight to return, so that
// no renewal runs beside the completion, retry or dead letter of the row.
func (c *claimed) stopRenewal() {
	if c.ren == nil {
		return
	}
	c.ren.mu.Lock()
	c.stopped = true
	delete(c.ren.rows, c)
	c.ren.mu.Unlock()
	c.renewing.Lock() // waits for the renewal in flight, if any
	c.renewing.Unlock()
}
