// Package tracingtest is the test helper of tracing: an in-process OTLP/HTTP receiver that
// decodes the protobuf ExportTraceServiceRequest of go.opentelemetry.io/proto/otlp and keeps
// the spans it receives.
package tracingtest

import (
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	"google.golang.org/protobuf/proto"
)

// Span is one received span, with its ids in lower-case hex.
type Span struct {
	Name         string
	TraceID      string
	SpanID       string
	ParentSpanID string // empty for a root span
	Kind         string
	// Attributes holds the span's attributes as text.
	Attributes map[string]string
	// Error is true when the span's status is error; StatusMessage is its message.
	Error         bool
	StatusMessage string
	// Links are the span ids of the linked spans.
	Links []string
	// Service is the service.name of the span's resource.
	Service string
}

// Receiver is an OTLP/HTTP traces receiver on a loopback port. It is safe for concurrent use.
type Receiver struct {
	srv *httptest.Server

	mu    sync.Mutex
	spans []Span
	cond  chan struct{} // closed and replaced after each export
}

// NewReceiver starts a receiver that stops when the test ends.
func NewReceiver(t testing.TB) *Receiver {
	t.Helper()
	r := &Receiver{cond: make(chan struct{})}
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.srv.Close)
	return r
}

// Endpoint is the base URL to configure as the OTLP endpoint (tracing.endpoint or
// OTEL_EXPORTER_OTLP_ENDPOINT); the spans arrive at Endpoint + "/v1/traces".
func (r *Receiver) Endpoint() string { return r.srv.URL }

func (r *Receiver) serve(w http.ResponseWriter, req *http.Request) {
	if req.URL.Path != "/v1/traces" || req.Method != http.MethodPost {
		http.NotFound(w, req)
		return
	}
	body, err := io.ReadAll(req.Body)
	if err != nil {
		http.Error(w, "reading the body", http.StatusBadRequest)
		return
	}
	var msg collectortrace.ExportTraceServiceRequest
	if err := proto.Unmarshal(body, &msg); err != nil {
		http.Error(w, "decoding the request", http.StatusBadRequest)
		return
	}
	var got []Span
	for _, rs := range msg.GetResourceSpans() {
		service := ""
		for _, kv := range rs.GetResource().GetAttributes() {
			if kv.GetKey() == "service.name" {
				service = text(kv.GetValue())
			}
		}
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				sp := Span{
					Name:          s.GetName(),
					TraceID:       hex.EncodeToString(s.GetTraceId()),
					SpanID:        hex.EncodeToString(s.GetSpanId()),
					ParentSpanID:  hex.EncodeToString(s.GetParentSpanId()),
					Kind:          s.GetKind().String(),
					Attributes:    map[string]string{},
					Error:         s.GetStatus().GetCode() == 2, // STATUS_CODE_ERROR
					StatusMessage: s.GetStatus().GetMessage(),
					Service:       service,
				}
				for _, kv := range s.GetAttributes() {
					sp.Attributes[kv.GetKey()] = text(kv.GetValue())
				}
				for _, l := range s.GetLinks() {
					sp.Links = append(sp.Links, hex.EncodeToString(l.GetSpanId()))
				}
				got = append(got, sp)
			}
		}
	}
	r.mu.Lock()
	r.spans = append(r.spans, got...)
	close(r.cond)
	r.cond = make(chan struct{})
	r.mu.Unlock()
	resp, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(resp)
}

// text renders an attribute value as text.
func text(v *commonpb.AnyValue) string {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return x.StringValue
	case *commonpb.AnyValue_IntValue:
		return strconv.FormatInt(x.IntValue, 10)
	case *commonpb.AnyValue_BoolValue:
		if x.BoolValue {
			return "true"
		}
		return "false"
	default:
		return v.String()
	}
}

// Spans returns a copy of every span received so far.
func (r *Receiver) Spans() []Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Span(nil), r.spans...)
}

// WaitFor returns the spans received once done reports true of them, or fails the test when
// timeout passes first. It waits on each export, never by sleeping.
func (r *Receiver) WaitFor(t testing.TB, timeout time.Duration, done func([]Span) bool) []Span {
	t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		r.mu.Lock()
		spans, cond := append([]Span(nil), r.spans...), r.cond
		r.mu.Unlock()
		if done(spans) {
			return spans
		}
		select {
		case <-cond:
		case <-deadline.C:
			t.Fatalf("the OTLP receiver did not get the expected spans within %s; it got %d: %+v", timeout, len(spans), spans)
			return nil
		}
	}
}

// ByName returns the spans of spans named name.
func ByName(spans []Span, name string) []Span {
	var out []Span
	for _, s := range spans {
		if s.Name == name {
			out = append(out, s)
		}
	}
	return out
}
