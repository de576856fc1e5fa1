package jsonata

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/alternayte/queuebox/shared/transform"
)

// Expression is a compiled JSONata expression with its limits (a transform.Expression). It is
// safe for concurrent use.
type Expression struct {
	engine *Engine
	key    exprKey
	limits transform.Limits
}

var _ transform.Compiler = (*Engine)(nil)

// Compile checks that expr compiles and returns it, an *Expression, bound to the limits (zero
// fields take the defaults). A compile error is a *transform.Error of KindCompile that names
// the JSONata code and the position, for example
// `JSONata S0203 at position 21: Expected ")" before end of expression`; a compile that runs
// longer than five seconds (or the timeout, when longer) or nests too deeply for the
// JavaScript stack is a compile error too.
// Each runtime of the pool compiles the expression once, when it first evaluates it.
func (e *Engine) Compile(expr string, limits transform.Limits) (transform.Expression, error) {
	limits = limits.WithDefaults()
	x := &Expression{engine: e, key: exprKey{src: expr, maxDepth: limits.MaxDepth}, limits: limits}
	_, err := e.run(context.Background(), "compile", max(limits.Timeout, compileTimeout), func(rt *jsRuntime) jobResult {
		_, res := rt.compiled(x.key)
		return res
	})
	var te *transform.Error
	if errors.As(err, &te) && te.Kind != transform.KindCompile {
		// A compile that runs out of time or stack is an expression that does not compile.
		return nil, &transform.Error{Kind: transform.KindCompile, Code: te.Code, Position: te.Position, Token: te.Token, Message: te.Message}
	}
	if err != nil {
		return nil, err
	}
	return x, nil
}

// CompileStep compiles a transform block on the engine (transform.CompileStep); a nil block
// gives a nil step.
func (e *Engine) CompileStep(t *transform.Config) (*transform.Step, error) {
	return transform.CompileStep(e, t)
}

// Source returns the expression text.
func (x *Expression) Source() string { return x.key.src }

// Limits returns the limits of the expression, defaults filled.
func (x *Expression) Limits() transform.Limits { return x.limits }

// Evaluate runs the expression on input (JSON text; an empty input means no input document, so
// `$` is undefined) with vars bound, and returns the result as JSON text.
//
// It waits for a runtime of the pool while ctx allows, then runs for at most the expression's
// timeout. The error is a *transform.Error for every failure of the expression (see
// transform.IsFailure and the sentinels ErrEvaluation, ErrTimeout, ErrDepth, ErrNoResult); an
// expression that gives no result (JSONata's undefined) fails with ErrNoResult. When ctx ends
// first, the error wraps ctx.Err() and is not a transform failure.
//
// Numbers pass through JavaScript: an integer beyond 2^53 loses precision in the result.
func (x *Expression) Evaluate(ctx context.Context, input json.RawMessage, vars transform.Vars) (json.RawMessage, error) {
	bindings, err := encodeVars(vars)
	if err != nil {
		return nil, err
	}
	return x.engine.run(ctx, "evaluation", x.limits.Timeout, func(rt *jsRuntime) jobResult {
		return rt.run(x.key, input, bindings)
	})
}

// encodeVars renders the variables as a JSON object, or "" when there are none.
func encodeVars(v transform.Vars) (string, error) {
	if len(v) == 0 {
		return "", nil
	}
	b, err := json.Marshal(map[string]any(v))
	if err != nil {
		return "", fmt.Errorf("encoding transform variables: %w", err)
	}
	return string(b), nil
}
