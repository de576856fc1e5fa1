// Package tracing holds QueueBox's tracing settings and tracer provider, and carries the W3C
// trace context (traceparent, tracestate) through the headers of inbox and outbox rows.
//
// Tracing is off unless an OTLP endpoint is configured (docs/tracing.md). When it is off, the
// Provider's Tracer is nil: the parts that take a tracer skip every tracing step (no SDK, no
// span, no header read or written), so tracing off costs nothing. When it is on, spans go
// through a batching span processor to an OTLP exporter over HTTP (protobuf) or gRPC.
//
// This package links no OpenTelemetry SDK: shared/tracing/otlp builds the Provider over it
// (otlp.New), and only the programs that record spans import that package and pass its New
// to their assembly. A program that records none (the admin Lambda function) still refuses
// the tracing settings that the others refuse, with Check, and links no SDK.
//
// The helpers that read and write the trace context of a row (ContextFromHeaders,
// ContextFromJSON, SetHeaders) match the header names in any letter case, as the rows'
// headers are matched everywhere else in QueueBox.
package tracing

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"
)

// Protocol is the OTLP transport of the exporter.
type Protocol string

// The OTLP protocols (the values of OTEL_EXPORTER_OTLP_PROTOCOL that QueueBox supports).
const (
	// ProtocolHTTP is OTLP over HTTP with protobuf bodies, POSTed to <endpoint>/v1/traces.
	ProtocolHTTP Protocol = "http/protobuf"
	// ProtocolGRPC is OTLP over gRPC.
	ProtocolGRPC Protocol = "grpc"
)

// InstrumentationName is the name of the tracer that creates QueueBox's spans.
const InstrumentationName = "github.com/alternayte/queuebox"

// Config holds the tracing settings (the tracing block of the configuration and the standard
// OTEL_ variables, resolved by the configuration).
type Config struct {
	// Endpoint is the base URL of the OTLP receiver (OTEL_EXPORTER_OTLP_ENDPOINT): for
	// http/protobuf the spans go to Endpoint + "/v1/traces". Empty, with TracesEndpoint empty
	// too, means tracing is off.
	Endpoint string
	// TracesEndpoint is the full URL of the traces receiver
	// (OTEL_EXPORTER_OTLP_TRACES_ENDPOINT); when set it wins over Endpoint and is used as it
	// is. Default: none.
	TracesEndpoint string
	// Protocol is http/protobuf or grpc. Default: http/protobuf.
	Protocol Protocol
	// ServiceName is the service.name of the spans' resource. Default: queuebox.
	ServiceName string
	// SampleRatio is the share of new traces recorded, from 0 to 1; a span whose parent came
	// with a trace context follows the parent's sampled flag. Nil means 1 (every trace).
	SampleRatio *float64
	// ExportTimeout bounds one export. Default 10 s.
	ExportTimeout time.Duration
}

// Enabled reports whether the config names an endpoint, so that tracing is on.
func (c Config) Enabled() bool {
	return strings.TrimSpace(c.Endpoint) != "" || strings.TrimSpace(c.TracesEndpoint) != ""
}

// WithDefaults returns the config with every zero value replaced by its default.
func (c Config) WithDefaults() Config {
	if c.Protocol == "" {
		c.Protocol = ProtocolHTTP
	}
	if c.ServiceName == "" {
		c.ServiceName = "queuebox"
	}
	if c.SampleRatio == nil {
		one := 1.0
		c.SampleRatio = &one
	}
	if c.ExportTimeout <= 0 {
		c.ExportTimeout = 10 * time.Second
	}
	return c
}

// Validate checks a config with its defaults filled; the errors name the configuration key.
func (c Config) Validate() error {
	switch c.Protocol {
	case ProtocolHTTP, ProtocolGRPC:
	default:
		return fmt.Errorf("tracing.protocol must be http/protobuf or grpc, not %q", c.Protocol)
	}
	if r := *c.SampleRatio; r < 0 || r > 1 {
		return fmt.Errorf("tracing.sampleRatio must be from 0 to 1, not %g", r)
	}
	if _, err := c.ExportURL(); err != nil {
		return err
	}
	return nil
}

