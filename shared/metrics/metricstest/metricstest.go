// Package metricstest reads the metrics of a test from a real scrape: it serves GET /metrics
// through the handler under test and parses the Prometheus text that it answers.
package metricstest

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Scrape is one parsed answer of GET /metrics.
type Scrape map[string]*dto.MetricFamily

// Get serves GET /metrics through h (a metrics.Registry's Handler) and parses the answer. It
// fails the test on a status other than 200 or on text that does not parse.
func Get(t testing.TB, h http.Handler) Scrape {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	body, err := io.ReadAll(rec.Result().Body)
	if err != nil {
		t.Fatalf("reading the scrape: %v", err)
	}
	if rec.Code != http.StatusOK {
		t.Fatalf("GET /metrics answered %d: %s", rec.Code, body)
	}
	parser := expfmt.NewTextParser(model.LegacyValidation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(string(body)))
	if err != nil {
		t.Fatalf("parsing the scrape: %v\n%s", err, body)
	}
	return families
}

// Value returns the sample of family name whose labels include every pair of labels: a gauge
// or counter value, or the sample count of a summary. ok is false when the scrape lacks it.
func (s Scrape) Value(name string, labels map[string]string) (v float64, ok bool) {
	f := s[name]
	if f == nil {
		return 0, false
	}
	for _, m := range f.GetMetric() {
		if !hasLabels(m, labels) {
			continue
		}
		switch f.GetType() {
		case dto.MetricType_GAUGE:
			return m.GetGauge().GetValue(), true
		case dto.MetricType_COUNTER:
			return m.GetCounter().GetValue(), true
		case dto.MetricType_SUMMARY:
			return float64(m.GetSummary().GetSampleCount()), true
		case dto.MetricType_UNTYPED:
			return m.GetUntyped().GetValue(), true
		}
	}
	return 0, false
}

// Type returns the type of family name, and false when the scrape lacks it.
func (s Scrape) Type(name string) (dto.MetricType, bool) {
	f := s[name]
	if f == nil {
		return 0, false
	}
	return f.GetType(), true
}

func hasLabels(m *dto.Metric, want map[string]string) bool {
	for name, value := range want {
		found := false
		for _, l := range m.GetLabel() {
			if l.GetName() == name && l.GetValue() == value {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}
