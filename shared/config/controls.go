package config

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/alternayte/queuebox/shared/kind"
)

// The delivery controls of issue 16 (docs/delivery-controls.md): outbox.retry and, per
// destination, retry, terminalStatuses, circuitBreaker and rateLimit. They are extensions
// beyond spec/: with none of them set, QueueBox retries and delivers as spec/ documents.

// The bounds of the delivery controls that are not the largest value of a numeric key (those
// are rows of bounds).
const (
	// maxScheduleEntries is the longest retry.scheduleMs: its length is the number of retries
	// of a row, and every destination's schedule is held in memory.
	maxScheduleEntries = 1000
	// maxRequestsPerSecond is the largest rateLimit.requestsPerSecond: each request takes
	// its slot with one statement on the destination's row of queuebox_destination_state.
	maxRequestsPerSecond = 100000
	// minTerminalStatus and maxTerminalStatus bound a terminalStatuses entry: a 4xx or 5xx
	// status, the answers that are failures.
	minTerminalStatus, maxTerminalStatus = 400, 599
)

// The defaults of the delivery controls.
const (
	// DefaultRetryMaxDelayMs is the cap of the retry delay when retry.maxDelayMs is not set
	// and there is no retry.scheduleMs: the fixed 60 s of spec/.
	DefaultRetryMaxDelayMs Milliseconds = 60000
	// DefaultFailureThreshold is circuitBreaker.failureThreshold.
	DefaultFailureThreshold = 5
	// DefaultBreakerWindowMs is circuitBreaker.windowMs.
	DefaultBreakerWindowMs Milliseconds = 60000
	// DefaultBreakerCoolDownMs is circuitBreaker.coolDownMs.
	DefaultBreakerCoolDownMs Milliseconds = 30000
	// DefaultRateLimitBurst is rateLimit.burst.
	DefaultRateLimitBurst = 1
)

// DeliveryControls holds the delivery control keys of a destination, extensions beyond spec/
// (docs/delivery-controls.md). Each is unset (nil) unless the destination sets it.
type DeliveryControls struct {
	// Retry is the retry schedule of the rows routed to the destination; each key that it
	// leaves out falls back to outbox.retry's (Config.EffectiveRetry merges them). Default: nil,
	// all from outbox.retry.
	Retry *Retry `yaml:"retry,omitempty"`
	// TerminalStatuses are HTTP statuses, from 400 to 599, after which the row goes to dead at
	// once; http destinations only. Default: empty, none.
	TerminalStatuses []int `yaml:"terminalStatuses,omitempty"`
	// CircuitBreaker, when set (even empty), turns the destination's circuit breaker on.
	// Default: nil, off.
	CircuitBreaker *CircuitBreaker `yaml:"circuitBreaker,omitempty"`
	// RateLimit, when set, bounds the requests to the destination across every replica.
	// Default: nil, none.
	RateLimit *DestinationRateLimit `yaml:"rateLimit,omitempty"`
}

// HasState reports whether the destination uses a control whose state lives in the table
// queuebox_destination_state (V1 of the QueueBox track): a circuit breaker or a rate limit.
func (c DeliveryControls) HasState() bool { return c.CircuitBreaker != nil || c.RateLimit != nil }

// Retry is outbox.retry or destinations.<name>.retry. A nil field is not set: in outbox.retry
// it takes the default, in a destination the value of outbox.retry.
type Retry struct {
	// MaxDelayMs caps every retry delay, a Retry-After included. It must be above 0.
	// Default: 60000, or with ScheduleMs its largest entry.
	MaxDelayMs *Milliseconds `yaml:"maxDelayMs,omitempty"`
	// Jitter adds a random 0-25 % to each delay; false uses each delay exactly. Default: true.
	Jitter *bool `yaml:"jitter,omitempty"`
	// ScheduleMs, when set, is the delay after each failed attempt in turn, each above 0,
	// 1 to 1000 entries; its length bounds the attempts of a row, whatever its max_attempts.
	// Default: empty, the doubling backoff of outbox.retryBaseDelayMs.
	ScheduleMs []Milliseconds `yaml:"scheduleMs,omitempty"`
	// HonorRetryAfter lets the Retry-After of a 429 or 503 answer set the next delay, at most
	// MaxDelayMs. Default: false.
	HonorRetryAfter *bool `yaml:"honorRetryAfter,omitempty"`
}

// IsZero reports whether the block sets no key.
func (r Retry) IsZero() bool {
	return r.MaxDelayMs == nil && r.Jitter == nil && r.ScheduleMs == nil && r.HonorRetryAfter == nil
}

