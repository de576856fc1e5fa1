package kind_test

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
)

// root is the module root, from this package's folder.
const root = "../.."

// handlers are the folders, relative to the module root, that may handle a kind: branch on
// it (a case of a switch, a comparison). Every other folder must not, so that a new
// destination or source is one folder under shared/connect, plus its line in the registry,
// and touches no switch elsewhere.
var handlers = []string{
	// The connectors, each its own kind, with its configuration package (<system>config).
	"shared/connect/webhook", "shared/connect/rabbitmq", "shared/connect/kafka", "shared/connect/nats",
	// The type of the kinds and the built-in kind http.
	"shared/kind",
	// The connector registry of the composition root.
	"shared/service/connectors",
}

// allowed are the folders outside handlers that still branch on a kind, each with the reason.
// Keep it short: a new entry needs a reason why the knowledge cannot live in the connector.
var allowed = map[string]string{
	// The configuration tree holds the built-in kind http itself: the inbox is QueueBox's own
	// HTTP source, and the webhook destination shares its auth and signing blocks with the
	// rest of the tree. Every other kind's block is its connector's (config.ConnectorSpec).
	"shared/config": "the built-in kind http",
	// The default topic template of a source whose topic is blank: {{ eventType }} for the
	// built-in HTTP source, {{ source }} for every other kind (a broker's).
	"shared/relay": "the default topic of the built-in http kind",
}

// kindNames are the kinds as text.
var kindNames = []string{"http", "rabbitmq", "kafka", "nats"}

// connectorPackages are the connector folders whose Type constant is their kind.
var connectorPackages = []string{"webhook", "rabbitmq", "kafka", "nats"}

// TestKindsAreHandledOnlyByTheirConnectors scans every non-test Go file of the module and
// fails on a switch case or a comparison that branches on a destination or source kind (a
// constant of this package, a connector's Type, another package's Kind constant, or the
// kind's text compared with a kind) outside the connector folders, the registry and the
// folders of allowed.
func TestKindsAreHandledOnlyByTheirConnectors(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if name := d.Name(); rel != "." && (strings.HasPrefix(name, ".") || name == "testdata" || name == "node_modules" || name == "vendor" || isModule(path)) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		dir := filepath.ToSlash(filepath.Dir(rel))
		for _, at := range kindBranches(t, path) {
			if inAny(dir, handlers) {
				continue
			}
			if _, ok := allowed[topFolder(dir)]; ok {
				seen[topFolder(dir)] = true
				continue
			}
			t.Errorf("%s:%d branches on the kind %s: let its connector (shared/connect/<system>) or the registry (shared/service/connectors) decide", rel, at.line, at.what)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for folder := range allowed {
		if !seen[folder] {
			t.Errorf("%s is allowed to branch on a kind but no longer does: remove it from allowed", folder)
		}
	}
}

// TestTheScanFindsABranch checks the scan itself on a file that branches on kinds in each
// form it looks for, and that it leaves alone the comparisons of the same text that are no
// kind.
func TestTheScanFindsABranch(t *testing.T) {
	t.Parallel()
	const src = `package p

func f(d dest, p pub, u url, k string) {
	switch d.Kind {
	case "rabbitmq", kind.Kafka:
	}
	_ = d.Kind == kind.NATS
	_ = p.Type() == "http"
	_ = string(d.Kind) != "kafka"
	_ = k == forwarded.KindNATS
	_ = p.Type() == rabbitmq.Type
	switch k {
	case "nats":
	}
	_ = u.Scheme == "http"
	_ = d.Kind == other
	switch u.Scheme {
	case "http", "https":
	}
	_ = d.Kind == kafkaconfig.Kind
	_ = k == string(natsconfig.Kind)
	_ = c.Kind == config.Kind
}
`
	var got []int
	for _, b := range kindBranches(t, "p.go", src) {
		got = append(got, b.line)
	}
	if want := []int{5, 5, 7, 8, 9, 10, 11, 13, 20, 21}; !slices.Equal(got, want) {
		t.Errorf("the scan found branches on the lines %v, want %v", got, want)
	}
}

// branch is one place that branches on a kind.
type branch struct {
	line int
	what string
}

// kindBranches returns the places of the file at path that branch on a kind; src, when not
// nil, is the file's text.
func kindBranches(t *testing.T, path string, src ...string) []branch {
	t.Helper()
	fset := token.NewFileSet()
	var text any
	if len(src) > 0 {
		text = src[0]
	}
	f, err := parser.ParseFile(fset, path, text, parser.SkipObjectResolution)
	if err != nil {
		t.Fatalf("parsing %s: %v", path, err)
	}
	var out []branch
	add := func(n ast.Node, what string) {
		out = append(out, branch{line: fset.Position(n.Pos()).Line, what: what})
	}
	// check reports an operand that names a kind; other is the expression it is compared
	// with (the switch tag of a case).
	check := func(e, other ast.Expr) {
		if what := kindOperand(e, other); what != "" {
			add(e, what)
		}
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.BinaryExpr:
			if n.Op == token.EQL || n.Op == token.NEQ {
				check(n.X, n.Y)
				check(n.Y, n.X)
			}
		case *ast.SwitchStmt:
			for _, s := range n.Body.List {
				for _, e := range s.(*ast.CaseClause).List {
					check(e, n.Tag)
				}
			}
		}
		return true
	})
	return out
}

