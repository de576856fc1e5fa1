package otlp_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/alternayte/queuebox/shared/tracing"
	"github.com/alternayte/queuebox/shared/tracing/otlp"
	"github.com/alternayte/queuebox/shared/tracing/tracingtest"
)

func TestNewWithoutAnEndpointIsOffAndCostsNothing(t *testing.T) {
	t.Parallel()
	p, err := otlp.New(context.Background(), tracing.Config{Protocol: "nonsense"})
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
			_, err := otlp.New(context.Background(), tt.cfg)
			require.Error(t, err)
			assert.Equal(t, tt.wantErr, err.Error())
			assert.NotContains(t, err.Error(), "hunter2")
		})
	}
}

func TestSpansReachAnOTLPHTTPReceiverOnForceFlush(t *testing.T) {
	t.Parallel()
	rcv := tracingtest.NewReceiver(t)
	p, err := otlp.New(context.Background(), tracing.Config{Endpoint: rcv.Endpoint(), ServiceName: "qb-test"})
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
	p, err := otlp.New(context.Background(), tracing.Config{Endpoint: rcv.Endpoint(), SampleRatio: &zero})
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
