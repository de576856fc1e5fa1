package migrations_test

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/alternayte/queuebox/migrations"
)

// No SQL Server runs on this machine, so these tests read the text of the SQL Server files:
// every version is there, every file splits into batches that sqlcmd and the runner send alike,
// every change is guarded so that a second run does nothing, and the schema that the files
// build is the one that spec/29-outbox-table.md and spec/27-inbox-table.md document.

func TestListBothDialectsShipTheSameVersions(t *testing.T) {
	t.Parallel()
	pg, err := migrations.List(migrations.PostgreSQL)
	require.NoError(t, err)
	ms, err := migrations.List(migrations.SQLServer)
	require.NoError(t, err)

	want := []string{
		"V1__create_outbox.sql", "V2__create_inbox.sql", "V3__add_claimed_at.sql",
		"V4__add_last_error.sql", "V5__add_correlation_id.sql",
		"V6__add_consumption_and_leases.sql", "V7__capture_state.sql",
		"V8__add_pull_claim_indexes.sql", "V9__add_aggregate_type.sql",
		"V10__add_inbox_headers.sql", "V11__add_outbox_sequence.sql",
	}
	for _, tc := range []struct {
		name string
		list []migrations.Migration
	}{{"postgresql", pg}, {"sqlserver", ms}} {
		var got []string
		for i, m := range tc.list {
			assert.Equal(t, i+1, m.Version, tc.name)
			got = append(got, m.Script)
		}
		assert.Equal(t, want, got, tc.name)
	}
	for i := range pg {
		assert.Equal(t, pg[i].Description, ms[i].Description)
	}
}

// TestQueueBoxTrackBothDialects: the QueueBox track ships the same versions on both dialects,
// numbered from V1, each file creating the table that Migration.Table names, guarded so that a
// second run does nothing; the main track holds none of QueueBox's own tables.
func TestQueueBoxTrackBothDialects(t *testing.T) {
	t.Parallel()
	pg, err := migrations.ListTrack(migrations.QueueBox, migrations.PostgreSQL)
	require.NoError(t, err)
	ms, err := migrations.ListTrack(migrations.QueueBox, migrations.SQLServer)
	require.NoError(t, err)
	require.Equal(t, len(pg), len(ms))
	require.NotEmpty(t, pg)
	assert.Equal(t, "V1__add_destination_state.sql", pg[0].Script)
	for i := range pg {
		assert.Equal(t, i+1, pg[i].Version)
		assert.Equal(t, pg[i].Script, ms[i].Script)
		assert.Equal(t, migrations.QueueBox, pg[i].Track)
		assert.Equal(t, pg[i].Table, ms[i].Table)
		assert.True(t, strings.HasPrefix(pg[i].Table, "queuebox_"), pg[i].Table)
		assert.Contains(t, pg[i].SQL, "CREATE TABLE IF NOT EXISTS "+pg[i].Table+" (", pg[i].Script)
		assert.Contains(t, ms[i].SQL, "IF OBJECT_ID(N'"+ms[i].Table+"', N'U') IS NULL\n    CREATE TABLE "+ms[i].Table+" (", ms[i].Script)
		assert.Contains(t, pg[i].SQL, "Safe to run twice.", pg[i].Script)
	}
	for _, d := range []migrations.Dialect{migrations.PostgreSQL, migrations.SQLServer} {
		main, err := migrations.List(d)
		require.NoError(t, err)
		for _, m := range main {
			assert.Equal(t, migrations.Main, m.Track)
			assert.Empty(t, m.Table)
			for _, q := range pg {
				assert.NotContains(t, m.SQL, q.Table, "%s/%s creates a table of the QueueBox track", d, m.Script)
			}
		}
	}
	assert.Equal(t, "flyway_schema_history", migrations.Main.HistoryTable())
	assert.Equal(t, "queuebox_schema_history", migrations.QueueBox.HistoryTable())
	assert.Equal(t, []migrations.Moved{{Version: 12, Script: "V12__add_destination_state.sql", To: 1}}, migrations.MovedToQueueBox())
}

// sqlServerFiles returns the SQL Server files of both tracks, main first.
func sqlServerFiles(t *testing.T) []migrations.Migration {
	t.Helper()
	var out []migrations.Migration
	for _, tr := range migrations.Tracks {
		list, err := migrations.ListTrack(tr, migrations.SQLServer)
		require.NoError(t, err)
		out = append(out, list...)
	}
	return out
}

