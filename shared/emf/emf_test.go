package emf_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/alternayte/queuebox/shared/connect/webhook"
	"github.com/alternayte/queuebox/shared/console"
	"github.com/alternayte/queuebox/shared/emf"
	"github.com/alternayte/queuebox/shared/inbox"
	"github.com/alternayte/queuebox/shared/lease"
	"github.com/alternayte/queuebox/shared/outbox"
	"github.com/alternayte/queuebox/shared/relay"
	"github.com/alternayte/queuebox/shared/retention"
	"github.com/alternayte/queuebox/shared/specdocs"
)

// The Recorder is every metrics sink that a Lambda function hands to the cycles.
var (
	_ outbox.Metrics    = (*emf.Recorder)(nil)
	_ webhook.Metrics   = (*emf.Recorder)(nil)
	_ inbox.Metrics     = (*emf.Recorder)(nil)
	_ relay.Metrics     = (*emf.Recorder)(nil)
	_ retention.Metrics = (*emf.Recorder)(nil)
	_ lease.Metrics     = (*emf.Recorder)(nil)
)

// metricsPage is spec/28-metrics.md, read with specdocs.
const metricsPage = "28-metrics.md"

var fixedNow = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func newRecorder() *emf.Recorder {
	return emf.New(emf.Options{Now: func() time.Time { return fixedNow }})
}

// line is one decoded EMF document.
type line struct {
	Namespace string
	Timestamp int64
	DimNames  []string
	Metrics   map[string]string // name -> unit
	Root      map[string]any
	DimValues map[string]string
}

// decodeLines parses every line of out as an EMF document and checks the structure that
// CloudWatch requires: one directive, one dimension set whose members are string members of
// the root, and a root member for every metric.
func decodeLines(t *testing.T, out []byte) []line {
	t.Helper()
	var lines []line
	text := string(out)
	require.True(t, text == "" || strings.HasSuffix(text, "\n"), "the output ends with a newline")
	for _, raw := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
		if raw == "" {
			continue
		}
		var doc struct {
			AWS struct {
				Timestamp         *int64
				CloudWatchMetrics []struct {
					Namespace  string
					Dimensions [][]string
					Metrics    []struct{ Name, Unit string }
				}
			} `json:"_aws"`
		}
		require.NoError(t, json.Unmarshal([]byte(raw), &doc), "line %s", raw)
		var root map[string]any
		require.NoError(t, json.Unmarshal([]byte(raw), &root))
		require.NotNil(t, doc.AWS.Timestamp, "line %s has _aws.Timestamp", raw)
		require.Len(t, doc.AWS.CloudWatchMetrics, 1, "line %s has one directive", raw)
		dir := doc.AWS.CloudWatchMetrics[0]
		require.Len(t, dir.Dimensions, 1, "line %s has one dimension set", raw)
		require.NotEmpty(t, dir.Metrics)
		require.LessOrEqual(t, len(dir.Metrics), 100)
		l := line{
			Namespace: dir.Namespace, Timestamp: *doc.AWS.Timestamp, DimNames: dir.Dimensions[0],
			Metrics: map[string]string{}, Root: root, DimValues: map[string]string{},
		}
		for _, name := range l.DimNames {
			v, ok := root[name].(string)
			require.True(t, ok, "dimension %s of line %s is a string member", name, raw)
			require.NotEmpty(t, v)
			l.DimValues[name] = v
		}
		for _, m := range dir.Metrics {
			l.Metrics[m.Name] = m.Unit
			switch v := root[m.Name].(type) {
			case float64:
			case []any:
				require.LessOrEqual(t, len(v), 100, "metric %s holds at most 100 values", m.Name)
				for _, x := range v {
					_, ok := x.(float64)
					require.True(t, ok, "metric %s holds numbers", m.Name)
				}
			default:
				t.Fatalf("metric %s of line %s has value %v", m.Name, raw, root[m.Name])
			}
		}
		// Nothing else: _aws, the dimensions and the metrics.
		require.Equal(t, 1+len(l.DimNames)+len(l.Metrics), len(root), "members of line %s", raw)
		lines = append(lines, l)
	}
	return lines
}

