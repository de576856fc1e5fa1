// Package dialect is the dialect table: one line per database dialect that QueueBox runs on.
// Each line is the dialect's own description (shared/store's Dialect, filled in the dialect's
// folder: its database.type name, the grammar of its database.url, its connection strings,
// Open, its default schema and capture mode) and, in a table of its own (NewCaptureSource),
// the source of its change data capture.
//
// The composition root (shared/service) reads everything dialect-specific from here: the
// checks of database.url and database.type that shared/config asks for, the opening of the
// store and of the health pool, and capture. Adding a dialect is one folder under shared/store
// (its store, its Dialect and its capture source), its migrations, one line in table and one
// in captureSources.
package dialect

import (
	"fmt"
	"slices"
	"strings"

	"github.com/alternayte/queuebox/shared/dburl"
	"github.com/alternayte/queuebox/shared/store"
	"github.com/alternayte/queuebox/shared/store/changes"
	"github.com/alternayte/queuebox/shared/store/postgres"
	"github.com/alternayte/queuebox/shared/store/postgres/logical"
	"github.com/alternayte/queuebox/shared/store/sqlserver"
	"github.com/alternayte/queuebox/shared/store/sqlserver/cdc"
)

// Dialect is one line of the table. Its change data capture source is apart, in
// captureSources (NewCaptureSource).
type Dialect struct {
	store.Dialect
	// CapturePublication says that the capture source reads a publication through a
	// replication slot (outbox.capture.publication and outbox.capture.slot), which may carry
	// the inbox table as well, so that an inbox insert wakes the relay.
	CapturePublication bool
}

// table lists the dialects, in the order that the error of database.type names them.
var table = []Dialect{
	{Dialect: postgres.Dialect, CapturePublication: true},
	{Dialect: sqlserver.Dialect},
}

// captureSources are the change data capture sources of the dialects of table
// (store.Dialect.CaptureMode), by database.type name. They are apart from table, which every
// program reads, so that only a program that captures (through NewCaptureSource) links them.
// Its keys are constants: a key read from a variable would make the package's initialization
// reach the table, and with it the sources.
var captureSources = []struct {
	name   string
	source func() changes.Source
}{
	{name: store.DialectPostgreSQL, source: func() changes.Source { return logical.Source{} }},
	{name: store.DialectSQLServer, source: func() changes.Source { return &cdc.Source{} }},
}

// NewCaptureSource returns a new source of d's change data capture, or nil when d has none.
// It is a function and not a method of Dialect, so that a program that converts a Dialect to
// an interface does not link the sources either.
func NewCaptureSource(d Dialect) changes.Source {
	for _, c := range captureSources {
		if c.name == d.Name {
			return c.source()
		}
	}
	return nil
}

// All returns the dialects, in the order of the table.
func All() []Dialect { return slices.Clone(table) }

// Lookup returns the dialect whose database.type is name.
func Lookup(name string) (Dialect, bool) {
	for _, d := range table {
		if d.Name == name {
			return d, true
		}
	}
	return Dialect{}, false
}

// ByCaptureMode returns the dialect whose change data capture is outbox.capture.mode mode.
func ByCaptureMode(mode string) (Dialect, bool) {
	for _, d := range table {
		if d.CaptureMode != "" && d.CaptureMode == mode {
			return d, true
		}
	}
	return Dialect{}, false
}

// CaptureModes returns the outbox.capture.mode of every dialect that has change data
// capture, in the order of the table.
func CaptureModes() []string {
	var out []string
	for _, d := range table {
		if d.CaptureMode != "" {
			out = append(out, d.CaptureMode)
		}
	}
	return out
}

// ParseURL parses database.url with the parser of the dialect that its scheme names. A URL
// whose scheme names no dialect of the table is the error of store.URLSchemeError.
func ParseURL(raw string) (dburl.URL, error) {
	name, _, _, ok := store.URLScheme(raw)
	d, found := Lookup(name)
	if !ok || !found {
		return dburl.URL{}, store.URLSchemeError(raw)
	}
	return d.ParseURL(raw)
}

// UnsupportedParams returns the names of the parameters of u that the driver of its dialect
// leaves out: they have no equivalent in this implementation.
func UnsupportedParams(u dburl.URL) []string {
	d, ok := Lookup(u.Dialect)
	if !ok {
		return nil
	}
	_, dropped := d.Params(u)
	return dropped
}

// ConnString returns the dialect of database.type name and its driver's connection string for
// database.url (raw), database.username (user) and database.password (password); an empty
// user or password takes the one of the URL. A name that no dialect has is an error that lists
// the dialects; a URL of another dialect is an error that names it. The string holds the
// password: never log it.
func ConnString(name, raw, user, password string) (Dialect, string, error) {
	d, ok := Lookup(name)
	if !ok {
		return Dialect{}, "", fmt.Errorf("database.type is %s, not %s", name, names())
	}
	s, err := d.ConnString(raw, user, password)
	if err != nil {
		return Dialect{}, "", err
	}
	return d, s, nil
}

// names returns the names of the dialects, as an error lists them: "a or b".
func names() string {
	out := make([]string, len(table))
	for i, d := range table {
		out[i] = d.Name
	}
	return JoinOr(out)
}

// JoinOr joins words as an error lists choices: "a", "a or b", "a, b or c".
func JoinOr(words []string) string {
	if len(words) < 2 {
		return strings.Join(words, "")
	}
	return strings.Join(words[:len(words)-1], ", ") + " or " + words[len(words)-1]
}
