//go:build lambda.norpc

package tracing_test

import (
	"errors"
	"testing"

	"github.com/alternayte/queuebox/shared/tracing"
)

// TestLambdaBuildChecksRefuseGRPC: in the Lambda build, Check refuses grpc as otlp.New does,
// so that a function that makes no tracer provider (the admin function) refuses it too.
func TestLambdaBuildChecksRefuseGRPC(t *testing.T) {
	err := tracing.Check(tracing.Config{Endpoint: "http://127.0.0.1:1", Protocol: tracing.ProtocolGRPC})
	if !errors.Is(err, tracing.ErrNoGRPCInLambda) {
		t.Fatalf("Check with grpc in the Lambda build: %v, want ErrNoGRPCInLambda", err)
	}
}