// sqlcmdCommand matches a line that sqlcmd would read as one of its own commands.
var sqlcmdCommand = regexp.MustCompile(`(?i)^\s*(:|!!|(ed|reset|exit|quit)\s*$|(ed|reset|exit|quit)\s*\()`)

func TestSQLServerFilesAreSafeForSqlcmd(t *testing.T) {
	t.Parallel()
	list := sqlServerFiles(t)
	goLike := regexp.MustCompile(`(?i)^\s*go\b`)
	for _, m := range list {
		t.Run(string(m.Track)+"/"+m.Script, func(t *testing.T) {
			t.Parallel()
			assert.NotContains(t, m.SQL, "/*", "block comments can hide a GO line from one splitter and not the other")
			assert.NotContains(t, m.SQL, "$(", "sqlcmd reads $(name) as a variable")
			assert.NotContains(t, m.SQL, "\r", "files use \n line ends")
			assert.False(t, strings.HasPrefix(m.SQL, "\uFEFF"), "no byte order mark")
			for i, line := range strings.Split(m.SQL, "\n") {
				if goLike.MatchString(line) {
					assert.Equal(t, "GO", strings.TrimSpace(line), "line %d: a batch separator is a line that reads exactly GO", i+1)
				}
				assert.False(t, sqlcmdCommand.MatchString(line), "line %d reads as a sqlcmd command: %q", i+1, line)
				assert.Equal(t, 0, strings.Count(line, "'")%2, "line %d: a string literal must not span lines: %q", i+1, line)
			}
			assert.True(t, strings.HasSuffix(m.SQL, "GO\n"), "the last batch ends with GO")
		})
	}
}

func TestSQLServerFilesSplitIntoBatches(t *testing.T) {
	t.Parallel()
	list := sqlServerFiles(t)
	for _, m := range list {
		t.Run(string(m.Track)+"/"+m.Script, func(t *testing.T) {
			t.Parallel()
			batches := migrations.SplitBatches(m.SQL)
			require.GreaterOrEqual(t, len(batches), 2, "the SET batch and at least one change")
			assert.Equal(t, "SET ANSI_NULLS ON;\nSET QUOTED_IDENTIFIER ON;", stripComments(batches[0]),
				"the first batch sets what a filtered index needs, also without sqlcmd -I")
			assert.Equal(t, strings.Count(m.SQL, "\nGO\n"), len(batches), "one batch per GO line")
			for i, b := range batches {
				assert.NotContains(t, "\n"+b+"\n", "\nGO\n", "batch %d holds a GO line", i+1)
				assert.NotEmpty(t, stripComments(b), "batch %d is empty", i+1)
			}
		})
	}
}

// guardRules: each change that a batch makes, and the guard that must come before it in the
// same batch. A change that matches no rule fails the test.
var guardRules = []struct {
	name   string
	change *regexp.Regexp
	guard  func(m []string) string
}{
	{"create table", regexp.MustCompile(`CREATE TABLE (\w+) \(`),
		func(m []string) string { return fmt.Sprintf("IF OBJECT_ID(N'%s', N'U') IS NULL", m[1]) }},
	{"create index", regexp.MustCompile(`CREATE INDEX (\w+) ON (\w+) `),
		func(m []string) string {
			return fmt.Sprintf("IF NOT EXISTS (SELECT 1 FROM sys.indexes WHERE object_id = OBJECT_ID(N'%s') AND name = N'%s')", m[2], m[1])
		}},
	{"create sequence", regexp.MustCompile(`CREATE SEQUENCE (\w+) `),
		func(m []string) string { return fmt.Sprintf("IF OBJECT_ID(N'%s', N'SO') IS NULL", m[1]) }},
	{"add check", regexp.MustCompile(`ALTER TABLE (\w+) ADD CONSTRAINT (\w+) CHECK `),
		func(m []string) string {
			return fmt.Sprintf("IF NOT EXISTS (SELECT 1 FROM sys.check_constraints WHERE parent_object_id = OBJECT_ID(N'%s') AND name = N'%s')", m[1], m[2])
		}},
	{"add default", regexp.MustCompile(`ALTER TABLE (\w+) ADD CONSTRAINT \w+ DEFAULT .* FOR (\w+);`),
		func(m []string) string {
			return fmt.Sprintf("WHERE dc.parent_object_id = OBJECT_ID(N'%s') AND c.name = N'%s'", m[1], m[2])
		}},
	{"add column", regexp.MustCompile(`ALTER TABLE (\w+) ADD (\w+) `),
		func(m []string) string { return fmt.Sprintf("IF COL_LENGTH(N'%s', N'%s') IS NULL", m[1], m[2]) }},
	{"alter column", regexp.MustCompile(`ALTER TABLE (\w+) ALTER COLUMN (\w+) \w+ NOT NULL;`),
		func(m []string) string {
			return fmt.Sprintf("IF EXISTS (SELECT 1 FROM sys.columns WHERE object_id = OBJECT_ID(N'%s') AND name = N'%s' AND is_nullable = 1)", m[1], m[2])
		}},
	{"restart sequence", regexp.MustCompile(`N'ALTER SEQUENCE (\w+) RESTART WITH '`),
		func([]string) string { return "IF @current IS NULL OR @current < @next" }},
	{"number rows", regexp.MustCompile(`UPDATE numbered SET sequence = @top \+ n;`),
		func([]string) string { return "WHERE sequence IS NULL" }},
}

