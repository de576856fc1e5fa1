package relay

import (
	"context"
	"fmt"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/alternayte/queuebox/shared/lease"
	"github.com/alternayte/queuebox/shared/redact"
	"github.com/alternayte/queuebox/shared/store"
	"github.com/alternayte/queuebox/shared/writeretry"
)

// The run: the state of one Run or RunOnce call, its loop over the stages (claim.go,
// forward.go, finish.go, renew.go) and its stop, which keeps forwarding the rows it holds for
// up to ShutdownTimeout.

// run is the state of one Run call. sum and failing belong to the goroutine that calls Run;
// held is shared with the renewer.
type run struct {
	r *Relay
	// work bounds every database call of the run: not cancelled with the caller's context, but
	// ShutdownTimeout after it, and never past its deadline.
	work       context.Context
	cancelWork context.CancelFunc
	stop       chan struct{}
	helpers    sync.WaitGroup

	sum Summary
	// writer runs the fenced writes of the rows under the write-retry policy (finish.go): after
	// a row whose writes failed even when retried, the next row is not retried until one
	// succeeds, so an outage costs one row's retries, not a batch's.
	writer *writeretry.Writer
	// stuck says why the health check is down after a cycle that claimed rows and forwarded
	// or dead-lettered none of them because their writes failed; empty otherwise. It stays set
	// through the cycles that claim nothing (the failed rows wait for their leases) and clears
	// when a row is forwarded or marked dead. lastWriteErr is the redacted text of the last
	// failed write.
	stuck        string
	lastWriteErr string

	mu   sync.Mutex
	held map[string]*heldRow
}

// heldRow is a claimed row that is not finished yet.
type heldRow struct {
	claim store.Claim
	// ctx is the row's work context: cancelled at the claim's local lease deadline (lease)
	// and when the row is finished or the run's work ends.
	ctx   context.Context
	lease *lease.Local
	// lost is set when a renewal found the fence gone (a failed one calls lease.Lose).
	lost bool
	// span is the row's forward span while tracing is on, created by the first prepare;
	// result is its outcome so far (empty until the row is forwarded or marked dead).
	span   trace.Span
	result string
}

func (r *Relay) newRun(ctx context.Context) *run {
	base := context.WithoutCancel(ctx)
	cancelDeadline := context.CancelFunc(func() {})
	if deadline, ok := ctx.Deadline(); ok {
		base, cancelDeadline = context.WithDeadline(base, deadline)
	}
	work, cancel := context.WithCancel(base)
	rn := &run{
		r:          r,
		work:       work,
		cancelWork: func() { cancel(); cancelDeadline() },
		stop:       make(chan struct{}),
		held:       map[string]*heldRow{},
		writer:     writeretry.New(writeretry.Row),
	}
	rn.helpers.Add(2)
	go rn.shutdownWatch(ctx)
	go rn.renewer()
	return rn
}

// shutdownWatch cancels the work context ShutdownTimeout after ctx is done.
func (rn *run) shutdownWatch(ctx context.Context) {
	defer rn.helpers.Done()
	select {
	case <-rn.stop:
		return
	case <-ctx.Done():
	}
	t := time.NewTimer(rn.r.cfg.ShutdownTimeout)
	defer t.Stop()
	select {
	case <-rn.stop:
	case <-t.C:
		rn.cancelWork()
	}
}

func (rn *run) close() {
	close(rn.stop)
	rn.cancelWork()
	rn.helpers.Wait()
}

// loop claims until ctx is done or the options end the run.
//
// While it forwards a batch, the loop already claims the next one on another connection, so
// that the claim's round trip and commit overlap the forward's. The claim skips every
// aggregate with a processing row, so the next batch holds no later row of an aggregate of
// the batch being forwarded, and batches are forwarded one after the other. A claim that
// comes back empty ran before the forwarded rows were committed, which may have held back
// the next rows of their aggregates: the loop claims again before it calls the relay idle.
// The rows of a claim that is under way when the run stops are forwarded like the rows of the
// batch it holds (within ShutdownTimeout), never left unclaimed. With a ClaimUntil the loop
// claims ahead only while more time is left before it than the last forward took
// (claimAhead).
func (rn *run) loop(ctx context.Context, opts RunOptions) {
	r := rn.r
	pause := time.NewTimer(time.Hour)
	pause.Stop()
	var next <-chan claimResult // the claim started while the last batch was forwarded
	defer func() {
		if next == nil {
			return
		}
		switch res := <-next; {
		case res.err == nil:
			rn.forward(rn.claimed(res))
		case rn.work.Err() == nil:
			r.cycleFailed(res.err)
		}
	}()
	claimUntilPassed := func() bool {
		return !opts.ClaimUntil.IsZero() && !time.Now().Before(opts.ClaimUntil)
	}
	var lastForward time.Duration // how long the last forward of rows took
	for ctx.Err() == nil {
		if claimUntilPassed() {
			return
		}
		var res claimResult
		if next != nil {
			res, next = <-next, nil
			if res.err == nil && len(res.rows) == 0 {
				res = rn.claim()
			}
		} else {
			res = rn.claim()
		}
		if res.err != nil {
			if rn.work.Err() != nil {
				return
			}
			r.cycleFailed(res.err)
			r.beat.Beat("the last relay cycle failed: " + redact.Error(res.err))
			rn.sleep(ctx, pause, max(r.cfg.PollInterval, time.Second))
			continue
		}
		rows := rn.claimed(res)
		if len(rows) > 0 && ctx.Err() == nil && claimAhead(opts.ClaimUntil, lastForward) {
			// An error of the maintenance steps leaves the next claim to the top of the loop,
			// which reports it.
			next, _ = rn.startClaim()
		}
		began := time.Now()
		rn.forward(rows)
		if len(rows) > 0 {
			lastForward = time.Since(began)
		}
		r.beat.Beat(rn.stuck)
		if len(rows) > 0 {
			continue
		}
		if opts.StopWhenIdle {
			return
		}
		rn.sleep(ctx, pause, r.cfg.PollInterval)
	}
}

func (r *Relay) cycleFailed(err error) {
	r.metrics.InboxRelayError()
	r.log.Error("inbox relay cycle failed; retrying after a pause", "error", redact.Error(err))
}

// sleep waits for d, a wake or ctx.
func (rn *run) sleep(ctx context.Context, t *time.Timer, d time.Duration) {
	t.Reset(d)
	select {
	case <-ctx.Done():
	case <-t.C:
		return
	case <-rn.r.wake:
	}
	t.Stop()
}

// claimAhead says whether the loop claims the next batch while it forwards one: always
// without a ClaimUntil; with one, only while the time left before it exceeds the last
// forward's, so that the next batch is forwarded from about ClaimUntil on at the latest, and a
// run ends within one forward after ClaimUntil, as a run that claims in turn does.
func claimAhead(claimUntil time.Time, lastForward time.Duration) bool {
	return claimUntil.IsZero() || time.Until(claimUntil) > lastForward
}

// judge sets stuck after a cycle of claimed rows, from the summary before the rows were
// handled: down when rows failed and none was forwarded or marked dead, up again when one was.
// A cycle whose rows all lost their claims changes nothing.
func (rn *run) judge(before Summary, claimed int) {
	switch {
	case rn.sum.Forwarded > before.Forwarded || rn.sum.Dead > before.Dead:
		rn.stuck = ""
	case rn.sum.Failed > before.Failed:
		rn.stuck = fmt.Sprintf("the last relay cycle claimed %d rows and forwarded none: %d failed, the last with: %s",
			claimed, rn.sum.Failed-before.Failed, rn.lastWriteErr)
	}
}
