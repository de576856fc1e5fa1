package queuebox

import (
	"context"
	"sync"
	"time"
)

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

// renew extends the lease of c once. A renewal that changes no row means that the lease is
// lost: it cancels the handler's context, so that the handler stops and its transaction rolls
// back, and renews the row no more.
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
	rctx, cancel := context.WithTimeout(hard, max(interval, time.Second))
	res, err := w.db.ExecContext(rctx, w.stmts.renew.text, args...)
	cancel()
	if err != nil {
		if hard.Err() == nil {
			// The next renewal tries again; once the lease has run out it finds no row.
			w.log.warn("renewing a lease", c.fields(err))
		}
		return
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		c.ren.mu.Lock()
		c.stopped = true
		delete(c.ren.rows, c)
		c.ren.mu.Unlock()
		c.cancel(errLeaseLost)
		w.log.warn("lost the lease: another worker owns the row, or the lease ran out; cancelling its handler", c.fields(nil))
	}
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
