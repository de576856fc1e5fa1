// Command refdocs writes the reference pages of docs/reference from the code: the
// configuration keys and their variables (shared/config and the connectors' configuration
// packages), the metrics (shared/metrics and shared/emf), the HTTP routes (the OpenAPI
// description of shared/openapi), the tables (the migrations, applied to a fresh PostgreSQL
// database) and the command line (the help text of shared/cli).
//
// Run it with `make docs` or `go generate ./tools/refdocs` after a change to any of them;
// TestTheCommittedPagesAreGenerated fails while a committed page differs from what it writes.
// It needs the PostgreSQL server of the tests (QUEUEBOX_TEST_DATABASE_URL, by default
// postgres://postgres@127.0.0.1:5432/postgres), on which it creates a database of its own and
// drops it again.
//
//	go run ./tools/refdocs [-root DIR] [-database URL]
package main

//go:generate go run . -root ../..

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
)

func main() {
	root := flag.String("root", ".", "the repository's root folder")
	dbURL := flag.String("database", serverURL(), "a PostgreSQL server on which the user may create a database")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, *root, *dbURL); err != nil {
		fmt.Fprintln(os.Stderr, "refdocs:", err)
		os.Exit(1)
	}
}

// run generates every page and writes it under root.
func run(ctx context.Context, root, dbURL string) error {
	pages, err := Generate(ctx, Options{Root: root, DatabaseURL: dbURL})
	if err != nil {
		return err
	}
	for _, p := range pages {
		path := filepath.Join(root, filepath.FromSlash(p.Path))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return fmt.Errorf("creating the folder of %s: %w", p.Path, err)
		}
		if err := os.WriteFile(path, p.Text, 0o644); err != nil {
			return fmt.Errorf("writing %s: %w", p.Path, err)
		}
		fmt.Printf("wrote %s (%d bytes)\n", p.Path, len(p.Text))
	}
	return nil
}

// serverURL returns the PostgreSQL server of the tests.
func serverURL() string {
	if u := os.Getenv("QUEUEBOX_TEST_DATABASE_URL"); u != "" {
		return u
	}
	return "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"
}
