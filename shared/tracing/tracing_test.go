package tracing_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/trace"

	"github.com/alternayte/queuebox/shared/tracing"
)

func TestTraceContextInRowHeadersIsMatchedInAnyLetterCase(t *testing.T) {
	t.Parallel()
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	ctx := tracing.ContextFromJSON(context.Background(), json.RawMessage(`{"TRACEPARENT":"`+tp+`","TraceState":"a=1","x":"y"}`))
	sc := trace.SpanContextFromContext(ctx)
	require.True(t, sc.IsValid())
	assert.True(t, sc.IsRemote())
	assert.Equal(t, "4bf92f3577b34da6a3ce929d0e0e4736", sc.TraceID().String())
	assert.Equal(t, "a=1", sc.TraceState().String())

	// Not a JSON object, no traceparent, or a broken one: no context.
	for _, h := range []string{`[1]`, `{"x":"traceparent"}`, `{"traceparent":"00-zz-00f067aa0ba902b7-01"}`, `{"traceparent":5}`} {
		assert.False(t, trace.SpanContextFromContext(tracing.ContextFromJSON(context.Background(), json.RawMessage(h))).IsValid(), h)
	}

	// SetHeaders replaces every case variant and drops a stale tracestate.
	headers := map[string]string{"Traceparent": "00-11111111111111111111111111111111-2222222222222222-01", "TRACESTATE": "old=1", "x": "y"}
	plain := trace.ContextWithSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{1}, SpanID: trace.SpanID{2}, TraceFlags: trace.FlagsSampled}))
	tracing.SetHeaders(plain, headers)
	assert.Equal(t, map[string]string{"traceparent": "00-01000000000000000000000000000000-0200000000000000-01", "x": "y"}, headers)

	// Without a span context nothing changes.
	headers = map[string]string{"traceparent": tp}
	tracing.SetHeaders(context.Background(), headers)
	assert.Equal(t, map[string]string{"traceparent": tp}, headers)
}

func TestLogAttrsNameTheSpan(t *testing.T) {
	t.Parallel()
	assert.Nil(t, tracing.LogAttrs(context.Background()))
	ctx := trace.ContextWithSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{0xab}, SpanID: trace.SpanID{0xcd}}))
	attrs := tracing.LogAttrs(ctx)
	require.Len(t, attrs, 2)
	assert.Equal(t, "trace_id=ab000000000000000000000000000000", attrs[0].(interface{ String() string }).String())
	assert.Equal(t, "span_id=cd00000000000000", attrs[1].(interface{ String() string }).String())
}

// Check refuses, without building anything, what otlp.New refuses (the same text), and passes
// a config without an endpoint whatever its other settings.
func TestCheckRefusesWhatNewRefuses(t *testing.T) {
	t.Parallel()
	require.NoError(t, tracing.Check(tracing.Config{Protocol: "nonsense"}), "tracing off: nothing is checked")
	require.NoError(t, tracing.Check(tracing.Config{Endpoint: "http://c:4318"}))
	err := tracing.Check(tracing.Config{Endpoint: "http://c:4318", Protocol: "thrift"})
	require.Error(t, err)
	assert.Equal(t, `tracing.protocol must be http/protobuf or grpc, not "thrift"`, err.Error())
	ratio := -0.5
	err = tracing.Check(tracing.Config{Endpoint: "http://c:4318", SampleRatio: &ratio})
	require.Error(t, err)
	assert.Equal(t, "tracing.sampleRatio must be from 0 to 1, not -0.5", err.Error())
}

// The zero Provider and a nil one are off: no tracer, and flushing or stopping does nothing.
func TestTheZeroProviderIsOff(t *testing.T) {
	t.Parallel()
	for _, p := range []*tracing.Provider{nil, {}} {
		assert.False(t, p.Enabled())
		assert.Nil(t, p.Tracer())
		require.NoError(t, p.ForceFlush(context.Background()))
		require.NoError(t, p.Shutdown(context.Background()))
	}
}
