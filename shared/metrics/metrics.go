// Package metrics exposes the measurements of spec/28-metrics.md in the Prometheus text
// format, with the documented names, types and labels. The local process and the capture
// node serve Registry.Handler on GET /metrics.
//
// A timer is a summary with the 0.5, 0.95 and 0.99 quantiles plus a `_max` gauge that holds
// the largest value of the current decay window, as the original exporter shows it.
//
// The connection pool shows under the HikariCP names of the original
// (hikaricp_connections_*, label pool) on both databases: a PoolTracer, the observer of the
// dialect's pool (through postgres.PoolTracer on the pgx pool, or shared/store/sqlpool on
// the database/sql pool of SQL Server), measures the acquires, the creations, the usage and
// the acquires that timed out, and AttachStats registers the gauges of the pool. The local
// process names its pool PoolName.
package metrics

import (
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Window is the decay window of the summaries and of the _max gauges.
const Window = 2 * time.Minute

var objectives = map[float64]float64{0.5: 0.05, 0.95: 0.01, 0.99: 0.001}

// Registry holds every QueueBox metric. Its methods are safe for concurrent use.
type Registry struct {
	reg     *prometheus.Registry
	started time.Time

	outboxMessages     *prometheus.CounterVec
	outboxPending      prometheus.Gauge
	outboxReclaimed    prometheus.Counter
	outboxOldestAge    prometheus.Gauge
	claimsLost         *prometheus.CounterVec
	outboxProcessErrs  prometheus.Counter
	processing         *timer
	publish            *timer
	destinationMsgs    *prometheus.CounterVec
	queueDepth         *prometheus.GaugeVec
	httpResponses      *prometheus.CounterVec
	transformFailures  *prometheus.CounterVec
	inboxMessages      *prometheus.CounterVec
	inboxRelayErrors   prometheus.Counter
	inboxRejections    *prometheus.CounterVec
	inboxFiltered      *prometheus.CounterVec
	inboxOldestAge     prometheus.Gauge
	cleanupDeleted     *prometheus.CounterVec
	cleanupDuration    *timer
	cleanupLastRunTime *prometheus.GaugeVec
	// The delivery controls' metrics, extensions beyond spec/28 (docs/delivery-controls.md).
	outboxDeferred     *prometheus.CounterVec
	destinationPaused  *prometheus.GaugeVec
	destinationCircuit *prometheus.GaugeVec
	// The console's logins, an extension (docs/console.md).
	consoleLogins *prometheus.CounterVec
	// The row headers that a destination cannot carry, an extension (docs/headers.md).
	headersNotCarried *prometheus.CounterVec
	// The publishes and forwards stopped at their claim's local lease deadline, an extension
	// beyond spec/28 (docs/monitoring.md).
	leaseDeadline *prometheus.CounterVec
	// The broker sources' metrics, extensions beyond spec/28 (docs/broker-sources.md).
	inboxUndecodable *prometheus.CounterVec
	inboxTooLarge    *prometheus.CounterVec
	inboxTombstones  *prometheus.CounterVec

	poolOnce sync.Once
	pool     *poolFamilies // the hikaricp_connections_* families; see pool.go

	// families describes every family registered, in the order of registration (Families).
	families []Family
}

// Family describes one metric family that a Registry exports, as its reference page
// (docs/reference/metrics.md) lists it.
type Family struct {
	// Name is the family's name in the scrape.
	Name string
	// Type is counter, gauge or summary.
	Type string
	// Help is the family's help text.
	Help string
	// Labels are the family's label names, in order; a summary's quantile label is not one.
	Labels []string
	// Quantiles are the quantiles of a summary, in ascending order; nil for another type.
	Quantiles []float64
}

// Families returns every family that a Registry exports, the connection pool's included, in
// the order of registration. A family with labels shows in a scrape from its first sample.
func Families() []Family {
	r := New("")
	r.poolFamilies()
	return slices.Clone(r.families)
}

// New returns a registry with the build information gauge set to version.
func New(version string) *Registry {
	r := &Registry{reg: prometheus.NewRegistry(), started: time.Now()}
	f := r.factory()

	info := f.gaugeVec("queuebox", "The build information. The value is always 1.", "version")
	info.WithLabelValues(version).Set(1)
	f.gaugeFunc("queuebox_uptime_seconds", "The seconds since the process started.",
		func() float64 { return time.Since(r.started).Seconds() })

	r.outboxMessages = f.counterVec("queuebox_outbox_messages_total", "The outbox delivery outcomes.", "status")
	r.outboxPending = f.gauge("queuebox_outbox_messages_pending", "The outbox messages that wait for a publish.")
	r.outboxReclaimed = f.counter("queuebox_outbox_messages_reclaimed_total", "The outbox messages that returned to pending after a stale claim.")
	r.outboxOldestAge = f.gauge("queuebox_outbox_oldest_pending_age_seconds", "The age in seconds of the oldest outbox row in state pending.")
	r.claimsLost = f.counterVec("queuebox_claims_lost_total", "The terminal writes that lost the claim.", "component")
	r.outboxProcessErrs = f.counter("queuebox_outbox_process_errors_total", "The errors that stopped the processing of one outbox message.")
	r.processing = f.timer("queuebox_outbox_processing_duration_seconds", "The time to process one outbox message.")
	r.publish = f.timer("queuebox_outbox_publish_duration_seconds", "The time to publish one message to a destination type.", "destination_type")
	r.destinationMsgs = f.counterVec("queuebox_outbox_destination_messages_total", "The outbox messages per destination and outcome.", "destination", "outcome")
	r.queueDepth = f.gaugeVec("queuebox_outbox_queue_depth", "The messages that wait for a publish to one destination.", "destination")
	r.httpResponses = f.counterVec("queuebox_http_publish_responses_total", "The HTTP publish responses per status class.", "status_class")
	r.transformFailures = f.counterVec("queuebox_transform_failures_total", "The transform failures per error strategy.", "strategy")
	r.inboxMessages = f.counterVec("queuebox_inbox_messages_total", "The inbox messages per status.", "status")
	r.inboxRelayErrors = f.counter("queuebox_inbox_relay_errors_total", "The errors of the inbox relay.")
	r.inboxRejections = f.counterVec("queuebox_inbox_rejections_total", "The inbox messages that QueueBox rejected, per reason.", "reason")
	r.inboxFiltered = f.counterVec("queuebox_inbox_filtered_total", "The inbox messages that the header filter of a source dropped.", "source")
	r.inboxOldestAge = f.gauge("queuebox_inbox_oldest_pending_age_seconds", "The age in seconds of the oldest inbox row in state pending.")
	r.cleanupDeleted = f.counterVec("queuebox_cleanup_messages_deleted_total", "The rows that the retention cleanup deleted, per table.", "table")
	r.cleanupDuration = f.timer("queuebox_cleanup_duration_seconds", "The time of one cleanup run, per table.", "table")
	r.cleanupLastRunTime = f.gaugeVec("queuebox_cleanup_last_run_timestamp", "The Unix time in seconds of the last cleanup run.", "table")
	r.outboxDeferred = f.counterVec("queuebox_outbox_deferred_total", "The outbox messages returned to pending unattempted, per destination and reason (paused, circuit_open, rate_limited).", "destination", "reason")
	r.destinationPaused = f.gaugeVec("queuebox_destination_paused", "1 while an operator has paused the destination, else 0.", "destination")
	r.destinationCircuit = f.gaugeVec("queuebox_destination_circuit_open", "1 while the circuit breaker of the destination is open, else 0.", "destination")
	r.consoleLogins = f.counterVec("queuebox_console_logins_total", "The logins to the web console, per outcome (accepted, refused, limited_client, limited_overall).", "outcome")
	r.headersNotCarried = f.counterVec("queuebox_outbox_headers_not_carried_total", "The row headers that a destination cannot carry, per destination and action (dropped, encoded, refused).", "destination", "action")
	r.leaseDeadline = f.counterVec("queuebox_lease_deadline_total", "The publishes (outbox) and forwards (inbox relay) stopped, or not started, because their claim reached its local lease deadline.", "component")
	r.inboxUndecodable = f.counterVec("queuebox_inbox_undecodable_total", "The broker messages that the client library could not decode, stored as dead rows, per source.", "source")
	r.inboxTooLarge = f.counterVec("queuebox_inbox_too_large_total", "The broker messages over the source's maxBodyBytes, stored as dead rows without their body, per source.", "source")
	r.inboxTombstones = f.counterVec("queuebox_inbox_tombstones_skipped_total", "The Kafka tombstones acknowledged without a row (skipTombstones), per source.", "source")
	return r
}

// HeaderNotCarried counts queuebox_outbox_headers_not_carried_total{destination,action}
// (outbox.HeaderMetrics).
func (r *Registry) HeaderNotCarried(destination, action string) {
	r.headersNotCarried.WithLabelValues(destination, action).Inc()
}

// ConsoleLogin counts queuebox_console_logins_total{outcome} (console.Metrics).
func (r *Registry) ConsoleLogin(outcome string) { r.consoleLogins.WithLabelValues(outcome).Inc() }

// LeaseDeadline counts queuebox_lease_deadline_total{component} (lease.Metrics): a publish
// (component outbox) or a forward (component inbox) stopped at its claim's local lease
// deadline.
func (r *Registry) LeaseDeadline(component string) {
	r.leaseDeadline.WithLabelValues(component).Inc()
}

// InboxUndecodable counts queuebox_inbox_undecodable_total{source} (inbox.SourceMetrics).
func (r *Registry) InboxUndecodable(source string) { r.inboxUndecodable.WithLabelValues(source).Inc() }

// InboxTooLarge counts queuebox_inbox_too_large_total{source} (inbox.SourceMetrics).
func (r *Registry) InboxTooLarge(source string) { r.inboxTooLarge.WithLabelValues(source).Inc() }

// InboxTombstoneSkipped counts queuebox_inbox_tombstones_skipped_total{source}
// (inbox.SourceMetrics).
func (r *Registry) InboxTombstoneSkipped(source string) {
	r.inboxTombstones.WithLabelValues(source).Inc()
}

// Deferred counts queuebox_outbox_deferred_total{destination,reason} (outbox.ControlMetrics).
func (r *Registry) Deferred(destination, reason string) {
	r.outboxDeferred.WithLabelValues(destination, reason).Inc()
}

// DestinationState sets queuebox_destination_paused and queuebox_destination_circuit_open of a
// destination (outbox.ControlMetrics).
func (r *Registry) DestinationState(destination string, paused, circuitOpen bool) {
	r.destinationPaused.WithLabelValues(destination).Set(flag(paused))
	r.destinationCircuit.WithLabelValues(destination).Set(flag(circuitOpen))
}

func flag(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// ContentType is the content type of the text format that GET /metrics answers
// (spec/26-http-api.md).
const ContentType = "text/plain; version=0.0.4; charset=utf-8"

// Handler serves the Prometheus text format with the documented content type. promhttp adds
// an escaping parameter to the text format's type; a client that negotiates another format
// (OpenMetrics, protobuf) keeps the type promhttp gives it.
func (r *Registry) Handler() http.Handler {
	h := promhttp.HandlerFor(r.reg, promhttp.HandlerOpts{})
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		h.ServeHTTP(&textTypeWriter{ResponseWriter: w}, req)
	})
}