// CircuitBreaker is destinations.<name>.circuitBreaker.
type CircuitBreaker struct {
	// FailureThreshold is the number of failed deliveries within WindowMs that opens the
	// breaker. It must be above 0. Default: 5.
	FailureThreshold int `yaml:"failureThreshold"`
	// WindowMs is the counting window, which starts at its first failure. It must be above 0.
	// Default: 60000.
	WindowMs Milliseconds `yaml:"windowMs"`
	// CoolDownMs is how long the breaker stays open. It must be above 0. Default: 30000.
	CoolDownMs Milliseconds `yaml:"coolDownMs"`
}

// DefaultCircuitBreaker returns a circuit breaker block with its defaults.
func DefaultCircuitBreaker() CircuitBreaker {
	return CircuitBreaker{FailureThreshold: DefaultFailureThreshold, WindowMs: DefaultBreakerWindowMs, CoolDownMs: DefaultBreakerCoolDownMs}
}

func (b *CircuitBreaker) setDefaults() { *b = DefaultCircuitBreaker() }

// DestinationRateLimit is destinations.<name>.rateLimit. It is not sources.<name>.rateLimit
// (RateLimit), which limits the requests that an HTTP source accepts.
type DestinationRateLimit struct {
	// RequestsPerSecond is the sustained rate, from 1 to 100000. Required.
	RequestsPerSecond int `yaml:"requestsPerSecond"`
	// Burst is the number of requests that may go at once after an idle time. It must be
	// above 0. Default: 1.
	Burst int `yaml:"burst"`
}

func (r *DestinationRateLimit) setDefaults() { *r = DestinationRateLimit{Burst: DefaultRateLimitBurst} }

// EffectiveRetry is the retry schedule of a destination with every fallback applied.
type EffectiveRetry struct {
	// MaxDelayMs is the cap, or 0 when neither the destination nor outbox.retry sets one: then
	// the cap is 60 s (DefaultRetryMaxDelayMs), or with ScheduleMs its largest entry.
	MaxDelayMs Milliseconds
	// Jitter adds a random 0-25 % to each delay.
	Jitter bool
	// ScheduleMs is the explicit schedule, or empty for the doubling backoff.
	ScheduleMs []Milliseconds
	// HonorRetryAfter lets Retry-After set the next delay.
	HonorRetryAfter bool
}

// EffectiveRetry returns the retry schedule of the destination d, each key falling back to
// outbox.retry's, or with d nil outbox.retry's alone.
func (c *Config) EffectiveRetry(d *Destination) EffectiveRetry {
	merged := c.Outbox.Retry
	if d != nil && d.Retry != nil {
		own := d.Retry
		if own.MaxDelayMs != nil {
			merged.MaxDelayMs = own.MaxDelayMs
		}
		if own.Jitter != nil {
			merged.Jitter = own.Jitter
		}
		if own.ScheduleMs != nil {
			merged.ScheduleMs = own.ScheduleMs
		}
		if own.HonorRetryAfter != nil {
			merged.HonorRetryAfter = own.HonorRetryAfter
		}
	}
	out := EffectiveRetry{Jitter: true, ScheduleMs: merged.ScheduleMs}
	if merged.MaxDelayMs != nil {
		out.MaxDelayMs = *merged.MaxDelayMs
	}
	if merged.Jitter != nil {
		out.Jitter = *merged.Jitter
	}
	if merged.HonorRetryAfter != nil {
		out.HonorRetryAfter = *merged.HonorRetryAfter
	}
	return out
}

// Cap returns the largest retry delay: MaxDelayMs, or without it the largest entry of the
// schedule, or 60 s.
func (r EffectiveRetry) Cap() Milliseconds {
	if r.MaxDelayMs > 0 {
		return r.MaxDelayMs
	}
	if len(r.ScheduleMs) > 0 {
		var largest Milliseconds
		for _, s := range r.ScheduleMs {
			largest = max(largest, s)
		}
		return largest
	}
	return DefaultRetryMaxDelayMs
}

// StatefulDestinations returns the names, sorted, of the destinations that set a circuit
// breaker or a rate limit: those that need the table queuebox_destination_state.
func (c *Config) StatefulDestinations() []string {
	var out []string
	for _, name := range sortedKeys(c.Destinations) {
		if c.Destinations[name].HasState() {
			out = append(out, name)
		}
	}
	return out
}

