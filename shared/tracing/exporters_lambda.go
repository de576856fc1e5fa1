//go:build lambda.norpc

package tracing

import (
	"context"
	"errors"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// The exporters of the Lambda functions, built with the tag lambda.norpc: the small OTLP/HTTP
// exporter of otlphttp.go, and no gRPC, so that grpc-go stays out of every zip (issue 8's
// 10 MB bound).

// ErrNoGRPCInLambda is the start error of a Lambda function configured with tracing.protocol
// grpc.
var ErrNoGRPCInLambda = errors.New("tracing.protocol grpc is not in the Lambda functions' build; set tracing.protocol (or OTEL_EXPORTER_OTLP_PROTOCOL) to http/protobuf")

func newGRPCExporter(context.Context, string, time.Duration) (sdktrace.SpanExporter, error) {
	return nil, ErrNoGRPCInLambda
}

func newHTTPExporter(_ context.Context, target string, timeout time.Duration) (sdktrace.SpanExporter, error) {
	return newLightExporter(target, timeout), nil
}
