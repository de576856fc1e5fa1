package lambdazip_test

import (
	"archive/zip"
	"bytes"
	"io"
	"os"
	"path/filepath"
	"testing"

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
