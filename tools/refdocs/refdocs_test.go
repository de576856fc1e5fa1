package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// root is the repository's root, from this package's folder.
const root = "../.."

// generated runs the generator once for the tests, as `make docs` does, on the PostgreSQL
// server of the tests.
var generated = sync.OnceValues(func() ([]Page, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	return Generate(ctx, Options{Root: root, DatabaseURL: serverURL()})
})

// generate returns the generated pages.
func generate(t *testing.T) []Page {
	t.Helper()
	pages, err := generated()
	require.NoError(t, err, "the tables page needs the PostgreSQL server of the tests: start it with `make services`, or set QUEUEBOX_TEST_DATABASE_URL")
	return pages
}

// TestTheCommittedPagesAreGenerated fails while a page of docs/reference differs from what
// the generator writes from the code, or while the folder holds a page that it does not write.
func TestTheCommittedPagesAreGenerated(t *testing.T) {
	t.Parallel()
	for _, problem := range stalePages(root, generate(t)) {
		t.Error(problem)
	}
}

// TestStalePagesFindsEveryDifference checks the comparison of the test above on a copy of the
// pages: an edited page, a missing page and a page that the generator does not write.
func TestStalePagesFindsEveryDifference(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	pages := []Page{
		{Path: Dir + "/a.md", Text: []byte("# A\n\none\ntwo\n")},
		{Path: Dir + "/b.md", Text: []byte("# B\n")},
	}
	require.NoError(t, os.MkdirAll(filepath.Join(dir, Dir), 0o755))
	write := func(name, text string) {
		require.NoError(t, os.WriteFile(filepath.Join(dir, Dir, name), []byte(text), 0o644))
	}
	write("a.md", "# A\n\none\ntwo\n")
	write("b.md", "# B\n")
	assert.Empty(t, stalePages(dir, pages), "the pages are what the generator writes")

	write("a.md", "# A\n\none\n2\n")
	write("old.md", "# Old\n")
	require.NoError(t, os.Remove(filepath.Join(dir, Dir, "b.md")))
	got := strings.Join(stalePages(dir, pages), "\n")
	assert.Contains(t, got, "docs/reference/a.md differs from what tools/refdocs generates at line 4")
	assert.Contains(t, got, `committed "2", generated "two"`)
	assert.Contains(t, got, "docs/reference/b.md is missing")
	assert.Contains(t, got, "docs/reference/old.md is not a page that tools/refdocs generates")
	assert.Contains(t, got, "make docs")
}

// TestThePagesSpeakToUsers fails when a generated page names the handbook that the code's
// comments cite, or an issue number.
func TestThePagesSpeakToUsers(t *testing.T) {
	t.Parallel()
	for _, p := range generate(t) {
		text := string(p.Text)
		for _, bad := range []string{"spec/", "shared/spec", "issue "} {
			assert.NotContains(t, text, bad, "%s", p.Path)
		}
	}
}

func TestParseHelp(t *testing.T) {
	t.Parallel()
	help := "Usage:\n" +
		"  queuebox a                 first command\n" +
		"                             goes on\n" +
		"  queuebox b [--x N] [--long-flag VALUE]\n" +
		"             [--y Y]...\n" +
		"                             second\n" +
		"\n" +
		"Closing words.\n"
	cmds, rest, err := parseHelp(help)
	require.NoError(t, err)
	assert.Equal(t, []command{
		{synopsis: "queuebox a", description: "first command goes on"},
		{synopsis: "queuebox b [--x N] [--long-flag VALUE] [--y Y]...", description: "second"},
	}, cmds)
	assert.Equal(t, "Closing words.\n", rest)
}

func TestParseSQLServer(t *testing.T) {
	t.Parallel()
	s := sqlServerSchema{types: map[string]string{}, indexes: map[string]map[string]string{}}
	s.parse("IF OBJECT_ID(N't', N'U') IS NULL\n    CREATE TABLE t (\n        id   UNIQUEIDENTIFIER NOT NULL PRIMARY KEY,\n" +
		"        [key] NVARCHAR(255) NULL,\n        CONSTRAINT uq UNIQUE (id, [key])\n    );\nGO\n" +
		"ALTER TABLE t ADD seq BIGINT NULL;\nGO\nALTER TABLE t ALTER COLUMN seq BIGINT NOT NULL;\n" +
		"ALTER TABLE t ADD CONSTRAINT df DEFAULT 1 FOR seq;\n" +
		"    CREATE INDEX idx_t ON t (seq, id)\n        WHERE seq > 0;\nGO\n")
	assert.Equal(t, map[string]string{"t.id": "UNIQUEIDENTIFIER", "t.key": "NVARCHAR(255)", "t.seq": "BIGINT"}, s.types)
	assert.Equal(t, map[string]map[string]string{"t": {"idx_t": "(seq, id) WHERE seq > 0"}}, s.indexes)
}
