//go:build !queuebox_no_jsonata

package builtin

import (
	"github.com/alternayte/queuebox/shared/transform"
	"github.com/alternayte/queuebox/shared/transform/jsonata"
)

// Included reports whether the program links the JSONata engine.
const Included = true

// Engine returns the JSONata engine.
func Engine() transform.Compiler { return jsonata.NewEngine(jsonata.EngineOptions{}) }
