package otlp

import (
	"bytes"
	"context"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// recordSpans returns the ended spans of a tracer provider: a parent with every attribute
// type, an event and an error status, and a child of a remote parent with a link, in two
// instrumentation scopes.
func recordSpans(t *testing.T) []sdktrace.ReadOnlySpan {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	res := resource.NewSchemaless(attribute.String("service.name", "queuebox-test"))
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec), sdktrace.WithResource(res))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })

	remote := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{0x4b, 0xf9, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14},
		SpanID:  trace.SpanID{0, 0xf0, 1, 2, 3, 4, 5, 6}, TraceFlags: trace.FlagsSampled, Remote: true,
	})
	ts, err := trace.ParseTraceState("vendor=1")
	if err != nil {
		t.Fatal(err)
	}
	remote = remote.WithTraceState(ts)
	ctx := trace.ContextWithRemoteSpanContext(context.Background(), remote)
	start := time.Date(2026, 12, 5, 10, 0, 0, 123, time.UTC)

	_, parent := tp.Tracer("a", trace.WithInstrumentationVersion("1.2")).Start(ctx, "outbox deliver",
		trace.WithSpanKind(trace.SpanKindProducer), trace.WithTimestamp(start),
		trace.WithAttributes(attribute.String("s", "x"), attribute.Int64("i", -7), attribute.Bool("b", true), attribute.Float64("f", 1.5),
			attribute.StringSlice("ss", []string{"p", "q"}), attribute.Int64Slice("is", []int64{1, 2}),
			attribute.BoolSlice("bs", []bool{true, false}), attribute.Float64Slice("fs", []float64{0.25})))
	parent.AddEvent("retry", trace.WithTimestamp(start.Add(time.Millisecond)), trace.WithAttributes(attribute.Int("attempt", 2)))
	parent.SetStatus(codes.Error, "HTTP 503")
	parent.End(trace.WithTimestamp(start.Add(2 * time.Second)))

	_, child := tp.Tracer("b").Start(trace.ContextWithSpan(ctx, parent), "outbox claim",
		trace.WithLinks(trace.Link{SpanContext: remote, Attributes: []attribute.KeyValue{attribute.String("why", "claimed")}}))
	child.SetStatus(codes.Ok, "")
	child.End()
	return rec.Ended()
}

