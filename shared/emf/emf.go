// Package emf records the measurements of spec/28-metrics.md in a Lambda function and writes
// them as CloudWatch Embedded Metric Format (EMF) log lines, since nothing scrapes a Lambda
// function. A Recorder implements the metrics interfaces of the outbox cycle
// (outbox.Metrics), the HTTP publisher (webhook.Metrics), the HTTP inbox (inbox.Metrics), the
// inbox relay (relay.Metrics), the retention cleanup (retention.Metrics) and the web console's
// logins (console.Metrics, an extension: queuebox_console_logins_total). It accumulates
// during an invocation, and Flush, called once at the end of the invocation, writes one JSON
// line per set of dimension values:
//
//	{"_aws":{"Timestamp":1767225600000,"CloudWatchMetrics":[{"Namespace":"QueueBox",
//	"Dimensions":[["destination","outcome"]],"Metrics":[{"Name":"queuebox_outbox_destination_messages_total","Unit":"Count"}]}]},
//	"destination":"orders-api","outcome":"success","queuebox_outbox_destination_messages_total":3}
//
// (one line in the log; wrapped here). CloudWatch Logs extracts the metrics from the lines of
// the function's log group; no API call and no permission beyond the log group's is needed.
//
// The names and the dimensions are those of the Prometheus scrape (spec/28-metrics.md): a
// Prometheus label is an EMF dimension of the same name. The values differ from a scrape in
// the way EMF works:
//
//   - a counter is the increase during the invocation (unit Count); CloudWatch's Sum over a
//     period is the increase over that period;
//   - a timer (a _seconds summary) is the list of observed values in seconds (unit Seconds);
//     CloudWatch computes the percentiles, the maximum (the _max gauge of the scrape) and the
//     sample count from them. A line holds at most 100 values, so a timer with more values
//     takes more lines; past MaxValues observations per invocation a uniform sample of
//     MaxValues values is kept (the percentiles stay right, SampleCount is capped; the
//     counters give the exact counts);
//   - a gauge is its last value in the invocation (unit Count, Seconds for an age, None for
//     a timestamp). A gauge that the invocation did not set is not written.
//
// queuebox_info and queuebox_uptime_seconds have no meaning per invocation and are not
// written; the hikaricp_connections_* families are not recorded either.
//
// The package imports no Prometheus code, so a function binary does not link it.
package emf

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"
)

// DefaultNamespace is the CloudWatch namespace of the metrics when Options.Namespace is empty.
const DefaultNamespace = "QueueBox"

// MaxValues is the default cap of the values that one timer series keeps per invocation.
const MaxValues = 1000

// EmptyValue stands for an empty dimension value, which CloudWatch does not accept.
const EmptyValue = "none"

// valuesPerLine is the EMF limit of the values of one metric in one line.
const valuesPerLine = 100

// metricsPerDirective is the EMF limit of the metrics of one directive.
const metricsPerDirective = 100

// Unit is a CloudWatch unit of an EMF metric definition.
type Unit string

// The units that QueueBox's metrics use.
const (
	Count   Unit = "Count"
	Seconds Unit = "Seconds"
	None    Unit = "None"
)

// Options are the inputs of New.
type Options struct {
	// Namespace is the CloudWatch namespace. Default "QueueBox" (DefaultNamespace).
	Namespace string
	// Now is the clock of the Timestamp of the lines. Nil means time.Now.
	Now func() time.Time
	// MaxValues caps the values that one timer series keeps between two flushes. Default
	// 1000 (MaxValues).
	MaxValues int
}

// kind is how a series accumulates.
type kind int

const (
	counter kind = iota
	gauge
	timer
)

// dim is one dimension of a series: a Prometheus label and its value.
type dim struct{ name, value string }

// seriesKey identifies a series: a metric name and its dimension values, in label order.
type seriesKey struct {
	name string
	dims string // the dimensions encoded by encodeDims
}

type series struct {
	kind  kind
	unit  Unit
	dims  []dim
	value float64   // counter: the sum; gauge: the last value
	vals  []float64 // timer: the kept observations
	seen  int       // timer: every observation, for the reservoir sample
}

// Recorder accumulates the measurements of one function between two flushes. Its methods are
// safe for concurrent use; the outbox cycle calls them from many goroutines.
type Recorder struct {
	namespace string
	now       func() time.Time
	maxValues int

	mu     sync.Mutex
	series map[seriesKey]*series
}

