package specdocs

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// helperVariable makes TestHelperAsksForTheDocuments act: the other tests run the test binary
// again with it set, so that they see the skip or the failure that a test asking for the
// documents gets.
const helperVariable = "QUEUEBOX_SPECDOCS_HELPER"

// TestHelperAsksForTheDocuments is the test that the others run in a child process: it asks for
// the documents with Dir (or Optional when the helper variable says "optional") and reads one.
func TestHelperAsksForTheDocuments(t *testing.T) {
	mode := os.Getenv(helperVariable)
	switch mode {
	case "":
		t.Skip("run by the other tests of this package")
	case "optional":
		if _, ok := Optional(t); !ok {
			t.Log("checked the rest")
			return
		}
	}
	t.Logf("read %d bytes", len(Read(t, "page.md")))
}

// runHelper runs TestHelperAsksForTheDocuments with the environment env added and returns
// its verbose output and whether it passed.
func runHelper(t *testing.T, env ...string) (string, bool) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperAsksForTheDocuments$", "-test.v", "-test.count=1")
	cmd.Env = append(withoutSpecVariables(os.Environ()), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		if _, ok := err.(*exec.ExitError); !ok {
			t.Fatalf("running the test binary: %v", err)
		}
	}
	return string(out), err == nil
}

// withoutSpecVariables drops the variables of this package from an environment, so that the
// child sees only what the test sets (CI sets the require variable for the whole run).
func withoutSpecVariables(env []string) []string {
	var out []string
	for _, kv := range env {
		if strings.HasPrefix(kv, DirVariable+"=") || strings.HasPrefix(kv, RequireVariable+"=") || strings.HasPrefix(kv, helperVariable+"=") {
			continue
		}
		out = append(out, kv)
	}
	return out
}

func TestMissingDocumentsSkipWithHowToRun(t *testing.T) {
	t.Parallel()
	absent := filepath.Join(t.TempDir(), "spec")
	out, passed := runHelper(t, helperVariable+"=dir", DirVariable+"="+absent)
	if !passed || !strings.Contains(out, "--- SKIP: TestHelperAsksForTheDocuments") {
		t.Fatalf("a test whose documents are absent must be skipped; output:\n%s", out)
	}
	want := "spec documents not found at " + absent + "; set " + DirVariable + " to their folder"
	if !strings.Contains(out, want) {
		t.Errorf("the skip must say where it looked and how to run it (%q); output:\n%s", want, out)
	}
}

func TestMissingDocumentsFailWhenRequired(t *testing.T) {
	t.Parallel()
	absent := filepath.Join(t.TempDir(), "spec")
	for _, mode := range []string{"dir", "optional"} {
		out, passed := runHelper(t, helperVariable+"="+mode, DirVariable+"="+absent, RequireVariable+"=1")
		if passed || !strings.Contains(out, "--- FAIL: TestHelperAsksForTheDocuments") {
			t.Fatalf("%s: with %s=1 a test whose documents are absent must fail; output:\n%s", mode, RequireVariable, out)
		}
		if !strings.Contains(out, "spec documents not found at "+absent) || !strings.Contains(out, RequireVariable+" is set") {
			t.Errorf("%s: the failure must say where it looked and why it fails; output:\n%s", mode, out)
		}
	}
}

func TestOptionalDocumentsLetTheRestRun(t *testing.T) {
	t.Parallel()
	absent := filepath.Join(t.TempDir(), "spec")
	out, passed := runHelper(t, helperVariable+"=optional", DirVariable+"="+absent)
	if !passed || !strings.Contains(out, "checked the rest") || !strings.Contains(out, "--- PASS") {
		t.Fatalf("Optional must log the line and let the test go on; output:\n%s", out)
	}
}

func TestPresentDocumentsAreRead(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "page.md"), []byte("# page\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, passed := runHelper(t, helperVariable+"=dir", DirVariable+"="+dir, RequireVariable+"=1")
	if !passed || !strings.Contains(out, "read 7 bytes") {
		t.Fatalf("the documents at %s must be read; output:\n%s", dir, out)
	}
}

func TestDefaultFolderIsBesideTheCheckout(t *testing.T) {
	t.Parallel()
	root, err := CheckoutRoot()
	if err != nil {
		t.Fatal(err)
	}
	want := filepath.Join(filepath.Dir(root), "shared", "spec")
	dir, err := Find(func(string) string { return "" })
	if err == nil {
		if dir != want {
			t.Fatalf("Find without %s returned %s, want %s", DirVariable, dir, want)
		}
		return
	}
	nf, ok := err.(*NotFoundError)
	if !ok || nf.Dir != want {
		t.Fatalf("Find without %s must look at %s; err %v", DirVariable, want, err)
	}
}

func TestRequired(t *testing.T) {
	t.Parallel()
	for v, want := range map[string]bool{"": false, "0": false, "false": false, "1": true, "true": true, "yes": true} {
		if got := Required(func(string) string { return v }); got != want {
			t.Errorf("Required(%q) = %v, want %v", v, got, want)
		}
	}
}
