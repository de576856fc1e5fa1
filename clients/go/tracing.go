package queuebox

import (
	"context"
	"errors"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// tracerName is the instrumentation scope of the worker's spans.
const tracerName = "github.com/alternayte/queuebox/clients/go"

// w3c reads the W3C trace context (traceparent, tracestate) of a row's headers.
var w3c = propagation.TraceContext{}

// headerCarrier is a propagation carrier over a row's headers that reads a name in any
// letter case: a webhook's Traceparent header is stored as it arrived.
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

func (c headerCarrier) Set(string, string) {}

func (c headerCarrier) Keys() []string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	return keys
}

// The results of a handler span (attribute queuebox.result).
const (
	resultCompleted = "completed"
	resultFailed    = "failed"
	resultCancelled = "cancelled"
	resultLost      = "lease_lost"
	resultError     = "error"
)

// handlerSpan is the span of one handler run, a child of the trace context in the row's
// headers when there is one. With the default global tracer provider of the OpenTelemetry API
// (no SDK installed) it records nothing and costs next to nothing.
type handlerSpan struct{ span trace.Span }

// newTracer is the worker's tracer: of Options.TracerProvider, else of the global provider,
// whose tracer follows a provider that the application installs later.
func newTracer(tp trace.TracerProvider) trace.Tracer {
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	return tp.Tracer(tracerName)
}

// startHandlerSpan starts the span of msg's handler under ctx and returns the handler's
// context, which carries the span.
func (w *InboxWorker) startHandlerSpan(ctx context.Context, msg Message) (context.Context, handlerSpan) {
	parent := w3c.Extract(ctx, headerCarrier(msg.Headers))
	attrs := []attribute.KeyValue{
		attribute.String("messaging.system", "queuebox"),
		attribute.String("messaging.operation.type", "process"),
		attribute.String("messaging.destination.name", msg.Source),
		attribute.String("messaging.message.id", msg.ID),
		attribute.String("queuebox.source", msg.Source),
		attribute.String("queuebox.inbox.id", msg.ID),
		attribute.Int("queuebox.attempt", msg.Attempt),
	}
	if msg.EventType != "" {
		attrs = append(attrs, attribute.String("queuebox.event_type", msg.EventType))
	}
	if msg.AggregateID != "" {
		attrs = append(attrs, attribute.String("queuebox.aggregate_id", msg.AggregateID))
	}
	ctx, span := w.tracer.Start(parent, "queuebox inbox handle "+msg.Source,
		trace.WithSpanKind(trace.SpanKindConsumer), trace.WithAttributes(attrs...))
	return ctx, handlerSpan{span}
}

// end records the result and ends the span; err, when set, marks it failed.
func (s handlerSpan) end(result string, err error) {
	s.span.SetAttributes(attribute.String("queuebox.result", result))
	if err != nil {
		// The error's text as last_error stores it: secrets redacted.
		s.span.RecordError(errors.New(SanitizeError(err)))
		s.span.SetStatus(codes.Error, result)
	}
	s.span.End()
}
