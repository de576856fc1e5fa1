package lambdazip_test

import (
	"archive/zip"
	"bytes"
	"context"
	"debug/elf"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/alternayte/queuebox/deploy/lambdazip"
)

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	require.NoError(t, os.WriteFile(path, []byte(content), 0o644))
}

// entries returns the files of a zip: name -> content and name -> mode.
func entries(t *testing.T, path string) (map[string]string, map[string]os.FileMode) {
	t.Helper()
	zr, err := zip.OpenReader(path)
	require.NoError(t, err)
	defer zr.Close()
	content := map[string]string{}
	modes := map[string]os.FileMode{}
	for _, f := range zr.File {
		rc, err := f.Open()
		require.NoError(t, err)
		data, err := io.ReadAll(rc)
		require.NoError(t, err)
		require.NoError(t, rc.Close())
		content[f.Name] = string(data)
		modes[f.Name] = f.Mode()
	}
	return content, modes
}

func TestZip(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bootstrap := filepath.Join(dir, "poll", "bootstrap")
	writeFile(t, bootstrap, "\x7fELF binary")
	config := filepath.Join(dir, "queuebox.yml")
	writeFile(t, config, "database:\n  type: postgresql\n")

	tests := []struct {
		name        string
		config      string
		wantEntries map[string]string
	}{
		{name: "bootstrap alone", wantEntries: map[string]string{"bootstrap": "\x7fELF binary"}},
		{name: "with the configuration", config: config, wantEntries: map[string]string{
			"bootstrap": "\x7fELF binary", "queuebox.yml": "database:\n  type: postgresql\n"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			out := filepath.Join(t.TempDir(), "poll.zip")
			require.NoError(t, lambdazip.Zip(out, bootstrap, tt.config))
			content, modes := entries(t, out)
			assert.Equal(t, tt.wantEntries, content)
			assert.Equal(t, os.FileMode(0o755), modes["bootstrap"].Perm(), "bootstrap is executable")
			assert.True(t, modes["bootstrap"].IsRegular())

			// The same inputs give the same bytes.
			again := filepath.Join(t.TempDir(), "poll.zip")
			require.NoError(t, lambdazip.Zip(again, bootstrap, tt.config))
			a, err := os.ReadFile(out)
			require.NoError(t, err)
			b, err := os.ReadFile(again)
			require.NoError(t, err)
			assert.True(t, bytes.Equal(a, b), "the zip is reproducible")

			size, err := lambdazip.Measure("poll", bootstrap, out)
			require.NoError(t, err)
			assert.Equal(t, int64(len("\x7fELF binary")), size.Bootstrap)
			assert.Equal(t, int64(len(a)), size.Zip)
		})
	}
}

func TestZipMissingInputLeavesNoFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	out := filepath.Join(dir, "x.zip")
	require.Error(t, lambdazip.Zip(out, filepath.Join(dir, "missing"), ""))
	_, err := os.Stat(out)
	assert.ErrorIs(t, err, os.ErrNotExist)

	writeFile(t, filepath.Join(dir, "bootstrap"), "x")
	require.Error(t, lambdazip.Zip(out, filepath.Join(dir, "bootstrap"), filepath.Join(dir, "missing.yml")))
	_, err = os.Stat(out)
	assert.ErrorIs(t, err, os.ErrNotExist)
}

func TestFunctions(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	writeFile(t, filepath.Join(root, "functions", "relay", "main.go"), "package main")
	writeFile(t, filepath.Join(root, "functions", "poll", "main.go"), "package main")
	writeFile(t, filepath.Join(root, "functions", "notyet", "README.md"), "")
	names, err := lambdazip.Functions(root)
	require.NoError(t, err)
	assert.Equal(t, []string{"poll", "relay"}, names)
}

func TestWriteTable(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	require.NoError(t, lambdazip.WriteTable(&buf, []lambdazip.Size{{Function: "poll", Bootstrap: 12_845_218, Zip: 4_631_162}}))
	assert.Contains(t, buf.String(), "poll")
	assert.Contains(t, buf.String(), "12845218 ( 12.8 MB)")
	assert.Contains(t, buf.String(), "4631162 (  4.6 MB)")
}

// TestEveryFunctionBuildsForLambdaWithoutRPC builds every function of functions/ as `make
// lambda` deploys it (BuildEnv and BuildFlags: linux/arm64, no cgo, -tags lambda.norpc), in
// one go command, and checks that each binary is an arm64 executable and that the tag leaves
// net/rpc out of each function while the same function without the tag links it (so the
// check can fail). The Runtime Interface Emulator tests (functions/rietest) run the
// functions built for this machine.
func TestEveryFunctionBuildsForLambdaWithoutRPC(t *testing.T) {
	t.Parallel()
	goTool, err := exec.LookPath("go")
	require.NoError(t, err, "the go command is needed to build the functions")
	root := filepath.Join("..", "..")
	names, err := lambdazip.Functions(root)
	require.NoError(t, err)
	for _, want := range []string{"admin", "inbox", "poll", "relay", "retention"} {
		require.Contains(t, names, want, "functions/%s/main.go", want)
	}

	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	require.NoError(t, lambdazip.BuildAll(ctx, root, names, dir, lambdazip.BuildEnv))
	for _, name := range names {
		f, err := elf.Open(filepath.Join(dir, name))
		require.NoError(t, err, "the binary of %s", name)
		assert.Equal(t, elf.EM_AARCH64, f.Machine, "the machine of %s", name)
		assert.Equal(t, elf.ET_EXEC, f.Type, "%s is a static executable", name)
		require.NoError(t, f.Close())
	}

	// deps maps each function's import path to its dependencies, with the tags.
	deps := func(tags ...string) map[string][]string {
		args := append([]string{"list"}, tags...)
		args = append(args, "-f", "{{.ImportPath}}{{range .Deps}} {{.}}{{end}}")
		for _, name := range names {
			args = append(args, "./functions/"+name)
		}
		cmd := exec.Command(goTool, args...)
		cmd.Dir = root
		cmd.Env = append(os.Environ(), lambdazip.BuildEnv...)
		out, err := cmd.Output()
		require.NoError(t, err, "go list %v", tags)
		m := map[string][]string{}
		for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			fields := strings.Fields(line)
			m[path.Base(fields[0])] = fields[1:]
		}
		require.Len(t, m, len(names), "go list %v: a line per function", tags)
		return m
	}
	tagged, untagged := deps("-tags", "lambda.norpc"), deps()
	for _, name := range names {
		assert.NotContains(t, tagged[name], "net/rpc", "functions/%s links net/rpc although it is built with -tags lambda.norpc", name)
		assert.Contains(t, untagged[name], "net/rpc", "without the tag functions/%s does not link net/rpc: the check above proves nothing", name)
	}
}