// textTypeWriter replaces the text format's content type before the header is written.
type textTypeWriter struct {
	http.ResponseWriter
	wrote bool
}

func (w *textTypeWriter) WriteHeader(code int) {
	if !w.wrote {
		w.wrote = true
		if strings.HasPrefix(w.Header().Get("Content-Type"), "text/plain; version=0.0.4") {
			w.Header().Set("Content-Type", ContentType)
		}
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *textTypeWriter) Write(b []byte) (int, error) {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(b)
}

// Prometheus returns the underlying registry, for collectors registered by other packages
// (the connection pool metrics).
func (r *Registry) Prometheus() *prometheus.Registry { return r.reg }

// Totals returns the outcome counters that the console shows as rates, by a label for people:
// queuebox_outbox_messages_total per status ("outbox sent", "outbox failed", "outbox dead") and
// queuebox_inbox_messages_total per status ("inbox new", "inbox forwarded", "inbox duplicate").
// A status that has not been counted yet is absent.
func (r *Registry) Totals() map[string]float64 {
	out := map[string]float64{}
	families, err := r.reg.Gather()
	if err != nil {
		return out
	}
	for _, f := range families {
		var prefix string
		switch f.GetName() {
		case "queuebox_outbox_messages_total":
			prefix = "outbox "
		case "queuebox_inbox_messages_total":
			prefix = "inbox "
		default:
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "status" {
					out[prefix+l.GetValue()] += m.GetCounter().GetValue()
				}
			}
		}
	}
	return out
}