// TestLightExporterEncodingDecodesAsOTLP: the protobuf that the Lambda exporter writes by hand
// decodes, with the generated OTLP types, into exactly the spans' fields.
func TestLightExporterEncodingDecodesAsOTLP(t *testing.T) {
	spans := recordSpans(t)
	var req collectortrace.ExportTraceServiceRequest
	if err := proto.Unmarshal(encodeExportRequest(spans), &req); err != nil {
		t.Fatalf("decoding the request: %v", err)
	}
	if len(req.ResourceSpans) != 1 {
		t.Fatalf("%d resource spans, want 1 (one resource)", len(req.ResourceSpans))
	}
	rs := req.ResourceSpans[0]
	if got := rs.GetResource().GetAttributes(); len(got) != 1 || got[0].GetKey() != "service.name" || got[0].GetValue().GetStringValue() != "queuebox-test" {
		t.Errorf("resource attributes %v", got)
	}
	if len(rs.ScopeSpans) != 2 || rs.ScopeSpans[0].GetScope().GetName() != "a" || rs.ScopeSpans[0].GetScope().GetVersion() != "1.2" ||
		rs.ScopeSpans[1].GetScope().GetName() != "b" {
		t.Fatalf("scopes %v", rs.ScopeSpans)
	}
	for i, want := range spans {
		got := rs.ScopeSpans[i].Spans[0]
		sc := want.SpanContext()
		if hex.EncodeToString(got.TraceId) != sc.TraceID().String() || hex.EncodeToString(got.SpanId) != sc.SpanID().String() ||
			hex.EncodeToString(got.ParentSpanId) != want.Parent().SpanID().String() || got.TraceState != "vendor=1" ||
			got.Name != want.Name() || int(got.Kind) != int(want.SpanKind()) || got.Flags != uint32(sc.TraceFlags()) ||
			got.StartTimeUnixNano != uint64(want.StartTime().UnixNano()) || got.EndTimeUnixNano != uint64(want.EndTime().UnixNano()) {
			t.Errorf("span %d: got %v, want %+v", i, got, want)
		}
	}
	deliver := rs.ScopeSpans[0].Spans[0]
	wantAttrs := map[string]string{
		"s": `string_value:"x"`, "i": `int_value:-7`, "b": `bool_value:true`, "f": `double_value:1.5`,
		"ss": `array_value:{values:{string_value:"p"} values:{string_value:"q"}}`,
		"is": `array_value:{values:{int_value:1} values:{int_value:2}}`,
		"bs": `array_value:{values:{bool_value:true} values:{bool_value:false}}`,
		"fs": `array_value:{values:{double_value:0.25}}`,
	}
	if len(deliver.Attributes) != len(wantAttrs) {
		t.Errorf("attributes %v", deliver.Attributes)
	}
	for _, kv := range deliver.Attributes {
		if got := strings.Join(strings.Fields(kv.GetValue().String()), " "); got != strings.Join(strings.Fields(wantAttrs[kv.Key]), " ") {
			t.Errorf("attribute %s = %s, want %s", kv.Key, got, wantAttrs[kv.Key])
		}
	}
	if s := deliver.GetStatus(); s.GetCode() != tracepb.Status_STATUS_CODE_ERROR || s.GetMessage() != "HTTP 503" {
		t.Errorf("status %v", s)
	}
	if ev := deliver.GetEvents(); len(ev) != 1 || ev[0].GetName() != "retry" || ev[0].GetTimeUnixNano() != uint64(spans[0].Events()[0].Time.UnixNano()) ||
		ev[0].GetAttributes()[0].GetValue().GetIntValue() != 2 {
		t.Errorf("events %v", ev)
	}
	claim := rs.ScopeSpans[1].Spans[0]
	if claim.GetStatus().GetCode() != tracepb.Status_STATUS_CODE_OK || hex.EncodeToString(claim.ParentSpanId) != spans[0].SpanContext().SpanID().String() {
		t.Errorf("claim span %v", claim)
	}
	if l := claim.GetLinks(); len(l) != 1 || hex.EncodeToString(l[0].SpanId) != spans[0].Parent().SpanID().String() || l[0].TraceState != "vendor=1" ||
		l[0].Flags != 1 || l[0].GetAttributes()[0].GetValue().GetStringValue() != "claimed" {
		t.Errorf("links %v", l)
	}
}

// TestLightExporterPostsWithTheConfiguredHeaders: one POST of protobuf with the headers of
// OTEL_EXPORTER_OTLP_TRACES_HEADERS; a receiver's error status is an error that quotes no URL.
func TestLightExporterPostsWithTheConfiguredHeaders(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_HEADERS", "x-ignored=1")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_HEADERS", "authorization=Bearer%20tok, x-tenant = acme ,bad")
	type got struct {
		auth, tenant, ignored, ctype string
		body                         []byte
	}
	reqs := make(chan got, 2)
	status := http.StatusOK
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		reqs <- got{r.Header.Get("Authorization"), r.Header.Get("X-Tenant"), r.Header.Get("X-Ignored"), r.Header.Get("Content-Type"), b}
		w.WriteHeader(status)
	}))
	defer srv.Close()
	spans := recordSpans(t)
	exp := newLightExporter(srv.URL+"/v1/traces?token=s3cret", 5*time.Second)
	if err := exp.ExportSpans(context.Background(), spans); err != nil {
		t.Fatalf("export: %v", err)
	}
	g := <-reqs
	if g.auth != "Bearer tok" || g.tenant != "acme" || g.ignored != "" || g.ctype != "application/x-protobuf" || !bytes.Equal(g.body, encodeExportRequest(spans)) {
		t.Errorf("request: %+v", g)
	}
	status = http.StatusServiceUnavailable
	err := exp.ExportSpans(context.Background(), spans)
	if err == nil || !strings.Contains(err.Error(), "HTTP 503") || strings.Contains(err.Error(), "s3cret") {
		t.Errorf("export to a failing receiver: %v", err)
	}
	<-reqs
	srv.Close()
	err = exp.ExportSpans(context.Background(), spans)
	if err == nil || strings.Contains(err.Error(), "s3cret") || strings.Contains(err.Error(), "/v1/traces") {
		t.Errorf("export to a closed receiver: %v, want an error without the URL (it may hold a credential)", err)
	}
	if err := exp.Shutdown(context.Background()); err != nil || exp.ExportSpans(context.Background(), spans) != nil {
		t.Error("an export after Shutdown must do nothing")
	}
}