var anyChange = regexp.MustCompile(`(?i)\b(CREATE|ALTER|DROP|UPDATE|INSERT|DELETE|EXEC|TRUNCATE|MERGE)\b`)

func TestSQLServerChangesAreGuarded(t *testing.T) {
	t.Parallel()
	list := sqlServerFiles(t)
	for _, m := range list {
		t.Run(string(m.Track)+"/"+m.Script, func(t *testing.T) {
			t.Parallel()
			for i, b := range migrations.SplitBatches(m.SQL)[1:] {
				b = stripComments(b)
				matched := 0
				rest := b
				for _, r := range guardRules {
					for _, loc := range r.change.FindAllStringSubmatchIndex(b, -1) {
						sub := make([]string, 0, len(loc)/2)
						for j := 0; j < len(loc); j += 2 {
							sub = append(sub, b[loc[j]:loc[j+1]])
						}
						if r.name == "add column" && sub[2] == "CONSTRAINT" {
							continue
						}
						guard := r.guard(sub)
						g := strings.Index(b, guard)
						if assert.GreaterOrEqual(t, g, 0, "batch %d: %s %q has no guard %q", i+2, r.name, sub[0], guard) {
							assert.Less(t, g, loc[0], "batch %d: the guard of %q comes after it", i+2, sub[0])
						}
						matched++
						rest = strings.Replace(rest, sub[0], "", 1)
					}
				}
				// Whatever changes the schema or the rows is one of the guarded changes: no
				// other change word is left, but the EXEC of the guarded restart.
				for _, kw := range anyChange.FindAllString(rest, -1) {
					if strings.EqualFold(kw, "EXEC") && strings.Contains(b, "EXEC sp_executesql @restart;") {
						continue
					}
					t.Errorf("batch %d: unguarded %s in %q", i+2, kw, b)
				}
				assert.Equal(t, 1, matched, "batch %d holds exactly one guarded change: %q", i+2, b)
			}
		})
	}
}

// column is one column as the files declare it, in the notation of the documentation.
type column struct {
	Type     string
	Nullable bool
	Default  string // "none" when the column has no default
}

