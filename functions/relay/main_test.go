package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestBuildsForArm64WithoutRPC builds the function as it is deployed (linux/arm64,
// -tags lambda.norpc, no cgo) and checks that the tag leaves net/rpc out. The Runtime
// Interface Emulator tests run the binary itself; shared/lambdafn tests the handler.
func TestBuildsForArm64WithoutRPC(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to build the function: %v", err)
	}
	crossEnv := append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=arm64")
	bin := filepath.Join(t.TempDir(), "bootstrap")
	build := exec.Command(goTool, "build", "-tags", "lambda.norpc", "-trimpath", "-o", bin, ".")
	build.Env = crossEnv
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build -tags lambda.norpc: %v\n%s", err, out)
	}
	if fi, err := os.Stat(bin); err != nil || fi.Size() == 0 {
		t.Fatalf("no binary at %s: %v", bin, err)
	}

	deps := func(tags ...string) []string {
		args := append([]string{"list", "-deps"}, tags...)
		cmd := exec.Command(goTool, append(args, ".")...)
		cmd.Env = crossEnv
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go list -deps %v: %v", tags, err)
		}
		return strings.Fields(string(out))
	}
	if slices.Contains(deps("-tags", "lambda.norpc"), "net/rpc") {
		t.Error("the function links net/rpc although it is built with -tags lambda.norpc")
	}
	if !slices.Contains(deps(), "net/rpc") {
		t.Error("without the tag the function does not link net/rpc: the check above proves nothing")
	}
}
