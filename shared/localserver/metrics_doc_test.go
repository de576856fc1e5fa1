package localserver

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"

	"github.com/alternayte/queuebox/shared/specdocs"
	"github.com/alternayte/queuebox/shared/store/postgres/dbtest"
)

// metricsPage is spec/28-metrics.md, read with specdocs.
const metricsPage = "28-metrics.md"

// docMetric is one row of a metrics table of the documentation.
type docMetric struct {
	name   string
	typ    string              // counter, gauge or summary
	labels []string            // the tag names, sorted
	values map[string][]string // the documented values of an enumerated tag
}

// docRow matches a table row whose first cell is a backticked metric name; it captures the
// name, the type cell and the tags cell.
var docRow = regexp.MustCompile("^\\|\\s*`([^`]+)`\\s*\\|\\s*([^|]*?)\\s*\\|\\s*([^|]*?)\\s*\\|")

var backticked = regexp.MustCompile("`([^`]+)`")

// parseMetricsPage returns the metrics of the tables of the page and the prefixes of its
// allowlist.
func parseMetricsPage(t *testing.T, page string) (map[string]docMetric, []string) {
	t.Helper()
	docs := map[string]docMetric{}
	var allowlist []string
	inAllowlist := false
	for _, line := range strings.Split(page, "\n") {
		if strings.HasPrefix(line, "## ") {
			inAllowlist = strings.HasPrefix(line, "## Allowlist")
		}
		if inAllowlist {
			// The section names its prefixes in backticks; the flattened page keeps the
			// section's prose on its heading line.
			for _, m := range backticked.FindAllStringSubmatch(line, -1) {
				allowlist = append(allowlist, m[1])
			}
			continue
		}
		m := docRow.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		d := docMetric{name: m[1], typ: m[2], values: map[string][]string{}}
		require.Contains(t, []string{"counter", "gauge", "summary"}, d.typ, "the type of %s in the documentation", d.name)
		d.labels, d.values = parseTags(m[3])
		_, dup := docs[d.name]
		require.False(t, dup, "the documentation lists %s twice", d.name)
		docs[d.name] = d
	}
	return docs, allowlist
}

// parseTags reads a tags cell: "none", "`a`, `b`", "`a`: x, y or z" or "`a`, `b` = `x` or `y"`.
// An enumeration belongs to the last tag before it.
func parseTags(cell string) ([]string, map[string][]string) {
	values := map[string][]string{}
	if strings.TrimSpace(cell) == "none" {
		return nil, values
	}
	names, enum, hasEnum := strings.Cut(cell, "=")
	if !hasEnum {
		names, enum, hasEnum = strings.Cut(cell, "`:")
		if hasEnum {
			names += "`"
		}
	}
	var labels []string
	for _, m := range backticked.FindAllStringSubmatch(names, -1) {
		labels = append(labels, m[1])
	}
	if hasEnum && len(labels) > 0 {
		var vs []string
		if b := backticked.FindAllStringSubmatch(enum, -1); len(b) > 0 {
			for _, m := range b {
				vs = append(vs, m[1])
			}
		} else {
			for _, v := range regexp.MustCompile(`,| or `).Split(enum, -1) {
				if v = strings.TrimSpace(v); v != "" {
					vs = append(vs, v)
				}
			}
		}
		values[labels[len(labels)-1]] = vs
	}
	sort.Strings(labels)
	return labels, values
}

func TestParseTags(t *testing.T) {
	t.Parallel()
	tests := []struct {
		cell       string
		wantLabels []string
		wantValues map[string][]string
	}{
		{cell: "none", wantValues: map[string][]string{}},
		{cell: "`version`", wantLabels: []string{"version"}, wantValues: map[string][]string{}},
		{cell: "`status`: sent, failed or dead", wantLabels: []string{"status"},
			wantValues: map[string][]string{"status": {"sent", "failed", "dead"}}},
		{cell: "`destination`, `outcome` = `success` or `failure`", wantLabels: []string{"destination", "outcome"},
			wantValues: map[string][]string{"outcome": {"success", "failure"}}},
		{cell: "`status_class` = `1xx`, `2xx`, `3xx`, `4xx`, `5xx` or `other`", wantLabels: []string{"status_class"},
			wantValues: map[string][]string{"status_class": {"1xx", "2xx", "3xx", "4xx", "5xx", "other"}}},
	}
	for _, tt := range tests {
		t.Run(tt.cell, func(t *testing.T) {
			labels, values := parseTags(tt.cell)
			require.Equal(t, tt.wantLabels, labels)
			require.Equal(t, tt.wantValues, values)
		})
	}
}

