package outbox

import (
	"errors"
	"math/rand/v2"
	"time"
)

// retryPlan is the resolved retry policy of one destination.
type retryPlan struct {
	base     time.Duration
	max      time.Duration
	jitter   bool
	schedule []time.Duration
	// honorRetryAfter lets a RetryAfterError set the delay.
	honorRetryAfter bool
}

// resolveRetry merges a destination's policy over the outbox's and fills in the defaults.
func resolveRetry(cfg Config, own *RetryPolicy) retryPlan {
	pol := cfg.Retry
	if own != nil {
		pol = *own
	}
	pl := retryPlan{base: cfg.RetryBaseDelay, jitter: !pol.NoJitter, schedule: pol.Schedule, honorRetryAfter: pol.HonorRetryAfter}
	switch {
	case pol.MaxDelay > 0:
		pl.max = pol.MaxDelay
	case len(pol.Schedule) > 0:
		for _, d := range pol.Schedule {
			pl.max = max(pl.max, d)
		}
	default:
		pl.max = cfg.MaxRetryDelay
	}
	return pl
}

// exhausted reports whether a failure of a row at attempt (failures so far) is its last: with a
// schedule, when no entry is left; otherwise when attempt reached max_attempts.
func (pl retryPlan) exhausted(attempt, maxAttempts int) bool {
	if len(pl.schedule) > 0 {
		return attempt >= len(pl.schedule)
	}
	return attempt >= maxAttempts
}

// delay is the wait after a failure of a row at attempt. A Retry-After that the policy honours
// sets it, at most the cap; otherwise the schedule's entry or the doubling backoff, each with
// its jitter and at most the cap.
func (pl retryPlan) delay(attempt int, err error) time.Duration {
	if pl.honorRetryAfter {
		var ra RetryAfterError
		if errors.As(err, &ra) {
			if d := ra.RetryAfter(); d > 0 {
				return min(d, pl.max)
			}
		}
	}
	jitter := 0.0
	if pl.jitter {
		jitter = rand.Float64() * 0.25
	}
	if len(pl.schedule) > 0 {
		d := pl.schedule[min(max(attempt, 0), len(pl.schedule)-1)]
		return min(time.Duration(float64(d)*(1+jitter)), pl.max)
	}
	return RetryDelay(pl.base, attempt, jitter, pl.max)
}

// isTerminal reports whether err is a TerminalError that says so.
func isTerminal(err error) bool {
	var te TerminalError
	return errors.As(err, &te) && te.Terminal()
}
