// Package waker tells a delivery cycle that there is new work, so that it claims at once
// instead of waiting for its next poll. Capture events, the reconciliation timer, a stored
// push inbox row and a relay cycle that forwarded rows into the outbox call Wake; what a wake
// does depends on where the cycle runs:
//
//   - Nop: nothing (pure polling, or a Lambda schedule alone);
//   - Func and Signal: in the same process, for example the local process's poller
//     (outbox.Poller.Wake) or a loop that selects on a channel;
//   - lambdawaker.Waker (shared/waker/lambdawaker): on AWS, an asynchronous invoke
//     (InvocationType Event) of the poll or relay function, debounced so that a burst of
//     wakes costs one invoke per interval.
//
// A wake is only a hint: the database is the source of truth, and the scheduled polls find
// every row anyway. A lost wake costs latency, never a message, so Wake never blocks and
// never fails.
package waker

// Waker is told that there may be new work. Wake must be safe for concurrent use, must not
// block, and may coalesce wakes: many wakes in a row may have the effect of one.
type Waker interface {
	Wake()
}

// Reconciler is a Waker that tells the wakes of a reconciliation timer (delivery passes that
// catch what no event announced: due retries, expired leases) from the wakes of new work.
// Reconcile asks for a pass that may be skipped when one happened within the waker's own
// interval, and it never delays the pass of a later Wake. lambdawaker.Waker is one; a waker
// that is not takes Reconcile as a Wake (see Reconcile).
type Reconciler interface {
	Waker
	Reconcile()
}

// Reconcile is the wake of a reconciliation timer: w.Reconcile when w is a Reconciler,
// otherwise w.Wake. A nil w does nothing.
func Reconcile(w Waker) {
	switch r := w.(type) {
	case nil:
	case Reconciler:
		r.Reconcile()
	default:
		w.Wake()
	}
}

// Nop is a Waker that does nothing.
type Nop struct{}

// Wake implements Waker.
func (Nop) Wake() {}

// Func is a Waker that calls the function, which must itself not block and be safe for
// concurrent use (outbox.Poller.Wake and relay.Relay.Wake are). A nil Func does nothing.
type Func func()

// Wake implements Waker.
func (f Func) Wake() {
	if f != nil {
		f()
	}
}

// Signal is a Waker for a loop that selects on a channel: Wake leaves one pending signal in
// C, and wakes while one is pending coalesce into it. Create it with NewSignal.
type Signal struct {
	c chan struct{}
}

// NewSignal returns a Signal with nothing pending.
func NewSignal() *Signal {
	return &Signal{c: make(chan struct{}, 1)}
}

// Wake implements Waker: it leaves a signal in C unless one is already pending.
func (s *Signal) Wake() {
	select {
	case s.c <- struct{}{}:
	default:
	}
}

// C receives one value per pending wake.
func (s *Signal) C() <-chan struct{} {
	return s.c
}

var (
	_ Waker = Nop{}
	_ Waker = Func(nil)
	_ Waker = (*Signal)(nil)
)
