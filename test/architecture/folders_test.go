package architecture

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const (
	module = "github.com/alternayte/queuebox"
	shared = module + "/shared/"
)

// testHelpers are the test-helper packages of shared/ (a package whose name ends in test, as
// the style notes name them). Only tests import them, and a helper may reach above its folder
// (storetest migrates through shared/migrate), so their imports make no folder edge. The list
// is exact: TestTestHelpersAreListed fails when a helper is missing from it or a listed one is
// gone.
var testHelpers = []string{
	"shared/connect/connecttest",
	"shared/connect/consumetest",
	"shared/connect/publishtest",
	"shared/metrics/metricstest",
	"shared/store/postgres/dbtest",
	"shared/store/postgres/logical/logicaltest",
	"shared/store/sqlserver/sqlservertest",
	"shared/store/storetest",
	"shared/tracing/tracingtest",
}

// pkg is one package of go list.
type pkg struct {
	ImportPath string
	Name       string
	Imports    []string // the imports of its non-test files
}

// listShared returns the packages of ./shared/... (go list, test files left out).
func listShared(t *testing.T) []pkg {
	t.Helper()
	cmd := exec.Command("go", "list", "-json=ImportPath,Name,Imports", "./shared/...")
	cmd.Dir = "../.."
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list ./shared/...: %v\n%s", err, stderr.String())
	}
	var pkgs []pkg
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p pkg
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("reading go list: %v", err)
		}
		pkgs = append(pkgs, p)
	}
	if len(pkgs) == 0 {
		t.Fatal("go list found no package under ./shared/")
	}
	return pkgs
}

// folderOf returns the top-level folder of shared/ that holds the package path, or "" for a
// package outside shared/.
func folderOf(path string) string {
	rest, ok := strings.CutPrefix(path, shared)
	if !ok {
		return ""
	}
	folder, _, _ := strings.Cut(rest, "/")
	return folder
}

// edge is one import that makes a folder depend on another: From imports To.
type edge struct{ From, To string }

// graph maps a folder to the folders that it imports, each with one import that shows it
// (the first in the order of the package paths).
type graph map[string]map[string]edge

// folderGraph collapses the imports of pkgs to the top-level folders of shared/, leaving out
// the imports of the test helpers.
func folderGraph(pkgs []pkg) graph {
	g := graph{}
	for _, p := range pkgs {
		if slices.Contains(testHelpers, strings.TrimPrefix(p.ImportPath, module+"/")) {
			continue
		}
		from := folderOf(p.ImportPath)
		for _, imp := range p.Imports {
			to := folderOf(imp)
			if from == "" || to == "" || to == from {
				continue
			}
			if g[from] == nil {
				g[from] = map[string]edge{}
			}
			if old, ok := g[from][to]; !ok || p.ImportPath+" "+imp < old.From+" "+old.To {
				g[from][to] = edge{From: p.ImportPath, To: imp}
			}
		}
	}
	return g
}

// TestSharedFoldersImportNoCycle fails when the top-level folders of shared/ import each
// other in a cycle, and names each cycle with one import per step. A folder that a cycle
// passes through cannot be understood, tested or moved without the others: a runtime
// (shared/localserver, shared/lambdafn, shared/capturenode) sits above what it assembles, and
// a seam that a lower folder implements (shared/store/changes) sits in that folder. Test
// files and test helpers may import upwards and are left out.
func TestSharedFoldersImportNoCycle(t *testing.T) {
	t.Parallel()
	g := folderGraph(listShared(t))
	if _, ok := g["service"]["store"]; !ok {
		t.Fatalf("the folder graph has no edge service -> store; go list was not read right: %v", g)
	}
	for _, group := range g.cycleGroups() {
		t.Errorf("the folders of shared/ import each other in a cycle:\n%s(the folders that import each other: %s)",
			describe(g, g.shortestCycle(group[0], group)), strings.Join(group, ", "))
	}
}

// describe writes a cycle as one line per step: the folders and the import that makes the
// step.
func describe(g graph, cycle []string) string {
	var b strings.Builder
	for i, from := range cycle {
		to := cycle[(i+1)%len(cycle)]
		e := g[from][to]
		fmt.Fprintf(&b, "  %s -> %s: %s imports %s\n", from, to,
			strings.TrimPrefix(e.From, module+"/"), strings.TrimPrefix(e.To, module+"/"))
	}
	return b.String()
}

// TestTestHelpersAreListed fails when a package of shared/ whose name ends in test is not in
// testHelpers, or when testHelpers names a package that is not a test helper any more.
func TestTestHelpersAreListed(t *testing.T) {
	t.Parallel()
	found := map[string]bool{}
	for _, p := range listShared(t) {
		path := strings.TrimPrefix(p.ImportPath, module+"/")
		if strings.HasSuffix(p.Name, "test") {
			found[path] = true
			if !slices.Contains(testHelpers, path) {
				t.Errorf("%s (package %s) is a test helper: add it to testHelpers", path, p.Name)
			}
		}
	}
	for _, path := range testHelpers {
		if !found[path] {
			t.Errorf("testHelpers names %s, which is not a package of shared/ whose name ends in test: remove it", path)
		}
	}
}
