package main

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"strings"
)

// module is the module path of the repository.
const module = "github.com/alternayte/queuebox"

// docComments reads the doc comments of struct fields from the source of their packages.
type docComments struct {
	root  string
	pkgs  map[string]map[string]*ast.StructType // package path -> type name -> struct
	fset  *token.FileSet
	cache map[string]string
}

func newDocComments(root string) *docComments {
	return &docComments{root: root, pkgs: map[string]map[string]*ast.StructType{}, fset: token.NewFileSet(), cache: map[string]string{}}
}

// field returns the doc comment of the field name of the struct type owner, as one line of
// text; "" when it has none.
func (d *docComments) field(owner reflect.Type, name string) (string, error) {
	key := owner.PkgPath() + "." + owner.Name() + "." + name
	if s, ok := d.cache[key]; ok {
		return s, nil
	}
	structs, err := d.load(owner.PkgPath())
	if err != nil {
		return "", err
	}
	st, ok := structs[owner.Name()]
	if !ok {
		return "", fmt.Errorf("the struct %s is not in the source of %s", owner.Name(), owner.PkgPath())
	}
	text := ""
	for _, f := range st.Fields.List {
		if fieldNamed(f, name) && f.Doc != nil {
			text = strings.Join(strings.Fields(f.Doc.Text()), " ")
		}
	}
	d.cache[key] = text
	return text, nil
}

// fieldNamed reports whether f declares name, or embeds a type called name.
func fieldNamed(f *ast.Field, name string) bool {
	for _, n := range f.Names {
		if n.Name == name {
			return true
		}
	}
	if len(f.Names) > 0 {
		return false
	}
	switch t := f.Type.(type) {
	case *ast.Ident:
		return t.Name == name
	case *ast.SelectorExpr:
		return t.Sel.Name == name
	}
	return false
}

// load parses the non-test Go files of the package path and returns its struct types by name.
func (d *docComments) load(path string) (map[string]*ast.StructType, error) {
	if s, ok := d.pkgs[path]; ok {
		return s, nil
	}
	rel, ok := strings.CutPrefix(path, module+"/")
	if !ok {
		return nil, fmt.Errorf("the package %s is not in the module %s", path, module)
	}
	dir := filepath.Join(d.root, filepath.FromSlash(rel))
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("reading the source of %s: %w", path, err)
	}
	structs := map[string]*ast.StructType{}
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(d.fset, filepath.Join(dir, name), nil, parser.ParseComments)
		if err != nil {
			return nil, fmt.Errorf("parsing %s: %w", name, err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if ts, ok := n.(*ast.TypeSpec); ok {
				if st, ok := ts.Type.(*ast.StructType); ok {
					structs[ts.Name.Name] = st
				}
			}
			return true
		})
	}
	d.pkgs[path] = structs
	return structs, nil
}
