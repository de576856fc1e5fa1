package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"reflect"
	"slices"
	"strings"

	"github.com/alternayte/queuebox/migrations"
	"github.com/alternayte/queuebox/shared/config"
	"github.com/alternayte/queuebox/shared/migrate"
	"github.com/alternayte/queuebox/shared/store/postgres"
	"github.com/alternayte/queuebox/shared/store/postgres/pgtool"
)

// pgTable is one table of the migrated database.
type pgTable struct {
	name        string
	columns     []pgColumn
	constraints [][2]string // name, definition
	indexes     [][2]string // name, definition
}

// pgColumn is one column of a table.
type pgColumn struct {
	name, typ, def string
	notNull        bool
}

// tablesPage is docs/reference/tables.md: the migrations of both tracks applied to a fresh
// PostgreSQL database on the server of dbURL (through the migration runner, as `queuebox
// migrate` applies them), then read back from the catalog.
func tablesPage(ctx context.Context, dbURL string) (string, error) {
	tables, seqs, err := migratedTables(ctx, dbURL)
	if err != nil {
		return "", err
	}
	sqlServer, err := sqlServerTables()
	if err != nil {
		return "", err
	}
	var b md
	b.line("# Tables")
	b.line("")
	b.text(generatedNote)
	b.line("")
	b.line("The tables, columns, constraints and indexes that the bundled migrations create on PostgreSQL,")
	b.line("read from a database that they migrated, as `queuebox migrate` (or a start with")
	b.line("`database.migrate: true`) applies them: the main track (`migrations/postgresql`, recorded in")
	b.line("`flyway_schema_history`), then QueueBox's own tables (`migrations/queuebox/postgresql`, recorded in")
	b.line("`queuebox_schema_history`); [migrations.md](../migrations.md) describes the two tracks.")
	b.line("")
	b.line("The names are the defaults. The outbox and inbox tables and each of their columns can have other")
	b.line("names (`database.outboxTableName`, `database.inboxTableName` and `database.columnMapping`; the")
	b.line("column **Key** gives the key of each), in which case the tables are created by hand and")
	b.line("`database.migrate` is `false`.")
	b.line("")
	b.line("SQL Server has the same tables and columns, created by `migrations/sqlserver` and")
	b.line("`migrations/queuebox/sqlserver`, with the types of its dialect: the column **SQL Server** gives the")
	b.line("type that those files declare, and each table's indexes give the definition of each dialect (`—`")
	b.line("where a dialect has no such index). The history tables, which the migration runner creates, are")
	b.line("Flyway's on both databases.")
	b.line("")
	keys := mappingKeys()
	for _, t := range tables {
		writeTable(&b, t, keys, sqlServer)
	}
	if len(seqs) > 0 {
		b.line("## Sequences")
		b.line("")
		b.line("The migrations also create the sequences " + joinAnd(seqs) + ".")
		b.line("")
	}
	b.line(fmt.Sprintf("This page lists %d tables.", len(tables)))
	return b.String(), nil
}

// writeTable writes the columns, constraints and indexes of t.
func writeTable(b *md, t pgTable, keys map[string]string, sqlServer sqlServerSchema) {
	b.line("## " + t.name)
	b.line("")
	if k, ok := keys[t.name]; ok {
		b.line("Its name is the key " + code(k) + ".")
		b.line("")
	}
	rows := make([][]string, 0, len(t.columns))
	for _, c := range t.columns {
		null := "yes"
		if c.notNull {
			null = "no"
		}
		mssql := sqlServer.types[t.name+"."+c.name]
		rows = append(rows, []string{code(c.name), code(c.typ), null, code(c.def), orNone(mssql), code(keys[t.name+"."+c.name])})
	}
	b.table([]string{"Column", "PostgreSQL", "Null", "Default", "SQL Server", "Key"}, rows)
	b.line("")
	if len(t.constraints) > 0 {
		b.line("Constraints:")
		b.line("")
		for _, c := range t.constraints {
			b.line(fmt.Sprintf("- %s: %s", code(c[0]), code(c[1])))
		}
		b.line("")
	}
	writeIndexes(b, t, sqlServer.indexes[t.name])
}

