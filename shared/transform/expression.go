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

// Expression is a compiled JSONata expression bound to its limits. Implementations are safe
// for concurrent use.
type Expression interface {
	// Evaluate runs the expression on input (JSON text; an empty input means no input
	// document, so `$` is undefined) with vars bound, and returns the result as JSON text.
	// The error is an *Error for every failure of the expression (see IsFailure and the
	// sentinels ErrEvaluation, ErrTimeout, ErrDepth, ErrNoResult); when ctx ends first, the
	// error wraps ctx.Err() and is not a transform failure.
	Evaluate(ctx context.Context, input json.RawMessage, vars Vars) (json.RawMessage, error)
	// Source returns the expression text.
	Source() string
	// Limits returns the limits of the expression, defaults filled.
	Limits() Limits
}

// Compiler compiles JSONata expressions: the JSONata engine of shared/transform/jsonata,
// which a program passes to the parts that run transforms. A program that runs none passes
// no Compiler and so links no JavaScript engine. It is safe for concurrent use.
type Compiler interface {
	// Compile checks that expr compiles and returns it bound to limits (zero fields take the
	// defaults). A compile error is an *Error of KindCompile.
	Compile(expr string, limits Limits) (Expression, error)
}

// ErrNoEngine is the error of a transform block compiled without a Compiler: a program that
// links no JSONata engine was asked to run a transform.
var ErrNoEngine = errors.New("this program has no JSONata engine to compile the transform")
