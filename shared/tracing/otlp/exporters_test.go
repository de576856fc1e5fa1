//go:build !lambda.norpc

package otlp_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/alternayte/queuebox/shared/tracing"
	"github.com/alternayte/queuebox/shared/tracing/otlp"
)

func TestGRPCProviderBuildsWithoutAReceiver(t *testing.T) {
	t.Parallel()
	// The gRPC exporter connects lazily: New returns at once, and a flush to a port that
	// nobody serves fails within its context instead of hanging.
	p, err := otlp.New(context.Background(), tracing.Config{Endpoint: "http://127.0.0.1:1", Protocol: tracing.ProtocolGRPC, ExportTimeout: time.Second})
	require.NoError(t, err)
	require.True(t, p.Enabled())
	_, span := p.Tracer().Start(context.Background(), "lost")
	span.End()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	assert.Error(t, p.ForceFlush(ctx))
	_ = p.Shutdown(ctx)
}
