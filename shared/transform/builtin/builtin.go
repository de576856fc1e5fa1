// Package builtin gives a Lambda function the transform engine it is built with: the JSONata
// engine of shared/transform/jsonata by default, or, built with the Go tag
// queuebox_no_jsonata, a compiler that refuses every expression, so that the function links
// no JavaScript engine (a smaller zip) and stops at its start when its configuration holds a
// transform (deploy/README.md).
package builtin

import (
	"errors"

	"github.com/alternayte/queuebox/shared/transform"
)

// Tag is the Go build tag that leaves the JSONata engine out.
const Tag = "queuebox_no_jsonata"

// ErrLeftOut is the error of every expression compiled by a program built with Tag.
var ErrLeftOut = errors.New("this function was built without the JSONata engine (the build tag " + Tag + "), so it runs no transform: remove the transform from the configuration, or build the function without " + Tag)

// LeftOut returns the Compiler of a program built with Tag: it refuses every expression with
// ErrLeftOut.
func LeftOut() transform.Compiler { return leftOut{} }

// leftOut is the Compiler of a program built with Tag.
type leftOut struct{}

// Compile refuses expr with ErrLeftOut.
func (leftOut) Compile(string, transform.Limits) (transform.Expression, error) {
	return nil, ErrLeftOut
}
