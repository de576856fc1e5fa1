// Package specdocs finds the product's specification documents for the tests that compare
// QueueBox with them (the metrics tables, the environment variables, the complete example
// configuration, the SQL examples and the tutorials).
//
// The documents live outside this module: in the folder that QUEUEBOX_SPEC_DIR names, or by
// default in shared/spec beside the checkout (the module root's parent folder holds shared/).
// A test asks for them with Dir or Read: when they are absent the test is skipped with one line
// that says how to run it, unless QUEUEBOX_REQUIRE_SPEC is set (CI sets it), which turns the
// absence into a failure so that no comparison is skipped unnoticed.
package specdocs

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// DirVariable names the folder of the spec documents when it is not shared/spec beside the
// checkout.
const DirVariable = "QUEUEBOX_SPEC_DIR"

// RequireVariable, when set to a true value (1, true), makes a test whose spec documents are
// absent fail instead of skip.
const RequireVariable = "QUEUEBOX_REQUIRE_SPEC"

// NotFoundError is the error of Find when the folder is absent.
type NotFoundError struct {
	// Dir is the absolute path that was looked at.
	Dir string
	// Err is the reason from the file system.
	Err error
}

// Error says where the documents were looked for and how to point the tests elsewhere.
func (e *NotFoundError) Error() string {
	return fmt.Sprintf("spec documents not found at %s; set %s to their folder to run the tests that compare QueueBox with them", e.Dir, DirVariable)
}

// Unwrap returns the file system's reason.
func (e *NotFoundError) Unwrap() error { return e.Err }

// Find returns the folder of the spec documents: the one that getenv(DirVariable) names, or
// shared/spec beside the checkout that holds the working directory. When the folder is absent
// the error is a *NotFoundError.
func Find(getenv func(string) string) (string, error) {
	dir := getenv(DirVariable)
	if dir == "" {
		root, err := CheckoutRoot()
		if err != nil {
			return "", err
		}
		dir = filepath.Join(filepath.Dir(root), "shared", "spec")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("resolving the spec documents folder %s: %w", dir, err)
	}
	info, err := os.Stat(abs)
	if err == nil && !info.IsDir() {
		err = errors.New("not a directory")
	}
	if err != nil {
		return "", &NotFoundError{Dir: abs, Err: err}
	}
	return abs, nil
}

// Required reports whether getenv(RequireVariable) asks for the spec documents to be present.
func Required(getenv func(string) string) bool {
	v := strings.TrimSpace(getenv(RequireVariable))
	if v == "" {
		return false
	}
	on, err := strconv.ParseBool(v)
	return err != nil || on
}

// Dir returns the folder of the spec documents for a test. When it is absent the test is
// skipped with one line naming the folder and DirVariable, or fails with that line when
// RequireVariable is set. Any other error fails the test.
func Dir(t testing.TB) string {
	t.Helper()
	dir, ok := lookup(t)
	if !ok {
		t.SkipNow()
	}
	return dir
}

// Optional is Dir for a test that compares only a part of what it checks with the spec
// documents: when they are absent it logs the same line and returns false, so that the test
// leaves that part out and runs the rest (RequireVariable still makes it a failure).
func Optional(t testing.TB) (string, bool) {
	t.Helper()
	return lookup(t)
}

// lookup finds the folder; when it is absent it logs the line that says how to run the
// comparison and returns false, or fails the test when RequireVariable is set.
func lookup(t testing.TB) (string, bool) {
	t.Helper()
	dir, err := Find(os.Getenv)
	var missing *NotFoundError
	switch {
	case err == nil:
		return dir, true
	case errors.As(err, &missing) && !Required(os.Getenv):
		t.Log(err.Error())
	case errors.As(err, &missing):
		t.Fatalf("%v (%s is set, so a missing folder is a failure)", err, RequireVariable)
	default:
		t.Fatal(err)
	}
	return "", false
}

// Path returns the path of one file of the spec documents (a slash-separated name relative
// to their folder, such as "28-metrics.md" or "examples/queuebox.yml"), skipping or failing
// the test as Dir does when the folder is absent.
func Path(t testing.TB, name string) string {
	t.Helper()
	return filepath.Join(Dir(t), filepath.FromSlash(name))
}

// Read returns the text of one file of the spec documents (see Path). A file that is absent
// from a folder that exists fails the test: the documents and the test disagree.
func Read(t testing.TB, name string) string {
	t.Helper()
	b, err := os.ReadFile(Path(t, name))
	if err != nil {
		t.Fatalf("reading the spec document %s: %v", name, err)
	}
	return string(b)
}

// CheckoutRoot returns the folder of the service module's go.mod, found from the working
// directory upwards (a test runs in its package's folder).
func CheckoutRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("reading the working directory: %w", err)
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && strings.Contains(string(b), "module github.com/alternayte/queuebox\n") {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("finding the checkout: no go.mod of github.com/alternayte/queuebox above the working directory")
		}
		dir = parent
	}
}
