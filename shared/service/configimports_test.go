package service

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// configFree lists the components that take their own Config and must not import shared/config,
// in their code or their tests: the composition root (this package) maps the tree to them.
var configFree = []string{
	"./shared/inbox/...", "./shared/filter/...", "./shared/inboundauth/...",
	"./shared/transform/...", "./shared/retention/...", "./bench/inboxbench/...",
}

// TestComponentsImportNoConfig fails when one of configFree imports shared/config directly.
func TestComponentsImportNoConfig(t *testing.T) {
	t.Parallel()
	const cfgPkg = "github.com/alternayte/queuebox/shared/config"
	args := append([]string{"list", "-f", `{{.ImportPath}} {{join .Imports " "}} {{join .TestImports " "}} {{join .XTestImports " "}}`}, configFree...)
	cmd := exec.Command("go", args...)
	cmd.Dir = "../.."
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		for _, imp := range fields[1:] {
			if imp == cfgPkg {
				t.Errorf("%s imports %s: map the configuration in shared/service instead", fields[0], cfgPkg)
			}
		}
	}
}

// configImporters are the packages (and the folders, with their subpackages) whose non-test
// code may import shared/config: the composition root, the CLI, the tree itself, and the
// connectors, each of which defines its kind's block of the tree (shared/connect/<system>/
// <system>config, a config.ConnectorSpec) and maps it to its own Config (connect.Connector). The
// drivers (shared/localserver, shared/lambdafn, shared/capturenode) load the configuration
// through this package (Load, LoadEnv, Config) and take the assembly (Build). tools/refdocs,
// outside the product, reads the model to write the configuration reference.
var configImporters = []string{module + "/shared/service", module + "/shared/cli", module + "/shared/config", module + "/shared/connect", module + "/tools/refdocs"}

const module = "github.com/alternayte/queuebox"

// TestOnlyTheCompositionRootImportsConfig lists every package of the module and what it
// depends on (go list -deps -json, test files left out) and fails when a package outside
// configImporters imports shared/config. Test files may import it.
func TestOnlyTheCompositionRootImportsConfig(t *testing.T) {
	t.Parallel()
	const cfgPkg = module + "/shared/config"
	cmd := exec.Command("go", "list", "-deps", "-json", module+"/...")
	cmd.Dir = "../.."
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	var importers, offenders []string
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p struct {
			ImportPath string
			Imports    []string
			Module     *struct{ Path string }
		}
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		if p.Module == nil || p.Module.Path != module || !slices.Contains(p.Imports, cfgPkg) {
			continue
		}
		importers = append(importers, p.ImportPath)
		if !slices.ContainsFunc(configImporters, func(f string) bool { return p.ImportPath == f || strings.HasPrefix(p.ImportPath, f+"/") }) {
			offenders = append(offenders, p.ImportPath)
		}
	}
	if !slices.Contains(importers, module+"/shared/service") {
		t.Fatalf("go list found no importer of %s; importers: %v", cfgPkg, importers)
	}
	for _, p := range offenders {
		t.Errorf("%s imports %s: load the configuration through shared/service (Load, LoadEnv, Config) and take the assembly (Build) instead", p, cfgPkg)
	}
}
