package outbox

import (
	"context"
	"errors"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/alternayte/queuebox/shared/every"
	"github.com/alternayte/queuebox/shared/redact"
	"github.com/alternayte/queuebox/shared/store"
)

// The reasons of a deferral: the reason label of queuebox_outbox_deferred_total.
const (
	// DeferPaused is a row of a paused destination.
	DeferPaused = "paused"
	// DeferCircuitOpen is a row of a destination whose circuit breaker is open, or half-open
	// with its trial delivery in flight.
	DeferCircuitOpen = "circuit_open"
	// DeferRateLimited is a row over its destination's rate limit.
	DeferRateLimited = "rate_limited"
)

const (
	// PausedRecheck is how long a row of a paused destination waits before it is claimed
	// again: after a resume, the held rows are delivered within about this time.
	PausedRecheck = 5 * time.Second
	// StateRefresh is the interval between two reads of the destination state table: a pause,
	// a resume or a breaker that another replica opened takes effect here within it.
	StateRefresh = time.Second
	// halfOpenRecheck is the wait of a row of a half-open destination while the trial
	// delivery of this process is in flight.
	halfOpenRecheck = time.Second
	// rateMaxWait is the longest wait of a publisher for its destination's next request slot;
	// a row whose slot is further away returns to pending until about then.
	rateMaxWait = 100 * time.Millisecond
	// stateErrorDefer is the wait of a row whose rate-limit slot could not be read.
	stateErrorDefer = time.Second
)

// ControlMetrics receives the measurements of the delivery controls. A Metrics that also
// implements it gets them; the metric names are extensions (docs/delivery-controls.md).
type ControlMetrics interface {
	// Deferred counts queuebox_outbox_deferred_total{destination,reason}.
	Deferred(destination, reason string)
	// DestinationState sets queuebox_destination_paused{destination} and
	// queuebox_destination_circuit_open{destination} (1 or 0).
	DestinationState(destination string, paused, circuitOpen bool)
}

// DestinationStatus is what the poller last read of one destination's controls.
type DestinationStatus struct {
	Destination string `json:"destination"`
	Paused      bool   `json:"paused"`
	// Circuit is closed, open or half-open; closed when the destination has no breaker.
	Circuit string `json:"circuit"`
}

// destPlan is the resolved controls of one destination.
type destPlan struct {
	name     string
	retry    retryPlan
	breaker  *BreakerPolicy
	rate     *RateLimit
	interval time.Duration // per request of the rate limit

	mu sync.Mutex
	// trial is true while this process delivers the trial row of a half-open breaker.
	trial bool
	// nextDefer is the latest time that a rate-limited row of this process was deferred
	// to; the next one waits one interval more, so that deferred rows return spread out.
	nextDefer time.Time
}

// cachedState is a state row and the local time at which it was read.
type cachedState struct {
	s  store.DestinationState
	at time.Time
}

// controls holds the destination state that the poller reads from the database.
type controls struct {
	st      store.DestinationStateStore // nil: no state table, nothing is paused or limited
	log     *slog.Logger
	metrics ControlMetrics // nil: none

	gate every.Gate

	mu      sync.Mutex
	states  map[string]cachedState
	missing bool // the table is missing; warned once
}

// refresh reads the state table at most once per StateRefresh. A failed read keeps the last
// state; a missing table means that nothing is paused or open.
func (c *controls) refresh(ctx context.Context, plans map[string]*destPlan) {
	if c.st == nil || !c.gate.Take(StateRefresh) {
		return
	}
	started := time.Now()
	rows, err := c.st.DestinationStates(ctx)
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case errors.Is(err, store.ErrNoDestinationState):
		if !c.missing {
			c.log.Warn("the destination state table is missing; pause, resume and circuit breaking are off until QueueBox's own migration V1__add_destination_state.sql is applied",
				"table", store.DestinationStateTable)
		}
		c.missing = true
		c.states = nil
	case err != nil:
		c.log.Warn("reading the destination state failed; keeping the last state", "error", redact.Error(err))
		return
	default:
		c.missing = false
		now := time.Now()
		states := make(map[string]cachedState, len(rows))
		for _, r := range rows {
			states[r.Destination] = cachedState{s: r, at: now}
		}
		// A state that a write of this process returned while the read ran is newer than
		// the read: a breaker that opened meanwhile stays open.
		for name, cs := range c.states {
			if cs.at.After(started) {
				states[name] = cs
			}
		}
		c.states = states
	}
	if c.metrics != nil {
		// Only destinations with a breaker or a state row get the gauges: with no control
		// used, /metrics carries exactly spec/28's families.
		for name, pl := range plans {
			cs, ok := c.states[name]
			if ok || pl.breaker != nil {
				c.metrics.DestinationState(name, cs.s.Paused, pl.breaker != nil && remaining(cs) > 0)
			}
		}
	}
}

// remaining is what is left of a breaker's cool-down now.
func remaining(cs cachedState) time.Duration {
	if cs.s.OpenUntil.IsZero() {
		return 0
	}
	return cs.s.OpenRemaining - time.Since(cs.at)
}

func (c *controls) state(name string) cachedState {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.states[name]
}

