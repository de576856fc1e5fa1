package queuebox

import (
	"math"
	"math/rand/v2"
	"time"
)

// FailureAction is what a RetryPolicy decides for a message whose handler failed: a retry
// after a delay (RetryAfter) or a dead letter (DeadLetter). The zero value retries at once.
type FailureAction struct {
	dead  bool
	delay time.Duration
}

// RetryAfter returns the action that sets the row back to pending, due after delay, with its
// attempt raised by one. A negative delay counts as 0; a delay beyond 2^31-1 milliseconds (about
// 24.8 days) is cut to that.
func RetryAfter(delay time.Duration) FailureAction {
	return FailureAction{delay: delay}
}

// DeadLetter returns the action that moves the row to dead. No worker claims it again; an
// operator can replay it.
func DeadLetter() FailureAction {
	return FailureAction{dead: true}
}

// IsDeadLetter reports whether the action is a dead letter.
func (a FailureAction) IsDeadLetter() bool { return a.dead }

// Delay returns the delay of a retry, and 0 for a dead letter.
func (a FailureAction) Delay() time.Duration {
	if a.dead {
		return 0
	}
	return a.delay
}

// RetryPolicy decides what happens to a message whose handler returned an error. Decide is
// called on the goroutine of the failed handler, so with Options.MaxConcurrency above 1 it must
// be safe for concurrent use. failure is the error as the handler returned it, so errors.As
// and errors.Is work on it.
type RetryPolicy interface {
	Decide(message Message, failure error) FailureAction
}

// RetryPolicyFunc adapts a function to a RetryPolicy.
type RetryPolicyFunc func(message Message, failure error) FailureAction

// Decide calls f(message, failure).
func (f RetryPolicyFunc) Decide(message Message, failure error) FailureAction {
	return f(message, failure)
}

// Defaults of the retry policy that a worker uses when Options.RetryPolicy is nil.
const (
	defaultMaxAttempts = 5
	defaultBaseDelay   = time.Second
	defaultMaxDelay    = 5 * time.Minute
	defaultJitter      = 0.2
)

// defaultPolicy is the exponential policy of NewDefaultRetryPolicy.
type defaultPolicy struct {
	maxAttempts int
	baseDelay   time.Duration
	maxDelay    time.Duration
	jitter      float64
}

// NewDefaultRetryPolicy returns the exponential policy with jitter that every QueueBox pull
// library uses by default: a message whose Attempt is maxAttempts or more is dead-lettered;
// otherwise it is retried after min(baseDelay * 2^Attempt, maxDelay), shifted at random by up
// to ±jitter of itself (0.2 is ±20 %). A row starts at attempt 0, so maxAttempts 5 allows six
// deliveries. The worker's default is NewDefaultRetryPolicy(5, time.Second, 5*time.Minute, 0.2).
//
// A negative maxAttempts counts as 0, a negative delay as 0, and jitter is kept within [0, 1].
// The policy is safe for concurrent use.
func NewDefaultRetryPolicy(maxAttempts int, baseDelay, maxDelay time.Duration, jitter float64) RetryPolicy {
	return defaultPolicy{
		maxAttempts: max(maxAttempts, 0),
		baseDelay:   max(baseDelay, 0),
		maxDelay:    max(maxDelay, 0),
		jitter:      math.Min(math.Max(jitter, 0), 1),
	}
}

// Decide implements RetryPolicy.
func (p defaultPolicy) Decide(message Message, _ error) FailureAction {
	if message.Attempt >= p.maxAttempts {
		return DeadLetter()
	}
	return RetryAfter(p.delay(message.Attempt, rand.Float64()))
}

// delay returns the delay before the retry of a message at attempt, with u in [0, 1) choosing
// the jitter: u = 0.5 gives no shift, u near 0 about -jitter, u near 1 about +jitter.
func (p defaultPolicy) delay(attempt int, u float64) time.Duration {
	d := p.maxDelay
	if attempt >= 0 && attempt < 62 {
		if exp := float64(p.baseDelay) * math.Exp2(float64(attempt)); exp < float64(p.maxDelay) {
			d = time.Duration(exp)
		}
	}
	shifted := float64(d) * (1 + p.jitter*(2*u-1))
	if shifted <= 0 {
		return 0
	}
	if shifted >= math.MaxInt64 {
		return time.Duration(math.MaxInt64)
	}
	return time.Duration(shifted)
}
