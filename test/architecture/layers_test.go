package architecture

import (
	"slices"
	"strings"
	"testing"
)

// layers are the layers of shared/ from the top down, as the table "Layers" of
// docs/architecture.md names them: each holds package paths below shared/, a path standing
// for itself and the packages below it. A package belongs to the layer of its longest
// matching path; a package that no path matches is support. An import may point to the
// package's own layer or to one below it, never up.
var layers = []struct {
	name  string
	paths []string
}{
	{"runtimes", []string{"cli", "localserver", "lambdafn", "capturenode"}},
	{"composition root", []string{"service"}},
	{"connectors", []string{"connect"}},
	{"delivery core", []string{"outbox", "relay", "inbox", "capture", "retention", "replay", "admin", "console", "deadletter", "migrate", "metrics", "emf", "openapi"}},
	{"stores", []string{"store"}},
	// Leaf packages that every layer shares; connect/kind is the one definition of the
	// connector kinds, which the configuration model names without linking a connector.
	{"support", []string{"connect/kind"}},
}

// layerOf returns the index in layers of the package path (a path below shared/).
func layerOf(rel string) int {
	best, bestLen := len(layers)-1, -1
	for i, l := range layers {
		for _, p := range l.paths {
			if (rel == p || strings.HasPrefix(rel, p+"/")) && len(p) > bestLen {
				best, bestLen = i, len(p)
			}
		}
	}
	return best
}

// TestImportsPointDownTheLayers fails when a package of shared/ imports a package of a layer
// above its own (test helpers aside, which only tests import).
func TestImportsPointDownTheLayers(t *testing.T) {
	t.Parallel()
	for _, p := range listShared(t) {
		rel := strings.TrimPrefix(p.ImportPath, shared)
		if slices.Contains(testHelpers, "shared/"+rel) {
			continue
		}
		from := layerOf(rel)
		for _, imp := range p.Imports {
			target, ok := strings.CutPrefix(imp, shared)
			if !ok {
				continue
			}
			if to := layerOf(target); to < from {
				t.Errorf("shared/%s (%s) imports shared/%s (%s), a layer above it: move the code to the layer that owns it, or pass it in from the layer above",
					rel, layers[from].name, target, layers[to].name)
			}
		}
	}
}

// TestLayerOf pins the assignment of a few packages, the longest path winning.
func TestLayerOf(t *testing.T) {
	t.Parallel()
	for rel, want := range map[string]string{
		"capturenode":        "runtimes",
		"service/connectors": "composition root",
		"connect/rabbitmq":   "connectors",
		"connect/kind":       "support",
		"console/operator":   "delivery core",
		"store/postgres":     "stores",
		"redact":             "support",
	} {
		if got := layers[layerOf(rel)].name; got != want {
			t.Errorf("layerOf(%q) = %s, want %s", rel, got, want)
		}
	}
}
