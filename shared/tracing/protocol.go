//go:build !lambda.norpc

package tracing

// protocolInBuild accepts both protocols: this build has both exporters (shared/tracing/otlp).
func protocolInBuild(Protocol) error { return nil }
