package lambdawaker_test

import (
	"os/exec"
	"strings"
	"testing"
)

// Only the capture node wakes Lambda functions, so only it links this package and the AWS
// SDK's Lambda client: the functions (whose zip must stay under 10 MB, bench/README.md) and
// queuebox serve do not.
func TestOnlyTheCaptureNodeLinksTheLambdaClient(t *testing.T) {
	const module = "github.com/alternayte/queuebox"
	cmd := exec.Command("go", "list", "-deps", "-f", `{{if not .Standard}}{{.ImportPath}}{{end}}`,
		"./functions/poll", "./functions/relay", "./functions/inbox", "./functions/admin", "./functions/retention", "./local")
	cmd.Dir = "../../.."
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, pkg := range strings.Fields(string(out)) {
		if pkg == module+"/shared/waker/lambdawaker" || strings.HasPrefix(pkg, "github.com/aws/aws-sdk-go-v2/service/lambda") {
			t.Errorf("a function or queuebox serve links %s", pkg)
		}
	}
	cmd = exec.Command("go", "list", "-deps", "./capturenode")
	cmd.Dir = "../../.."
	out, err = cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), module+"/shared/waker/lambdawaker\n") {
		t.Errorf("the capture node does not link %s/shared/waker/lambdawaker; the check above checks nothing", module)
	}
}
