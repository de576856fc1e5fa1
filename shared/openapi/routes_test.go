package openapi_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/alternayte/queuebox/shared/inbox"
	"github.com/alternayte/queuebox/shared/openapi"
)

// routeFolders are the folders of the module whose Go files build the servers of QueueBox:
// queuebox serve (local, shared/localserver), the capture node, and the Lambda functions.
var routeFolders = []string{"shared", "local", "capturenode", "functions"}

// notQueueBox are folders below routeFolders whose routes are not QueueBox's: the demo
// receiver that the tutorials deliver to is a program of its own.
var notQueueBox = []string{"local/receiver"}

// registered is one route pattern that a server registers, and where.
type registered struct {
	pattern string
	at      string
}

// TestTheDescriptionHasEveryRouteTheServersRegister reads every call of Handle and HandleFunc
// in the Go files that build the servers (tests aside) and fails when the routes they register
// and the operations of openapi.yaml (docs/openapi.yaml) differ: a route that the description
// lacks, or an operation that no server registers. A pattern with a method is a route
// ("GET /console/{$}" is the operation GET /console/); a pattern without one only hands a
// prefix to the management routes on the data port, and must lead to a path that the
// description has. The inbox's routes are registered by no mux: the inbox handler serves
// POST <inbox.basePath>/<source path>, which the description names POST /inbox/{source}.
func TestTheDescriptionHasEveryRouteTheServersRegister(t *testing.T) {
	t.Parallel()
	documented := documentedOperations(t)
	routes, prefixes := registeredPatterns(t)
	routes = append(routes, registered{pattern: "POST " + inbox.DefaultBasePath + "/{source}", at: "the inbox handler (shared/inbox)"})

	served := map[string]bool{}
	for _, r := range routes {
		served[r.pattern] = true
		if !documented[r.pattern] {
			t.Errorf("%s registers %s, which docs/openapi.yaml does not describe: add the operation", r.at, r.pattern)
		}
	}
	for _, op := range sortedKeys(documented) {
		if !served[op] {
			t.Errorf("docs/openapi.yaml describes %s, which no server registers: remove it, or fix its method or path", op)
		}
	}
	for _, p := range prefixes {
		if !leadsToDocumentedPath(p.pattern, documented) {
			t.Errorf("%s hands %s to a handler, but docs/openapi.yaml has no path there", p.at, p.pattern)
		}
	}
	if len(routes) < 20 {
		t.Errorf("found only %d routes; the reading of the Go files is broken", len(routes))
	}
}

// documentedOperations returns "METHOD /path" for every operation of openapi.yaml.
func documentedOperations(t *testing.T) map[string]bool {
	t.Helper()
	var doc struct {
		Paths map[string]map[string]yaml.Node `yaml:"paths"`
	}
	if err := yaml.Unmarshal(openapi.YAML, &doc); err != nil {
		t.Fatalf("parsing openapi.yaml: %v", err)
	}
	methods := []string{"get", "put", "post", "delete", "options", "head", "patch", "trace"}
	out := map[string]bool{}
	for path, item := range doc.Paths {
		for key := range item {
			if slices.Contains(methods, key) {
				out[strings.ToUpper(key)+" "+path] = true
			}
		}
	}
	return out
}

// registeredPatterns returns the patterns with a method, in the description's form, and the
// patterns without one, as written, of every Handle and HandleFunc call in a file that imports
// net/http. A pattern that is not a string literal fails the test, since it cannot be read.
func registeredPatterns(t *testing.T) (routes, prefixes []registered) {
	t.Helper()
	root := moduleRoot(t)
	fset := token.NewFileSet()
	for _, folder := range routeFolders {
		err := filepath.WalkDir(filepath.Join(root, folder), func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(root, path)
			rel = filepath.ToSlash(rel)
			if d.IsDir() {
				if slices.Contains(notQueueBox, rel) || d.Name() == "testdata" || d.Name() == "node_modules" {
					return filepath.SkipDir
				}
				return nil
			}
			if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return nil
			}
			f, err := parser.ParseFile(fset, path, nil, 0)
			if err != nil {
				return err
			}
			if !importsNetHTTP(f) {
				return nil
			}
			ast.Inspect(f, func(n ast.Node) bool {
				pattern, pos, ok := handleCall(t, fset, n)
				if !ok {
					return true
				}
				at := rel + ":" + strconv.Itoa(fset.Position(pos).Line)
				if method, path, found := strings.Cut(pattern, " "); found {
					routes = append(routes, registered{pattern: method + " " + strings.TrimSuffix(path, "{$}"), at: at})
				} else {
					prefixes = append(prefixes, registered{pattern: pattern, at: at})
				}
				return true
			})
			return nil
		})
		if err != nil {
			t.Fatalf("reading the Go files of %s: %v", folder, err)
		}
	}
	return routes, prefixes
}

// handleCall returns the pattern of a call X.Handle(pattern, h) or X.HandleFunc(pattern, f).
func handleCall(t *testing.T, fset *token.FileSet, n ast.Node) (string, token.Pos, bool) {
	call, ok := n.(*ast.CallExpr)
	if !ok || len(call.Args) != 2 {
		return "", 0, false
	}
	sel, ok := call.Fun.(*ast.SelectorExpr)
	if !ok || (sel.Sel.Name != "Handle" && sel.Sel.Name != "HandleFunc") {
		return "", 0, false
	}
	lit, ok := call.Args[0].(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		t.Errorf("%s: a route whose pattern is not a string literal; write it as one, so that this test can compare it with docs/openapi.yaml",
			fset.Position(call.Pos()))
		return "", 0, false
	}
	pattern, err := strconv.Unquote(lit.Value)
	if err != nil {
		t.Errorf("%s: unquoting %s: %v", fset.Position(lit.Pos()), lit.Value, err)
		return "", 0, false
	}
	return pattern, call.Pos(), true
}

func importsNetHTTP(f *ast.File) bool {
	for _, imp := range f.Imports {
		if imp.Path.Value == `"net/http"` {
			return true
		}
	}
	return false
}

// leadsToDocumentedPath reports whether a pattern without a method covers a documented path:
// a pattern that ends in a slash is a prefix, another is one path.
func leadsToDocumentedPath(pattern string, documented map[string]bool) bool {
	for op := range documented {
		_, path, _ := strings.Cut(op, " ")
		if path == pattern || (strings.HasSuffix(pattern, "/") && strings.HasPrefix(path, pattern)) {
			return true
		}
	}
	return false
}

// moduleRoot is the folder of the module's go.mod, two folders above this package.
func moduleRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatalf("finding the module root: %v", err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("no go.mod at %s: %v", root, err)
	}
	return root
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