// TestMetricsMatchTheDocumentation is MetricsDocTest of spec/28-metrics.md: it runs the local
// process on a fresh database with retention on, makes traffic that produces every documented
// family (the cleanup runs at start), scrapes
// GET /metrics and compares the families with the tables of the page both ways, with their
// types, their tag names and the documented values of the enumerated tags.
func TestMetricsMatchTheDocumentation(t *testing.T) {
	t.Parallel()
	page := specdocs.Read(t, metricsPage)
	docs, allowlist := parseMetricsPage(t, page)
	require.Contains(t, docs, "queuebox_outbox_messages_total", "the QueueBox table was not parsed")
	require.Contains(t, docs, "hikaricp_connections_pending", "the HikariCP table was not parsed")

	dbURL := dbtest.NewDatabase(t)
	dbPool := dbtest.NewPool(t, dbURL)
	ctx := context.Background()

	// The receiver: /hooks accepts, /flaky fails once then accepts, /steal takes the claim of
	// its row away during the publish, as a replica that reclaimed it would.
	var flakyCalls atomic.Int32
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		switch r.URL.Path {
		case "/flaky":
			if flakyCalls.Add(1) == 1 {
				w.WriteHeader(http.StatusServiceUnavailable)
				return
			}
		case "/steal":
			if _, err := dbPool.Exec(r.Context(),
				`UPDATE outbox SET claim_token = gen_random_uuid() WHERE topic = 'steal.created' AND state = 'processing'`); err != nil {
				w.WriteHeader(http.StatusInternalServerError)
				return
			}
		}
		w.WriteHeader(http.StatusOK)
	}))
	defer receiver.Close()

	l, base := startLocal(t, dbURL, receiver.URL)

	// The outbox traffic: a row that is sent, one that fails once and is retried, one without
	// a route that goes dead, one whose claim is lost, and one scheduled an hour ahead that
	// stays pending for the queue depth of its destination.
	for _, row := range []struct{ topic, key, delay string }{
		{"order.created", "order-1", "0"},
		{"flaky.created", "flaky-1", "0"},
		{"nowhere.created", "nowhere-1", "0"},
		{"steal.created", "steal-1", "0"},
		{"order.later", "later-1", "1 hour"},
	} {
		_, err := dbPool.Exec(ctx, `INSERT INTO outbox (topic, key, payload, scheduled_at) VALUES ($1, $2, '{"n":1}', now() + $3::interval)`,
			row.topic, row.key, row.delay)
		require.NoError(t, err)
	}
	l.Poller().Wake()

	// The inbox traffic: a push message (new, then forwarded by the relay), its duplicate, a
	// message without its idempotency key (rejected) and one that the header filter drops.
	for _, req := range []struct {
		body   string
		header string
		want   int
	}{
		{body: `{"id":"in-1"}`, want: http.StatusAccepted},
		{body: `{"id":"in-1"}`, want: http.StatusOK},
		{body: `{"other":1}`, want: http.StatusBadRequest},
		{body: `{"id":"in-2"}`, header: "X-Test", want: http.StatusAccepted},
	} {
		r, err := http.NewRequest(http.MethodPost, base+"/inbox/orders", strings.NewReader(req.body))
		require.NoError(t, err)
		r.Header.Set("Content-Type", "application/json")
		if req.header != "" {
			r.Header.Set(req.header, "1")
		}
		resp, err := http.DefaultClient.Do(r)
		require.NoError(t, err)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.Equal(t, req.want, resp.StatusCode, "POST %s: %s", req.body, b)
	}

	// No component of this build produces queuebox_transform_failures_total yet (the
	// destination transforms), so the test reports to it through the registry as the
	// transform step will.
	l.metrics.TransformFailure("Fail")

	// Wait until the traffic shows, then compare.
	wantSeries := []string{
		`queuebox_outbox_messages_total{status="sent"}`,
		`queuebox_outbox_messages_total{status="failed"}`,
		`queuebox_outbox_messages_total{status="dead"}`,
		`queuebox_claims_lost_total{component="outbox"}`,
		`queuebox_outbox_queue_depth{destination="hooks"}`,
		`queuebox_inbox_messages_total{status="new"}`,
		`queuebox_inbox_messages_total{status="duplicate"}`,
		`queuebox_inbox_messages_total{status="forwarded"}`,
		`queuebox_inbox_rejections_total{reason="extraction_failed"}`,
		`queuebox_inbox_filtered_total{source="orders"}`,
		`queuebox_cleanup_last_run_timestamp{table="outbox"}`,
		`queuebox_cleanup_last_run_timestamp{table="inbox"}`,
	}
	var families map[string]*dto.MetricFamily
	var text string
	deadline := time.Now().Add(30 * time.Second)
	for {
		text, families = scrapeMetrics(t, base+"/metrics")
		missing := slices.DeleteFunc(slices.Clone(wantSeries), func(s string) bool { return strings.Contains(text, s+" ") })
		if len(missing) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("after 30 s the scrape still lacks the series of the traffic: %v", missing)
			break
		}
		time.Sleep(20 * time.Millisecond)
	}

	var undocumented, absent []string
	for name, f := range families {
		if _, ok := docs[name]; ok || slices.ContainsFunc(allowlist, func(p string) bool { return strings.HasPrefix(name, p) }) {
			continue
		}
		undocumented = append(undocumented, name+" ("+strings.ToLower(f.GetType().String())+")")
	}
	for name, d := range docs {
		f, ok := families[name]
		if !ok {
			absent = append(absent, name)
			continue
		}
		if got := strings.ToLower(f.GetType().String()); got != d.typ {
			t.Errorf("%s is a %s in the scrape and a %s in the documentation", name, got, d.typ)
		}
		for _, m := range f.GetMetric() {
			var labels []string
			for _, lp := range m.GetLabel() {
				labels = append(labels, lp.GetName())
				if allowed, ok := d.values[lp.GetName()]; ok && !slices.Contains(allowed, lp.GetValue()) {
					t.Errorf("%s carries %s=%q; the documentation allows %v", name, lp.GetName(), lp.GetValue(), allowed)
				}
			}
			sort.Strings(labels)
			if !slices.Equal(labels, d.labels) {
				t.Errorf("%s carries the tags %v; the documentation lists %v", name, labels, d.labels)
				break
			}
		}
	}
	sort.Strings(undocumented)
	sort.Strings(absent)
	if len(undocumented) > 0 {
		t.Errorf("the scrape carries families that %s does not document: %v", metricsPage, undocumented)
	}
	if len(absent) > 0 {
		t.Errorf("%s documents families that the scrape lacks: %v", metricsPage, absent)
	}
	if t.Failed() {
		t.Logf("the scrape:\n%s", text)
	}
}

