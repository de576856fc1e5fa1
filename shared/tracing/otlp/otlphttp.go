package otlp

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"google.golang.org/protobuf/encoding/protowire"
)

// lightExporter is a small OTLP/HTTP (protobuf) span exporter for the Lambda functions. The
// OpenTelemetry OTLP exporters link grpc-go and grpc-gateway even for HTTP (through their
// configuration and the collector's service package), about 2 MB of every function's zip, which
// would push the zips over their 10 MB bound (issue 8). This exporter writes the protobuf of
// ExportTraceServiceRequest itself with protowire, so it links neither grpc nor the protobuf
// runtime.
//
// It POSTs to the traces URL with the headers of OTEL_EXPORTER_OTLP_TRACES_HEADERS (else
// OTEL_EXPORTER_OTLP_HEADERS), bounded by the export timeout, without compression, client
// certificates or retries: the Lambda deployment sends to a collector extension on loopback
// (docs/tracing.md).
type lightExporter struct {
	url     string
	timeout time.Duration
	headers map[string]string
	client  *http.Client
	stopped atomic.Bool
}

func newLightExporter(target string, timeout time.Duration) *lightExporter {
	raw := os.Getenv("OTEL_EXPORTER_OTLP_TRACES_HEADERS")
	if raw == "" {
		raw = os.Getenv("OTEL_EXPORTER_OTLP_HEADERS")
	}
	return &lightExporter{url: target, timeout: timeout, headers: parseHeaders(raw), client: &http.Client{}}
}

// parseHeaders reads the W3C-baggage-like list of the OTLP header variables: key=value pairs
// separated by commas, values percent-encoded. A malformed pair is skipped.
func parseHeaders(raw string) map[string]string {
	out := map[string]string{}
	for _, pair := range strings.Split(raw, ",") {
		k, v, ok := strings.Cut(pair, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			continue
		}
		if dec, err := url.PathUnescape(strings.TrimSpace(v)); err == nil {
			out[k] = dec
		}
	}
	return out
}

// ExportSpans sends the spans in one request.
func (e *lightExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	if e.stopped.Load() || len(spans) == 0 {
		return nil
	}
	body := encodeExportRequest(spans)
	ctx, cancel := context.WithTimeout(ctx, e.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.url, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("exporting spans: %w", err)
	}
	req.Header.Set("Content-Type", "application/x-protobuf")
	for k, v := range e.headers {
		req.Header.Set(k, v)
	}
	resp, err := e.client.Do(req)
	if err != nil {
		// The URL may hold a credential: name only the failure.
		return fmt.Errorf("exporting spans: %w", redactURLError(err))
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("exporting spans: the OTLP receiver answered HTTP %d", resp.StatusCode)
	}
	return nil
}

// redactURLError drops the URL of a *url.Error, keeping its operation and cause.
func redactURLError(err error) error {
	if ue, ok := err.(*url.Error); ok {
		return fmt.Errorf("%s: %w", ue.Op, ue.Err)
	}
	return err
}

// Shutdown stops the exporter; later exports do nothing.
func (e *lightExporter) Shutdown(context.Context) error {
	e.stopped.Store(true)
	return nil
}

// The encoding below writes the OTLP protobuf messages field by field with protowire (the field
// numbers of opentelemetry/proto/trace/v1/trace.proto, common/v1 and resource/v1), so that the
// Lambda functions link neither the generated message types nor the protobuf runtime. The test
// decodes the result with the generated types (tracingtest's receiver).

// encodeExportRequest is the protobuf ExportTraceServiceRequest of the spans: one
// ResourceSpans (field 1) per resource, one ScopeSpans per instrumentation scope.
func encodeExportRequest(spans []sdktrace.ReadOnlySpan) []byte {
	type scopeKey struct {
		res   *resource.Resource
		scope instrumentation.Scope
	}
	var resOrder []*resource.Resource
	scopes := map[*resource.Resource][]instrumentation.Scope{}
	byScope := map[scopeKey][]sdktrace.ReadOnlySpan{}
	for _, s := range spans {
		k := scopeKey{s.Resource(), s.InstrumentationScope()}
		if _, ok := scopes[k.res]; !ok {
			resOrder = append(resOrder, k.res)
			scopes[k.res] = nil
		}
		if _, ok := byScope[k]; !ok {
			scopes[k.res] = append(scopes[k.res], k.scope)
		}
		byScope[k] = append(byScope[k], s)
	}
	var out []byte
	for _, res := range resOrder {
		out = appendMessage(out, 1, func(b []byte) []byte { // ResourceSpans
			b = appendMessage(b, 1, func(b []byte) []byte { // Resource
				return appendKeyValues(b, 1, res.Attributes())
			})
			for _, sc := range scopes[res] {
				b = appendMessage(b, 2, func(b []byte) []byte { // ScopeSpans
					b = appendMessage(b, 1, func(b []byte) []byte { // InstrumentationScope
						b = appendString(b, 1, sc.Name)
						b = appendString(b, 2, sc.Version)
						return appendKeyValues(b, 3, sc.Attributes.ToSlice())
					})
					for _, s := range byScope[scopeKey{res, sc}] {
						b = appendMessage(b, 2, func(b []byte) []byte { return appendSpan(b, s) })
					}
					return appendString(b, 3, sc.SchemaURL)
				})
			}
			return appendString(b, 3, res.SchemaURL())
		})
	}
	return out
}

// OTLP status codes (Status.code): unset 0, ok 1, error 2.
const (
	statusOK    = 1
	statusError = 2
)

