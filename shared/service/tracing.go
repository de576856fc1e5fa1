package service

import (
	"github.com/alternayte/queuebox/shared/config"
	"github.com/alternayte/queuebox/shared/tracing"
)

// TracingConfig maps the tracing section (already filled from the OTEL_ variables by the
// configuration loader) to the tracer provider's settings.
func TracingConfig(cfg *config.Config) tracing.Config {
	t := cfg.Tracing
	ratio := t.SampleRatio
	return tracing.Config{
		Endpoint:       t.Endpoint,
		TracesEndpoint: t.TracesEndpoint,
		Protocol:       tracing.Protocol(t.Protocol),
		ServiceName:    t.ServiceName,
		SampleRatio:    &ratio,
		ExportTimeout:  t.ExportTimeoutMs.Duration(),
	}.WithDefaults()
}