// sqlServerColumns is the SQL Server column of the tables in spec/29-outbox-table.md,
// spec/27-inbox-table.md, COMPAT ("V7 queuebox_capture_state"), and the QueueBox track's tables
// (docs/migrations.md, extensions): queuebox_destination_state (docs/destination-state.md) and
// queuebox_revoked_session (docs/console.md), queuebox_replay_generation (docs/headers.md).
var sqlServerColumns = map[string]map[string]column{
	"outbox": {
		"id":               {"UNIQUEIDENTIFIER", false, "NEWID()"},
		"topic":            {"NVARCHAR(255)", false, "none"},
		"key":              {"NVARCHAR(255)", true, "none"},
		"payload":          {"NVARCHAR(MAX)", false, "none"},
		"headers":          {"NVARCHAR(MAX)", false, "'{}'"},
		"aggregate_type":   {"NVARCHAR(255)", true, "none"},
		"state":            {"NVARCHAR(50)", false, "'pending'"},
		"attempt":          {"INT", false, "0"},
		"max_attempts":     {"INT", false, "5"},
		"scheduled_at":     {"DATETIME2", false, "GETUTCDATE()"},
		"created_at":       {"DATETIME2", false, "GETUTCDATE()"},
		"updated_at":       {"DATETIME2", false, "GETUTCDATE()"},
		"claimed_at":       {"DATETIME2", true, "none"},
		"claim_token":      {"UNIQUEIDENTIFIER", true, "none"},
		"lease_expires_at": {"DATETIME2", true, "none"},
		"last_error":       {"NVARCHAR(MAX)", true, "none"},
		"sequence":         {"BIGINT", false, "NEXT VALUE FOR outbox_sequence_seq"},
	},
	"inbox": {
		"id":               {"UNIQUEIDENTIFIER", false, "NEWID()"},
		"source":           {"NVARCHAR(255)", false, "none"},
		"idempotency_key":  {"NVARCHAR(255)", false, "none"},
		"aggregate_id":     {"NVARCHAR(255)", true, "none"},
		"event_type":       {"NVARCHAR(255)", true, "none"},
		"payload":          {"NVARCHAR(MAX)", false, "none"},
		"headers":          {"NVARCHAR(MAX)", false, "'{}'"},
		"correlation_id":   {"NVARCHAR(128)", true, "none"},
		"consumption":      {"VARCHAR(4)", false, "'push'"},
		"state":            {"NVARCHAR(50)", false, "'pending'"},
		"created_at":       {"DATETIME2", false, "GETUTCDATE()"},
		"processed_at":     {"DATETIME2", true, "none"},
		"scheduled_at":     {"DATETIME2", false, "SYSUTCDATETIME()"},
		"attempt":          {"INT", false, "0"},
		"last_error":       {"NVARCHAR(MAX)", true, "none"},
		"claimed_at":       {"DATETIME2", true, "none"},
		"claim_token":      {"UNIQUEIDENTIFIER", true, "none"},
		"lease_expires_at": {"DATETIME2", true, "none"},
	},
	"queuebox_capture_state": {
		"identity_name":      {"VARCHAR(63)", false, "none"},
		"state_id":           {"VARCHAR(36)", false, "none"},
		"config_fingerprint": {"VARCHAR(64)", false, "none"},
	},
	"queuebox_destination_state": {
		"destination":       {"NVARCHAR(255)", false, "none"},
		"paused":            {"BIT", false, "0"},
		"paused_at":         {"DATETIME2", true, "none"},
		"open_until":        {"DATETIME2", true, "none"},
		"failures":          {"INT", false, "0"},
		"window_started_at": {"DATETIME2", true, "none"},
		"rate_tat":          {"DATETIME2", true, "none"},
		"updated_at":        {"DATETIME2", false, "SYSUTCDATETIME()"},
	},
	"queuebox_revoked_session": {
		"session_hash": {"NVARCHAR(64)", false, "none"},
		"expires_at":   {"DATETIME2", false, "none"},
		"revoked_at":   {"DATETIME2", false, "SYSUTCDATETIME()"},
	},
	"queuebox_replay_generation": {
		"outbox_id":   {"UNIQUEIDENTIFIER", false, "none"},
		"generation":  {"BIGINT", false, "none"},
		"replayed_at": {"DATETIME2", false, "SYSUTCDATETIME()"},
	},
}

// index is one index as the documentation lists it.
type index struct {
	Table   string
	Columns string
	Filter  string // "none", or the WHERE clause
	Unique  bool
}

