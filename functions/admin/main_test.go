package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/alternayte/queuebox/shared/lambdafn"
)

// TestBuildsForArm64WithoutRPC builds the function as it is deployed (linux/arm64,
// -tags lambda.norpc, no cgo) and checks that the tag leaves net/rpc out. The Runtime
// Interface Emulator tests (functions/rietest) run the binary itself with the events of
// testdata.
func TestBuildsForArm64WithoutRPC(t *testing.T) {
	t.Parallel()
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

// TestEventsAreIAMAuthorized checks that every event of testdata has the shape of an API
// Gateway HTTP API (payload 2.0) request that passed IAM authorization: a SigV4
// Authorization header and the caller in requestContext.authorizer.iam, and a body whose
// content-length is its length.
func TestEventsAreIAMAuthorized(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("testdata/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no events in testdata: %v", err)
	}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var ev lambdafn.HTTPRequest
		if err := json.Unmarshal(raw, &ev); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if ev.Version != "2.0" || ev.RawPath == "" || ev.RawPath != ev.RequestContext.HTTP.Path {
			t.Errorf("%s: version %q, rawPath %q, http.path %q", f, ev.Version, ev.RawPath, ev.RequestContext.HTTP.Path)
		}
		if !strings.HasPrefix(ev.Headers["authorization"], "AWS4-HMAC-SHA256 Credential=") {
			t.Errorf("%s: no SigV4 authorization header", f)
		}
		if a := ev.RequestContext.Authorizer; a == nil || a.IAM == nil || !strings.HasPrefix(a.IAM.UserARN, "arn:aws:iam::") {
			t.Errorf("%s: no IAM caller in requestContext.authorizer.iam", f)
		}
		if ev.Body != "" && ev.Headers["content-length"] != strconv.Itoa(len(ev.Body)) {
			t.Errorf("%s: content-length %q for a body of %d bytes", f, ev.Headers["content-length"], len(ev.Body))
		}
	}
}
