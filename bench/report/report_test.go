package report

import (
	"math"
	"os"
	"path/filepath"
	"testing"
)

func TestWriteJSON(t *testing.T) {
	path := filepath.Join(t.TempDir(), "results", "x.json")
	if err := WriteJSON(path, map[string]any{"a": 1, "b": []int{2}}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want := "{\n  \"a\": 1,\n  \"b\": [\n    2\n  ]\n}\n"
	if string(b) != want {
		t.Fatalf("wrote %q, want %q", b, want)
	}
	if err := WriteJSON(filepath.Join(t.TempDir(), "y.json"), math.NaN()); err == nil {
		t.Fatal("WriteJSON of NaN succeeded")
	}
}