// kindOperand returns the kind that e names when it is compared with other, or "".
func kindOperand(e, other ast.Expr) string {
	switch e := ast.Unparen(e).(type) {
	case *ast.CallExpr:
		// A conversion, string(kafkaconfig.Kind): the kind it converts.
		if len(e.Args) == 1 {
			return kindOperand(e.Args[0], other)
		}
	case *ast.SelectorExpr:
		pkg, ok := e.X.(*ast.Ident)
		name := e.Sel.Name
		switch {
		case ok && pkg.Name == "kind" && name != "Kind":
			return "kind." + name
		case ok && name == "Kind" && pkg.Name != "config" && strings.HasSuffix(pkg.Name, "config"):
			// A connector's kind, defined by its configuration package (kafkaconfig.Kind).
			return exprText(e)
		case strings.HasPrefix(name, "Kind") && slices.Contains(kindNames, strings.ToLower(strings.TrimPrefix(name, "Kind"))):
			return exprText(e)
		case ok && name == "Type" && slices.Contains(connectorPackages, pkg.Name):
			return exprText(e)
		}
	case *ast.Ident:
		if strings.HasPrefix(e.Name, "Kind") && slices.Contains(kindNames, strings.ToLower(strings.TrimPrefix(e.Name, "Kind"))) {
			return e.Name
		}
	case *ast.BasicLit:
		if e.Kind != token.STRING || other == nil || !namesAKind(other) {
			return ""
		}
		if s, err := strconv.Unquote(e.Value); err == nil && slices.Contains(kindNames, s) {
			return strconv.Quote(s) + " (compared with " + exprText(other) + ")"
		}
	}
	return ""
}

// namesAKind reports whether e reads a kind: an expression whose last name is kind, Kind or
// Type (x.Kind, kind, p.Type()), or a conversion of one.
func namesAKind(e ast.Expr) bool {
	switch e := ast.Unparen(e).(type) {
	case *ast.Ident:
		return strings.EqualFold(e.Name, "kind") || e.Name == "k"
	case *ast.SelectorExpr:
		return e.Sel.Name == "Kind" || e.Sel.Name == "Type"
	case *ast.CallExpr:
		if len(e.Args) == 1 {
			return namesAKind(e.Args[0]) || namesAKind(e.Fun)
		}
		return len(e.Args) == 0 && namesAKind(e.Fun)
	}
	return false
}

// exprText writes an expression as its source text, for a message.
func exprText(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.Ident:
		return e.Name
	case *ast.SelectorExpr:
		return exprText(e.X) + "." + e.Sel.Name
	case *ast.CallExpr:
		return exprText(e.Fun) + "(...)"
	}
	return "an expression"
}

// isModule reports whether the folder at path is the root of another Go module.
func isModule(path string) bool {
	if filepath.Clean(path) == filepath.Clean(root) {
		return false
	}
	_, err := os.Stat(filepath.Join(path, "go.mod"))
	return err == nil
}

// inAny reports whether dir is one of folders or below one.
func inAny(dir string, folders []string) bool {
	return slices.ContainsFunc(folders, func(f string) bool { return dir == f || strings.HasPrefix(dir, f+"/") })
}

// topFolder returns the folder of allowed that holds dir, or dir.
func topFolder(dir string) string {
	for f := range allowed {
		if dir == f || strings.HasPrefix(dir, f+"/") {
			return f
		}
	}
	return dir
}