// Outcome counts queuebox_outbox_messages_total{status}.
func (r *Registry) Outcome(status string) { r.outboxMessages.WithLabelValues(status).Inc() }

// ClaimLost counts queuebox_claims_lost_total{component="outbox"}.
func (r *Registry) ClaimLost() { r.claimsLost.WithLabelValues("outbox").Inc() }

// InboxClaimLost counts queuebox_claims_lost_total{component="inbox"}.
func (r *Registry) InboxClaimLost() { r.claimsLost.WithLabelValues("inbox").Inc() }

// Reclaimed counts queuebox_outbox_messages_reclaimed_total.
func (r *Registry) Reclaimed(n int) { r.outboxReclaimed.Add(float64(n)) }

// ProcessError counts queuebox_outbox_process_errors_total.
func (r *Registry) ProcessError() { r.outboxProcessErrs.Inc() }

// ProcessingDuration observes queuebox_outbox_processing_duration_seconds.
func (r *Registry) ProcessingDuration(d time.Duration) { r.processing.observe(d) }

// PublishDuration observes queuebox_outbox_publish_duration_seconds{destination_type}.
func (r *Registry) PublishDuration(destinationType string, d time.Duration) {
	r.publish.observe(d, destinationType)
}

// DestinationOutcome counts queuebox_outbox_destination_messages_total.
func (r *Registry) DestinationOutcome(destination, outcome string) {
	r.destinationMsgs.WithLabelValues(destination, outcome).Inc()
}