func flush(t *testing.T, r *emf.Recorder) []byte {
	t.Helper()
	var buf bytes.Buffer
	require.NoError(t, r.Flush(&buf))
	return buf.Bytes()
}

func TestFlushWritesTheDocumentedLine(t *testing.T) {
	t.Parallel()
	r := newRecorder()
	for range 3 {
		r.DestinationOutcome("orders-api", "success")
	}
	want := `{"_aws":{"Timestamp":1767225600000,"CloudWatchMetrics":[{"Namespace":"QueueBox",` +
		`"Dimensions":[["destination","outcome"]],"Metrics":[{"Name":"queuebox_outbox_destination_messages_total","Unit":"Count"}]}]},` +
		`"destination":"orders-api","outcome":"success","queuebox_outbox_destination_messages_total":3}` + "\n"
	assert.Equal(t, want, string(flush(t, r)))
}

// call records one measurement of every kind, as the cycles do.
var calls = []struct {
	name string
	do   func(r *emf.Recorder)
}{
	{"Outcome", func(r *emf.Recorder) { r.Outcome("sent") }},
	{"ClaimLost", func(r *emf.Recorder) { r.ClaimLost() }},
	{"InboxClaimLost", func(r *emf.Recorder) { r.InboxClaimLost() }},
	{"Reclaimed", func(r *emf.Recorder) { r.Reclaimed(2) }},
	{"ProcessError", func(r *emf.Recorder) { r.ProcessError() }},
	{"ProcessingDuration", func(r *emf.Recorder) { r.ProcessingDuration(15 * time.Millisecond) }},
	{"PublishDuration", func(r *emf.Recorder) { r.PublishDuration("http", 12*time.Millisecond) }},
	{"DestinationOutcome", func(r *emf.Recorder) { r.DestinationOutcome("orders", "failure") }},
	{"Pending", func(r *emf.Recorder) { r.Pending(7, 1500*time.Millisecond) }},
	{"QueueDepth", func(r *emf.Recorder) { r.QueueDepth("orders", 4) }},
	{"HTTPResponse", func(r *emf.Recorder) { r.HTTPResponse("2xx") }},
	{"TransformFailure", func(r *emf.Recorder) { r.TransformFailure("dead") }},
	{"InboxMessage", func(r *emf.Recorder) { r.InboxMessage("new") }},
	{"InboxRejection", func(r *emf.Recorder) { r.InboxRejection("storage_failed") }},
	{"InboxFiltered", func(r *emf.Recorder) { r.InboxFiltered("stripe") }},
	{"InboxRelayError", func(r *emf.Recorder) { r.InboxRelayError() }},
	{"InboxOldestPendingAge", func(r *emf.Recorder) { r.InboxOldestPendingAge(3 * time.Second) }},
	{"Cleanup", func(r *emf.Recorder) { r.Cleanup("outbox", 120, 2*time.Second, fixedNow) }},
}

// docMetric is a row of the metrics tables of spec/28.
type docMetric struct {
	typ    string
	labels []string
}

var (
	docRow     = regexp.MustCompile("^\\|\\s*`([^`]+)`\\s*\\|\\s*([^|]*?)\\s*\\|\\s*([^|]*?)\\s*\\|")
	backticked = regexp.MustCompile("`([^`]+)`")
)

