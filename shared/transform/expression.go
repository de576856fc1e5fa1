package transform

import (
	"context"
	"encoding/json"
	"errors"
	"time"
)

// The defaults of a transform block (spec/23-configuration.md, transform).
const (
	// DefaultTimeout is the default timeoutMs: 100 ms.
	DefaultTimeout = 100 * time.Millisecond
	// DefaultMaxDepth is the default maxDepth: 100.
	DefaultMaxDepth = 100
)

// Limits bound one evaluation.
type Limits struct {
	// Timeout is the longest run time of one evaluation. Default: 100 ms.
	Timeout time.Duration
	// MaxDepth is the deepest JSONata evaluation depth: every step of the evaluation (a path
	// step, an operator, a function call, a block) counts one level while it runs, as in
	// JSONata's own stack guard (error D1011). Default: 100.
	MaxDepth int
}

// WithDefaults fills the zero fields with their defaults.
func (l Limits) WithDefaults() Limits {
	if l.Timeout <= 0 {
		l.Timeout = DefaultTimeout
	}
	if l.MaxDepth <= 0 {
		l.MaxDepth = DefaultMaxDepth
	}
	return l
}

// OnError is the error strategy of a transform block: Fail, Skip or Dead, in this letter case.
type OnError string

// The values of OnError.
const (
	// OnErrorFail retries a delivery and rejects a source message (the default).
	OnErrorFail OnError = "Fail"
	// OnErrorSkip passes the input on unchanged.
	OnErrorSkip OnError = "Skip"
	// OnErrorDead dead-letters a delivery and rejects a source message.
	OnErrorDead OnError = "Dead"
)

// Config is one transform block (a source's, a route's or a destination's transform).
type Config struct {
	// Expression is the JSONata expression. Required.
	Expression string
	// Timeout is the longest run time of one evaluation. Default: 100 ms.
	Timeout time.Duration
	// MaxDepth is the deepest evaluation depth (see Limits). Default: 100.
	MaxDepth int
	// OnError is Fail, Skip or Dead. Default: Fail.
	OnError OnError
}

// WithDefaults fills the zero fields with their defaults: the limits and onError Fail.
func (c Config) WithDefaults() Config {
	l := c.Limits()
	c.Timeout, c.MaxDepth = l.Timeout, l.MaxDepth
	if c.OnError == "" {
		c.OnError = OnErrorFail
	}
	return c
}

// Limits returns the limits of the block, defaults filled.
func (c Config) Limits() Limits {
	return Limits{Timeout: c.Timeout, MaxDepth: c.MaxDepth}.WithDefaults()
}

// Expression is a compiled JSONata expression with its limits. It is safe for concurrent use.
type Expression struct {
	engine *Engine
	key    exprKey
	limits Limits
}

// Compile checks that expr compiles and returns it bound to the limits (zero fields take the
// defaults). A compile error is an *Error of KindCompile that names the JSONata code and the
// position, for example `JSONata S0203 at position 21: Expected ")" before end of expression`;
// a compile that runs longer than five seconds (or the timeout, when longer) or nests too
// deeply for the JavaScript stack is a compile error too.
// Each runtime of the pool compiles the expression once, when it first evaluates it.
func (e *Engine) Compile(expr string, limits Limits) (*Expression, error) {
	limits = limits.WithDefaults()
	x := &Expression{engine: e, key: exprKey{src: expr, maxDepth: limits.MaxDepth}, limits: limits}
	_, err := e.run(context.Background(), "compile", max(limits.Timeout, compileTimeout), func(rt *jsRuntime) jobResult {
		_, res := rt.compiled(x.key)
		return res
	})
	var te *Error
	if errors.As(err, &te) && te.Kind != KindCompile {
		// A compile that runs out of time or stack is an expression that does not compile.
		return nil, &Error{Kind: KindCompile, Code: te.Code, Position: te.Position, Token: te.Token, Message: te.Message}
	}
	if err != nil {
		return nil, err
	}
	return x, nil
}

// Source returns the expression text.
func (x *Expression) Source() string { return x.key.src }

// Limits returns the limits of the expression, defaults filled.
func (x *Expression) Limits() Limits { return x.limits }

// Evaluate runs the expression on input (JSON text; an empty input means no input document, so
// `$` is undefined) with vars bound, and returns the result as JSON text.
//
// It waits for a runtime of the pool while ctx allows, then runs for at most the expression's
// timeout. The error is an *Error for every failure of the expression (see IsFailure and the
// sentinels ErrEvaluation, ErrTimeout, ErrDepth, ErrNoResult); an expression that gives no
// result (JSONata's undefined) fails with ErrNoResult. When ctx ends first, the error wraps
// ctx.Err() and is not a transform failure.
//
// Numbers pass through JavaScript: an integer beyond 2^53 loses precision in the result.
func (x *Expression) Evaluate(ctx context.Context, input json.RawMessage, vars Vars) (json.RawMessage, error) {
	bindings, err := vars.encode()
	if err != nil {
		return nil, err
	}
	return x.engine.run(ctx, "evaluation", x.limits.Timeout, func(rt *jsRuntime) jobResult {
		return rt.run(x.key, input, bindings)
	})
}