// Pending sets the outbox pending count and the oldest pending age.
func (r *Registry) Pending(count int64, oldestAge time.Duration) {
	r.outboxPending.Set(float64(count))
	r.outboxOldestAge.Set(oldestAge.Seconds())
}

// QueueDepth sets queuebox_outbox_queue_depth{destination}.
func (r *Registry) QueueDepth(destination string, count int64) {
	r.queueDepth.WithLabelValues(destination).Set(float64(count))
}

// HTTPResponse counts queuebox_http_publish_responses_total{status_class}.
func (r *Registry) HTTPResponse(statusClass string) {
	r.httpResponses.WithLabelValues(statusClass).Inc()
}

// StatusClass returns the status_class label of an HTTP status: 1xx to 5xx, or other.
func StatusClass(status int) string {
	if status >= 100 && status < 600 {
		return strconv.Itoa(status/100) + "xx"
	}
	return "other"
}

// TransformFailure counts queuebox_transform_failures_total{strategy}.
func (r *Registry) TransformFailure(strategy string) {
	r.transformFailures.WithLabelValues(strategy).Inc()
}

// InboxMessage counts queuebox_inbox_messages_total{status}: new, forwarded or duplicate.
func (r *Registry) InboxMessage(status string) { r.inboxMessages.WithLabelValues(status).Inc() }

// InboxRelayError counts queuebox_inbox_relay_errors_total.
func (r *Registry) InboxRelayError() { r.inboxRelayErrors.Inc() }

// InboxRejection counts queuebox_inbox_rejections_total{reason}.
func (r *Registry) InboxRejection(reason string) { r.inboxRejections.WithLabelValues(reason).Inc() }

// InboxFiltered counts queuebox_inbox_filtered_total{source}.
func (r *Registry) InboxFiltered(source string) { r.inboxFiltered.WithLabelValues(source).Inc() }

// InboxOldestPendingAge sets queuebox_inbox_oldest_pending_age_seconds.
func (r *Registry) InboxOldestPendingAge(age time.Duration) { r.inboxOldestAge.Set(age.Seconds()) }