// update records a state row that a write returned.
func (c *controls) update(s store.DestinationState) {
	c.mu.Lock()
	if c.states == nil {
		c.states = map[string]cachedState{}
	}
	c.states[s.Destination] = cachedState{s: s, at: time.Now()}
	c.mu.Unlock()
}

// snapshot returns the status of every planned destination, by name.
func (c *controls) snapshot(plans map[string]*destPlan) []DestinationStatus {
	out := make([]DestinationStatus, 0, len(plans))
	for name, pl := range plans {
		cs := c.state(name)
		st := DestinationStatus{Destination: name, Paused: cs.s.Paused, Circuit: "closed"}
		if pl.breaker != nil && !cs.s.OpenUntil.IsZero() {
			st.Circuit = "half-open"
			if remaining(cs) > 0 {
				st.Circuit = "open"
			}
		}
		out = append(out, st)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Destination < out[j].Destination })
	return out
}

// admission is the answer of admit.
type admission struct {
	// deferBy, when above 0, returns the row to pending for that long without an attempt.
	deferBy time.Duration
	reason  string
	// trial is true when the row is the trial delivery of a half-open breaker.
	trial bool
}

// admit decides whether a row of the destination may be delivered now. A row over the rate
// limit whose slot is near waits for it here.
func (c *controls) admit(ctx context.Context, pl *destPlan) admission {
	if c.st == nil {
		return admission{}
	}
	cs := c.state(pl.name)
	if cs.s.Paused {
		return admission{deferBy: PausedRecheck, reason: DeferPaused}
	}
	var a admission
	if pl.breaker != nil && !cs.s.OpenUntil.IsZero() {
		if left := remaining(cs); left > 0 {
			return admission{deferBy: left, reason: DeferCircuitOpen}
		}
		pl.mu.Lock()
		busy := pl.trial
		pl.trial = true
		pl.mu.Unlock()
		if busy {
			return admission{deferBy: halfOpenRecheck, reason: DeferCircuitOpen}
		}
		a.trial = true
	}
	if pl.rate != nil {
		if d := c.reserve(ctx, pl); d > 0 {
			c.endTrial(pl, a.trial)
			return admission{deferBy: d, reason: DeferRateLimited}
		}
	}
	return a
}

// reserve takes a request slot of the rate limit, waiting for one that is near. It returns 0
// when the request may go, or how long the row should wait.
func (c *controls) reserve(ctx context.Context, pl *destPlan) time.Duration {
	res, err := c.st.DestinationReserve(ctx, store.RateReserveParams{
		Destination: pl.name, Interval: pl.interval, Burst: pl.rate.Burst, MaxWait: rateMaxWait,
	})
	if err != nil {
		c.log.Warn("taking a rate-limit slot failed; the row waits", "destination", pl.name, "error", redact.Error(err))
		return stateErrorDefer
	}
	if !res.Reserved {
		now := time.Now()
		pl.mu.Lock()
		until := now.Add(res.Wait)
		if next := pl.nextDefer.Add(pl.interval); next.After(until) {
			until = next
		}
		pl.nextDefer = until
		pl.mu.Unlock()
		return max(until.Sub(now), time.Millisecond)
	}
	if res.Wait > 0 {
		t := time.NewTimer(res.Wait)
		defer t.Stop()
		select {
		case <-ctx.Done():
		case <-t.C:
		}
	}
	return 0
}

func (c *controls) endTrial(pl *destPlan, trial bool) {
	if !trial {
		return
	}
	pl.mu.Lock()
	pl.trial = false
	pl.mu.Unlock()
}

// outcome feeds the breaker with the result of a publish: a failure is counted (and may open
// it); a success closes a half-open breaker.
func (c *controls) outcome(ctx context.Context, pl *destPlan, a admission, err error) {
	defer c.endTrial(pl, a.trial)
	if c.st == nil || pl.breaker == nil || ctx.Err() != nil {
		return
	}
	if err != nil {
		s, werr := c.st.DestinationRecordFailure(ctx, store.BreakerFailureParams{
			Destination: pl.name, Threshold: pl.breaker.Threshold, Window: pl.breaker.Window, CoolDown: pl.breaker.CoolDown,
		})
		if werr != nil {
			c.log.Warn("counting a failure of the circuit breaker failed", "destination", pl.name, "error", redact.Error(werr))
			return
		}
		was := c.state(pl.name)
		c.update(s)
		if s.Open() && (was.s.OpenUntil.IsZero() || !was.s.OpenUntil.Equal(s.OpenUntil)) {
			c.log.Warn("circuit breaker opened; the destination's rows wait for the cool-down",
				"destination", pl.name, "cool_down_ms", s.OpenRemaining.Milliseconds())
			if c.metrics != nil {
				c.metrics.DestinationState(pl.name, s.Paused, true)
			}
		}
		return
	}
	if !a.trial && c.state(pl.name).s.OpenUntil.IsZero() {
		return
	}
	s, werr := c.st.DestinationRecordSuccess(ctx, pl.name)
	if werr != nil {
		c.log.Warn("closing the circuit breaker failed", "destination", pl.name, "error", redact.Error(werr))
		return
	}
	c.update(s)
	if s.OpenUntil.IsZero() {
		c.log.Info("circuit breaker closed", "destination", pl.name)
		if c.metrics != nil {
			c.metrics.DestinationState(pl.name, s.Paused, false)
		}
	}
}
