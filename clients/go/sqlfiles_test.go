package queuebox

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"testing"
)

// contractDir is the SQL contract of the repository, which the embedded files copy.
const contractDir = "../../examples/pull/sql"

// TestEmbeddedStatementsMatchTheContract compares every embedded statement byte for byte with
// examples/pull/sql, and the two sets of files with each other, so the copies cannot drift.
// After a change of the contract, copy the files again: cp -r ../../examples/pull/sql/* sql/
func TestEmbeddedStatementsMatchTheContract(t *testing.T) {
	t.Parallel()
	list := func(fsys fs.FS) []string {
		var out []string
		err := fs.WalkDir(fsys, ".", func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if !d.IsDir() && filepath.Ext(path) == ".sql" {
				out = append(out, path)
			}
			return nil
		})
		if err != nil {
			t.Fatalf("listing SQL files: %v", err)
		}
		sort.Strings(out)
		return out
	}
	embedded, err := fs.Sub(contractFiles, "sql")
	if err != nil {
		t.Fatal(err)
	}
	mine, theirs := list(embedded), list(os.DirFS(contractDir))
	if len(theirs) != 10 {
		t.Fatalf("the contract has %d files %q, want the five statements of two dialects", len(theirs), theirs)
	}
	if !equalStrings(mine, theirs) {
		t.Fatalf("embedded files %q, contract files %q", mine, theirs)
	}
	for _, path := range theirs {
		want, err := os.ReadFile(filepath.Join(contractDir, path))
		if err != nil {
			t.Fatal(err)
		}
		got, err := fs.ReadFile(embedded, path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("sql/%s differs from examples/pull/sql/%s: copy it again", path, path)
		}
	}
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
