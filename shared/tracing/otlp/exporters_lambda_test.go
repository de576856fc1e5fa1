//go:build lambda.norpc

package otlp_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/alternayte/queuebox/shared/tracing"
	"github.com/alternayte/queuebox/shared/tracing/otlp"
	"github.com/alternayte/queuebox/shared/tracing/tracingtest"
)

// TestLambdaBuildRefusesGRPC: the Lambda build has no gRPC exporter; a function configured
// with it stops at its start with the reason and the setting to change.
func TestLambdaBuildRefusesGRPC(t *testing.T) {
	_, err := otlp.New(context.Background(), tracing.Config{Endpoint: "http://127.0.0.1:1", Protocol: tracing.ProtocolGRPC, ExportTimeout: time.Second})
	if !errors.Is(err, tracing.ErrNoGRPCInLambda) {
		t.Fatalf("New with grpc in the Lambda build: %v, want ErrNoGRPCInLambda", err)
	}
}

// TestLambdaBuildExportsOverHTTP: the Lambda build's small exporter delivers a flushed span to
// a real OTLP/HTTP receiver, which decodes it with the generated OTLP types.
func TestLambdaBuildExportsOverHTTP(t *testing.T) {
	r := tracingtest.NewReceiver(t)
	p, err := otlp.New(context.Background(), tracing.Config{Endpoint: r.Endpoint(), ServiceName: "fn"})
	if err != nil {
		t.Fatal(err)
	}
	_, span := p.Tracer().Start(context.Background(), "outbox deliver")
	span.End()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := p.ForceFlush(ctx); err != nil {
		t.Fatalf("flush: %v", err)
	}
	spans := r.WaitFor(t, 30*time.Second, func(s []tracingtest.Span) bool { return len(s) == 1 })
	if spans[0].Name != "outbox deliver" || spans[0].Service != "fn" {
		t.Errorf("received %+v", spans[0])
	}
	_ = p.Shutdown(ctx)
}
