package relay

import "time"

// Metrics receives the relay measurements of spec/28-metrics.md. Implementations must be safe
// for concurrent use. *metrics.Registry (Prometheus) satisfies it; Lambda uses the CloudWatch
// Embedded Metric Format; NopMetrics discards everything.
type Metrics interface {
	// InboxMessage counts queuebox_inbox_messages_total{status}; the relay counts "forwarded".
	InboxMessage(status string)
	// InboxRelayError counts queuebox_inbox_relay_errors_total: a failed cycle, a failed
	// forward or dead-letter write, and a row that the relay marked dead.
	InboxRelayError()
	// InboxClaimLost counts queuebox_claims_lost_total{component="inbox"}.
	InboxClaimLost()
	// InboxOldestPendingAge sets queuebox_inbox_oldest_pending_age_seconds.
	InboxOldestPendingAge(age time.Duration)
}

// NopMetrics discards every measurement.
type NopMetrics struct{}

// InboxMessage implements Metrics.
func (NopMetrics) InboxMessage(string) {}

// InboxRelayError implements Metrics.
func (NopMetrics) InboxRelayError() {}

// InboxClaimLost implements Metrics.
func (NopMetrics) InboxClaimLost() {}

// InboxOldestPendingAge implements Metrics.
func (NopMetrics) InboxOldestPendingAge(time.Duration) {}
