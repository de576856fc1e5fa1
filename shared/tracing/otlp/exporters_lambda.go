//go:build lambda.norpc

package otlp

import (
	"context"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/alternayte/queuebox/shared/tracing"
)

// The exporters of the Lambda functions, built with the tag lambda.norpc: the small OTLP/HTTP
// exporter of otlphttp.go, and no gRPC, so that grpc-go stays out of every zip (issue 8's
// 10 MB bound).

func newGRPCExporter(context.Context, string, time.Duration) (sdktrace.SpanExporter, error) {
	return nil, tracing.ErrNoGRPCInLambda
}

func newHTTPExporter(_ context.Context, target string, timeout time.Duration) (sdktrace.SpanExporter, error) {
	return newLightExporter(target, timeout), nil
}
