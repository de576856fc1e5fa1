//go:build !lambda.norpc

package otlp

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// The exporters of the service and the capture node: OpenTelemetry's OTLP exporters, with
// every standard OTEL_EXPORTER_OTLP_* variable (headers, certificates, compression, retries).
// The Lambda functions are built with the tag lambda.norpc and use those of
// exporters_lambda.go instead.

// newGRPCExporter is the exporter of protocol grpc.
func newGRPCExporter(ctx context.Context, target string, timeout time.Duration) (sdktrace.SpanExporter, error) {
	return otlptracegrpc.New(ctx, otlptracegrpc.WithEndpointURL(target), otlptracegrpc.WithTimeout(timeout))
}

// newHTTPExporter is the exporter of protocol http/protobuf.
func newHTTPExporter(ctx context.Context, target string, timeout time.Duration) (sdktrace.SpanExporter, error) {
	return otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(target), otlptracehttp.WithTimeout(timeout))
}