// sqlServerIndexes are the SQL Server index tables of spec/29 and spec/27 (the primary keys
// aside), with each filter in words turned into its WHERE clause.
var sqlServerIndexes = map[string]index{
	"idx_outbox_pending_scheduled":  {"outbox", "state, scheduled_at", "state = 'pending'", false},
	"idx_outbox_state_updated":      {"outbox", "state, updated_at", "none", false},
	"idx_outbox_processing_claimed": {"outbox", "claimed_at", "state = 'processing'", false},
	"idx_outbox_key_sequence":       {"outbox", "[key], sequence", "state IN ('pending', 'processing')", false},
	"uq_inbox_source_idempotency":   {"inbox", "source, idempotency_key", "none", true},
	"idx_inbox_state":               {"inbox", "state", "none", false},
	"idx_inbox_state_created":       {"inbox", "state, created_at", "none", false},
	"idx_inbox_aggregate_state":     {"inbox", "aggregate_id, state", "none", false},
	"idx_inbox_processing_claimed":  {"inbox", "claimed_at", "state = 'processing'", false},
	"idx_inbox_consumption_pending": {"inbox", "consumption, state, scheduled_at", "none", false},
	"idx_inbox_pull_pending":        {"inbox", "source, scheduled_at, created_at, id", "consumption = 'pull' AND state = 'pending'", false},
	"idx_inbox_pull_busy":           {"inbox", "source, aggregate_id, lease_expires_at", "consumption = 'pull' AND state = 'processing'", false},

	"idx_queuebox_revoked_session_expires": {"queuebox_revoked_session", "expires_at", "none", false},
}

var (
	createTable  = regexp.MustCompile(`(?s)CREATE TABLE (\w+) \((.*)\);`)
	addColumn    = regexp.MustCompile(`ALTER TABLE (\w+) ADD (\w+) (.*);`)
	addDefault   = regexp.MustCompile(`ALTER TABLE (\w+) ADD CONSTRAINT \w+ DEFAULT \((.*)\) FOR (\w+);`)
	alterNotNull = regexp.MustCompile(`ALTER TABLE (\w+) ALTER COLUMN (\w+) (\w+) NOT NULL;`)
	createIndex  = regexp.MustCompile(`(?s)CREATE INDEX (\w+) ON (\w+) \(([^)]*)\)(?:\s+WHERE (.*?))?;`)
	unique       = regexp.MustCompile(`CONSTRAINT (\w+) UNIQUE \(([^)]*)\)`)
	columnDef    = regexp.MustCompile(`^\[?(\w+)\]?\s+(\w+(?:\((?:\d+|MAX)\))?)\s*(.*)$`)
	defaultValue = regexp.MustCompile(`DEFAULT ('[^']*'|\w+\(\)|\d+)`)
)

// TestSQLServerSchemaEqualsTheDocumentation builds the schema that the SQL Server files declare,
// file after file, and compares it with the documentation's tables.
func TestSQLServerSchemaEqualsTheDocumentation(t *testing.T) {
	t.Parallel()
	list := sqlServerFiles(t)

	tables := map[string]map[string]column{}
	indexes := map[string]index{}
	for _, m := range list {
		for _, b := range migrations.SplitBatches(m.SQL) {
			b = stripComments(b)
			if mm := createTable.FindStringSubmatch(b); mm != nil {
				cols := map[string]column{}
				for _, def := range splitTopLevel(mm[2]) {
					if u := unique.FindStringSubmatch(def); u != nil {
						indexes[u[1]] = index{mm[1], u[2], "none", true}
						continue
					}
					c := columnDef.FindStringSubmatch(def)
					require.NotNil(t, c, "%s: column definition %q", m.Script, def)
					cols[c[1]] = parseColumn(c[2], c[3])
				}
				tables[mm[1]] = cols
			}
			if mm := addDefault.FindStringSubmatch(b); mm != nil {
				c := tables[mm[1]][mm[3]]
				c.Default = mm[2]
				tables[mm[1]][mm[3]] = c
			} else if mm := addColumn.FindStringSubmatch(b); mm != nil && mm[2] != "CONSTRAINT" {
				require.Contains(t, tables, mm[1], "%s adds a column to a table that no earlier file creates", m.Script)
				tables[mm[1]][mm[2]] = parseColumn(strings.Fields(mm[3])[0], mm[3])
			}
			if mm := alterNotNull.FindStringSubmatch(b); mm != nil {
				c := tables[mm[1]][mm[2]]
				assert.Equal(t, c.Type, mm[3], "ALTER COLUMN keeps the type")
				c.Nullable = false
				tables[mm[1]][mm[2]] = c
			}
			if mm := createIndex.FindStringSubmatch(b); mm != nil {
				filter := "none"
				if mm[4] != "" {
					filter = strings.Join(strings.Fields(mm[4]), " ")
				}
				indexes[mm[1]] = index{mm[2], mm[3], filter, false}
			}
		}
	}
	assert.Equal(t, sqlServerColumns, tables)
	assert.Equal(t, sqlServerIndexes, indexes)
}

