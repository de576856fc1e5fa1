// Package migrations embeds the versioned SQL files that create and evolve the QueueBox schema,
// in two tracks, one folder per dialect in each. The files are plain SQL that an operator can
// also apply by hand with psql or sqlcmd; see ../shared/spec/15-use-custom-tables.md and
// docs/migrations.md.
//
//   - The main track, migrations/<dialect>: the schema of the original QueueBox (the outbox,
//     the inbox, the capture state), numbered as the original numbers it and recorded in
//     Flyway's flyway_schema_history, so that a database moves between the two as it is.
//   - The QueueBox track, migrations/queuebox/<dialect>: the tables that only this QueueBox
//     has, numbered from V1 on their own and recorded in queuebox_schema_history, so that a
//     later migration of the original can never clash with one of them. Each file creates one
//     table (Migration.Table) and is safe to run twice.
package migrations

import (
	"embed"
	"fmt"
	"io/fs"
	"regexp"
	"sort"
	"strconv"
)

//go:embed postgresql/*.sql sqlserver/*.sql queuebox/postgresql/*.sql queuebox/sqlserver/*.sql
var files embed.FS

// Dialect names a folder of migrations.
type Dialect string

// The dialects that QueueBox ships migrations for.
const (
	PostgreSQL Dialect = "postgresql"
	SQLServer  Dialect = "sqlserver"
)

// Track names one series of migration files, numbered from V1, with its own history table.
type Track string

// The two tracks.
const (
	// Main is the schema of the original QueueBox, in migrations/<dialect>, recorded in
	// flyway_schema_history.
	Main Track = "main"
	// QueueBox is the tables of this QueueBox only, in migrations/queuebox/<dialect>, recorded
	// in queuebox_schema_history. It is applied after the last version of Main.
	QueueBox Track = "queuebox"
)

// Tracks lists the tracks in the order in which they are applied.
var Tracks = []Track{Main, QueueBox}

// HistoryTable returns the name of the table that records the versions of the track applied:
// flyway_schema_history for Main, queuebox_schema_history for QueueBox. Both have the columns
// of Flyway's history table.
func (t Track) HistoryTable() string {
	if t == QueueBox {
		return "queuebox_schema_history"
	}
	return "flyway_schema_history"
}

// Dir returns the folder of the track's files of dialect d, relative to this package:
// postgresql, or queuebox/postgresql.
func (t Track) Dir(d Dialect) string {
	if t == QueueBox {
		return "queuebox/" + string(d)
	}
	return string(d)
}

// Migration is one versioned SQL file.
type Migration struct {
	// Track is the track of the file.
	Track Track
	// Version is the number after V in the file name.
	Version int
	// Description is the part of the file name after the double underscore, with
	// underscores turned into spaces, as Flyway records it.
	Description string
	// Script is the file name, for example V1__create_outbox.sql.
	Script string
	// SQL is the content of the file.
	SQL string
	// Table is, on the QueueBox track, the table that the file creates: the start check of a
	// database whose schema is applied by hand (database.migrate false) looks for it. Empty on
	// the main track.
	Table string
}

// InTrack returns the track of m: a Migration whose Track is empty is of the main track.
func (m Migration) InTrack() Track {
	if m.Track == "" {
		return Main
	}
	return m.Track
}

// queueboxTables is the table that each version of the QueueBox track creates. A test checks
// that each file creates the table named here.
var queueboxTables = map[int]string{
	1: "queuebox_destination_state",
	2: "queuebox_revoked_session",
	3: "queuebox_replay_generation",
}

// Moved is a migration that earlier builds of this QueueBox shipped in the main track, and
// recorded in flyway_schema_history, and that the QueueBox track now holds.
type Moved struct {
	// Version and Script are the version and the file name that flyway_schema_history
	// records.
	Version int
	Script  string
	// To is the version of the QueueBox track that holds the same change.
	To int
}

// MovedToQueueBox lists the migrations that moved from the main track to the QueueBox track.
// A row of flyway_schema_history with one of these versions and scripts is this QueueBox's,
// never the original's: the runner moves it to queuebox_schema_history.
func MovedToQueueBox() []Moved {
	return []Moved{{Version: 12, Script: "V12__add_destination_state.sql", To: 1}}
}

var fileName = regexp.MustCompile(`^V([0-9]+)__([A-Za-z0-9_]+)\.sql$`)

// List returns the main-track migrations of a dialect in version order.
func List(d Dialect) ([]Migration, error) {
	return ListTrack(Main, d)
}

// ListAll returns the migrations of every track of a dialect in the order in which they are
// applied: the main track, then the QueueBox track. It is what an operator applies by hand to
// an empty database (psql or sqlcmd, one file after another).
func ListAll(d Dialect) ([]Migration, error) {
	var out []Migration
	for _, t := range Tracks {
		list, err := ListTrack(t, d)
		if err != nil {
			return nil, err
		}
		out = append(out, list...)
	}
	return out, nil
}

// ListTrack returns the migrations of a track and a dialect in version order.
func ListTrack(t Track, d Dialect) ([]Migration, error) {
	if t != Main && t != QueueBox {
		return nil, fmt.Errorf("reading migrations: unknown track %q", t)
	}
	dir := t.Dir(d)
	entries, err := fs.ReadDir(files, dir)
	if err != nil {
		return nil, fmt.Errorf("reading %s migrations: %w", dir, err)
	}
	var out []Migration
	for _, e := range entries {
		m := fileName.FindStringSubmatch(e.Name())
		if m == nil {
			return nil, fmt.Errorf("reading %s migrations: file %q does not follow V<version>__<description>.sql", dir, e.Name())
		}
		v, err := strconv.Atoi(m[1])
		if err != nil {
			return nil, fmt.Errorf("reading %s migrations: version of %q: %w", dir, e.Name(), err)
		}
		body, err := fs.ReadFile(files, dir+"/"+e.Name())
		if err != nil {
			return nil, fmt.Errorf("reading %s migration %s: %w", dir, e.Name(), err)
		}
		mig := Migration{Track: t, Version: v, Description: descriptionOf(m[2]), Script: e.Name(), SQL: string(body)}
		if t == QueueBox {
			if mig.Table = queueboxTables[v]; mig.Table == "" {
				return nil, fmt.Errorf("reading %s migrations: %s names no table that it creates", dir, e.Name())
			}
		}
		out = append(out, mig)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	for i := range out {
		if out[i].Version != i+1 {
			return nil, fmt.Errorf("reading %s migrations: expected version %d, found %s", dir, i+1, out[i].Script)
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