func readMetricsPage(t *testing.T) map[string]docMetric {
	t.Helper()
	page := specdocs.Read(t, metricsPage)
	docs := map[string]docMetric{}
	for _, row := range strings.Split(page, "\n") {
		m := docRow.FindStringSubmatch(row)
		if m == nil {
			continue
		}
		names := m[3]
		if n, _, ok := strings.Cut(names, "="); ok {
			names = n
		} else if n, _, ok := strings.Cut(names, "`:"); ok {
			names = n + "`"
		}
		labels := []string{}
		if strings.TrimSpace(m[3]) != "none" {
			for _, b := range backticked.FindAllStringSubmatch(names, -1) {
				labels = append(labels, b[1])
			}
		}
		slices.Sort(labels)
		docs[m[1]] = docMetric{typ: m[2], labels: labels}
	}
	require.Contains(t, docs, "queuebox_outbox_messages_total", "the page still has its metrics table")
	return docs
}

// TestEveryMetricIsDocumented records one measurement with every method and checks each
// metric of the output against spec/28: the name, the dimensions (the tags), and the unit
// (Seconds for a _seconds name, None for the timestamp, Count for the rest).
func TestEveryMetricIsDocumented(t *testing.T) {
	t.Parallel()
	docs := readMetricsPage(t)
	r := newRecorder()
	for _, c := range calls {
		c.do(r)
	}
	seen := map[string]bool{}
	for _, l := range decodeLines(t, flush(t, r)) {
		assert.Equal(t, "QueueBox", l.Namespace)
		assert.Equal(t, fixedNow.UnixMilli(), l.Timestamp)
		for name, unit := range l.Metrics {
			seen[name] = true
			doc, ok := docs[name]
			if !assert.True(t, ok, "metric %s is in spec/28", name) {
				continue
			}
			dims := slices.Clone(l.DimNames)
			slices.Sort(dims)
			assert.Equal(t, doc.labels, dims, "the dimensions of %s are its documented tags", name)
			wantUnit := "Count"
			switch {
			case strings.HasSuffix(name, "_seconds"):
				wantUnit = "Seconds"
			case strings.HasSuffix(name, "_timestamp"):
				wantUnit = "None"
			}
			assert.Equal(t, wantUnit, unit, "the unit of %s", name)
			if doc.typ == "summary" {
				assert.IsType(t, []any{}, l.Root[name], "%s is a list of values", name)
			} else {
				assert.IsType(t, float64(0), l.Root[name], "%s is one value", name)
			}
		}
	}
	// Every QueueBox metric of the page but the process-wide ones and the _max gauges.
	for name := range docs {
		if !strings.HasPrefix(name, "queuebox_") || strings.HasSuffix(name, "_max") ||
			name == "queuebox_uptime_seconds" {
			continue
		}
		assert.True(t, seen[name], "documented metric %s is written", name)
	}
}

