// Package jsjsonata holds the JSONata build that the engine of shared/transform/jsonata
// loads into each JavaScript runtime: jsonata.min.js of npm jsonata 2.2.2 (MIT), committed
// with its licence. `make jsonata` installs the pinned package with npm ci and checks the file
// against it (README.md).
package jsjsonata

import _ "embed"

// Source is the minified build of npm jsonata 2.2.2.
//
//go:embed jsonata.min.js
var Source string
