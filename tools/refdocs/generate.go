package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/alternayte/queuebox/shared/openapi"
)

// Options are the inputs of Generate.
type Options struct {
	// Root is the repository's root folder, where the doc comments are read.
	Root string
	// DatabaseURL is a PostgreSQL server on which the user may create a database: the tables
	// page applies the migrations to a fresh one.
	DatabaseURL string
}

// Page is one generated file.
type Page struct {
	// Path is the file's path from the repository's root, with slashes.
	Path string
	// Text is the file's content.
	Text []byte
}

// Dir is the folder of the reference pages, from the repository's root.
const Dir = "docs/reference"

// Generate returns every reference page, the index first.
func Generate(ctx context.Context, opts Options) ([]Page, error) {
	docs := newDocComments(opts.Root)
	type gen struct {
		file string
		fn   func() (string, error)
	}
	gens := []gen{
		{"README.md", func() (string, error) { return indexPage(), nil }},
		{"configuration.md", func() (string, error) { return configurationPage(docs) }},
		{"metrics.md", func() (string, error) { return metricsPage(opts.Root) }},
		{"http-api.md", func() (string, error) { return httpAPIPage(openapi.YAML) }},
		{"tables.md", func() (string, error) { return tablesPage(ctx, opts.DatabaseURL) }},
		{"cli.md", cliPage},
	}
	pages := make([]Page, 0, len(gens))
	for _, g := range gens {
		text, err := g.fn()
		if err != nil {
			return nil, fmt.Errorf("generating %s: %w", g.file, err)
		}
		pages = append(pages, Page{Path: Dir + "/" + g.file, Text: []byte(text)})
	}
	return pages, nil
}

// generatedNote is the line under each page's title.
const generatedNote = "This page is generated from the code by `tools/refdocs` (`make docs`); do not edit it by hand.\n"

// indexPage is docs/reference/README.md.
func indexPage() string {
	var b md
	b.line("# Reference")
	b.line("")
	b.text(generatedNote)
	b.line("")
	b.line("These pages list what QueueBox exposes, each from the code that defines it, so that they")
	b.line("change with it: a test fails while a committed page differs from what the generator writes.")
	b.line("")
	b.table([]string{"Page", "What it lists", "Generated from"}, [][]string{
		{"[configuration.md](configuration.md)", "Every configuration key: its type, default, largest value and environment variable, by section and by kind.", "The configuration model (`shared/config`) and each connector's configuration package."},
		{"[metrics.md](metrics.md)", "Every metric family of `GET /metrics`, with its type and labels, and what the Lambda functions write instead.", "The Prometheus registry (`shared/metrics`) and the EMF recorder (`shared/emf`)."},
		{"[http-api.md](http-api.md)", "Every HTTP route: method, path, port, credentials and summary.", "The OpenAPI description (`shared/openapi/openapi.yaml`, also `docs/openapi.yaml`) and the data port's routing."},
		{"[tables.md](tables.md)", "Every table, column and index that the migrations create.", "The migrations of both tracks, applied to an empty PostgreSQL database; the SQL Server types from its migration files."},
		{"[cli.md](cli.md)", "Every command and flag of the `queuebox` binary.", "The command line's help text (`shared/cli`)."},
	})
	b.line("")
	b.line("To regenerate them after a change, with the test PostgreSQL server running:")
	b.line("")
	b.line("```sh")
	b.line("make docs   # or: go generate ./tools/refdocs")
	b.line("```")
	return b.String()
}

// regenerate is the advice of every problem that stalePages reports.
const regenerate = "run `make docs` (or `go generate ./tools/refdocs`) with the test PostgreSQL server running, and commit the result"

// stalePages compares the pages under root with pages, what the generator writes, and
// returns one problem per page that differs or is missing, and per Markdown file of Dir that
// the generator does not write.
func stalePages(root string, pages []Page) []string {
	var out []string
	want := map[string]bool{}
	for _, p := range pages {
		want[p.Path] = true
		got, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(p.Path)))
		switch {
		case errors.Is(err, fs.ErrNotExist):
			out = append(out, fmt.Sprintf("%s is missing; %s", p.Path, regenerate))
		case err != nil:
			out = append(out, fmt.Sprintf("reading %s: %v", p.Path, err))
		case !bytes.Equal(got, p.Text):
			out = append(out, fmt.Sprintf("%s differs from what tools/refdocs generates at %s; %s", p.Path, firstDifference(got, p.Text), regenerate))
		}
	}
	files, _ := filepath.Glob(filepath.Join(root, filepath.FromSlash(Dir), "*.md"))
	for _, f := range files {
		rel := Dir + "/" + filepath.Base(f)
		if !want[rel] {
			out = append(out, fmt.Sprintf("%s is not a page that tools/refdocs generates: remove it, or generate it", rel))
		}
	}
	return out
}

// firstDifference names the first line at which committed and generated differ, with both.
func firstDifference(committed, generated []byte) string {
	a := strings.Split(string(committed), "\n")
	b := strings.Split(string(generated), "\n")
	for i := 0; i < max(len(a), len(b)); i++ {
		var x, y string
		if i < len(a) {
			x = a[i]
		}
		if i < len(b) {
			y = b[i]
		}
		if x != y || i >= len(a) || i >= len(b) {
			return fmt.Sprintf("line %d (committed %q, generated %q)", i+1, x, y)
		}
	}
	return "its end"
}
