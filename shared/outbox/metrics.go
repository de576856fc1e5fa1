package outbox

import "time"

// Metrics receives the outbox measurements of spec/28-metrics.md. Implementations must be
// safe for concurrent use. The process chooses one: Prometheus in the local process, the
// CloudWatch Embedded Metric Format in Lambda, or NopMetrics.
type Metrics interface {
	// Outcome counts queuebox_outbox_messages_total{status}: sent, failed (a retry) or dead.
	Outcome(status string)
	// ClaimLost counts queuebox_claims_lost_total{component="outbox"}.
	ClaimLost()
	// Reclaimed counts queuebox_outbox_messages_reclaimed_total.
	Reclaimed(n int)
	// ProcessError counts queuebox_outbox_process_errors_total.
	ProcessError()
	// ProcessingDuration observes queuebox_outbox_processing_duration_seconds.
	ProcessingDuration(d time.Duration)
	// PublishDuration observes queuebox_outbox_publish_duration_seconds{destination_type}.
	PublishDuration(destinationType string, d time.Duration)
	// DestinationOutcome counts queuebox_outbox_destination_messages_total{destination,outcome}
	// with outcome success or failure.
	DestinationOutcome(destination, outcome string)
	// Pending sets queuebox_outbox_messages_pending and
	// queuebox_outbox_oldest_pending_age_seconds.
	Pending(count int64, oldestAge time.Duration)
	// QueueDepth sets queuebox_outbox_queue_depth{destination}.
	QueueDepth(destination string, count int64)
	// TransformFailure counts queuebox_transform_failures_total{strategy}.
	TransformFailure(strategy string)
}

// NopMetrics discards every measurement.
type NopMetrics struct{}

// Outcome implements Metrics.
func (NopMetrics) Outcome(string) {}

// ClaimLost implements Metrics.
func (NopMetrics) ClaimLost() {}

// Reclaimed implements Metrics.
func (NopMetrics) Reclaimed(int) {}

// ProcessError implements Metrics.
func (NopMetrics) ProcessError() {}

// ProcessingDuration implements Metrics.
func (NopMetrics) ProcessingDuration(time.Duration) {}

// PublishDuration implements Metrics.
func (NopMetrics) PublishDuration(string, time.Duration) {}

// DestinationOutcome implements Metrics.
func (NopMetrics) DestinationOutcome(string, string) {}

// Pending implements Metrics.
func (NopMetrics) Pending(int64, time.Duration) {}

// QueueDepth implements Metrics.
func (NopMetrics) QueueDepth(string, int64) {}

// TransformFailure implements Metrics.
func (NopMetrics) TransformFailure(string) {}
