package config

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestTracingIsOffByDefaultAndTakesTheOTELVariablesForWhatTheBlockLeavesUnset(t *testing.T) {
	t.Parallel()
	cfg := mustLoad(t, minimalDatabase, nil)
	assert.False(t, cfg.Tracing.Enabled())
	assert.Equal(t, Tracing{Protocol: "http/protobuf", ServiceName: "queuebox", SampleRatio: 1, ExportTimeoutMs: 10000}, cfg.Tracing)

	env := map[string]string{
		"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318",
		"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
		"OTEL_SERVICE_NAME":           "payments-queuebox",
	}
	cfg = mustLoad(t, minimalDatabase, env)
	assert.True(t, cfg.Tracing.Enabled())
	assert.Equal(t, "http://collector:4318", cfg.Tracing.Endpoint)
	assert.Equal(t, "grpc", cfg.Tracing.Protocol)
	assert.Equal(t, "payments-queuebox", cfg.Tracing.ServiceName)

	// The block wins over the OTEL_ variables, key by key.
	cfg = mustLoad(t, minimalDatabase+"tracing:\n  endpoint: https://otel.example:4318\n  sampleRatio: 0.25\n  serviceName: qb\n", env)
	assert.Equal(t, "https://otel.example:4318", cfg.Tracing.Endpoint)
	assert.Equal(t, "grpc", cfg.Tracing.Protocol)
	assert.Equal(t, "qb", cfg.Tracing.ServiceName)
	assert.InDelta(t, 0.25, cfg.Tracing.SampleRatio, 1e-9)

	// The traces endpoint variable alone turns tracing on.
	cfg = mustLoad(t, minimalDatabase, map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4318/v1/traces"})
	assert.True(t, cfg.Tracing.Enabled())
	assert.Equal(t, "http://c:4318/v1/traces", cfg.Tracing.TracesEndpoint)

	// OTEL_SDK_DISABLED=true turns it off whatever sets the endpoint.
	cfg = mustLoad(t, minimalDatabase+"tracing:\n  endpoint: http://c:4318\n", map[string]string{"OTEL_SDK_DISABLED": "TRUE"})
	assert.False(t, cfg.Tracing.Enabled())

	// The QUEUEBOX_ variables set the block's keys as for every key.
	cfg = mustLoad(t, minimalDatabase, map[string]string{"QUEUEBOX_TRACING_ENDPOINT": "http://c:4318", "QUEUEBOX_TRACING_SAMPLERATIO": "0.5"})
	assert.Equal(t, "http://c:4318", cfg.Tracing.Endpoint)
	assert.InDelta(t, 0.5, cfg.Tracing.SampleRatio, 1e-9)
}

func TestTracingValidation(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		block   string
		env     map[string]string
		wantErr string
	}{
		{name: "sample ratio above 1", block: "tracing:\n  sampleRatio: 1.5\n", wantErr: "tracing.sampleRatio (QUEUEBOX_TRACING_SAMPLERATIO) must be from 0 to 1, not 1.5"},
		{name: "sample ratio below 0", block: "tracing:\n  sampleRatio: -0.1\n", wantErr: "tracing.sampleRatio (QUEUEBOX_TRACING_SAMPLERATIO) must be from 0 to 1, not -0.1"},
		{name: "sample ratio not a number", block: "tracing:\n  sampleRatio: half\n", wantErr: `tracing.sampleRatio (QUEUEBOX_TRACING_SAMPLERATIO) must be a number, not "half"`},
		{name: "protocol", block: "tracing:\n  protocol: http/json\n", wantErr: "tracing.protocol (QUEUEBOX_TRACING_PROTOCOL) must be"},
		{name: "protocol from OTEL variable", env: map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "thrift"}, wantErr: "tracing.protocol (QUEUEBOX_TRACING_PROTOCOL) must be"},
		{name: "endpoint without scheme", block: "tracing:\n  endpoint: collector:4318\n", wantErr: "tracing.endpoint (QUEUEBOX_TRACING_ENDPOINT) must be an http:// or https:// URL with a host"},
		{name: "traces endpoint", block: "tracing:\n  tracesEndpoint: ftp://secret@c/x\n", wantErr: "tracing.tracesEndpoint (QUEUEBOX_TRACING_TRACESENDPOINT) must be an http:// or https:// URL with a host"},
		{name: "export timeout zero", block: "tracing:\n  exportTimeoutMs: 0\n", wantErr: "tracing.exportTimeoutMs (QUEUEBOX_TRACING_EXPORTTIMEOUTMS) must be above 0"},
		{name: "export timeout above bound", block: "tracing:\n  exportTimeoutMs: 60001\n", wantErr: "tracing.exportTimeoutMs (QUEUEBOX_TRACING_EXPORTTIMEOUTMS) must be at most 60000, not 60001"},
		{name: "valid", block: "tracing:\n  endpoint: http://c:4317\n  protocol: GRPC\n  sampleRatio: 0\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, _, err := loadYAML(t, minimalDatabase+tt.block, tt.env, nil)
			if tt.wantErr == "" {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Contains(t, strings.Join(problemStrings(t, err), "\n"), tt.wantErr)
			assert.NotContains(t, err.Error(), "secret@")
		})
	}
}

func TestTracingPrintsWithItsCredentialsMasked(t *testing.T) {
	t.Parallel()
	cfg := mustLoad(t, minimalDatabase+"tracing:\n  endpoint: http://user:s3cr3t@c:4318/?token=abc\n  sampleRatio: 0.25\n", nil)
	out, err := cfg.MaskedYAML()
	require.NoError(t, err)
	text := string(out)
	assert.Contains(t, text, "tracing:\n  endpoint: http://user:***@c:4318/?token=***\n")
	assert.Contains(t, text, "  sampleRatio: 0.25\n")
	assert.NotContains(t, text, "s3cr3t")
	assert.NotContains(t, text, "abc")
}
