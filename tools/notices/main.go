// Command notices writes THIRD_PARTY_NOTICES.md: the third-party software that QueueBox's
// binaries and packages bundle, each with its version, its licence and where its licence
// text comes from, followed by the licence and NOTICE texts that a redistribution carries.
//
// It lists:
//   - every Go module that a shipped binary links (the main packages under local/,
//     functions/ and capturenode/, built for linux/amd64 and linux/arm64 without cgo, with
//     and without the tag lambda.norpc), read with go list -deps; test-only modules are not
//     linked and so not listed;
//   - the Go standard library, linked into every binary;
//   - jsonata.js, which shared/transform/jsjsonata embeds (its version from that folder's
//     package-lock.json, its licence from the LICENSE file beside it);
//   - the runtime dependencies of the npm package in clients/typescript (its
//     package-lock.json; devDependencies are not bundled).
//
// Each Go module's licence is read from the licence files at the root of the module in the
// module cache and classified by their text with github.com/google/licensecheck. A file that
// is not classified, a licence outside the accepted list, or a file whose text is mostly
// not licence text stops the generator with an error naming the file: a licence is never
// guessed. A file that needs a person's reading is listed in reviewed (classify.go), pinned
// to the SHA-256 of the text that was read.
//
// Run it with `make notices` or `go generate ./tools/notices`; TestNoticesAreCurrent fails
// when the committed file differs from what the generator writes now.
package main

//go:generate go run . -out ../../THIRD_PARTY_NOTICES.md

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// noticesFile is the generated file, relative to the repository root.
const noticesFile = "THIRD_PARTY_NOTICES.md"

func main() {
	out := flag.String("out", "", "the file to write (default: "+noticesFile+" at the repository root)")
	flag.Parse()
	if err := run(*out); err != nil {
		fmt.Fprintln(os.Stderr, "notices:", err)
		os.Exit(1)
	}
}

// run generates the notices and writes them to out, or to the default file when out is
// empty.
func run(out string) error {
	root, err := repoRoot()
	if err != nil {
		return err
	}
	text, err := generate(root)
	if err != nil {
		return err
	}
	if out == "" {
		out = filepath.Join(root, noticesFile)
	}
	if err := os.WriteFile(out, text, 0o644); err != nil {
		return fmt.Errorf("write the notices: %w", err)
	}
	return nil
}

// generate returns the text of the notices file of the repository at root.
func generate(root string) ([]byte, error) {
	mods, err := goModules(root)
	if err != nil {
		return nil, err
	}
	std, err := goStandardLibrary(root)
	if err != nil {
		return nil, err
	}
	jsonata, err := jsonataComponent(root)
	if err != nil {
		return nil, err
	}
	npm, err := npmPackage(root)
	if err != nil {
		return nil, err
	}
	return render(notices{Modules: mods, Std: std, JSONata: jsonata, NPM: npm})
}

// repoRoot returns the folder of the main module's go.mod, seen from the working directory.
func repoRoot() (string, error) {
	out, err := goCommand("", nil, "env", "GOMOD")
	if err != nil {
		return "", err
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", fmt.Errorf("find the repository root: the working directory is in no Go module")
	}
	return filepath.Dir(gomod), nil
}

// goCommand runs the go command in dir with the extra environment, and returns its standard
// output; an error carries its standard error.
func goCommand(dir string, env []string, args ...string) ([]byte, error) {
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go %s: %w\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return out, nil
}