// New returns an empty Recorder.
func New(opts Options) *Recorder {
	r := &Recorder{namespace: opts.Namespace, now: opts.Now, maxValues: opts.MaxValues,
		series: map[seriesKey]*series{}}
	if r.namespace == "" {
		r.namespace = DefaultNamespace
	}
	if r.now == nil {
		r.now = time.Now
	}
	if r.maxValues <= 0 {
		r.maxValues = MaxValues
	}
	return r
}

// Outcome counts queuebox_outbox_messages_total{status}: sent, failed or dead.
func (r *Recorder) Outcome(status string) {
	r.add("queuebox_outbox_messages_total", 1, dim{"status", status})
}

// ClaimLost counts queuebox_claims_lost_total{component="outbox"}.
func (r *Recorder) ClaimLost() {
	r.add("queuebox_claims_lost_total", 1, dim{"component", "outbox"})
}

// InboxClaimLost counts queuebox_claims_lost_total{component="inbox"}.
func (r *Recorder) InboxClaimLost() {
	r.add("queuebox_claims_lost_total", 1, dim{"component", "inbox"})
}

// Reclaimed counts queuebox_outbox_messages_reclaimed_total.
func (r *Recorder) Reclaimed(n int) {
	if n > 0 {
		r.add("queuebox_outbox_messages_reclaimed_total", float64(n))
	}
}

// ProcessError counts queuebox_outbox_process_errors_total.
func (r *Recorder) ProcessError() {
	r.add("queuebox_outbox_process_errors_total", 1)
}

// ProcessingDuration observes queuebox_outbox_processing_duration_seconds.
func (r *Recorder) ProcessingDuration(d time.Duration) {
	r.observe("queuebox_outbox_processing_duration_seconds", d)
}

// PublishDuration observes queuebox_outbox_publish_duration_seconds{destination_type}.
func (r *Recorder) PublishDuration(destinationType string, d time.Duration) {
	r.observe("queuebox_outbox_publish_duration_seconds", d, dim{"destination_type", destinationType})
}

// DestinationOutcome counts queuebox_outbox_destination_messages_total{destination,outcome}.
func (r *Recorder) DestinationOutcome(destination, outcome string) {
	r.add("queuebox_outbox_destination_messages_total", 1,
		dim{"destination", destination}, dim{"outcome", outcome})
}

// Pending sets queuebox_outbox_messages_pending and
// queuebox_outbox_oldest_pending_age_seconds.
func (r *Recorder) Pending(count int64, oldestAge time.Duration) {
	r.set("queuebox_outbox_messages_pending", Count, float64(count))
	r.set("queuebox_outbox_oldest_pending_age_seconds", Seconds, oldestAge.Seconds())
}

// QueueDepth sets queuebox_outbox_queue_depth{destination}.
func (r *Recorder) QueueDepth(destination string, count int64) {
	r.set("queuebox_outbox_queue_depth", Count, float64(count), dim{"destination", destination})
}

// Deferred counts queuebox_outbox_deferred_total{destination,reason} (outbox.ControlMetrics).
func (r *Recorder) Deferred(destination, reason string) {
	r.add("queuebox_outbox_deferred_total", 1, dim{"destination", destination}, dim{"reason", reason})
}

// HeaderNotCarried counts queuebox_outbox_headers_not_carried_total{destination,action}
// (outbox.HeaderMetrics).
func (r *Recorder) HeaderNotCarried(destination, action string) {
	r.add("queuebox_outbox_headers_not_carried_total", 1, dim{"destination", destination}, dim{"action", action})
}

// LeaseDeadline counts queuebox_lease_deadline_total{component} (lease.Metrics).
func (r *Recorder) LeaseDeadline(component string) {
	r.add("queuebox_lease_deadline_total", 1, dim{"component", component})
}

// DestinationState sets queuebox_destination_paused and queuebox_destination_circuit_open of a
// destination (outbox.ControlMetrics).
func (r *Recorder) DestinationState(destination string, paused, circuitOpen bool) {
	p, o := 0.0, 0.0
	if paused {
		p = 1
	}
	if circuitOpen {
		o = 1
	}
	r.set("queuebox_destination_paused", Count, p, dim{"destination", destination})
	r.set("queuebox_destination_circuit_open", Count, o, dim{"destination", destination})
}

// ConsoleLogin counts queuebox_console_logins_total{outcome}, the logins to the web console of
// the admin function (console.Metrics; docs/console.md).
func (r *Recorder) ConsoleLogin(outcome string) {
	r.add("queuebox_console_logins_total", 1, dim{"outcome", outcome})
}

// HTTPResponse counts queuebox_http_publish_responses_total{status_class}.
func (r *Recorder) HTTPResponse(statusClass string) {
	r.add("queuebox_http_publish_responses_total", 1, dim{"status_class", statusClass})
}

