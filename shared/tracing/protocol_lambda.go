//go:build lambda.norpc

package tracing

import "errors"

// ErrNoGRPCInLambda is the start error of a Lambda function configured with tracing.protocol
// grpc: the Lambda functions are built with the tag lambda.norpc, and that build of
// shared/tracing/otlp has no gRPC exporter, so that grpc-go stays out of every zip.
var ErrNoGRPCInLambda = errors.New("tracing.protocol grpc is not in the Lambda functions' build; set tracing.protocol (or OTEL_EXPORTER_OTLP_PROTOCOL) to http/protobuf")

// protocolInBuild refuses grpc, which this build has no exporter for.
func protocolInBuild(p Protocol) error {
	if p == ProtocolGRPC {
		return ErrNoGRPCInLambda
	}
	return nil
}
