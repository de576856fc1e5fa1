package store_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os/exec"
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

// driverExceptions are the packages outside the dialect folders that still import a database
// driver, each with its reason. The test fails when one of them no longer does, so the list
// only shrinks.
var driverExceptions = map[string]string{
	// The benchmarks and the chaos suite are tools outside the product: they drive the real
	// database directly, to load it, time it or break it, and no QueueBox binary links them.
	module + "/bench/benchdb":     "tool outside the product (benchmark): drives the real database directly",
	module + "/bench/lambda":      "tool outside the product (benchmark): drives the real database directly",
	module + "/bench/outboxbench": "tool outside the product (benchmark): drives the real database directly",
	module + "/test/chaos":        "tool outside the product (chaos suite): drives the real database directly",
}

type listedPackage struct {
	ImportPath string
	Imports    []string
	Module     *struct{ Path string }
}

// TestDatabaseDriversOnlyInDialectFolders lists every package that the module's packages
// depend on (go list -deps) and checks that only the dialect folders import a database
// driver, apart from the exceptions above.
func TestDatabaseDriversOnlyInDialectFolders(t *testing.T) {
	t.Parallel()
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
		if _, ok := driverExceptions[pkg]; ok {
			continue
		}
		offenders = append(offenders, pkg+" imports "+strings.Join(drivers, ", "))
	}
	sort.Strings(offenders)
	assert.Empty(t, offenders, "only shared/store/postgres and shared/store/sqlserver may import a database driver")

	for pkg, reason := range driverExceptions {
		assert.NotEmpty(t, importers[pkg], "%s no longer imports a database driver (%s): remove its exception", pkg, reason)
	}
}

func inDialectFolder(pkg string) bool {
	for _, f := range dialectFolders {
		if pkg == f || strings.HasPrefix(pkg, f+"/") {
			return true
		}
	}
	return false
}
