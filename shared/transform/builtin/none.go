//go:build queuebox_no_jsonata

package builtin

import "github.com/alternayte/queuebox/shared/transform"

// Included reports whether the program links the JSONata engine.
const Included = false

// Engine returns a compiler that refuses every expression with ErrLeftOut.
func Engine() transform.Compiler { return LeftOut() }
