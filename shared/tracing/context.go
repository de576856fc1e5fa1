package tracing

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// The W3C trace context headers.
const (
	// HeaderTraceparent is the W3C traceparent header.
	HeaderTraceparent = "traceparent"
	// HeaderTracestate is the W3C tracestate header.
	HeaderTracestate = "tracestate"
)

// w3c is the W3C trace context propagator (traceparent and tracestate only; no baggage).
var w3c = propagation.TraceContext{}

// headerCarrier is a propagation carrier over one string value per name that reads a name in
// any letter case and replaces every case variant of a name it writes.
type headerCarrier map[string]string

func (c headerCarrier) Get(key string) string {
	if v, ok := c[key]; ok {
		return v
	}
	for k, v := range c {
		if strings.EqualFold(k, key) {
			return v
		}
	}
	return ""
}

func (c headerCarrier) Set(key, value string) {
	for k := range c {
		if strings.EqualFold(k, key) {
			delete(c, k)
		}
	}
	c[key] = value
}

func (c headerCarrier) Keys() []string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	return keys
}

// ContextFromHeaders returns ctx with the remote span context of headers' traceparent and
// tracestate (names in any letter case), or ctx unchanged when headers hold no valid
// traceparent.
func ContextFromHeaders(ctx context.Context, headers map[string]string) context.Context {
	if len(headers) == 0 {
		return ctx
	}
	return w3c.Extract(ctx, headerCarrier(headers))
}

// ContextFromJSON is ContextFromHeaders over a headers column (a JSON object). Headers that
// are not a JSON object, or whose traceparent is not a string, leave ctx unchanged.
func ContextFromJSON(ctx context.Context, headers json.RawMessage) context.Context {
	if len(headers) == 0 || !containsFold(headers, HeaderTraceparent) {
		return ctx
	}
	var raw map[string]json.RawMessage
	if json.Unmarshal(headers, &raw) != nil {
		return ctx
	}
	h := make(map[string]string, 2)
	for k, v := range raw {
		if strings.EqualFold(k, HeaderTraceparent) || strings.EqualFold(k, HeaderTracestate) {
			var s string
			if json.Unmarshal(v, &s) == nil {
				h[strings.ToLower(k)] = s
			}
		}
	}
	return ContextFromHeaders(ctx, h)
}

// containsFold reports whether b holds lower, an ASCII lower-case string, in any letter case,
// without copying b (ContextFromJSON runs for every delivered row when tracing is on).
func containsFold(b []byte, lower string) bool {
	n := len(lower)
	for i := 0; i+n <= len(b); i++ {
		j := 0
		for ; j < n; j++ {
			c := b[i+j]
			if 'A' <= c && c <= 'Z' {
				c += 'a' - 'A'
			}
			if c != lower[j] {
				break
			}
		}
		if j == n {
			return true
		}
	}
	return false
}

// SetHeaders writes the span context of ctx into headers as traceparent (and tracestate when
// it has one), replacing any case variant of those names; a tracestate of the headers that
// the span context does not carry is removed. Without a valid span context in ctx, headers
// are left unchanged. headers must not be nil.
func SetHeaders(ctx context.Context, headers map[string]string) {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return
	}
	c := headerCarrier(headers)
	for k := range c {
		if strings.EqualFold(k, HeaderTracestate) {
			delete(c, k)
		}
	}
	w3c.Inject(ctx, c)
}

// LogAttrs returns the trace_id and span_id attributes of the span of ctx for a log line, or
// nil when ctx holds no valid span context (tracing off).
func LogAttrs(ctx context.Context) []any {
	return SpanLogAttrs(trace.SpanContextFromContext(ctx))
}

// SpanLogAttrs returns the trace_id and span_id attributes of sc, or nil when sc is not valid.
func SpanLogAttrs(sc trace.SpanContext) []any {
	if !sc.IsValid() {
		return nil
	}
	return []any{slog.String("trace_id", sc.TraceID().String()), slog.String("span_id", sc.SpanID().String())}
}

// ContextFromHTTP returns ctx with the remote span context of an HTTP request's traceparent
// and tracestate headers, or ctx unchanged when they hold no valid traceparent.
func ContextFromHTTP(ctx context.Context, h http.Header) context.Context {
	return w3c.Extract(ctx, propagation.HeaderCarrier(h))
}
