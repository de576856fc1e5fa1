package outbox

import (
	"time"
)

// RetryPolicy is the retry schedule of the rows routed to a destination: destinations.<name>.retry
// over outbox.retry (docs/delivery-controls.md). The zero value is the documented default of
// spec/: RetryBaseDelay doubling per attempt, at most 60 s, with 0-25 % jitter, until the
// row's max_attempts.
type RetryPolicy struct {
	// MaxDelay caps every delay, a Retry-After included. Zero means the outbox's
	// Config.MaxRetryDelay (60 s), or with a Schedule its largest entry.
	MaxDelay time.Duration
	// NoJitter uses each delay exactly; by default a random 0-25 % of it is added.
	NoJitter bool
	// Schedule, when not empty, is the delay after each failed attempt in turn: the row's
	// attempt n (0 on the first delivery) waits Schedule[n]. Its length bounds the attempts:
	// the delivery after the last delay is the last one, whatever the row's max_attempts.
	Schedule []time.Duration
	// HonorRetryAfter lets a RetryAfterError (a 429 or 503 with Retry-After) set the delay of
	// the next attempt, at most MaxDelay. Off by default: spec/'s backoff stays as it is.
	HonorRetryAfter bool
}

// BreakerPolicy is the circuit breaker of a destination (destinations.<name>.circuitBreaker).
type BreakerPolicy struct {
	// Threshold is the number of failed deliveries within Window that opens the breaker.
	Threshold int
	// Window is the counting window; it starts at its first failure.
	Window time.Duration
	// CoolDown is how long the breaker stays open. While open, the rows of the destination
	// are not attempted and their attempt does not grow; they wait until the cool-down ends.
	CoolDown time.Duration
}

// RateLimit is the request rate limit of a destination (destinations.<name>.rateLimit),
// honoured across replicas through the database.
type RateLimit struct {
	// RequestsPerSecond is the sustained rate. Above 0.
	RequestsPerSecond int
	// Burst is the number of requests that may go at once after an idle time. At least 1.
	Burst int
}

// RetryAfterError is an error that names the earliest time of the next attempt: a 429 or 503
// response with a Retry-After header. The retry waits RetryAfter, at most the policy's
// MaxDelay.
type RetryAfterError interface {
	error
	RetryAfter() time.Duration
}

// TerminalError is an error that no later attempt can cure: a status that the destination
// lists as terminal. The row goes to dead at once, with the error in last_error.
type TerminalError interface {
	error
	Terminal() bool
}
