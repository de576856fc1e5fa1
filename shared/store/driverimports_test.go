package store_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const module = "github.com/alternayte/queuebox"

// driverPrefixes are the import paths of the database drivers.
var driverPrefixes = []string{"github.com/jackc/pgx", "github.com/jackc/pglogrepl", "github.com/microsoft/go-mssqldb"}

// dialectFolders may import their driver: each dialect's code lives there.
var dialectFolders = []string{module + "/shared/store/postgres", module + "/shared/store/sqlserver"}

type listedPackage struct {
	ImportPath string
	Imports    []string
	Module     *struct{ Path string }
}

// TestDatabaseDriversOnlyInDialectFolders lists every package that the module's packages
// depend on (go list -deps) and checks that only the dialect folders import a database
// driver. There are no exceptions: the tools outside the product (bench/, test/chaos) reach
// pgx through shared/store/postgres/pgtool.
func TestDatabaseDriversOnlyInDialectFolders(t *testing.T) {
	t.Parallel()
	watchSources(t, "../..")
	cmd := exec.Command("go", "list", "-deps", "-json", module+"/...")
	cmd.Dir = "../.."
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "go list: %s", stderr.String())

	importers := map[string][]string{} // package -> drivers it imports
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p listedPackage
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else {
			require.NoError(t, err)
		}
		if p.Module == nil || p.Module.Path != module {
			continue
		}
		for _, imp := range p.Imports {
			for _, d := range driverPrefixes {
				if imp == d || strings.HasPrefix(imp, d+"/") {
					importers[p.ImportPath] = append(importers[p.ImportPath], imp)
				}
			}
		}
	}
	require.NotEmpty(t, importers[module+"/shared/store/postgres"], "the postgres driver imports pgx: go list found the packages")

	var offenders []string
	for pkg, drivers := range importers {
		if inDialectFolder(pkg) {
			continue
		}
		offenders = append(offenders, pkg+" imports "+strings.Join(drivers, ", "))
	}
	sort.Strings(offenders)
	assert.Empty(t, offenders, "only shared/store/postgres and shared/store/sqlserver may import a database driver")
}

func inDialectFolder(pkg string) bool {
	for _, f := range dialectFolders {
		if pkg == f || strings.HasPrefix(pkg, f+"/") {
			return true
		}
	}
	return false
}

// watchSources reads every folder of the module and the metadata of its Go files and of
// go.mod and go.sum, so that go test keys its cached result on them: go list runs in a child
// process, whose reads the test cache does not see, and a new driver import would otherwise
// pass as "(cached)".
func watchSources(t *testing.T, root string) {
	t.Helper()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != root && (name == ".git" || name == "node_modules" || strings.HasPrefix(name, ".")) {
				return filepath.SkipDir
			}
			return nil
		}
		if name := d.Name(); strings.HasSuffix(name, ".go") || name == "go.mod" || name == "go.sum" {
			_, err := os.Stat(path)
			return err
		}
		return nil
	})
	require.NoError(t, err, "walking the module's sources")
}