// Cleanup records one retention run of a table.
func (r *Registry) Cleanup(table string, deleted int64, d time.Duration, at time.Time) {
	r.cleanupDeleted.WithLabelValues(table).Add(float64(deleted))
	r.cleanupDuration.observe(d, table)
	r.cleanupLastRunTime.WithLabelValues(table).Set(float64(at.Unix()))
}

// promFactory registers the families of a Registry and describes each one (Family).
type promFactory struct {
	reg      *prometheus.Registry
	families *[]Family
}

// factory returns the promFactory of r.
func (r *Registry) factory() promFactory { return promFactory{reg: r.reg, families: &r.families} }

// describe records the description of a family that f registers.
func (f promFactory) describe(typ, name, help string, labels []string) {
	*f.families = append(*f.families, Family{Name: name, Type: typ, Help: help, Labels: slices.Clone(labels)})
}

func (f promFactory) counter(name, help string) prometheus.Counter {
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
	f.reg.MustRegister(c)
	f.describe("counter", name, help, nil)
	return c
}

func (f promFactory) counterVec(name, help string, labels ...string) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
	f.reg.MustRegister(c)
	f.describe("counter", name, help, labels)
	return c
}

func (f promFactory) gauge(name, help string) prometheus.Gauge {
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: help})
	f.reg.MustRegister(g)
	f.describe("gauge", name, help, nil)
	return g
}

func (f promFactory) gaugeFunc(name, help string, fn func() float64) {
	f.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, fn))
	f.describe("gauge", name, help, nil)
}

func (f promFactory) gaugeVec(name, help string, labels ...string) *prometheus.GaugeVec {
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, labels)
	f.reg.MustRegister(g)
	f.describe("gauge", name, help, labels)
	return g
}

// timer is a summary with quantiles plus a _max gauge over a decaying window.
type timer struct {
	summary *prometheus.SummaryVec
	maxes   *prometheus.GaugeVec

	mu      sync.Mutex
	windows map[string]*maxWindow
}

func (f promFactory) timer(name, help string, labels ...string) *timer {
	t := &timer{
		summary: prometheus.NewSummaryVec(prometheus.SummaryOpts{
			Name: name, Help: help, Objectives: objectives, MaxAge: Window, AgeBuckets: 3,
		}, labels),
		windows: map[string]*maxWindow{},
	}
	maxHelp := "The largest value of the current window of " + name + "."
	t.maxes = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name + "_max", Help: maxHelp}, labels)
	f.reg.MustRegister(t.summary, t.maxes)
	f.describe("summary", name, help, labels)
	fam := &(*f.families)[len(*f.families)-1]
	for q := range objectives {
		fam.Quantiles = append(fam.Quantiles, q)
	}
	slices.Sort(fam.Quantiles)
	f.describe("gauge", name+"_max", maxHelp, labels)
	return t
}

func (t *timer) observe(d time.Duration, labels ...string) {
	s := d.Seconds()
	t.summary.WithLabelValues(labels...).Observe(s)
	key := ""
	for _, l := range labels {
		key += l + "\x00"
	}
	t.mu.Lock()
	w := t.windows[key]
	if w == nil {
		w = &maxWindow{}
		t.windows[key] = w
	}
	m := w.observe(time.Now(), s)
	t.mu.Unlock()
	t.maxes.WithLabelValues(labels...).Set(m)
}

// maxWindow keeps the largest value seen over the last Window, in three rotating buckets.
type maxWindow struct {
	buckets [3]float64
	rotated time.Time
	index   int
}

func (w *maxWindow) observe(now time.Time, v float64) float64 {
	step := Window / 3
	if w.rotated.IsZero() {
		w.rotated = now
	}
	for now.Sub(w.rotated) >= step {
		w.index = (w.index + 1) % len(w.buckets)
		w.buckets[w.index] = 0
		w.rotated = w.rotated.Add(step)
		if now.Sub(w.rotated) > Window {
			w.buckets = [3]float64{}
			w.rotated = now
		}
	}
	if v > w.buckets[w.index] {
		w.buckets[w.index] = v
	}
	m := 0.0
	for _, b := range w.buckets {
		m = max(m, b)
	}
	return m
}
