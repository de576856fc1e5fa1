package service

import (
	"os/exec"
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
