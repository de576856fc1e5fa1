package architecture

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestTheMapNamesEveryPackage fails when a package under shared/, or a top-level folder of
// the repository, is not named in docs/architecture.md, so that the map has no blank.
func TestTheMapNamesEveryPackage(t *testing.T) {
	t.Parallel()
	root := repoRoot(t)
	doc, err := os.ReadFile(filepath.Join(root, architectureDoc))
	if err != nil {
		t.Fatalf("read %s: %v", architectureDoc, err)
	}
	text := string(doc)
	cmd := exec.Command("go", "list", "-f", "{{.Dir}}", "./shared/...")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list ./shared/...: %v", err)
	}
	var want []string
	for _, dir := range strings.Fields(string(out)) {
		rel, err := filepath.Rel(root, dir)
		if err != nil {
			t.Fatalf("%s: %v", dir, err)
		}
		want = append(want, filepath.ToSlash(rel))
	}
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatalf("read %s: %v", root, err)
	}
	for _, e := range entries {
		if e.IsDir() && !strings.HasPrefix(e.Name(), ".") && e.Name() != "node_modules" && e.Name() != "bin" {
			want = append(want, e.Name()+"/")
		}
	}
	for _, name := range want {
		if !strings.Contains(text, "`"+name) {
			t.Errorf("%s does not name `%s`: give it its line in the map", architectureDoc, name)
		}
	}
}
