package transform

import (
	"errors"
	"fmt"
	"strings"
)

// Kind classifies a transform error.
type Kind int

// The kinds of transform error.
const (
	// KindCompile: the expression does not compile.
	KindCompile Kind = iota + 1
	// KindEvaluation: the evaluation failed, for example a type error, $error(), or input that
	// is not JSON.
	KindEvaluation
	// KindTimeout: the evaluation ran longer than its timeout.
	KindTimeout
	// KindDepth: the evaluation recursed deeper than its maximum depth.
	KindDepth
	// KindNoResult: the expression gave no result (JSONata's undefined), so there is no body.
	KindNoResult
)

// String names the kind.
func (k Kind) String() string {
	switch k {
	case KindCompile:
		return "compile"
	case KindEvaluation:
		return "evaluation"
	case KindTimeout:
		return "timeout"
	case KindDepth:
		return "depth"
	case KindNoResult:
		return "no result"
	default:
		return fmt.Sprintf("Kind(%d)", int(k))
	}
}

// Sentinel errors, one per Kind: errors.Is(err, ErrTimeout) reports a timeout, and so on. Every
// *Error matches exactly the sentinel of its kind.
var (
	ErrCompile    = errors.New("transform: expression does not compile")
	ErrEvaluation = errors.New("transform: evaluation failed")
	ErrTimeout    = errors.New("transform: evaluation timed out")
	ErrDepth      = errors.New("transform: evaluation too deep")
	ErrNoResult   = errors.New("transform: expression gave no result")
)

// Error is a failed compile or evaluation of a JSONata expression.
type Error struct {
	// Kind classifies the error.
	Kind Kind
	// Code is the JSONata error code, such as "S0203" or "T2001". Codes of QueueBox's own
	// guards start with "QB": QB1001 a regular expression match ran too long, QB1002 a $pad
	// width above the limit. Empty when there is none (a timeout, no result).
	Code string
	// Position is the character position in the expression that JSONata reports, or -1.
	Position int
	// Token is the token that JSONata reports, or empty.
	Token string
	// Message is the human-readable reason.
	Message string
}

// Error formats the error, with its code and position when known.
func (e *Error) Error() string {
	var b strings.Builder
	if e.Code != "" {
		b.WriteString("JSONata ")
		b.WriteString(e.Code)
		if e.Position >= 0 {
			fmt.Fprintf(&b, " at position %d", e.Position)
		}
		b.WriteString(": ")
	} else if e.Position >= 0 {
		fmt.Fprintf(&b, "at position %d: ", e.Position)
	}
	b.WriteString(e.Message)
	return b.String()
}

// Is matches the sentinel of the error's kind.
func (e *Error) Is(target error) bool {
	switch target {
	case ErrCompile:
		return e.Kind == KindCompile
	case ErrEvaluation:
		return e.Kind == KindEvaluation
	case ErrTimeout:
		return e.Kind == KindTimeout
	case ErrDepth:
		return e.Kind == KindDepth
	case ErrNoResult:
		return e.Kind == KindNoResult
	}
	return false
}

// IsFailure reports whether err is a transform failure that the error strategy (onError) of the
// block decides about: a compile error, an evaluation error, a timeout, a depth overflow or no
// result. It is false for nil and for the context's cancellation, which says nothing about the
// expression and must not dead-letter a row.
func IsFailure(err error) bool {
	var e *Error
	return errors.As(err, &e)
}

// KindOf returns the kind of a transform failure, or 0 when err is not one.
func KindOf(err error) Kind {
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	return 0
}
