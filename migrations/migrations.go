// Package migrations embeds the versioned SQL files that create and evolve the QueueBox schema,
// one folder per dialect. The files are plain SQL that an operator can also apply by hand with
// psql or sqlcmd; see ../shared/spec/15-use-custom-tables.md.
package migrations

import (
	"embed"
	"fmt"
	"io/fs"
	"regexp"
	"sort"
	"strconv"
)

//go:embed postgresql/*.sql sqlserver/*.sql
var files embed.FS

// Dialect names a folder of migrations.
type Dialect string

// The dialects that QueueBox ships migrations for.
const (
	PostgreSQL Dialect = "postgresql"
	SQLServer  Dialect = "sqlserver"
)

// Migration is one versioned SQL file.
type Migration struct {
	// Version is the number after V in the file name.
	Version int
	// Description is the part of the file name after the double underscore, with
	// underscores turned into spaces, as Flyway records it.
	Description string
	// Script is the file name, for example V1__create_outbox.sql.
	Script string
	// SQL is the content of the file.
	SQL string
}

var fileName = regexp.MustCompile(`^V([0-9]+)__([A-Za-z0-9_]+)\.sql$`)

// List returns the migrations of a dialect in version order.
func List(d Dialect) ([]Migration, error) {
	entries, err := fs.ReadDir(files, string(d))
	if err != nil {
		return nil, fmt.Errorf("reading %s migrations: %w", d, err)
	}
	var out []Migration
	for _, e := range entries {
		m := fileName.FindStringSubmatch(e.Name())
		if m == nil {
			return nil, fmt.Errorf("reading %s migrations: file %q does not follow V<version>__<description>.sql", d, e.Name())
		}
		v, err := strconv.Atoi(m[1])
		if err != nil {
			return nil, fmt.Errorf("reading %s migrations: version of %q: %w", d, e.Name(), err)
		}
		body, err := fs.ReadFile(files, string(d)+"/"+e.Name())
		if err != nil {
			return nil, fmt.Errorf("reading %s migration %s: %w", d, e.Name(), err)
		}
		out = append(out, Migration{Version: v, Description: descriptionOf(m[2]), Script: e.Name(), SQL: string(body)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	for i := range out {
		if out[i].Version != i+1 {
			return nil, fmt.Errorf("reading %s migrations: expected version %d, found %s", d, i+1, out[i].Script)
		}
	}
	return out, nil
}

func descriptionOf(s string) string {
	b := []byte(s)
	for i := range b {
		if b[i] == '_' {
			b[i] = ' '
		}
	}
	return string(b)
}