// TransformFailure counts queuebox_transform_failures_total{strategy}.
func (r *Recorder) TransformFailure(strategy string) {
	r.add("queuebox_transform_failures_total", 1, dim{"strategy", strategy})
}

// InboxMessage counts queuebox_inbox_messages_total{status}: new, forwarded or duplicate.
func (r *Recorder) InboxMessage(status string) {
	r.add("queuebox_inbox_messages_total", 1, dim{"status", status})
}

// InboxRejection counts queuebox_inbox_rejections_total{reason}.
func (r *Recorder) InboxRejection(reason string) {
	r.add("queuebox_inbox_rejections_total", 1, dim{"reason", reason})
}

// InboxFiltered counts queuebox_inbox_filtered_total{source}.
func (r *Recorder) InboxFiltered(source string) {
	r.add("queuebox_inbox_filtered_total", 1, dim{"source", source})
}

// InboxRelayError counts queuebox_inbox_relay_errors_total.
func (r *Recorder) InboxRelayError() {
	r.add("queuebox_inbox_relay_errors_total", 1)
}

// InboxOldestPendingAge sets queuebox_inbox_oldest_pending_age_seconds.
func (r *Recorder) InboxOldestPendingAge(age time.Duration) {
	r.set("queuebox_inbox_oldest_pending_age_seconds", Seconds, age.Seconds())
}

// Cleanup records one retention run of table: queuebox_cleanup_messages_deleted_total,
// queuebox_cleanup_duration_seconds and queuebox_cleanup_last_run_timestamp (Unix seconds),
// each with the dimension table.
func (r *Recorder) Cleanup(table string, deleted int64, d time.Duration, at time.Time) {
	t := dim{"table", table}
	r.add("queuebox_cleanup_messages_deleted_total", float64(max(deleted, 0)), t)
	r.observe("queuebox_cleanup_duration_seconds", d, t)
	r.set("queuebox_cleanup_last_run_timestamp", None, float64(at.Unix()), t)
}

func (r *Recorder) add(name string, v float64, dims ...dim) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.get(name, counter, Count, dims).value += v
}

func (r *Recorder) set(name string, unit Unit, v float64, dims ...dim) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.get(name, gauge, unit, dims).value = v
}

func (r *Recorder) observe(name string, d time.Duration, dims ...dim) {
	v := d.Seconds()
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.get(name, timer, Seconds, dims)
	s.seen++
	if len(s.vals) < r.maxValues {
		s.vals = append(s.vals, v)
		return
	}
	// Reservoir sampling (algorithm R): every observation stays with the same probability.
	if i := rand.IntN(s.seen); i < len(s.vals) {
		s.vals[i] = v
	}
}

// get returns the series of name and dims, creating it. r.mu is held.
func (r *Recorder) get(name string, k kind, unit Unit, dims []dim) *series {
	for i := range dims {
		if dims[i].value == "" {
			// CloudWatch refuses an empty dimension value, and with it the whole line.
			dims[i].value = EmptyValue
		}
	}
	key := seriesKey{name: name, dims: encodeDims(dims)}
	s := r.series[key]
	if s == nil {
		s = &series{kind: k, unit: unit, dims: slices.Clone(dims)}
		r.series[key] = s
	}
	return s
}

// encodeDims joins the dimensions into a map key that no two different lists share.
func encodeDims(dims []dim) string {
	var b strings.Builder
	for _, d := range dims {
		fmt.Fprintf(&b, "%d:%s%d:%s", len(d.name), d.name, len(d.value), d.value)
	}
	return b.String()
}

// Flush writes what the Recorder accumulated since the last flush to w as EMF lines, one
// Write per line, and starts over empty. It writes nothing when nothing was recorded. A
// function calls it at the end of every invocation, with os.Stdout, so that the lines reach
// the function's log group before Lambda freezes the process.
//
// Lines group the metrics that have exactly the same dimensions and values: one line for the
// metrics without dimensions, one per destination and outcome, and so on, in a stable order.
// Measurements recorded while Flush runs go to the next flush.
func (r *Recorder) Flush(w io.Writer) error {
	r.mu.Lock()
	taken := r.series
	r.series = map[seriesKey]*series{}
	r.mu.Unlock()
	if len(taken) == 0 {
		return nil
	}
	for _, line := range r.lines(taken) {
		if _, err := w.Write(line); err != nil {
			return fmt.Errorf("writing metrics line: %w", err)
		}
	}
	return nil
}

// group is the metrics of one set of dimension values.
type group struct {
	dims   []dim
	keys   []seriesKey
	series []*series
}