// retry checks a retry block: outbox.retry or a destination's.
func (v *validator) retry(p keyPath, r *Retry) {
	if r == nil {
		return
	}
	if r.MaxDelayMs != nil {
		v.positive(p.child("maxDelayMs"), int64(*r.MaxDelayMs))
	}
	if r.ScheduleMs != nil {
		sp := p.child("scheduleMs")
		switch n := len(r.ScheduleMs); {
		case n == 0:
			v.add(sp, "must hold at least one delay; leave the key out for the doubling backoff")
		case n > maxScheduleEntries:
			v.add(sp, "must hold at most %d delays, not %d", maxScheduleEntries, n)
		}
		for i, s := range r.ScheduleMs {
			v.positive(sp.index(i), int64(s))
		}
	}
}

// deliveryControls checks the delivery controls of a destination.
func (v *validator) deliveryControls(p keyPath, d *Destination) {
	v.retry(p.child("retry"), d.Retry)
	if d.TerminalStatuses != nil {
		tp := p.child("terminalStatuses")
		if d.Kind != kind.HTTP {
			v.add(tp, "is a key of http destinations only, but %s is of the %s kind: remove it", p, d.Kind)
		} else {
			for i, s := range d.TerminalStatuses {
				if s < minTerminalStatus || s > maxTerminalStatus {
					v.add(tp.index(i), "must be an HTTP status from %d to %d, not %d", minTerminalStatus, maxTerminalStatus, s)
				}
			}
		}
	}
	if b := d.CircuitBreaker; b != nil {
		bp := p.child("circuitBreaker")
		v.positive(bp.child("failureThreshold"), int64(b.FailureThreshold))
		v.positive(bp.child("windowMs"), int64(b.WindowMs))
		v.positive(bp.child("coolDownMs"), int64(b.CoolDownMs))
	}
	if r := d.RateLimit; r != nil {
		rp := p.child("rateLimit")
		switch {
		case r.RequestsPerSecond == 0:
			v.add(rp.child("requestsPerSecond"), "is required when %s is set: from 1 to %d", rp, maxRequestsPerSecond)
		case r.RequestsPerSecond < 0:
			v.add(rp.child("requestsPerSecond"), "must be above 0")
		}
		v.positive(rp.child("burst"), int64(r.Burst))
	}
}

// resolveControls turns an empty circuitBreaker key (circuitBreaker: with no value) into a
// breaker with its defaults: a present block is on.
func (c *Config) resolveControls(root *node) {
	for name, d := range c.Destinations {
		if d.CircuitBreaker == nil && treeHas(root, "destinations", name, "circuitBreaker") {
			b := DefaultCircuitBreaker()
			d.CircuitBreaker = &b
		}
	}
}

// treeHas reports whether the tree holds the key path, even with an empty value, matching
// each level in any letter case.
func treeHas(root *node, levels ...string) bool {
	cur := root
	for _, l := range levels {
		if cur == nil || cur.kind != mapNode {
			return false
		}
		e := cur.lookup(l)
		if e == nil {
			return false
		}
		cur = e.val
	}
	return true
}

// retryWarnings warns about every retry schedule with delays above the cap that applies to
// it: a destination's schedule falls back to outbox.retry.maxDelayMs key by key, so a long
// schedule under a short outbox cap waits the cap. It is legal, so it is a warning.
func (c *Config) retryWarnings() []Warning {
	var out []Warning
	check := func(d *Destination, schedPath, capPath keyPath) {
		r := c.EffectiveRetry(d)
		if r.MaxDelayMs <= 0 {
			return
		}
		var above []string
		for _, s := range r.ScheduleMs {
			if s > r.MaxDelayMs {
				above = append(above, strconv.FormatInt(int64(s), 10))
			}
		}
		if len(above) == 0 {
			return
		}
		out = append(out, Warning{Key: schedPath.String(), Message: fmt.Sprintf(
			"%s has delays above the cap %s (%d ms): %s wait %d ms each; raise the cap, or set it on the same block as the schedule",
			schedPath, capPath, r.MaxDelayMs, strings.Join(above, ", "), r.MaxDelayMs)})
	}
	outboxRetry := keyPath{"outbox", "retry"}
	check(nil, outboxRetry.child("scheduleMs"), outboxRetry.child("maxDelayMs"))
	for _, name := range sortedKeys(c.Destinations) {
		d := c.Destinations[name]
		if d.Retry == nil || (d.Retry.ScheduleMs == nil && d.Retry.MaxDelayMs == nil) {
			continue // its schedule and cap are outbox.retry's, warned about above
		}
		own := keyPath{"destinations", name, "retry"}
		schedPath, capPath := own.child("scheduleMs"), own.child("maxDelayMs")
		if d.Retry.ScheduleMs == nil {
			schedPath = outboxRetry.child("scheduleMs")
		}
		if d.Retry.MaxDelayMs == nil {
			capPath = outboxRetry.child("maxDelayMs")
		}
		check(d, schedPath, capPath)
	}
	return out
}