// writeIndexes writes the indexes of t on PostgreSQL beside those of SQL Server (mssql).
func writeIndexes(b *md, t pgTable, mssql map[string]string) {
	var rows [][]string
	seen := map[string]bool{}
	for _, ix := range t.indexes {
		seen[ix[0]] = true
		rows = append(rows, []string{code(ix[0]), code(ix[1]), orNone(mssql[ix[0]])})
	}
	var only []string
	for name := range mssql {
		if !seen[name] {
			only = append(only, name)
		}
	}
	slices.Sort(only)
	for _, name := range only {
		rows = append(rows, []string{code(name), none, code(mssql[name])})
	}
	if len(rows) == 0 {
		return
	}
	b.line("Indexes:")
	b.line("")
	b.table([]string{"Index", "PostgreSQL", "SQL Server"}, rows)
	b.line("")
}

// orNone writes s as code, or none when it is empty.
func orNone(s string) string {
	if s == "" {
		return none
	}
	return code(s)
}

// mappingKeys returns the configuration key of the outbox and inbox tables and of each of
// their columns, by default name (outbox, outbox.max_attempts).
func mappingKeys() map[string]string {
	out := map[string]string{
		config.DefaultOutboxTableName: "database.outboxTableName",
		config.DefaultInboxTableName:  "database.inboxTableName",
	}
	for _, m := range []struct {
		table, section string
		cols           any
	}{
		{config.DefaultOutboxTableName, "outbox", config.DefaultOutboxColumns()},
		{config.DefaultInboxTableName, "inbox", config.DefaultInboxColumns()},
	} {
		v := reflect.ValueOf(m.cols)
		for i := range v.NumField() {
			key, _, _ := strings.Cut(v.Type().Field(i).Tag.Get("yaml"), ",")
			out[m.table+"."+v.Field(i).String()] = "database.columnMapping." + m.section + "." + key
		}
	}
	return out
}

// migratedTables creates a database of its own on the server of dbURL, migrates it, reads its
// tables and sequences, and drops it.
func migratedTables(ctx context.Context, dbURL string) ([]pgTable, []string, error) {
	var suffix [6]byte
	_, _ = rand.Read(suffix[:])
	name := "queuebox_refdocs_" + hex.EncodeToString(suffix[:])
	if err := pgtool.CreateDatabase(ctx, dbURL, name); err != nil {
		return nil, nil, fmt.Errorf("creating the database %s on the PostgreSQL server of the tests (start it with `make services`, or set QUEUEBOX_TEST_DATABASE_URL): %w", name, err)
	}
	defer func() { _ = pgtool.DropDatabase(context.WithoutCancel(ctx), dbURL, name) }()
	u, err := url.Parse(dbURL)
	if err != nil {
		return nil, nil, fmt.Errorf("parsing the database URL: %w", err)
	}
	u.Path = "/" + name
	pool, err := pgtool.OpenPool(ctx, u.String(), pgtool.PoolOptions{MaxConns: 2, AppName: "refdocs"})
	if err != nil {
		return nil, nil, err
	}
	defer pool.Close()
	runner, err := migrate.New(postgres.NewMigrationBackend(pool), migrate.Options{InstalledBy: "refdocs"})
	if err != nil {
		return nil, nil, fmt.Errorf("building the migration runner: %w", err)
	}
	if _, err := runner.Migrate(ctx); err != nil {
		return nil, nil, fmt.Errorf("migrating %s: %w", name, err)
	}
	return readCatalog(ctx, pool)
}

