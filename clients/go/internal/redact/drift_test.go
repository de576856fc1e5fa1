package redact

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// TestSameAsTheServer compares this copy of the redaction with the server's shared/redact byte
// for byte. The client module cannot import the server module, so it carries a copy; this test
// keeps the two from drifting. After a change on the server, copy the files again.
func TestSameAsTheServer(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"redact.go", "error.go"} {
		want, err := os.ReadFile(filepath.Join("..", "..", "..", "..", "shared", "redact", name))
		if err != nil {
			t.Fatalf("reading the server's %s: %v", name, err)
		}
		got, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("internal/redact/%s differs from shared/redact/%s: copy it again", name, name)
		}
	}
}
