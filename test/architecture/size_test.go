package architecture

import (
	"bufio"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// The bounds of product code: a source file, and a function, in lines, and a function's
// cyclomatic complexity. Test files, test helper packages, benchmarks and the tools under
// test/ and bench/ are not product code.
const (
	maxFileLines = 700
	maxFuncLines = 80
	maxCyclo     = 20
)

// architectureDoc is the page whose section "Functions over the bounds" lists, with a
// reason each, the product functions allowed over maxFuncLines or maxCyclo.
const architectureDoc = "docs/architecture.md"

// productFiles returns the repository's product Go files, relative to root, with slashes.
func productFiles(t *testing.T, root string) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			name := d.Name()
			skip := name == "testdata" || name == "node_modules" || name == "vendor" ||
				(strings.HasPrefix(name, ".") && rel != ".") ||
				rel == "bench" || rel == "test" ||
				strings.HasSuffix(name, "test") || strings.HasSuffix(name, "bench")
			if skip {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(rel, ".go") && !strings.HasSuffix(rel, "_test.go") {
			files = append(files, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("walk %s: %v", root, err)
	}
	sort.Strings(files)
	return files
}

// funcSize is one function's measure.
type funcSize struct {
	file, name   string
	lines, cyclo int
}

func (f funcSize) key() string { return f.file + " " + f.name }

// measure parses one file and returns its line count and its functions' sizes.
func measure(t *testing.T, root, file string) (int, []funcSize) {
	t.Helper()
	fset := token.NewFileSet()
	src, err := os.ReadFile(filepath.Join(root, file))
	if err != nil {
		t.Fatalf("read %s: %v", file, err)
	}
	f, err := parser.ParseFile(fset, file, src, 0)
	if err != nil {
		t.Fatalf("parse %s: %v", file, err)
	}
	var sizes []funcSize
	for _, decl := range f.Decls {
		fn, ok := decl.(*ast.FuncDecl)
		if !ok || fn.Body == nil {
			continue
		}
		sizes = append(sizes, funcSize{
			file:  file,
			name:  funcName(fn),
			lines: fset.Position(fn.End()).Line - fset.Position(fn.Pos()).Line + 1,
			cyclo: cyclomatic(fn.Body),
		})
	}
	return strings.Count(string(src), "\n"), sizes
}

// funcName is Name, or Type.Name for a method.
func funcName(fn *ast.FuncDecl) string {
	if fn.Recv == nil || len(fn.Recv.List) == 0 {
		return fn.Name.Name
	}
	t := fn.Recv.List[0].Type
	if s, ok := t.(*ast.StarExpr); ok {
		t = s.X
	}
	switch x := t.(type) {
	case *ast.IndexExpr:
		t = x.X
	case *ast.IndexListExpr:
		t = x.X
	}
	if id, ok := t.(*ast.Ident); ok {
		return id.Name + "." + fn.Name.Name
	}
	return fn.Name.Name
}

// cyclomatic is 1 plus one for each branch: if, for, range, a case or select clause with a
// condition, and each && and ||.
func cyclomatic(body *ast.BlockStmt) int {
	c := 1
	ast.Inspect(body, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.IfStmt, *ast.ForStmt, *ast.RangeStmt:
			c++
		case *ast.CaseClause:
			if n.List != nil {
				c++
			}
		case *ast.CommClause:
			if n.Comm != nil {
				c++
			}
		case *ast.BinaryExpr:
			if n.Op == token.LAND || n.Op == token.LOR {
				c++
			}
		}
		return true
	})
	return c
}

// allowedRow matches a row of the section's table: | `Func` | `file.go` | reason |.
var allowedRow = regexp.MustCompile("^\\|\\s*`([^`]+)`\\s*\\|\\s*`([^`]+)`\\s*\\|\\s*(.*?)\\s*\\|\\s*$")

// allowed reads the section "Functions over the bounds" of architectureDoc: file and
// function name to the reason given.
func allowed(t *testing.T, root string) map[string]string {
	t.Helper()
	f, err := os.Open(filepath.Join(root, architectureDoc))
	if err != nil {
		t.Fatalf("open %s: %v", architectureDoc, err)
	}
	defer f.Close()
	out := map[string]string{}
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "## ") {
			in = strings.TrimSpace(strings.TrimPrefix(line, "## ")) == "Functions over the bounds"
			continue
		}
		if !in {
			continue
		}
		if m := allowedRow.FindStringSubmatch(line); m != nil {
			if m[3] == "" {
				t.Errorf("%s: %s in %s is listed without a reason", architectureDoc, m[1], m[2])
			}
			out[m[2]+" "+m[1]] = m[3]
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("read %s: %v", architectureDoc, err)
	}
	return out
}

// TestProductCodeStaysWithinItsBounds fails when a product source file is over
// maxFileLines, or a product function over maxFuncLines or maxCyclo and not listed with its
// reason in architectureDoc; and when a listed function no longer exists or is within the
// bounds, so the list stays true.
func TestProductCodeStaysWithinItsBounds(t *testing.T) {
	t.Parallel()
	root := repoRoot(t)
	allow := allowed(t, root)
	seen := map[string]bool{}
	for _, file := range productFiles(t, root) {
		lines, funcs := measure(t, root, file)
		if lines > maxFileLines {
			t.Errorf("%s has %d lines, over %d: split it into files named for their parts", file, lines, maxFileLines)
		}
		for _, fn := range funcs {
			if fn.lines <= maxFuncLines && fn.cyclo <= maxCyclo {
				continue
			}
			seen[fn.key()] = true
			if _, ok := allow[fn.key()]; !ok {
				t.Errorf("%s: %s has %d lines and cyclomatic complexity %d (bounds %d and %d): split it into named steps, or list it with its reason under %q in %s",
					fn.file, fn.name, fn.lines, fn.cyclo, maxFuncLines, maxCyclo, "Functions over the bounds", architectureDoc)
			}
		}
	}
	for key := range allow {
		if !seen[key] {
			t.Errorf("%s lists %s under %q, but it no longer exists or is within the bounds: remove the row", architectureDoc, key, "Functions over the bounds")
		}
	}
}

// repoRoot is the module root: two folders up from this package.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatalf("repository root: %v", err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("repository root %s: %v", root, fmt.Errorf("no go.mod: %w", err))
	}
	return root
}