// readCatalog reads the tables of the schema public, in the order of their creation with the
// history tables last, and the names of its sequences.
func readCatalog(ctx context.Context, pool *pgtool.Pool) ([]pgTable, []string, error) {
	rows, err := pool.Query(ctx, `SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = 'public' AND c.relkind = 'r'
		ORDER BY c.relname LIKE '%schema_history', c.oid`)
	if err != nil {
		return nil, nil, fmt.Errorf("listing the tables: %w", err)
	}
	names, err := pgtool.CollectRows[string](rows)
	if err != nil {
		return nil, nil, fmt.Errorf("listing the tables: %w", err)
	}
	tables := make([]pgTable, 0, len(names))
	for _, n := range names {
		t, err := readTable(ctx, pool, n)
		if err != nil {
			return nil, nil, err
		}
		tables = append(tables, t)
	}
	rows, err = pool.Query(ctx, `SELECT sequence_name::text FROM information_schema.sequences
		WHERE sequence_schema = 'public' ORDER BY sequence_name`)
	if err != nil {
		return nil, nil, fmt.Errorf("listing the sequences: %w", err)
	}
	seqs, err := pgtool.CollectRows[string](rows)
	if err != nil {
		return nil, nil, fmt.Errorf("listing the sequences: %w", err)
	}
	for i, s := range seqs {
		seqs[i] = code(s)
	}
	return tables, seqs, nil
}

// readTable reads the columns, constraints and indexes of the table name.
func readTable(ctx context.Context, pool *pgtool.Pool, name string) (pgTable, error) {
	t := pgTable{name: name}
	rows, err := pool.Query(ctx, `SELECT a.attname::text, format_type(a.atttypid, a.atttypmod), a.attnotnull,
			coalesce(pg_get_expr(d.adbin, d.adrelid), '')
		FROM pg_attribute a LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
		WHERE a.attrelid = $1::regclass AND a.attnum > 0 AND NOT a.attisdropped
		ORDER BY a.attnum`, name)
	if err != nil {
		return t, fmt.Errorf("reading the columns of %s: %w", name, err)
	}
	var c pgColumn
	err = pgtool.ForEachRow(rows, []any{&c.name, &c.typ, &c.notNull, &c.def}, func() error {
		t.columns = append(t.columns, c)
		return nil
	})
	if err != nil {
		return t, fmt.Errorf("reading the columns of %s: %w", name, err)
	}
	if t.constraints, err = pairs(ctx, pool, `SELECT conname::text, pg_get_constraintdef(oid) FROM pg_constraint
		WHERE conrelid = $1::regclass ORDER BY conname`, name); err != nil {
		return t, fmt.Errorf("reading the constraints of %s: %w", name, err)
	}
	if t.indexes, err = pairs(ctx, pool, `SELECT i.indexname::text, i.indexdef FROM pg_indexes i
		WHERE i.schemaname = 'public' AND i.tablename = $1
		AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conname = i.indexname AND c.conrelid = $1::regclass)
		ORDER BY i.indexname`, name); err != nil {
		return t, fmt.Errorf("reading the indexes of %s: %w", name, err)
	}
	for i, ix := range t.indexes {
		t.indexes[i][1] = shortIndex(ix[1])
	}
	return t, nil
}

// pairs runs a query of two text columns with the argument arg.
func pairs(ctx context.Context, pool *pgtool.Pool, sql, arg string) ([][2]string, error) {
	rows, err := pool.Query(ctx, sql, arg)
	if err != nil {
		return nil, err
	}
	var out [][2]string
	var a, b string
	err = pgtool.ForEachRow(rows, []any{&a, &b}, func() error {
		out = append(out, [2]string{a, b})
		return nil
	})
	return out, err
}

// shortIndex writes an index definition without what its heading says: "CREATE INDEX x ON
// public.outbox USING btree (topic)" gives "btree (topic)", and "UNIQUE btree (...)" for a
// unique index.
func shortIndex(def string) string {
	unique := strings.HasPrefix(def, "CREATE UNIQUE INDEX")
	if _, rest, ok := strings.Cut(def, " USING "); ok {
		def = rest
	}
	if unique {
		def = "UNIQUE " + def
	}
	return def
}

// sqlServerTables returns the column types and indexes that the SQL Server migrations declare.
func sqlServerTables() (sqlServerSchema, error) {
	out := sqlServerSchema{types: map[string]string{}, indexes: map[string]map[string]string{}}
	list, err := migrations.ListAll(migrations.SQLServer)
	if err != nil {
		return out, fmt.Errorf("listing the SQL Server migrations: %w", err)
	}
	for _, m := range list {
		out.parse(m.SQL)
	}
	return out, nil
}
