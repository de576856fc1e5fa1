package metrics

import (
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/alternayte/queuebox/shared/console"
	"github.com/alternayte/queuebox/shared/lease"
)

// The console of queuebox serve counts its logins in the registry.
var _ console.Metrics = (*Registry)(nil)

// The outbox poller and the relay count their lease deadlines through lease.Metrics.
var _ lease.Metrics = (*Registry)(nil)

func scrape(t *testing.T, r *Registry) string {
	t.Helper()
	rec := httptest.NewRecorder()
	r.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	b, _ := io.ReadAll(rec.Body)
	return string(b)
}

func TestScrapeShowsTheDocumentedOutboxFamilies(t *testing.T) {
	t.Parallel()
	r := New("1.2.3")
	r.Outcome("sent")
	r.ClaimLost()
	r.Reclaimed(2)
	r.ProcessingDuration(30 * time.Millisecond)
	r.PublishDuration("http", 20*time.Millisecond)
	r.DestinationOutcome("orders-api", "success")
	r.Pending(7, 3*time.Second)
	r.QueueDepth("orders-api", 7)
	r.HTTPResponse(StatusClass(503))
	body := scrape(t, r)
	for _, want := range []string{
		`queuebox{version="1.2.3"} 1`,
		`queuebox_uptime_seconds `,
		`queuebox_outbox_messages_total{status="sent"} 1`,
		`queuebox_claims_lost_total{component="outbox"} 1`,
		`queuebox_outbox_messages_reclaimed_total 2`,
		`queuebox_outbox_processing_duration_seconds{quantile="0.99"}`,
		`queuebox_outbox_processing_duration_seconds_max 0.03`,
		`queuebox_outbox_publish_duration_seconds_count{destination_type="http"} 1`,
		`queuebox_outbox_publish_duration_seconds_max{destination_type="http"} 0.02`,
		`queuebox_outbox_destination_messages_total{destination="orders-api",outcome="success"} 1`,
		`queuebox_outbox_messages_pending 7`,
		`queuebox_outbox_oldest_pending_age_seconds 3`,
		`queuebox_outbox_queue_depth{destination="orders-api"} 7`,
		`queuebox_http_publish_responses_total{status_class="5xx"} 1`,
		`# TYPE queuebox_outbox_messages_total counter`,
		`# TYPE queuebox_outbox_processing_duration_seconds summary`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the scrape lacks %q", want)
		}
	}
}

func TestStatusClass(t *testing.T) {
	t.Parallel()
	cases := map[int]string{100: "1xx", 200: "2xx", 204: "2xx", 302: "3xx", 404: "4xx", 599: "5xx", 0: "other", 600: "other", -1: "other"}
	for status, want := range cases {
		if got := StatusClass(status); got != want {
			t.Errorf("StatusClass(%d) = %q, want %q", status, got, want)
		}
	}
}

func TestMaxWindowDecays(t *testing.T) {
	t.Parallel()
	var w maxWindow
	start := time.Unix(1000, 0)
	if got := w.observe(start, 5); got != 5 {
		t.Fatalf("max = %v", got)
	}
	if got := w.observe(start.Add(Window/3), 1); got != 5 {
		t.Errorf("max one step later = %v, want 5", got)
	}
	if got := w.observe(start.Add(Window+Window/3), 2); got != 2 {
		t.Errorf("max after the window passed = %v, want 2", got)
	}
	if got := w.observe(start.Add(10*Window), 0.5); got != 0.5 {
		t.Errorf("max long after = %v, want 0.5", got)
	}
}

func TestScrapeAnswersTheDocumentedContentType(t *testing.T) {
	t.Parallel()
	r := New("1.2.3")
	for _, accept := range []string{"", "text/plain", "*/*"} {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest("GET", "/metrics", nil)
		if accept != "" {
			req.Header.Set("Accept", accept)
		}
		r.Handler().ServeHTTP(rec, req)
		if rec.Code != 200 {
			t.Fatalf("Accept %q: status %d", accept, rec.Code)
		}
		if got := rec.Header().Get("Content-Type"); got != "text/plain; version=0.0.4; charset=utf-8" {
			t.Errorf("Accept %q: Content-Type %q, want the type of spec/26", accept, got)
		}
		if !strings.Contains(rec.Body.String(), `queuebox{version="1.2.3"} 1`) {
			t.Errorf("Accept %q: body lacks the version metric", accept)
		}
	}
}

// The lease deadline counter is an extension: absent until its first use, then one series per
// component.
func TestLeaseDeadlineCounter(t *testing.T) {
	t.Parallel()
	r := New("1.2.3")
	if body := scrape(t, r); strings.Contains(body, "queuebox_lease_deadline_total") {
		t.Error("the scrape shows queuebox_lease_deadline_total before its first use")
	}
	r.LeaseDeadline("outbox")
	r.LeaseDeadline("outbox")
	r.LeaseDeadline("inbox")
	body := scrape(t, r)
	for _, want := range []string{
		`# TYPE queuebox_lease_deadline_total counter`,
		`queuebox_lease_deadline_total{component="outbox"} 2`,
		`queuebox_lease_deadline_total{component="inbox"} 1`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the scrape lacks %q", want)
		}
	}
}

// TestFamiliesDescribeTheScrape checks that Families describes every family of a scrape, with
// its type, and nothing twice.
func TestFamiliesDescribeTheScrape(t *testing.T) {
	t.Parallel()
	fams := Families()
	byName := map[string]Family{}
	for _, f := range fams {
		if _, dup := byName[f.Name]; dup {
			t.Errorf("Families lists %s twice", f.Name)
		}
		byName[f.Name] = f
	}
	r := New("1.2.3")
	r.RegisterPool(PoolName, func() PoolStats { return PoolStats{Max: 10} })
	r.ProcessingDuration(time.Millisecond)
	r.Cleanup("outbox", 1, time.Millisecond, time.Now())
	gathered, err := r.Prometheus().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range gathered {
		f, ok := byName[g.GetName()]
		if !ok {
			t.Errorf("the scrape shows %s, which Families does not describe", g.GetName())
			continue
		}
		if want := strings.ToLower(g.GetType().String()); f.Type != want {
			t.Errorf("Families says %s is a %s, the scrape a %s", f.Name, f.Type, want)
		}
	}
	if s := byName["queuebox_cleanup_duration_seconds"]; len(s.Quantiles) != 3 || len(s.Labels) != 1 {
		t.Errorf("queuebox_cleanup_duration_seconds: %+v", s)
	}
}