func TestFlushValues(t *testing.T) {
	t.Parallel()
	r := newRecorder()
	r.Outcome("sent")
	r.Outcome("sent")
	r.Outcome("dead")
	r.Reclaimed(3)
	r.Reclaimed(0) // nothing to count
	r.Pending(10, time.Second)
	r.Pending(4, 2500*time.Millisecond) // a gauge keeps its last value
	r.ProcessingDuration(10 * time.Millisecond)
	r.ProcessingDuration(30 * time.Millisecond)
	r.Cleanup("inbox", 5, 250*time.Millisecond, fixedNow)
	r.DestinationOutcome("", "success") // an empty value would void the line

	lines := decodeLines(t, flush(t, r))
	byDims := map[string]line{}
	for _, l := range lines {
		var key []string
		for _, n := range l.DimNames {
			key = append(key, n+"="+l.DimValues[n])
		}
		k := strings.Join(key, ",")
		require.NotContains(t, byDims, k, "one line per set of dimension values")
		byDims[k] = l
	}
	require.Len(t, byDims, 5)

	plain := byDims[""]
	assert.Equal(t, []string{}, plain.DimNames, "the line without dimensions has an empty dimension set")
	assert.Equal(t, 3.0, plain.Root["queuebox_outbox_messages_reclaimed_total"])
	assert.Equal(t, 4.0, plain.Root["queuebox_outbox_messages_pending"])
	assert.Equal(t, 2.5, plain.Root["queuebox_outbox_oldest_pending_age_seconds"])
	assert.Equal(t, []any{0.01, 0.03}, plain.Root["queuebox_outbox_processing_duration_seconds"])

	assert.Equal(t, 2.0, byDims["status=sent"].Root["queuebox_outbox_messages_total"])
	assert.Equal(t, 1.0, byDims["status=dead"].Root["queuebox_outbox_messages_total"])

	cleanup := byDims["table=inbox"]
	assert.Equal(t, 5.0, cleanup.Root["queuebox_cleanup_messages_deleted_total"])
	assert.Equal(t, []any{0.25}, cleanup.Root["queuebox_cleanup_duration_seconds"])
	assert.Equal(t, float64(fixedNow.Unix()), cleanup.Root["queuebox_cleanup_last_run_timestamp"])

	assert.Equal(t, 1.0, byDims["destination="+emf.EmptyValue+",outcome=success"].Root["queuebox_outbox_destination_messages_total"])

	// Flush starts over: nothing more to write, and a new measurement stands alone.
	assert.Empty(t, flush(t, r))
	r.Outcome("sent")
	again := decodeLines(t, flush(t, r))
	require.Len(t, again, 1)
	assert.Equal(t, 1.0, again[0].Root["queuebox_outbox_messages_total"])
}

func TestTimerValuesSplitAcrossLines(t *testing.T) {
	t.Parallel()
	r := newRecorder()
	for i := range 250 {
		r.PublishDuration("http", time.Duration(i+1)*time.Millisecond)
	}
	r.PublishDuration("kafka", time.Millisecond)
	r.ProcessingDuration(time.Millisecond)
	r.ProcessError()

	var http []float64
	var httpLines int
	for _, l := range decodeLines(t, flush(t, r)) {
		if l.DimValues["destination_type"] != "http" {
			continue
		}
		httpLines++
		for _, v := range l.Root["queuebox_outbox_publish_duration_seconds"].([]any) {
			http = append(http, v.(float64))
		}
	}
	assert.Equal(t, 3, httpLines, "250 values take three lines of at most 100")
	require.Len(t, http, 250)
	for i, v := range http {
		assert.InDelta(t, float64(i+1)/1000, v, 1e-12)
	}
}

func TestTimerKeepsAtMostMaxValues(t *testing.T) {
	t.Parallel()
	r := emf.New(emf.Options{MaxValues: 150})
	for i := range 10_000 {
		r.ProcessingDuration(time.Duration(i) * time.Microsecond)
	}
	var n int
	for _, l := range decodeLines(t, flush(t, r)) {
		n += len(l.Root["queuebox_outbox_processing_duration_seconds"].([]any))
	}
	assert.Equal(t, 150, n)
}

// TestConcurrentUse records from many goroutines while another flushes, and checks that
// every count arrives in exactly one flush.
func TestConcurrentUse(t *testing.T) {
	t.Parallel()
	r := newRecorder()
	const workers, perWorker = 8, 500
	var out bytes.Buffer
	stop := make(chan struct{})
	flushed := make(chan struct{})
	go func() {
		defer close(flushed)
		for {
			select {
			case <-stop:
				return
			default:
			}
			if err := r.Flush(&out); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range perWorker {
				r.DestinationOutcome(fmt.Sprintf("d%d", w%2), "success")
				r.PublishDuration("http", time.Millisecond)
				r.QueueDepth("d", int64(w))
			}
		}()
	}
	wg.Wait()
	close(stop)
	<-flushed
	require.NoError(t, r.Flush(&out))

	var total, values float64
	for _, l := range decodeLines(t, out.Bytes()) {
		if v, ok := l.Root["queuebox_outbox_destination_messages_total"].(float64); ok {
			total += v
		}
		if vs, ok := l.Root["queuebox_outbox_publish_duration_seconds"].([]any); ok {
			values += float64(len(vs))
		}
	}
	assert.Equal(t, float64(workers*perWorker), total)
	assert.LessOrEqual(t, values, float64(workers*perWorker))
	assert.Positive(t, values)
}

