// Package otlp builds QueueBox's tracer provider (shared/tracing's Provider): the
// OpenTelemetry SDK with a batching span processor to an OTLP exporter over HTTP (protobuf) or
// gRPC (docs/tracing.md). It is apart from shared/tracing so that a program that records no
// span links no SDK: the programs that record spans (queuebox serve, the capture node, and
// the poll, inbox, relay and retention Lambda functions) pass New to their assembly
// (service.AppOptions.NewTracing, lambdafn.Options.NewTracing).
//
// The Lambda functions are built with the tag lambda.norpc, and that build has a small
// OTLP/HTTP exporter of its own (otlphttp.go) and no gRPC; the others use OpenTelemetry's
// OTLP exporters.
package otlp

import (
	"context"
	"fmt"

	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"

	"github.com/alternayte/queuebox/shared/tracing"
)

var _ tracing.NewFunc = New

// New returns the Provider of cfg: off (no SDK at all) when cfg names no endpoint; otherwise
// an SDK tracer provider that batches the spans to the OTLP exporter of cfg.Protocol. It
// refuses what tracing.Check refuses, with the same error. The exporter connects lazily, so
// New does not wait for the receiver.
func New(ctx context.Context, cfg tracing.Config) (*tracing.Provider, error) {
	if !cfg.Enabled() {
		return &tracing.Provider{}, nil
	}
	if err := tracing.Check(cfg); err != nil {
		return nil, err
	}
	cfg = cfg.WithDefaults()
	target, _ := cfg.ExportURL()
	var exp sdktrace.SpanExporter
	var err error
	switch cfg.Protocol {
	case tracing.ProtocolGRPC:
		exp, err = newGRPCExporter(ctx, target, cfg.ExportTimeout)
	default:
		exp, err = newHTTPExporter(ctx, target, cfg.ExportTimeout)
	}
	if err != nil {
		return nil, fmt.Errorf("creating the OTLP trace exporter: %w", err)
	}
	res, err := resource.Merge(resource.Default(), resource.NewWithAttributes(semconv.SchemaURL, semconv.ServiceName(cfg.ServiceName)))
	if err != nil {
		// A schema conflict between the default resource and ours: keep ours alone.
		res = resource.NewWithAttributes(semconv.SchemaURL, semconv.ServiceName(cfg.ServiceName))
	}
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp),
		sdktrace.WithResource(res),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(*cfg.SampleRatio))),
	)
	return tracing.NewProvider(tp.Tracer(tracing.InstrumentationName), tp), nil
}
