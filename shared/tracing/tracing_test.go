package tracing_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/trace"

	"github.com/alternayte/queuebox/shared/tracing"
	"github.com/alternayte/queuebox/shared/tracing/tracingtest"
)

func TestNewWithoutAnEndpointIsOffAndCostsNothing(t *testing.T) {
	t.Parallel()
	p, err := tracing.New(context.Background(), tracing.Config{Protocol: "nonsense"})
	require.NoError(t, err, "an unused setting is not checked while tracing is off")
	assert.False(t, p.Enabled())
	assert.Nil(t, p.Tracer())
	require.NoError(t, p.ForceFlush(context.Background()))
	require.NoError(t, p.Shutdown(context.Background()))

	var none *tracing.Provider
	assert.False(t, none.Enabled())
	assert.Nil(t, none.Tracer())
}

func TestNewRefusesABadConfig(t *testing.T) {
	t.Parallel()
	ratio := 1.5
	tests := []struct {
		name    string
		cfg     tracing.Config
		wantErr string
	}{
		{name: "protocol", cfg: tracing.Config{Endpoint: "http://c:4318", Protocol: "thrift"}, wantErr: `tracing.protocol must be http/protobuf or grpc, not "thrift"`},
		{name: "ratio", cfg: tracing.Config{Endpoint: "http://c:4318", SampleRatio: &ratio}, wantErr: "tracing.sampleRatio must be from 0 to 1, not 1.5"},
		{name: "endpoint", cfg: tracing.Config{Endpoint: "c:4318"}, wantErr: "tracing.endpoint must be an http:// or https:// URL with a host"},
		{name: "traces endpoint holds no credential in the error", cfg: tracing.Config{TracesEndpoint: "ftp://user:hunter2@c"}, wantErr: "tracing.tracesEndpoint must be an http:// or https:// URL with a host"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := tracing.New(context.Background(), tt.cfg)
			require.Error(t, err)
			assert.Equal(t, tt.wantErr, err.Error())
			assert.NotContains(t, err.Error(), "hunter2")
		})
	}
}

func TestSpansReachAnOTLPHTTPReceiverOnForceFlush(t *testing.T) {
	t.Parallel()
	rcv := tracingtest.NewReceiver(t)
	p, err := tracing.New(context.Background(), tracing.Config{Endpoint: rcv.Endpoint(), ServiceName: "qb-test"})
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Shutdown(context.Background()) })
	require.True(t, p.Enabled())

	_, span := p.Tracer().Start(context.Background(), "unit")
	span.End()
	require.NoError(t, p.ForceFlush(context.Background()))
	// ForceFlush returns once the receiver answered, so the span is there without waiting.
	spans := rcv.Spans()
	require.Len(t, spans, 1)
	assert.Equal(t, "unit", spans[0].Name)
	assert.Equal(t, "qb-test", spans[0].Service)
	assert.Equal(t, span.SpanContext().TraceID().String(), spans[0].TraceID)
}

func TestSampleRatioZeroRecordsNoNewTraceButFollowsASampledParent(t *testing.T) {
	t.Parallel()
	rcv := tracingtest.NewReceiver(t)
	zero := 0.0
	p, err := tracing.New(context.Background(), tracing.Config{Endpoint: rcv.Endpoint(), SampleRatio: &zero})
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Shutdown(context.Background()) })

	_, root := p.Tracer().Start(context.Background(), "new trace")
	root.End()
	parent := tracing.ContextFromHeaders(context.Background(), map[string]string{
		"Traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"})
	_, child := p.Tracer().Start(parent, "child")
	child.End()
	require.NoError(t, p.ForceFlush(context.Background()))
	spans := rcv.Spans()
	require.Len(t, spans, 1)
	assert.Equal(t, "child", spans[0].Name)
	assert.Equal(t, "0af7651916cd43dd8448eb211c80319c", spans[0].TraceID)
	assert.Equal(t, "b7ad6b7169203331", spans[0].ParentSpanID)
}

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