func TestWrapFlushesAfterEveryInvocation(t *testing.T) {
	t.Parallel()
	r := newRecorder()
	var out bytes.Buffer
	boom := errors.New("boom")
	h := emf.Wrap(r, &out, func(_ context.Context, n int) (int, error) {
		for range n {
			r.Outcome("sent")
		}
		if n == 0 {
			return 0, boom
		}
		if n < 0 {
			panic("negative")
		}
		return n, nil
	})

	got, err := h(context.Background(), 2)
	require.NoError(t, err)
	assert.Equal(t, 2, got)
	lines := decodeLines(t, out.Bytes())
	require.Len(t, lines, 1)
	assert.Equal(t, 2.0, lines[0].Root["queuebox_outbox_messages_total"])

	out.Reset()
	r.ProcessError()
	_, err = h(context.Background(), 0)
	require.ErrorIs(t, err, boom)
	require.Len(t, decodeLines(t, out.Bytes()), 1, "a failed invocation flushes too")

	out.Reset()
	r.ProcessError()
	require.Panics(t, func() { _, _ = h(context.Background(), -1) })
	require.Len(t, decodeLines(t, out.Bytes()), 1, "a panicking invocation flushes too")
}

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("closed") }

func TestFlushReportsAWriteError(t *testing.T) {
	t.Parallel()
	r := newRecorder()
	r.ProcessError()
	err := r.Flush(failingWriter{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "writing metrics line")
}

// The console of the admin function counts its logins through the Recorder.
var _ console.Metrics = (*emf.Recorder)(nil)

// TestConsoleLoginsAreWritten: the console's login counter, an extension beyond the metrics
// page, is written with its outcome as the dimension, as the scrape labels it.
func TestConsoleLoginsAreWritten(t *testing.T) {
	t.Parallel()
	r := newRecorder()
	r.ConsoleLogin("refused")
	r.ConsoleLogin("refused")
	r.ConsoleLogin("limited_client")
	lines := decodeLines(t, flush(t, r))
	got := map[string]any{}
	for _, l := range lines {
		assert.Equal(t, []string{"outcome"}, l.DimNames)
		assert.Equal(t, "Count", l.Metrics["queuebox_console_logins_total"])
		got[l.DimValues["outcome"]] = l.Root["queuebox_console_logins_total"]
	}
	assert.Equal(t, map[string]any{"refused": 2.0, "limited_client": 1.0}, got)
}

// TestHeaderNotCarried writes the extension metric of docs/headers.md: a count per
// destination and action, as the Prometheus registry counts it.
func TestHeaderNotCarried(t *testing.T) {
	t.Parallel()
	var _ outbox.HeaderMetrics = (*emf.Recorder)(nil)
	r := newRecorder()
	r.HeaderNotCarried("hooks", outbox.HeaderDropped)
	r.HeaderNotCarried("hooks", outbox.HeaderDropped)
	r.HeaderNotCarried("hooks", outbox.HeaderRefused)
	got := map[string]float64{}
	for _, l := range decodeLines(t, flush(t, r)) {
		require.Equal(t, "Count", l.Metrics["queuebox_outbox_headers_not_carried_total"])
		dims := slices.Clone(l.DimNames)
		slices.Sort(dims)
		require.Equal(t, []string{"action", "destination"}, dims)
		got[l.DimValues["destination"]+"/"+l.DimValues["action"]] += l.Root["queuebox_outbox_headers_not_carried_total"].(float64)
	}
	assert.Equal(t, map[string]float64{"hooks/dropped": 2, "hooks/refused": 1}, got)
}
