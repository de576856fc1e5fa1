package lambdafn

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/alternayte/queuebox/shared/tracing"
	"github.com/alternayte/queuebox/shared/tracing/otlp"
	"github.com/alternayte/queuebox/shared/tracing/tracingtest"
)

// The spans of an invocation reach the receiver before the handler returns to the Lambda
// runtime, which may freeze the container right after: the batch processor alone would hold
// them for seconds.
func TestSpansAreFlushedBeforeTheInvocationReturns(t *testing.T) {
	t.Parallel()
	rcv := tracingtest.NewReceiver(t)
	tp, err := otlp.New(context.Background(), tracing.Config{Endpoint: rcv.Endpoint()})
	require.NoError(t, err)
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	rt := &Runtime{Tracing: tp}

	handler := func(ctx context.Context, in string) (string, error) {
		_, span := tp.Tracer().Start(ctx, "invocation "+in)
		span.End()
		return "ok " + in, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	got, err := withSpanFlush(rt, handler)(ctx, "a")
	require.NoError(t, err)
	assert.Equal(t, "ok a", got)
	spans := rcv.Spans() // no wait: the flush returned after the receiver answered
	require.Len(t, spans, 1)
	assert.Equal(t, "invocation a", spans[0].Name)

	// Tracing off: the handler is returned unchanged and nothing is exported.
	off := &Runtime{Tracing: &tracing.Provider{}}
	got, err = withSpanFlush(off, func(_ context.Context, in string) (string, error) { return in, nil })(ctx, "b")
	require.NoError(t, err)
	assert.Equal(t, "b", got)
	assert.Len(t, rcv.Spans(), 1)
}