// lines encodes the series as EMF lines, each ending in a newline.
func (r *Recorder) lines(taken map[seriesKey]*series) [][]byte {
	groups := map[string]*group{}
	var order []string
	for key, s := range taken {
		gk := key.dims
		g := groups[gk]
		if g == nil {
			g = &group{dims: s.dims}
			groups[gk] = g
			order = append(order, gk)
		}
		g.keys = append(g.keys, key)
		g.series = append(g.series, s)
	}
	slices.Sort(order)
	ts := r.now().UnixMilli()
	var out [][]byte
	for _, gk := range order {
		g := groups[gk]
		idx := make([]int, len(g.keys))
		for i := range idx {
			idx[i] = i
		}
		slices.SortFunc(idx, func(a, b int) int { return strings.Compare(g.keys[a].name, g.keys[b].name) })
		out = append(out, r.groupLines(ts, g, idx)...)
	}
	return out
}

// groupLines encodes one group: a first line with every metric (a timer with its first 100
// values), then as many lines as the longest timer needs for the rest of its values, each
// with only the timers that still have values. A line holds at most 100 metrics.
func (r *Recorder) groupLines(ts int64, g *group, idx []int) [][]byte {
	var out [][]byte
	for offset := 0; ; offset += valuesPerLine {
		var names []string
		var units []Unit
		var values []any
		for _, i := range idx {
			s := g.series[i]
			switch {
			case s.kind != timer && offset == 0:
				values = append(values, number(s.value))
			case s.kind == timer && offset < len(s.vals):
				chunk := s.vals[offset:min(offset+valuesPerLine, len(s.vals))]
				vs := make([]json.Number, len(chunk))
				for j, v := range chunk {
					vs[j] = number(v)
				}
				values = append(values, vs)
			default:
				continue
			}
			names = append(names, g.keys[i].name)
			units = append(units, s.unit)
		}
		if len(names) == 0 {
			return out
		}
		for start := 0; start < len(names); start += metricsPerDirective {
			end := min(start+metricsPerDirective, len(names))
			out = append(out, r.encodeLine(ts, g.dims, names[start:end], units[start:end], values[start:end]))
		}
	}
}

// encodeLine writes one EMF document: the _aws metadata, the dimension values, then the
// metric values, as one line.
func (r *Recorder) encodeLine(ts int64, dims []dim, names []string, units []Unit, values []any) []byte {
	var b strings.Builder
	b.WriteString(`{"_aws":{"Timestamp":`)
	fmt.Fprintf(&b, "%d", ts)
	b.WriteString(`,"CloudWatchMetrics":[{"Namespace":`)
	writeJSON(&b, r.namespace)
	b.WriteString(`,"Dimensions":[[`)
	for i, d := range dims {
		if i > 0 {
			b.WriteByte(',')
		}
		writeJSON(&b, d.name)
	}
	b.WriteString(`]],"Metrics":[`)
	for i, name := range names {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`{"Name":`)
		writeJSON(&b, name)
		b.WriteString(`,"Unit":`)
		writeJSON(&b, string(units[i]))
		b.WriteByte('}')
	}
	b.WriteString(`]}]}`)
	for _, d := range dims {
		b.WriteByte(',')
		writeJSON(&b, d.name)
		b.WriteByte(':')
		writeJSON(&b, d.value)
	}
	for i, name := range names {
		b.WriteByte(',')
		writeJSON(&b, name)
		b.WriteByte(':')
		writeJSON(&b, values[i])
	}
	b.WriteString("}\n")
	return []byte(b.String())
}

// writeJSON writes v as JSON. Strings, numbers and lists of numbers never fail to encode.
func writeJSON(b *strings.Builder, v any) {
	data, err := json.Marshal(v)
	if err != nil {
		data = []byte("null")
	}
	b.Write(data)
}

// number formats v in the shortest form that reads back as v, and 0 for a value that JSON
// cannot hold (NaN, ±Inf).
func number(v float64) json.Number {
	if v != v || v > 1.7976931348623157e308 || v < -1.7976931348623157e308 {
		return "0"
	}
	data, _ := json.Marshal(v)
	return json.Number(data)
}

// Wrap returns a handler that runs h and then flushes r to w, whatever h returned (also
// when it panics), so that every invocation ends with its metrics lines. A write error is
// dropped: losing a metrics line must not fail the invocation.
func Wrap[TIn, TOut any](r *Recorder, w io.Writer, h func(context.Context, TIn) (TOut, error)) func(context.Context, TIn) (TOut, error) {
	return func(ctx context.Context, in TIn) (TOut, error) {
		defer func() { _ = r.Flush(w) }()
		return h(ctx, in)
	}
}