// ExportURL returns the URL that the exporter sends to: TracesEndpoint as it is, else
// Endpoint, with /v1/traces added for http/protobuf. The error names the key.
func (c Config) ExportURL() (string, error) {
	raw, key := strings.TrimSpace(c.TracesEndpoint), "tracing.tracesEndpoint"
	if raw == "" {
		raw, key = strings.TrimSpace(c.Endpoint), "tracing.endpoint"
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		// The URL is not quoted: it may hold a credential.
		return "", fmt.Errorf("%s must be an http:// or https:// URL with a host", key)
	}
	if key == "tracing.endpoint" && c.Protocol == ProtocolHTTP {
		u.Path = strings.TrimSuffix(u.Path, "/") + "/v1/traces"
	}
	return u.String(), nil
}

// Provider is the process's tracer provider. A nil *Provider, and the zero Provider, is off:
// its Tracer is nil and its ForceFlush and Shutdown do nothing. otlp.New makes the one of a
// config. A Provider is safe for concurrent use.
type Provider struct {
	sdk    SDK
	tracer trace.Tracer
}

// SDK is what a Provider flushes and stops: the OpenTelemetry SDK's tracer provider, which
// shared/tracing/otlp builds.
type SDK interface {
	// ForceFlush exports every ended span now.
	ForceFlush(ctx context.Context) error
	// Shutdown flushes the spans and stops the exporter.
	Shutdown(ctx context.Context) error
}

// NewProvider returns the Provider that is on: its spans come from tracer, and sdk flushes and
// stops them. otlp.New calls it.
func NewProvider(tracer trace.Tracer, sdk SDK) *Provider {
	return &Provider{sdk: sdk, tracer: tracer}
}

// NewFunc makes the Provider of a config: otlp.New. A program's assembly takes it as an
// option, so that only the programs that record spans link the SDK.
type NewFunc func(ctx context.Context, cfg Config) (*Provider, error)

// Check returns the error that otlp.New returns for cfg, without building anything: a config
// that names no endpoint passes (tracing is off); otherwise the config with its defaults must
// be valid and its protocol must be in this build (the Lambda functions' build has no gRPC
// exporter). otlp.New calls it first; a program that records no span but refuses the
// configurations that the others refuse (the admin Lambda function) calls it alone.
func Check(cfg Config) error {
	if !cfg.Enabled() {
		return nil
	}
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return err
	}
	if err := protocolInBuild(cfg.Protocol); err != nil {
		return fmt.Errorf("creating the OTLP trace exporter: %w", err)
	}
	return nil
}

// Enabled reports whether the provider records spans.
func (p *Provider) Enabled() bool { return p != nil && p.sdk != nil }

// Tracer returns the tracer of QueueBox's spans, or nil when tracing is off. The parts of
// QueueBox take it as an option, where nil means no tracing.
func (p *Provider) Tracer() trace.Tracer {
	if p == nil {
		return nil
	}
	return p.tracer
}

// ForceFlush exports every ended span now and returns when the receiver took them or ctx
// ends. The Lambda functions call it before a handler returns.
func (p *Provider) ForceFlush(ctx context.Context) error {
	if !p.Enabled() {
		return nil
	}
	if err := p.sdk.ForceFlush(ctx); err != nil {
		return fmt.Errorf("flushing the spans: %w", err)
	}
	return nil
}

// Shutdown flushes the spans and stops the exporter. It is safe to call more than once.
func (p *Provider) Shutdown(ctx context.Context) error {
	if !p.Enabled() {
		return nil
	}
	if err := p.sdk.Shutdown(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("stopping the span exporter: %w", err)
	}
	return nil
}