// startLocal runs the local process on the database of dbURL with the routes and the source
// of the documentation test, and returns it with the base URL of its data port, which also
// serves /metrics. The process stops when the test ends.
func startLocal(t *testing.T, dbURL, receiverURL string) (*Local, string) {
	t.Helper()
	u, err := url.Parse(dbURL)
	require.NoError(t, err)
	user, pass := "postgres", "trust-auth"
	if u.User != nil {
		if n := u.User.Username(); n != "" {
			user = n
		}
		if p, ok := u.User.Password(); ok && p != "" {
			pass = p
		}
	}
	yaml := fmt.Sprintf(`
server:
  httpPort: 8080
database:
  url: jdbc:postgresql://%s%s
  username: %q
  password: %q
outbox:
  pollIntervalMs: 20
  retryBaseDelayMs: 50
  pendingGaugeIntervalMs: 0
inbox:
  relay:
    pollIntervalMs: 20
    pendingGaugeIntervalMs: 0
destinations:
  hooks:
    type: http
    baseUrl: %[5]s
    path: /hooks
  flaky:
    type: http
    baseUrl: %[5]s
    path: /flaky
  steal:
    type: http
    baseUrl: %[5]s
    path: /steal
routes:
  - topicPattern: "order.*"
    destination: hooks
  - topicPattern: "flaky.*"
    destination: flaky
  - topicPattern: "steal.*"
    destination: steal
retention:
  enabled: true
  outbox:
    policy: AGE
    maxAge: 7d
  inbox:
    policy: AGE
    maxAge: 30d
sources:
  orders:
    type: http
    path: /orders
    idempotencyKeyPath: $.id
    topic: order.received
    filter:
      exclude:
        - header: x-test
          exists: true
`, u.Host, u.Path, user, pass, receiverURL)
	cfg := loadYAML(t, yaml)
	// Any free port: Addrs reports the one the listener got.
	cfg.Server.HTTPPort = 0

	var logs syncBuffer
	log := slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	ctx, cancel := context.WithCancel(context.Background())
	l, err := New(ctx, cfg, log)
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- l.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(60 * time.Second):
			t.Error("the local process did not stop within 60 s")
		}
		if t.Failed() {
			t.Logf("the process log:\n%s", logs.String())
		}
	})
	select {
	case <-l.Ready():
	case <-time.After(30 * time.Second):
		t.Fatal("the local process did not listen within 30 s")
	}
	addrs := l.Addrs()
	require.NotEmpty(t, addrs, "the local process does not listen")
	port := addrs[0].(*net.TCPAddr).Port
	return l, fmt.Sprintf("http://127.0.0.1:%d", port)
}

// scrapeMetrics gets url and returns the body and its metric families.
func scrapeMetrics(t *testing.T, url string) (string, map[string]*dto.MetricFamily) {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, "GET /metrics: %s", body)
	parser := expfmt.NewTextParser(model.LegacyValidation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(body))
	require.NoError(t, err)
	return string(body), families
}

// syncBuffer is a bytes.Buffer that the process and the test share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