func appendSpan(b []byte, s sdktrace.ReadOnlySpan) []byte {
	sc := s.SpanContext()
	tid, sid := sc.TraceID(), sc.SpanID()
	b = appendBytes(b, 1, tid[:])
	b = appendBytes(b, 2, sid[:])
	b = appendString(b, 3, sc.TraceState().String())
	if parent := s.Parent(); parent.IsValid() {
		psid := parent.SpanID()
		b = appendBytes(b, 4, psid[:])
	}
	b = appendString(b, 5, s.Name())
	// The SDK's SpanKind numbers are OTLP's (unspecified 0 ... consumer 5).
	b = appendVarint(b, 6, uint64(s.SpanKind()))
	b = appendFixed64(b, 7, uint64(s.StartTime().UnixNano()))
	b = appendFixed64(b, 8, uint64(s.EndTime().UnixNano()))
	b = appendKeyValues(b, 9, s.Attributes())
	b = appendVarint(b, 10, uint64(s.DroppedAttributes()))
	for _, ev := range s.Events() {
		b = appendMessage(b, 11, func(b []byte) []byte {
			b = appendFixed64(b, 1, uint64(ev.Time.UnixNano()))
			b = appendString(b, 2, ev.Name)
			b = appendKeyValues(b, 3, ev.Attributes)
			return appendVarint(b, 4, uint64(ev.DroppedAttributeCount))
		})
	}
	b = appendVarint(b, 12, uint64(s.DroppedEvents()))
	for _, l := range s.Links() {
		b = appendMessage(b, 13, func(b []byte) []byte {
			ltid, lsid := l.SpanContext.TraceID(), l.SpanContext.SpanID()
			b = appendBytes(b, 1, ltid[:])
			b = appendBytes(b, 2, lsid[:])
			b = appendString(b, 3, l.SpanContext.TraceState().String())
			b = appendKeyValues(b, 4, l.Attributes)
			b = appendVarint(b, 5, uint64(l.DroppedAttributeCount))
			return appendFixed32(b, 6, uint32(l.SpanContext.TraceFlags()))
		})
	}
	b = appendVarint(b, 14, uint64(s.DroppedLinks()))
	switch st := s.Status(); st.Code {
	case codes.Error:
		b = appendMessage(b, 15, func(b []byte) []byte {
			b = appendString(b, 2, st.Description)
			return appendVarint(b, 3, statusError)
		})
	case codes.Ok:
		b = appendMessage(b, 15, func(b []byte) []byte { return appendVarint(b, 3, statusOK) })
	}
	return appendFixed32(b, 16, uint32(sc.TraceFlags()))
}

// appendKeyValues appends each attribute as a KeyValue (key 1, value 2) in field num.
func appendKeyValues(b []byte, num protowire.Number, attrs []attribute.KeyValue) []byte {
	for _, a := range attrs {
		b = appendMessage(b, num, func(b []byte) []byte {
			b = appendString(b, 1, string(a.Key))
			return appendMessage(b, 2, func(b []byte) []byte { return appendAnyValue(b, a.Value) })
		})
	}
	return b
}

// appendAnyValue writes the oneof of AnyValue: string 1, bool 2, int 3, double 4, array 5.
func appendAnyValue(b []byte, v attribute.Value) []byte {
	switch v.Type() {
	case attribute.BOOL:
		b = protowire.AppendTag(b, 2, protowire.VarintType)
		return protowire.AppendVarint(b, protowire.EncodeBool(v.AsBool()))
	case attribute.INT64:
		b = protowire.AppendTag(b, 3, protowire.VarintType)
		return protowire.AppendVarint(b, uint64(v.AsInt64()))
	case attribute.FLOAT64:
		b = protowire.AppendTag(b, 4, protowire.Fixed64Type)
		return protowire.AppendFixed64(b, math.Float64bits(v.AsFloat64()))
	case attribute.BOOLSLICE:
		return appendArray(b, v.AsBoolSlice(), attribute.BoolValue)
	case attribute.INT64SLICE:
		return appendArray(b, v.AsInt64Slice(), attribute.Int64Value)
	case attribute.FLOAT64SLICE:
		return appendArray(b, v.AsFloat64Slice(), attribute.Float64Value)
	case attribute.STRINGSLICE:
		return appendArray(b, v.AsStringSlice(), attribute.StringValue)
	}
	b = protowire.AppendTag(b, 1, protowire.BytesType)
	return protowire.AppendString(b, v.Emit())
}

func appendArray[T any](b []byte, items []T, value func(T) attribute.Value) []byte {
	return appendMessage(b, 5, func(b []byte) []byte {
		for _, it := range items {
			b = appendMessage(b, 1, func(b []byte) []byte { return appendAnyValue(b, value(it)) })
		}
		return b
	})
}

// appendMessage appends field num holding the message that body writes.
func appendMessage(b []byte, num protowire.Number, body func([]byte) []byte) []byte {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendBytes(b, body(nil))
}

// appendString appends a string field; proto3 leaves an empty one out.
func appendString(b []byte, num protowire.Number, s string) []byte {
	if s == "" {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendString(b, s)
}

func appendBytes(b []byte, num protowire.Number, v []byte) []byte {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendBytes(b, v)
}

// appendVarint appends a varint field; proto3 leaves a zero out.
func appendVarint(b []byte, num protowire.Number, v uint64) []byte {
	if v == 0 {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.VarintType)
	return protowire.AppendVarint(b, v)
}

func appendFixed64(b []byte, num protowire.Number, v uint64) []byte {
	b = protowire.AppendTag(b, num, protowire.Fixed64Type)
	return protowire.AppendFixed64(b, v)
}

func appendFixed32(b []byte, num protowire.Number, v uint32) []byte {
	if v == 0 {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.Fixed32Type)
	return protowire.AppendFixed32(b, v)
}
