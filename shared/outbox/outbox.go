// Package outbox delivers outbox rows: it claims due rows through the store, routes each by
// its topic, publishes it with a bounded number in flight, renews the leases of publishes that
// run long, and finishes every row through the claim fence (sent, retry with backoff, or
// dead). Finishing writes are grouped so that one statement fences many rows. In the opt-in
// claim mode lock (Config.ClaimMode, held.go) a claim holds its rows under row locks instead,
// and writes each row once, with its outcome, when the whole claim is done.
//
// The Poller is driven by the local process (a loop until shutdown) and by the poll Lambda
// function (a loop until the invocation deadline); both call Run with different options.
package outbox

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/alternayte/queuebox/shared/forwarded"
	"github.com/alternayte/queuebox/shared/route"
	"github.com/alternayte/queuebox/shared/transform"
)

// Config holds the outbox settings of the configuration (outbox.*).
type Config struct {
	// PollInterval is the wait between two claims that found nothing. Default 100 ms.
	PollInterval time.Duration
	// BatchSize is the largest number of rows one claim takes. Default 100.
	BatchSize int
	// Concurrency is the largest number of rows published at the same time (outbox.concurrency).
	// Up to BatchSize more rows may be claimed and wait for a publisher, under renewed leases.
	// Default 8.
	Concurrency int
	// RetryBaseDelay is the base of the retry backoff. Default 1 s.
	RetryBaseDelay time.Duration
	// ClaimTimeout is the lease of a claim. Default 300 s.
	ClaimTimeout time.Duration
	// PendingGaugeInterval is the shortest interval between two queries for the pending
	// gauges. Default 5 s.
	PendingGaugeInterval time.Duration
	// ShutdownTimeout is the longest wait for the rows in flight when a run stops. Default 30 s.
	ShutdownTimeout time.Duration
	// MaxRetryDelay caps the retry delay. Default 60 s.
	MaxRetryDelay time.Duration
	// Retry is the retry policy of the destinations that set none (outbox.retry). Its zero
	// value is the documented default.
	Retry RetryPolicy
	// ClaimMode is ClaimModeLease (the default) or ClaimModeLock (outbox.claimMode,
	// docs/claim-modes.md).
	ClaimMode string
	// HeldBatches is the most lock claims held at once in the claim mode lock, each on a
	// connection of the pool. Default 4.
	HeldBatches int
}

// WithDefaults returns the config with every zero value replaced by its default.
func (c Config) WithDefaults() Config {
	if c.PollInterval <= 0 {
		c.PollInterval = 100 * time.Millisecond
	}
	if c.BatchSize <= 0 {
		c.BatchSize = 100
	}
	if c.Concurrency <= 0 {
		c.Concurrency = 8
	}
	if c.RetryBaseDelay <= 0 {
		c.RetryBaseDelay = time.Second
	}
	if c.ClaimTimeout <= 0 {
		c.ClaimTimeout = 300 * time.Second
	}
	if c.PendingGaugeInterval <= 0 {
		c.PendingGaugeInterval = 5 * time.Second
	}
	if c.ShutdownTimeout <= 0 {
		c.ShutdownTimeout = 30 * time.Second
	}
	if c.MaxRetryDelay <= 0 {
		c.MaxRetryDelay = 60 * time.Second
	}
	if c.ClaimMode == "" {
		c.ClaimMode = ClaimModeLease
	}
	if c.HeldBatches <= 0 {
		c.HeldBatches = 4
	}
	return c
}

// Message is one outbox row as a publisher sees it.
type Message struct {
	ID            string
	Topic         string
	Key           string // empty when the row has no key
	AggregateType string
	Payload       json.RawMessage
	// Headers are the entries of the row's headers column, one string value per name.
	Headers map[string]string
	// Attempt is the number of failed deliveries so far; 0 on the first delivery.
	Attempt   int
	CreatedAt time.Time
	// Route is the route that matched the topic.
	Route route.Route
	// ReplayGeneration is how many times a replay moved the row back to pending, read for a
	// destination that sends a deduplication id (DedupPublisher); 0 otherwise. DedupID
	// builds the id from it.
	ReplayGeneration int64
}

// Publisher delivers messages to one destination.
//
// Publish must be safe for concurrent use. It returns nil only when the destination took
// responsibility for the message; any error schedules a retry or a dead letter. Publish must
// return when ctx is done.
type Publisher interface {
	Publish(ctx context.Context, m Message) error
	// Type is the destination type, the destination_type label: http, rabbitmq, kafka or nats.
	Type() string
}

// Destination is one configured egress.
type Destination struct {
	Name      string
	Publisher Publisher
	// Transform is the destination transform, or nil.
	Transform *transform.Step
	// Retry is the retry schedule of the rows routed here, or nil for the outbox's
	// (Config.Retry).
	Retry *RetryPolicy
	// Breaker is the circuit breaker, or nil for none.
	Breaker *BreakerPolicy
	// RateLimit is the request rate limit, or nil for none.
	RateLimit *RateLimit
	// Headers is what the destination's protocol carries of a header (docs/headers.md): the
	// poller fits a row's headers to it before each publish. The zero Rule carries every
	// header.
	Headers forwarded.Rule
}

// Summary counts what a run did.
type Summary struct {
	Claimed int `json:"claimed"`
	Sent    int `json:"sent"`
	Retried int `json:"retried"`
	Dead    int `json:"dead"`
	// ClaimsLost counts the rows whose claim was lost: a finishing write that found it gone,
	// or a lease renewal that updated zero rows or failed while the publish ran or waited
	// (that publish is cancelled, spends no attempt and gets no write).
	ClaimsLost int `json:"claimsLost"`
	Reclaimed  int `json:"reclaimed"`
	// Deferred counts the rows returned to pending unattempted: their destination was paused,
	// its circuit breaker open or its rate limit spent.
	Deferred int `json:"deferred,omitempty"`
	// Released counts the claimed rows that the run returned to pending unattempted when it
	// stopped, before any publisher took them.
	Released int `json:"released,omitempty"`
	// LeaseExpired counts the rows whose publish was cancelled, or never started, because
	// their claim reached its local lease deadline (no renewal answered in time): no attempt
	// spent, no write, the row left to its lease.
	LeaseExpired int `json:"leaseExpired,omitempty"`
}

func noRouteError(topic string) error {
	// The text is documented (spec/04), so it keeps its capital letter.
	return fmt.Errorf("No route matches topic %s", topic)
}

// RetryDelay is the backoff after a failed delivery of a row whose attempt is attempt:
// base * 2^min(attempt, 20), plus jitter (a fraction from 0 to 0.25 of it), at most max.
func RetryDelay(base time.Duration, attempt int, jitter float64, max time.Duration) time.Duration {
	if attempt < 0 {
		attempt = 0
	}
	if attempt > 20 {
		attempt = 20
	}
	d := float64(base) * float64(uint64(1)<<uint(attempt))
	d += d * jitter
	if d > float64(max) || d < 0 {
		return max
	}
	return time.Duration(d)
}
