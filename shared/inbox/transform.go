package inbox

import (
	"context"
	"encoding/json"

	"github.com/alternayte/queuebox/shared/transform"
)

// SourceTransform is the Transformer of a compiled source transform (sources.<name>.transform):
// it evaluates the expression on the received body with the variables of the source stage
// (transform.SourceVars). The handler and the intake apply the source's onError; it is safe
// for concurrent use, as the expression is.
type SourceTransform struct{ expr transform.Expression }

// CompileTransform compiles the source transform t on engine (the JSONata engine of
// shared/transform/jsonata), for the HTTP inbox's sources and a broker source's intake alike.
// The error is the compile error of the expression, or transform.ErrNoEngine without an
// engine.
func CompileTransform(engine transform.Compiler, t *transform.Config) (SourceTransform, error) {
	step, err := transform.CompileStep(engine, t)
	if err != nil || step == nil {
		return SourceTransform{}, err
	}
	return SourceTransform{expr: step.Expression}, nil
}

// Expression returns the compiled expression, with its limits.
func (s SourceTransform) Expression() transform.Expression { return s.expr }

// Transform implements Transformer.
func (s SourceTransform) Transform(ctx context.Context, in TransformInput) (json.RawMessage, error) {
	vars := transform.SourceVars(transform.Inbound{
		MessageID: in.MessageID, Source: in.Source, Headers: in.Headers,
		IdempotencyKey: nonEmpty(in.IdempotencyKey), EventType: nonEmpty(in.EventType),
		ReceivedAt: in.Timestamp,
	})
	return s.expr.Evaluate(ctx, in.Payload, vars)
}

// nonEmpty is nil for an empty string, which binds null.
func nonEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