func TestSQLServerOutboxSequence(t *testing.T) {
	t.Parallel()
	list, err := migrations.List(migrations.SQLServer)
	require.NoError(t, err)
	v11 := stripComments(list[10].SQL)
	steps := []string{
		"ALTER TABLE outbox ADD sequence BIGINT NULL;",
		"CREATE SEQUENCE outbox_sequence_seq AS BIGINT START WITH 1 INCREMENT BY 1;",
		"SELECT @top = COALESCE(MAX(sequence), 0) FROM outbox WITH (TABLOCKX, HOLDLOCK);",
		"ROW_NUMBER() OVER (ORDER BY created_at, id) AS n",
		"UPDATE numbered SET sequence = @top + n;",
		"SELECT @next = COALESCE(MAX(sequence), 0) + 1 FROM outbox;",
		"N'ALTER SEQUENCE outbox_sequence_seq RESTART WITH ' + CAST(@next AS NVARCHAR(20))",
		"DEFAULT (NEXT VALUE FOR outbox_sequence_seq) FOR sequence;",
		"ALTER TABLE outbox ALTER COLUMN sequence BIGINT NOT NULL;",
		"CREATE INDEX idx_outbox_key_sequence ON outbox ([key], sequence) WHERE state IN ('pending', 'processing');",
	}
	at := 0
	for _, s := range steps {
		i := strings.Index(v11[at:], s)
		if !assert.GreaterOrEqual(t, i, 0, "V11 holds %q after the previous step", s) {
			continue
		}
		at += i + len(s)
	}
}

func TestSplitBatchesMatchesSqlcmd(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   string
		want []string
	}{
		{"one batch without GO", "SELECT 1;\n", []string{"SELECT 1;"}},
		{"GO lines split", "SELECT 1;\nGO\nSELECT 2;\nGO\n", []string{"SELECT 1;", "SELECT 2;"}},
		{"GO in any case with blanks", "SELECT 1;\n  go \t\nSELECT 2;", []string{"SELECT 1;", "SELECT 2;"}},
		{"CRLF line ends", "SELECT 1;\r\nGO\r\nSELECT 2;\r\n", []string{"SELECT 1;", "SELECT 2;"}},
		{"GO inside a word is not a separator", "SELECT 1 AS GOAL;\nGOTO x;\n", []string{"SELECT 1 AS GOAL;\nGOTO x;"}},
		{"comment-only batches are dropped", "-- header\nGO\n\n-- note\nSELECT 1;\nGO\n-- end\n", []string{"-- note\nSELECT 1;"}},
		{"byte order mark", "\uFEFFSELECT 1;\nGO\n", []string{"SELECT 1;"}},
		{"empty", "", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tc.want, migrations.SplitBatches(tc.in))
		})
	}
}

func parseColumn(typ, rest string) column {
	c := column{Type: typ, Nullable: !strings.Contains(rest, "NOT NULL") && !strings.Contains(rest, "PRIMARY KEY"), Default: "none"}
	if d := defaultValue.FindStringSubmatch(rest); d != nil {
		c.Default = d[1]
	}
	return c
}

// splitTopLevel splits the body of a CREATE TABLE at the commas outside parentheses.
func splitTopLevel(s string) []string {
	var out []string
	depth, start := 0, 0
	for i, r := range s {
		switch r {
		case '(':
			depth++
		case ')':
			depth--
		case ',':
			if depth == 0 {
				out = append(out, strings.TrimSpace(s[start:i]))
				start = i + 1
			}
		}
	}
	if last := strings.TrimSpace(s[start:]); last != "" {
		out = append(out, last)
	}
	return slices.DeleteFunc(out, func(s string) bool { return s == "" })
}

// stripComments drops -- comment lines and blank lines and trims every line's end.
func stripComments(b string) string {
	var keep []string
	for _, line := range strings.Split(b, "\n") {
		t := strings.TrimSpace(line)
		if t == "" || strings.HasPrefix(t, "--") {
			continue
		}
		keep = append(keep, strings.TrimRight(line, " \t\r"))
	}
	return strings.TrimSpace(strings.Join(keep, "\n"))
}
