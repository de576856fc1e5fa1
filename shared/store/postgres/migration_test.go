package postgres_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/alternayte/queuebox/migrations"
	"github.com/alternayte/queuebox/shared/migrate"
	"github.com/alternayte/queuebox/shared/store/postgres"
	"github.com/alternayte/queuebox/shared/store/postgres/dbtest"
)

// These tests run the migration runner of package migrate on a real PostgreSQL through this
// driver's backend (postgres.NewMigrationBackend): the statements, the advisory lock and the
// schema that the files build.

// pgRunner returns the runner of package migrate on pool, through the driver's backend.
func pgRunner(pool *pgxpool.Pool, opts migrate.Options) *migrate.Runner {
	r, err := migrate.New(postgres.NewMigrationBackend(pool), opts)
	if err != nil {
		panic("migrate.New refused the PostgreSQL backend: " + err.Error())
	}
	return r
}

// pgMigrate applies the pending migrations; see migrate.Runner.Migrate.
func pgMigrate(ctx context.Context, pool *pgxpool.Pool, opts migrate.Options) (migrate.Result, error) {
	return pgRunner(pool, opts).Migrate(ctx)
}

// pgBaseline records versions 1..version as applied; see migrate.Runner.Baseline.
func pgBaseline(ctx context.Context, pool *pgxpool.Pool, version int, opts migrate.Options) (migrate.Result, error) {
	return pgRunner(pool, opts).Baseline(ctx, version)
}

// pgCheckStart runs the start check; see migrate.Runner.CheckStart.
func pgCheckStart(ctx context.Context, pool *pgxpool.Pool, doMigrate bool, opts migrate.Options) (migrate.StartResult, error) {
	return pgRunner(pool, opts).CheckStart(ctx, doMigrate)
}

// versions writes from..to as the runner's messages do: "V1" or "V1..V3".
func versions(from, to int) string {
	if from == to {
		return fmt.Sprintf("V%d", from)
	}
	return fmt.Sprintf("V%d..V%d", from, to)
}

func seq(from, to int) []int {
	var out []int
	for v := from; v <= to; v++ {
		out = append(out, v)
	}
	return out
}

// newPool gives the test an empty database of its own.
func newPool(t *testing.T) (*pgxpool.Pool, string) {
	t.Helper()
	url := dbtest.NewDatabase(t)
	return dbtest.NewPool(t, url), url
}

// applyFiles applies the PostgreSQL files V1..upTo of the main track directly, as an operator
// does with psql.
func applyFiles(t *testing.T, pool *pgxpool.Pool, upTo int) {
	t.Helper()
	list, err := migrations.List(migrations.PostgreSQL)
	require.NoError(t, err)
	for _, m := range list[:upTo] {
		_, err := pool.Exec(context.Background(), m.SQL)
		require.NoError(t, err, m.Script)
	}
}

// applyQueueBoxFiles applies every PostgreSQL file of the QueueBox track directly, as an
// operator does with psql.
func applyQueueBoxFiles(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	for _, m := range queueboxList(t) {
		_, err := pool.Exec(context.Background(), m.SQL)
		require.NoError(t, err, m.Script)
	}
}

// queueboxList returns the PostgreSQL files of the QueueBox track.
func queueboxList(t *testing.T) []migrations.Migration {
	t.Helper()
	list, err := migrations.ListTrack(migrations.QueueBox, migrations.PostgreSQL)
	require.NoError(t, err)
	require.NotEmpty(t, list)
	return list
}

// storedRow is a row of flyway_schema_history as the tests read it.
type storedRow struct {
	Rank        int
	Version     string
	Description string
	Type        string
	Script      string
	Checksum    *int32
	Success     bool
}

func readHistory(t *testing.T, pool *pgxpool.Pool) []storedRow {
	t.Helper()
	return readHistoryOf(t, pool, "flyway_schema_history")
}

// readQueueBoxHistory reads queuebox_schema_history, the history of the QueueBox track.
func readQueueBoxHistory(t *testing.T, pool *pgxpool.Pool) []storedRow {
	t.Helper()
	return readHistoryOf(t, pool, "queuebox_schema_history")
}

func readHistoryOf(t *testing.T, pool *pgxpool.Pool, table string) []storedRow {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT installed_rank, version, description, type, script, checksum, success
		FROM `+table+` ORDER BY installed_rank`)
	require.NoError(t, err)
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (storedRow, error) {
		var h storedRow
		err := r.Scan(&h.Rank, &h.Version, &h.Description, &h.Type, &h.Script, &h.Checksum, &h.Success)
		return h, err
	})
	require.NoError(t, err)
	return out
}

// wantHistory is the history that applying list[from-1:] from rank `from` on writes.
func wantHistory(t *testing.T, from, to int, typ string) []storedRow {
	t.Helper()
	list, err := migrations.List(migrations.PostgreSQL)
	require.NoError(t, err)
	return wantRows(list, from, to, typ)
}

// wantQueueBoxHistory is the QueueBox track's history that applying its versions from..to
// from rank `from` on writes.
func wantQueueBoxHistory(t *testing.T, from, to int, typ string) []storedRow {
	t.Helper()
	return wantRows(queueboxList(t), from, to, typ)
}

func wantRows(list []migrations.Migration, from, to int, typ string) []storedRow {
	var out []storedRow
	for _, m := range list[from-1 : to] {
		var sum *int32
		if typ == "SQL" {
			c := migrations.Checksum(m.SQL)
			sum = &c
		}
		out = append(out, storedRow{Rank: m.Version, Version: strconv.Itoa(m.Version), Description: m.Description,
			Type: typ, Script: m.Script, Checksum: sum, Success: true})
	}
	return out
}

func TestPostgresMigratesAFreshDatabaseOnce(t *testing.T) {
	t.Parallel()
	pool, _ := newPool(t)
	ctx := context.Background()

	n := len(queueboxList(t))
	res, err := pgMigrate(ctx, pool, migrate.Options{})
	require.NoError(t, err)
	assert.Equal(t, seq(1, 11), res.Applied)
	assert.Equal(t, 11, res.Current)
	assert.Equal(t, seq(1, n), res.QueueBox.Applied)
	assert.Equal(t, n, res.QueueBox.Current)
	assert.Equal(t, "applied V1..V11; applied QueueBox's own migrations "+versions(1, n), res.String())
	assert.Equal(t, wantHistory(t, 1, 11, "SQL"), readHistory(t, pool), "the main track's history holds the original's versions only")
	assert.Equal(t, wantQueueBoxHistory(t, 1, n, "SQL"), readQueueBoxHistory(t, pool))

	var installedBy string
	require.NoError(t, pool.QueryRow(ctx, `SELECT DISTINCT installed_by FROM flyway_schema_history`).Scan(&installedBy))
	assert.Equal(t, "postgres", installedBy, "the database user by default")

	again, err := pgMigrate(ctx, pool, migrate.Options{})
	require.NoError(t, err)
	assert.Empty(t, again.Applied)
	assert.Empty(t, again.QueueBox.Applied)
	assert.Equal(t, fmt.Sprintf("schema is up to date at V11; QueueBox's own migrations are up to date at V%d", n), again.String())
	assert.Len(t, readHistory(t, pool), 11)
	assert.Len(t, readQueueBoxHistory(t, pool), n)

	var locks int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'
		AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`).Scan(&locks))
	assert.Zero(t, locks, "the run releases its advisory lock")
}

// pgColumn is a column in the notation of the documentation's tables.
type pgColumn struct {
	Type     string
	Nullable bool
	Default  string
}

// The PostgreSQL columns of spec/29-outbox-table.md, spec/27-inbox-table.md and COMPAT
// ("V7 queuebox_capture_state") and the QueueBox track's tables (docs/migrations.md,
// extensions): queuebox_destination_state (docs/destination-state.md) and
// queuebox_revoked_session (docs/console.md) and queuebox_replay_generation (docs/headers.md),
// as the documentation writes them.
var documentedPGColumns = map[string]map[string]pgColumn{
	"outbox": {
		"id":               {"UUID", false, "gen_random_uuid()"},
		"topic":            {"VARCHAR(255)", false, "none"},
		"key":              {"VARCHAR(255)", true, "none"},
		"payload":          {"JSONB", false, "none"},
		"headers":          {"JSONB", false, "'{}'"},
		"aggregate_type":   {"VARCHAR(255)", true, "none"},
		"state":            {"VARCHAR(50)", false, "'pending'"},
		"attempt":          {"INTEGER", false, "0"},
		"max_attempts":     {"INTEGER", false, "5"},
		"scheduled_at":     {"TIMESTAMP WITH TIME ZONE", false, "CURRENT_TIMESTAMP"},
		"created_at":       {"TIMESTAMP WITH TIME ZONE", false, "CURRENT_TIMESTAMP"},
		"updated_at":       {"TIMESTAMP WITH TIME ZONE", false, "CURRENT_TIMESTAMP"},
		"claimed_at":       {"TIMESTAMP WITH TIME ZONE", true, "none"},
		"claim_token":      {"UUID", true, "none"},
		"lease_expires_at": {"TIMESTAMPTZ", true, "none"},
		"last_error":       {"TEXT", true, "none"},
		"sequence":         {"BIGINT", false, "nextval('outbox_sequence_seq')"},
	},
	"inbox": {
		"id":               {"UUID", false, "gen_random_uuid()"},
		"source":           {"VARCHAR(255)", false, "none"},
		"idempotency_key":  {"VARCHAR(255)", false, "none"},
		"aggregate_id":     {"VARCHAR(255)", true, "none"},
		"event_type":       {"VARCHAR(255)", true, "none"},
		"payload":          {"JSONB", false, "none"},
		"headers":          {"JSONB", false, "'{}'"},
		"correlation_id":   {"VARCHAR(128)", true, "none"},
		"consumption":      {"VARCHAR(4)", false, "'push'"},
		"state":            {"VARCHAR(50)", false, "'pending'"},
		"created_at":       {"TIMESTAMP WITH TIME ZONE", false, "CURRENT_TIMESTAMP"},
		"processed_at":     {"TIMESTAMP WITH TIME ZONE", true, "none"},
		"scheduled_at":     {"TIMESTAMPTZ", false, "CURRENT_TIMESTAMP"},
		"attempt":          {"INT", false, "0"},
		"last_error":       {"TEXT", true, "none"},
		"claimed_at":       {"TIMESTAMP WITH TIME ZONE", true, "none"},
		"claim_token":      {"UUID", true, "none"},
		"lease_expires_at": {"TIMESTAMPTZ", true, "none"},
	},
	"queuebox_capture_state": {
		"identity_name":      {"VARCHAR(63)", false, "none"},
		"state_id":           {"VARCHAR(36)", false, "none"},
		"config_fingerprint": {"VARCHAR(64)", false, "none"},
	},
	"queuebox_destination_state": {
		"destination":       {"VARCHAR(255)", false, "none"},
		"paused":            {"BOOLEAN", false, "false"},
		"paused_at":         {"TIMESTAMP WITH TIME ZONE", true, "none"},
		"open_until":        {"TIMESTAMP WITH TIME ZONE", true, "none"},
		"failures":          {"INTEGER", false, "0"},
		"window_started_at": {"TIMESTAMP WITH TIME ZONE", true, "none"},
		"rate_tat":          {"TIMESTAMP WITH TIME ZONE", true, "none"},
		"updated_at":        {"TIMESTAMP WITH TIME ZONE", false, "CURRENT_TIMESTAMP"},
	},
	"queuebox_revoked_session": {
		"session_hash": {"VARCHAR(64)", false, "none"},
		"expires_at":   {"TIMESTAMP WITH TIME ZONE", false, "none"},
		"revoked_at":   {"TIMESTAMP WITH TIME ZONE", false, "CURRENT_TIMESTAMP"},
	},
	"queuebox_replay_generation": {
		"outbox_id":   {"UUID", false, "none"},
		"generation":  {"BIGINT", false, "none"},
		"replayed_at": {"TIMESTAMP WITH TIME ZONE", false, "CURRENT_TIMESTAMP"},
	},
}

// pgIndex is a row of the documentation's index tables.
type pgIndex struct {
	Table   string
	Columns string
	Filter  string
}

// The PostgreSQL index tables of spec/29 and spec/27. The primary key is named "Primary key",
// as the documentation names it.
var documentedPGIndexes = map[string]pgIndex{
	"outbox/Primary key":            {"outbox", "id", "none"},
	"idx_outbox_pending_scheduled":  {"outbox", "state, scheduled_at", "pending rows"},
	"idx_outbox_topic":              {"outbox", "topic", "none"},
	"idx_outbox_processing_claimed": {"outbox", "claimed_at", "processing rows"},
	"idx_outbox_key_sequence":       {"outbox", "key, sequence", "pending and processing rows"},
	"inbox/Primary key":             {"inbox", "id", "none"},
	"uq_inbox_source_idempotency":   {"inbox", "source, idempotency_key", "unique"},
	"idx_inbox_pending":             {"inbox", "state", "pending rows"},
	"idx_inbox_source":              {"inbox", "source", "none"},
	"idx_inbox_aggregate_state":     {"inbox", "aggregate_id, state", "none"},
	"idx_inbox_processing_claimed":  {"inbox", "claimed_at", "processing rows"},
	"idx_inbox_state_created":       {"inbox", "state, created_at", "none"},
	"idx_inbox_consumption_pending": {"inbox", "consumption, state, scheduled_at", "none"},
	"idx_inbox_pull_pending":        {"inbox", "source, scheduled_at, created_at, id", "pending pull rows"},
	"idx_inbox_pull_busy":           {"inbox", "source, aggregate_id, lease_expires_at", "processing pull rows"},
}

// pgTypeOf turns a type as the documentation writes it into format_type's spelling.
func pgTypeOf(doc string) string {
	if m := regexp.MustCompile(`^VARCHAR\((\d+)\)$`).FindStringSubmatch(doc); m != nil {
		return "character varying(" + m[1] + ")"
	}
	return map[string]string{
		"UUID": "uuid", "JSONB": "jsonb", "INTEGER": "integer", "INT": "integer", "BIGINT": "bigint",
		"TEXT": "text", "BOOLEAN": "boolean", "TIMESTAMP WITH TIME ZONE": "timestamp with time zone",
		"TIMESTAMPTZ": "timestamp with time zone",
	}[doc]
}

// pgFilterOf turns a filter in the documentation's words into the predicate as PostgreSQL
// prints it, without casts and parentheses.
var pgFilterOf = map[string]string{
	"none":                        "",
	"unique":                      "",
	"pending rows":                "state = 'pending'",
	"processing rows":             "state = 'processing'",
	"pending pull rows":           "consumption = 'pull' AND state = 'pending'",
	"processing pull rows":        "consumption = 'pull' AND state = 'processing'",
	"pending and processing rows": "state = ANY ARRAY['pending', 'processing']",
}

var (
	castRe  = regexp.MustCompile(`::[a-z]+(?: [a-z]+)*(\(\d+\))?(\[\])?`)
	parenRe = regexp.MustCompile(`[()]`)
)

type actualColumn struct {
	Type     string
	Nullable bool
	Default  string
}

func readColumns(t *testing.T, pool *pgxpool.Pool) map[string]map[string]actualColumn {
	t.Helper()
	rows, err := pool.Query(context.Background(), `
		SELECT c.relname, a.attname, format_type(a.atttypid, a.atttypmod), NOT a.attnotnull,
		       COALESCE(pg_get_expr(d.adbin, d.adrelid), '')
		FROM pg_attribute a
		JOIN pg_class c ON c.oid = a.attrelid
		LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
		WHERE c.relname IN ('outbox', 'inbox', 'queuebox_capture_state', 'queuebox_destination_state', 'queuebox_revoked_session', 'queuebox_replay_generation') AND c.relkind = 'r'
		  AND c.relnamespace = 'public'::regnamespace AND a.attnum > 0 AND NOT a.attisdropped`)
	require.NoError(t, err)
	out := map[string]map[string]actualColumn{}
	for rows.Next() {
		var table, name string
		var c actualColumn
		require.NoError(t, rows.Scan(&table, &name, &c.Type, &c.Nullable, &c.Default))
		if out[table] == nil {
			out[table] = map[string]actualColumn{}
		}
		out[table][name] = c
	}
	require.NoError(t, rows.Err())
	return out
}

type actualIndex struct {
	Table   string
	Columns string
	Unique  bool
	Filter  string
}

func readIndexes(t *testing.T, pool *pgxpool.Pool) map[string]actualIndex {
	t.Helper()
	rows, err := pool.Query(context.Background(), `
		SELECT CASE WHEN ix.indisprimary THEN tc.relname || '/Primary key' ELSE ic.relname END,
		       tc.relname, ix.indisunique AND NOT ix.indisprimary,
		       (SELECT string_agg(a.attname, ', ' ORDER BY k.ord)
		          FROM unnest(ix.indkey::int2[]) WITH ORDINALITY AS k(attnum, ord)
		          JOIN pg_attribute a ON a.attrelid = tc.oid AND a.attnum = k.attnum),
		       COALESCE(pg_get_expr(ix.indpred, ix.indrelid), '')
		FROM pg_index ix
		JOIN pg_class ic ON ic.oid = ix.indexrelid
		JOIN pg_class tc ON tc.oid = ix.indrelid
		WHERE tc.relname IN ('outbox', 'inbox') AND tc.relnamespace = 'public'::regnamespace`)
	require.NoError(t, err)
	out := map[string]actualIndex{}
	for rows.Next() {
		var name string
		var ix actualIndex
		require.NoError(t, rows.Scan(&name, &ix.Table, &ix.Unique, &ix.Columns, &ix.Filter))
		ix.Filter = strings.TrimSpace(parenRe.ReplaceAllString(castRe.ReplaceAllString(ix.Filter, ""), ""))
		out[name] = ix
	}
	require.NoError(t, rows.Err())
	return out
}

// assertDocumentedSchema compares the tables with the documentation's tables.
func assertDocumentedSchema(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	wantCols := map[string]map[string]actualColumn{}
	for table, cols := range documentedPGColumns {
		wantCols[table] = map[string]actualColumn{}
		for name, c := range cols {
			d := c.Default
			if d == "none" {
				d = ""
			}
			wantCols[table][name] = actualColumn{Type: pgTypeOf(c.Type), Nullable: c.Nullable, Default: d}
		}
	}
	gotCols := readColumns(t, pool)
	for _, cols := range gotCols {
		for name, c := range cols {
			c.Default = castRe.ReplaceAllString(c.Default, "")
			cols[name] = c
		}
	}
	assert.Equal(t, wantCols, gotCols)

	wantIdx := map[string]actualIndex{}
	for name, ix := range documentedPGIndexes {
		wantIdx[name] = actualIndex{Table: ix.Table, Columns: ix.Columns, Unique: ix.Filter == "unique", Filter: pgFilterOf[ix.Filter]}
	}
	assert.Equal(t, wantIdx, readIndexes(t, pool))
}

func TestPostgresSchemaEqualsTheDocumentation(t *testing.T) {
	t.Parallel()
	pool, _ := newPool(t)
	_, err := pgMigrate(context.Background(), pool, migrate.Options{})
	require.NoError(t, err)
	assertDocumentedSchema(t, pool)

	var check string
	require.NoError(t, pool.QueryRow(context.Background(),
		`SELECT pg_get_constraintdef(oid) FROM pg_constraint WHERE conname = 'ck_inbox_consumption'`).Scan(&check))
	assert.Contains(t, check, "'push'")
	assert.Contains(t, check, "'pull'")
}

func TestPostgresV11NumbersExistingRows(t *testing.T) {
	t.Parallel()
	pool, _ := newPool(t)
	ctx := context.Background()

	res, err := pgMigrate(ctx, pool, migrate.Options{Target: 10})
	require.NoError(t, err)
	require.Equal(t, seq(1, 10), res.Applied)

	// Inserted in an order that is neither the created_at order nor the id order; two rows
	// share a created_at.
	dbtest.Exec(t, pool, `INSERT INTO outbox (id, topic, key, payload, created_at) VALUES
		('ffffffff-0000-0000-0000-000000000001', 't', 'k', '{}', '2024-01-01 00:00:01+00'),
		('00000000-0000-0000-0000-000000000002', 't', 'k', '{}', '2024-01-01 00:00:02+00'),
		('00000000-0000-0000-0000-000000000001', 't', 'k', '{}', '2024-01-01 00:00:02+00'),
		('80000000-0000-0000-0000-000000000001', 't', NULL, '{}', '2024-01-01 00:00:00+00')`)

	res, err = pgMigrate(ctx, pool, migrate.Options{})
	require.NoError(t, err)
	require.Equal(t, []int{11}, res.Applied)

	numbers := func() map[string]int64 {
		rows, err := pool.Query(ctx, `SELECT id::text, sequence FROM outbox`)
		require.NoError(t, err)
		out := map[string]int64{}
		for rows.Next() {
			var id string
			var n int64
			require.NoError(t, rows.Scan(&id, &n))
			out[id] = n
		}
		require.NoError(t, rows.Err())
		return out
	}
	want := map[string]int64{
		"80000000-0000-0000-0000-000000000001": 1, // earliest created_at
		"ffffffff-0000-0000-0000-000000000001": 2,
		"00000000-0000-0000-0000-000000000001": 3, // tie on created_at: smaller id first
		"00000000-0000-0000-0000-000000000002": 4,
	}
	assert.Equal(t, want, numbers())

	var next int64
	require.NoError(t, pool.QueryRow(ctx, `INSERT INTO outbox (topic, payload) VALUES ('t', '{}') RETURNING sequence`).Scan(&next))
	assert.Equal(t, int64(5), next, "a new row gets max + 1")

	// The file is safe to run twice: the numbers stay, and a number that the sequence handed
	// out (here to a rolled-back insert) is never handed out again.
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	var lost int64
	require.NoError(t, tx.QueryRow(ctx, `INSERT INTO outbox (topic, payload) VALUES ('t', '{}') RETURNING sequence`).Scan(&lost))
	require.NoError(t, tx.Rollback(ctx))
	require.Equal(t, int64(6), lost)
	list, err := migrations.List(migrations.PostgreSQL)
	require.NoError(t, err)
	dbtest.Exec(t, pool, list[10].SQL)
	dbtest.Exec(t, pool, list[10].SQL)
	got := numbers()
	var all []int64
	for id, n := range got {
		all = append(all, n)
		if w, ok := want[id]; ok {
			assert.Equal(t, w, n, id)
		}
	}
	slices.Sort(all)
	assert.Equal(t, []int64{1, 2, 3, 4, 5}, all)
	require.NoError(t, pool.QueryRow(ctx, `INSERT INTO outbox (topic, payload) VALUES ('t', '{}') RETURNING sequence`).Scan(&next))
	assert.Equal(t, int64(7), next)
}

// helperURLEnv selects the helper mode of the test binary: migrate the database it names.
const helperURLEnv = "QUEUEBOX_MIGRATE_HELPER_URL"

// TestHelperProcessMigrate is not a test: TestPostgresConcurrentMigrate runs the test binary
// with helperURLEnv set, and this function is then the whole process. It prints "ready", waits
// for a line on stdin (the start signal), migrates and prints "applied: <versions>".
func TestHelperProcessMigrate(t *testing.T) {
	url := os.Getenv(helperURLEnv)
	if url == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	pool, err := pgxpool.New(ctx, url)
	if err == nil {
		err = pool.Ping(ctx)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		os.Exit(3)
	}
	fmt.Println("ready")
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		fmt.Fprintln(os.Stderr, "helper: waiting for the start signal:", err)
		os.Exit(3)
	}
	res, err := pgMigrate(ctx, pool, migrate.Options{})
	pool.Close()
	if err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		os.Exit(4)
	}
	applied := strings.Trim(fmt.Sprint(res.Applied), "[]")
	for _, v := range res.QueueBox.Applied {
		applied += fmt.Sprintf(" q%d", v)
	}
	fmt.Printf("applied: %s\n", applied)
	os.Exit(0)
}

func TestPostgresConcurrentMigrate(t *testing.T) {
	t.Parallel()
	pool, url := newPool(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	const processes, goroutines = 4, 4
	type proc struct {
		cmd    *exec.Cmd
		stdin  io.WriteCloser
		stdout *bufio.Reader
		stderr strings.Builder
	}
	procs := make([]*proc, processes)
	for i := range procs {
		p := &proc{cmd: exec.CommandContext(ctx, os.Args[0], "-test.run=^TestHelperProcessMigrate$", "-test.count=1")}
		p.cmd.Env = append(os.Environ(), helperURLEnv+"="+url)
		p.cmd.Stderr = &p.stderr
		var err error
		p.stdin, err = p.cmd.StdinPipe()
		require.NoError(t, err)
		out, err := p.cmd.StdoutPipe()
		require.NoError(t, err)
		p.stdout = bufio.NewReader(out)
		require.NoError(t, p.cmd.Start())
		t.Cleanup(func() { _ = p.cmd.Process.Kill(); _ = p.cmd.Wait() })
		procs[i] = p
	}
	for i, p := range procs {
		line, err := p.stdout.ReadString('\n')
		require.NoError(t, err, "helper %d: %s", i, p.stderr.String())
		require.Equal(t, "ready\n", line)
	}

	// Start every process and every goroutine at once.
	start := make(chan struct{})
	var wg sync.WaitGroup
	applied := make([][]int, goroutines)
	queueboxApplied := make([][]int, goroutines)
	errs := make([]error, goroutines)
	for i := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			res, err := pgMigrate(ctx, pool, migrate.Options{})
			applied[i], queueboxApplied[i], errs[i] = res.Applied, res.QueueBox.Applied, err
		}()
	}
	for _, p := range procs {
		_, err := io.WriteString(p.stdin, "go\n")
		require.NoError(t, err)
	}
	close(start)

	var all []int
	for i, p := range procs {
		out, _ := io.ReadAll(p.stdout)
		require.NoError(t, p.cmd.Wait(), "helper %d: %s", i, p.stderr.String())
		m := regexp.MustCompile(`(?m)^applied: (.*)$`).FindStringSubmatch(string(out))
		require.NotNil(t, m, "helper %d printed %q", i, out)
		for _, f := range strings.Fields(m[1]) {
			if q, ok := strings.CutPrefix(f, "q"); ok {
				v, err := strconv.Atoi(q)
				require.NoError(t, err)
				all = append(all, 100+v)
				continue
			}
			v, err := strconv.Atoi(f)
			require.NoError(t, err)
			all = append(all, v)
		}
	}
	wg.Wait()
	for i := range goroutines {
		require.NoError(t, errs[i], "goroutine %d", i)
		all = append(all, applied[i]...)
		for _, v := range queueboxApplied[i] {
			all = append(all, 100+v)
		}
	}
	slices.Sort(all)
	n := len(queueboxList(t))
	want := seq(1, 11)
	for v := 1; v <= n; v++ {
		want = append(want, 100+v)
	}
	assert.Equal(t, want, all, "each version of each track applied by exactly one of the runs")

	var perVersion []int
	rows, err := pool.Query(ctx, `SELECT count(*) FROM flyway_schema_history GROUP BY version ORDER BY version::int`)
	require.NoError(t, err)
	perVersion, err = pgx.CollectRows(rows, pgx.RowTo[int])
	require.NoError(t, err)
	assert.Equal(t, slices.Repeat([]int{1}, 11), perVersion, "each version recorded exactly once")
	assert.Equal(t, wantHistory(t, 1, 11, "SQL"), readHistory(t, pool))
	assert.Equal(t, wantQueueBoxHistory(t, 1, n, "SQL"), readQueueBoxHistory(t, pool))
	assertDocumentedSchema(t, pool)
}

// jvmHistory creates flyway_schema_history as Flyway does and records versions 1..upTo as the
// JVM QueueBox leaves them: its own descriptions, checksums of its own files.
func jvmHistory(t *testing.T, pool *pgxpool.Pool, upTo int) {
	t.Helper()
	dbtest.Exec(t, pool, `CREATE TABLE "public"."flyway_schema_history" (
		"installed_rank" INT NOT NULL,
		"version" VARCHAR(50),
		"description" VARCHAR(200) NOT NULL,
		"type" VARCHAR(20) NOT NULL,
		"script" VARCHAR(1000) NOT NULL,
		"checksum" INTEGER,
		"installed_by" VARCHAR(100) NOT NULL,
		"installed_on" TIMESTAMP NOT NULL DEFAULT now(),
		"execution_time" INTEGER NOT NULL,
		"success" BOOLEAN NOT NULL
	);
	ALTER TABLE "public"."flyway_schema_history" ADD CONSTRAINT "flyway_schema_history_pk" PRIMARY KEY ("installed_rank");
	CREATE INDEX "flyway_schema_history_s_idx" ON "public"."flyway_schema_history" ("success");`)
	list, err := migrations.List(migrations.PostgreSQL)
	require.NoError(t, err)
	for _, m := range list[:upTo] {
		dbtest.Exec(t, pool, `INSERT INTO flyway_schema_history
			(installed_rank, version, description, type, script, checksum, installed_by, execution_time, success)
			VALUES ($1, $2, $3, 'SQL', $4, $5, 'queuebox', 17, true)`,
			m.Version, strconv.Itoa(m.Version), m.Description, m.Script, int32(-1000003*m.Version))
	}
}

func TestPostgresAdoptsAJVMMigratedDatabase(t *testing.T) {
	t.Parallel()
	pool, _ := newPool(t)
	ctx := context.Background()
	applyFiles(t, pool, 10)
	jvmHistory(t, pool, 10)

	res, err := pgMigrate(ctx, pool, migrate.Options{})
	require.NoError(t, err)
	assert.Equal(t, []int{11}, res.Applied)
	n := len(queueboxList(t))
	assert.Equal(t, "applied V11; applied QueueBox's own migrations "+versions(1, n), res.String())

	h := readHistory(t, pool)
	require.Len(t, h, 11)
	assert.Equal(t, int32(-1000003), *h[0].Checksum, "the JVM's rows stay as they are")
	assert.Equal(t, wantHistory(t, 11, 11, "SQL"), h[10:], "V11 is installed_rank 11")
	assert.Equal(t, wantQueueBoxHistory(t, 1, n, "SQL"), readQueueBoxHistory(t, pool))
	assertDocumentedSchema(t, pool)
}

func TestPostgresAdoptsAFlywayBaseline(t *testing.T) {
	t.Parallel()
	pool, _ := newPool(t)
	ctx := context.Background()
	applyFiles(t, pool, 9)
	jvmHistory(t, pool, 0)
	dbtest.Exec(t, pool, `INSERT INTO flyway_schema_history
		(installed_rank, version, description, type, script, checksum, installed_by, execution_time, success)
		VALUES (1, '9', '<< Flyway Baseline >>', 'BASELINE', '<< Flyway Baseline >>', NULL, 'queuebox', 0, true)`)

	res, err := pgMigrate(ctx, pool, migrate.Options{})
	require.NoError(t, err)
	assert.Equal(t, []int{10, 11}, res.Applied)
	h := readHistory(t, pool)
	require.Len(t, h, 3)
	assert.Equal(t, []string{"9", "10", "11"}, []string{h[0].Version, h[1].Version, h[2].Version})
	assert.Equal(t, []int{1, 2, 3}, []int{h[0].Rank, h[1].Rank, h[2].Rank})
}

func TestPostgresStopsOnAFailedHistoryRow(t *testing.T) {
	t.Parallel()
	pool, _ := newPool(t)
	applyFiles(t, pool, 2)
	jvmHistory(t, pool, 2)
	dbtest.Exec(t, pool, `INSERT INTO flyway_schema_history
		(installed_rank, version, description, type, script, checksum, installed_by, execution_time, success)
		VALUES (3, '3', 'add claimed at', 'SQL', 'V3__add_claimed_at.sql', 1, 'queuebox', 5, false)`)

	for _, doMigrate := range []bool{true, false} {
		_, err := pgCheckStart(context.Background(), pool, doMigrate, migrate.Options{})
		require.ErrorIs(t, err, migrate.ErrFailedMigration, "migrate=%v", doMigrate)
		assert.Contains(t, err.Error(), "V3 (add claimed at) as failed at installed_rank 3")
	}
	assert.Len(t, readHistory(t, pool), 3, "nothing ran")
}

func TestPostgresFailedMigrationLeavesNoTrace(t *testing.T) {
	t.Parallel()
	pool, _ := newPool(t)
	ctx := context.Background()
	_, err := pgMigrate(ctx, pool, migrate.Options{Target: 1})
	require.NoError(t, err)
	// An inbox that V2 cannot index: V2 fails on its second statement.
	dbtest.Exec(t, pool, `CREATE TABLE inbox (id UUID PRIMARY KEY)`)

	_, err = pgMigrate(ctx, pool, migrate.Options{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "applying migration V2__create_inbox.sql")
	assert.Equal(t, wantHistory(t, 1, 1, "SQL"), readHistory(t, pool))
	var idx int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM pg_indexes WHERE tablename = 'inbox' AND indexname LIKE 'idx_%'`).Scan(&idx))
	assert.Zero(t, idx, "the migration's transaction rolled back")

	// After the operator repairs the table, the next run goes on from V2.
	dbtest.Exec(t, pool, `DROP TABLE inbox`)
	res, err := pgMigrate(ctx, pool, migrate.Options{})
	require.NoError(t, err)
	assert.Equal(t, seq(2, 11), res.Applied)
}

func TestPostgresBaseline(t *testing.T) {
	t.Parallel()
	pool, _ := newPool(t)
	ctx := context.Background()
	applyFiles(t, pool, 11)
	applyQueueBoxFiles(t, pool)
	dbtest.Exec(t, pool, `INSERT INTO queuebox_destination_state (destination, paused) VALUES ('orders', true)`)

	_, err := pgCheckStart(ctx, pool, true, migrate.Options{})
	require.ErrorIs(t, err, migrate.ErrNoHistory)
	assert.Contains(t, err.Error(), "queuebox migrate --baseline")
	assert.Contains(t, err.Error(), "outbox, inbox")
	_, err = pgMigrate(ctx, pool, migrate.Options{})
	require.ErrorIs(t, err, migrate.ErrNoHistory, "queuebox migrate refuses as well")

	_, err = pgBaseline(ctx, pool, 12, migrate.Options{})
	require.ErrorIs(t, err, migrate.ErrInvalidVersion, "V12 is no longer a version of the main track")

	res, err := pgBaseline(ctx, pool, 11, migrate.Options{InstalledBy: "operator"})
	require.NoError(t, err)
	assert.Equal(t, "recorded V1..V11 as baseline", res.String())
	assert.Equal(t, wantHistory(t, 1, 11, "BASELINE"), readHistory(t, pool))
	assert.Equal(t, -1, queueboxHistoryCount(t, pool), "a baseline records the main track only")

	// The QueueBox track needs no baseline: its files are safe to run again, so the next start
	// applies them over the tables made by hand, keeps their rows, and records them.
	n := len(queueboxList(t))
	start, err := pgCheckStart(ctx, pool, true, migrate.Options{})
	require.NoError(t, err)
	assert.Equal(t, migrate.LevelInfo, start.Level)
	assert.Equal(t, "schema is up to date at V11; applied QueueBox's own migrations "+versions(1, n), start.Message)
	assert.Empty(t, start.Migration.Applied)
	assert.Equal(t, wantQueueBoxHistory(t, 1, n, "SQL"), readQueueBoxHistory(t, pool))
	var paused bool
	require.NoError(t, pool.QueryRow(ctx, `SELECT paused FROM queuebox_destination_state WHERE destination = 'orders'`).Scan(&paused))
	assert.True(t, paused, "the rows of a table made by hand stay")

	start, err = pgCheckStart(ctx, pool, true, migrate.Options{})
	require.NoError(t, err)
	assert.Equal(t, fmt.Sprintf("schema is up to date at V11; QueueBox's own migrations are up to date at V%d", n), start.Message)

	_, err = pgBaseline(ctx, pool, 11, migrate.Options{})
	require.ErrorIs(t, err, migrate.ErrHistoryExists)
	assert.Contains(t, err.Error(), "holds 11 rows")
	assert.Len(t, readHistory(t, pool), 11)
}

func TestPostgresBaselineBelowLatestThenMigrate(t *testing.T) {
	t.Parallel()
	pool, _ := newPool(t)
	ctx := context.Background()
	applyFiles(t, pool, 9)

	_, err := pgBaseline(ctx, pool, 9, migrate.Options{})
	require.NoError(t, err)
	start, err := pgCheckStart(ctx, pool, true, migrate.Options{})
	require.NoError(t, err)
	assert.Equal(t, "applied V10..V11; applied QueueBox's own migrations "+versions(1, len(queueboxList(t))), start.Message)
	assertDocumentedSchema(t, pool)
}

// formerV12 records V12 (the destination state) in flyway_schema_history as the builds that
// shipped it in the main track did, after V1..V11, and creates its table.
func formerV12(t *testing.T, pool *pgxpool.Pool, typ string) {
	t.Helper()
	applyQueueBoxFiles(t, pool)
	checksum := "1234567"
	if typ == "BASELINE" {
		checksum = "NULL"
	}
	dbtest.Exec(t, pool, `INSERT INTO flyway_schema_history
		(installed_rank, version, description, type, script, checksum, installed_by, installed_on, execution_time, success)
		VALUES (12, '12', 'add destination state', '`+typ+`', 'V12__add_destination_state.sql', `+checksum+`,
		        'former-build', '2025-01-02 03:04:05', 42, true)`)
}

// TestPostgresMovesTheFormerV12: a database that an earlier build migrated records V12
// (the destination state) in flyway_schema_history. The start without migrate warns and writes
// nothing; Migrate moves the row to queuebox_schema_history as V1 of the QueueBox track,
// keeping who applied it and when, and leaves flyway_schema_history with the original's
// V1..V11 only, so that a later V12 of the original applies there at the next rank; a second
// run does nothing.
func TestPostgresMovesTheFormerV12(t *testing.T) {
	t.Parallel()
	for _, typ := range []string{"SQL", "BASELINE"} {
		t.Run(typ, func(t *testing.T) {
			t.Parallel()
			pool, _ := newPool(t)
			ctx := context.Background()
			applyFiles(t, pool, 11)
			jvmHistory(t, pool, 11)
			formerV12(t, pool, typ)
			n := len(queueboxList(t))

			start, err := pgCheckStart(ctx, pool, false, migrate.Options{})
			require.NoError(t, err)
			assert.Equal(t, migrate.LevelWarning, start.Level)
			assert.Equal(t, "schema is up to date at V11 (database.migrate is false); flyway_schema_history records V12 "+
				"(V12__add_destination_state.sql), which is now V1 of QueueBox's own migrations; run `queuebox migrate` once, "+
				"or move the row by hand (docs/migrations.md), so that a later V12 of the original QueueBox can apply", start.Message)
			assert.Empty(t, start.Unknown, "the former V12 is not a version of a newer release")
			assert.Len(t, readHistory(t, pool), 12, "migrate=false writes nothing")

			res, err := pgMigrate(ctx, pool, migrate.Options{})
			require.NoError(t, err)
			assert.Empty(t, res.Applied)
			assert.Equal(t, []int{1}, res.QueueBox.Moved)
			assert.Equal(t, seq(2, n), res.QueueBox.Applied)
			assert.Contains(t, res.String(), "moved V12 from flyway_schema_history to queuebox_schema_history as V1")

			h := readHistory(t, pool)
			require.Len(t, h, 11, "flyway_schema_history holds the original's versions only")
			assert.Equal(t, "11", h[10].Version)
			q := readQueueBoxHistory(t, pool)
			require.Len(t, q, n)
			want := wantQueueBoxHistory(t, 1, 1, typ)[0]
			assert.Equal(t, want, q[0])
			var by, on string
			var took int
			require.NoError(t, pool.QueryRow(ctx, `SELECT installed_by, installed_on::text, execution_time
				FROM queuebox_schema_history WHERE version = '1'`).Scan(&by, &on, &took))
			assert.Equal(t, []any{"former-build", "2025-01-02 03:04:05", 42}, []any{by, on, took}, "the move keeps who, when and how long")

			again, err := pgMigrate(ctx, pool, migrate.Options{})
			require.NoError(t, err)
			assert.Empty(t, again.QueueBox.Moved)
			assert.Empty(t, again.QueueBox.Applied)
			assert.Equal(t, fmt.Sprintf("schema is up to date at V11; QueueBox's own migrations are up to date at V%d", n), again.String())

			// The original's own V12, when it comes, goes into flyway_schema_history at the next
			// rank as Flyway writes it; this QueueBox then reads it as a version of a newer
			// release and leaves it alone.
			dbtest.Exec(t, pool, `INSERT INTO flyway_schema_history
				(installed_rank, version, description, type, script, checksum, installed_by, execution_time, success)
				VALUES ((SELECT max(installed_rank) + 1 FROM flyway_schema_history), '12', 'a change of the original', 'SQL',
				        'V12__a_change_of_the_original.sql', 99, 'jvm', 5, true)`)
			start, err = pgCheckStart(ctx, pool, true, migrate.Options{})
			require.NoError(t, err)
			assert.Equal(t, []string{"12"}, start.Unknown)
			assert.Len(t, readHistory(t, pool), 12)
			assert.Len(t, readQueueBoxHistory(t, pool), n)
		})
	}
}

// TestPostgresMovesTheFormerV12RecordedTwice: a database on which an earlier build recorded
// V12 again after the QueueBox track recorded V1 (a roll back to that build, whose V12 is safe
// to run twice): Migrate deletes the old row and records V1 once.
func TestPostgresMovesTheFormerV12RecordedTwice(t *testing.T) {
	t.Parallel()
	pool, _ := newPool(t)
	ctx := context.Background()
	_, err := pgMigrate(ctx, pool, migrate.Options{})
	require.NoError(t, err)
	n := len(queueboxList(t))
	formerV12(t, pool, "SQL")

	res, err := pgMigrate(ctx, pool, migrate.Options{})
	require.NoError(t, err)
	assert.Equal(t, []int{1}, res.QueueBox.Moved)
	assert.Empty(t, res.QueueBox.Applied)
	assert.Equal(t, wantHistory(t, 1, 11, "SQL"), readHistory(t, pool))
	assert.Equal(t, wantQueueBoxHistory(t, 1, n, "SQL"), readQueueBoxHistory(t, pool))
}

func TestPostgresCheckStartWithoutMigrate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		setup       func(t *testing.T, pool *pgxpool.Pool)
		names       func(o *migrate.Options)
		wantLevel   migrate.Level
		wantPending []int
		wantMessage string
	}{
		{
			name: "schema applied by hand, no history",
			setup: func(t *testing.T, pool *pgxpool.Pool) {
				applyFiles(t, pool, 11)
				applyQueueBoxFiles(t, pool)
			},
			wantLevel:   migrate.LevelInfo,
			wantMessage: "database.migrate is false and the database has no migration history; the schema is managed by hand",
		},
		{
			name: "custom tables, no history",
			setup: func(t *testing.T, pool *pgxpool.Pool) {
				dbtest.Exec(t, pool, `CREATE TABLE qb_outbox (id UUID); CREATE TABLE qb_inbox (id UUID)`)
				applyQueueBoxFiles(t, pool)
			},
			names:       func(o *migrate.Options) { o.Names.OutboxTable, o.Names.InboxTable = "qb_outbox", "qb_inbox" },
			wantLevel:   migrate.LevelInfo,
			wantMessage: "database.migrate is false and the database has no migration history; the schema is managed by hand",
		},
		{
			name: "history behind the release",
			setup: func(t *testing.T, pool *pgxpool.Pool) {
				applyFiles(t, pool, 9)
				jvmHistory(t, pool, 9)
				applyQueueBoxFiles(t, pool)
			},
			wantLevel:   migrate.LevelWarning,
			wantPending: []int{10, 11},
			wantMessage: "database.migrate is false and migrations V10..V11 are not applied; apply them by hand before this version runs (see Upgrade QueueBox)",
		},
		{
			name: "history up to date",
			setup: func(t *testing.T, pool *pgxpool.Pool) {
				_, err := pgMigrate(context.Background(), pool, migrate.Options{})
				require.NoError(t, err)
			},
			wantLevel:   migrate.LevelInfo,
			wantMessage: "schema is up to date at V11 (database.migrate is false)",
		},
		{
			name: "history from a newer release",
			setup: func(t *testing.T, pool *pgxpool.Pool) {
				applyFiles(t, pool, 11)
				jvmHistory(t, pool, 11)
				applyQueueBoxFiles(t, pool)
				dbtest.Exec(t, pool, `INSERT INTO flyway_schema_history
					(installed_rank, version, description, type, script, checksum, installed_by, execution_time, success)
					VALUES (12, '13', 'something new', 'SQL', 'V13__something_new.sql', 1, 'queuebox', 5, true)`)
			},
			wantLevel:   migrate.LevelWarning,
			wantMessage: "schema is up to date at V11 (database.migrate is false); flyway_schema_history records versions that this release does not ship (V13); a newer QueueBox migrated this database",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			pool, _ := newPool(t)
			tc.setup(t, pool)
			before := historyCount(t, pool)
			opts := migrate.Options{}.WithDefaults()
			if tc.names != nil {
				tc.names(&opts)
			}
			res, err := pgCheckStart(context.Background(), pool, false, opts)
			require.NoError(t, err)
			assert.Equal(t, tc.wantLevel, res.Level)
			assert.Equal(t, tc.wantPending, res.Pending)
			assert.Equal(t, tc.wantMessage, res.Message)
			assert.Equal(t, before, historyCount(t, pool), "migrate=false writes nothing")
		})
	}
}

// TestPostgresCheckStartWithoutMigrateListsAMissingQueueBoxMigration: with database.migrate
// false, a version of the QueueBox track whose table does not exist and that no history
// records is listed as missing, with its file and the way to apply it, and the start goes on;
// the table created by hand (no history) or a recorded version is not listed.
func TestPostgresCheckStartWithoutMigrateListsAMissingQueueBoxMigration(t *testing.T) {
	t.Parallel()
	pool, _ := newPool(t)
	ctx := context.Background()
	applyFiles(t, pool, 11)
	jvmHistory(t, pool, 11)
	list := queueboxList(t)

	start, err := pgCheckStart(ctx, pool, false, migrate.Options{})
	require.NoError(t, err)
	require.Len(t, start.Missing, len(list))
	for i, m := range list {
		assert.Equal(t, m.Script, start.Missing[i].Script)
		assert.Equal(t, m.Table, start.Missing[i].Table)
		assert.Contains(t, start.Missing[i].Apply, "psql -v ON_ERROR_STOP=1 -f migrations/queuebox/postgresql/"+m.Script)
	}
	assert.Equal(t, -1, queueboxHistoryCount(t, pool), "migrate=false writes nothing")

	// Every file but the last applied by hand: the last one is still missing, alone.
	for _, m := range list[:len(list)-1] {
		dbtest.Exec(t, pool, m.SQL)
	}
	last := list[len(list)-1]
	start, err = pgCheckStart(ctx, pool, false, migrate.Options{})
	require.NoError(t, err)
	require.Len(t, start.Missing, 1)
	assert.Equal(t, last.Script, start.Missing[0].Script)

	dbtest.Exec(t, pool, last.SQL)
	start, err = pgCheckStart(ctx, pool, false, migrate.Options{})
	require.NoError(t, err)
	assert.Empty(t, start.Missing)
	assert.Equal(t, migrate.LevelInfo, start.Level)
	assert.Equal(t, "schema is up to date at V11 (database.migrate is false)", start.Message)

	// With every version recorded, a dropped table is a matter for the feature that reads
	// it, not for the history check.
	_, err = pgMigrate(ctx, pool, migrate.Options{})
	require.NoError(t, err)
	_, err = pgCheckStart(ctx, pool, false, migrate.Options{})
	require.NoError(t, err)
}

func queueboxHistoryCount(t *testing.T, pool *pgxpool.Pool) int {
	t.Helper()
	var exists bool
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT to_regclass('queuebox_schema_history') IS NOT NULL`).Scan(&exists))
	if !exists {
		return -1
	}
	var n int
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT count(*) FROM queuebox_schema_history`).Scan(&n))
	return n
}

func historyCount(t *testing.T, pool *pgxpool.Pool) int {
	t.Helper()
	var exists bool
	require.NoError(t, pool.QueryRow(context.Background(), postgres.HistoryExistsSQL).Scan(&exists))
	if !exists {
		return -1
	}
	var n int
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT count(*) FROM flyway_schema_history`).Scan(&n))
	return n
}

func TestPostgresWaitsForTheLockThenGivesUp(t *testing.T) {
	t.Parallel()
	pool, _ := newPool(t)
	ctx := context.Background()
	holder, err := pool.Acquire(ctx)
	require.NoError(t, err)
	defer holder.Release()
	_, err = holder.Exec(ctx, `SELECT pg_advisory_lock($1)`, postgres.MigrationLockKey)
	require.NoError(t, err)

	_, err = pgMigrate(ctx, pool, migrate.Options{LockTimeout: 300 * time.Millisecond})
	require.ErrorIs(t, err, migrate.ErrLockTimeout)
	assert.Equal(t, -1, historyCount(t, pool), "nothing ran without the lock")

	cctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { _, err := pgMigrate(cctx, pool, migrate.Options{}); done <- err }()
	cancel()
	require.ErrorIs(t, <-done, context.Canceled)

	_, err = holder.Exec(ctx, `SELECT pg_advisory_unlock($1)`, postgres.MigrationLockKey)
	require.NoError(t, err)
	res, err := pgMigrate(ctx, pool, migrate.Options{LockTimeout: 5 * time.Second})
	require.NoError(t, err)
	assert.Len(t, res.Applied, 11)
	assert.Equal(t, seq(1, len(queueboxList(t))), res.QueueBox.Applied)
}

func TestPostgresRejectsBadNames(t *testing.T) {
	t.Parallel()
	pool, _ := newPool(t)
	opts := migrate.Options{}.WithDefaults()
	opts.Names.InboxTable = `inbox"; DROP TABLE outbox; --`
	_, err := pgCheckStart(context.Background(), pool, true, opts)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "database.inboxTableName")
	assert.False(t, errors.Is(err, migrate.ErrNoHistory))
}

// TestPostgresCheckStartUpToDateTakesNoLock: with every version applied, CheckStart with
// migrate = true reads the history without the migration lock, so a start is not held up by
// a process that holds it; with a version pending it takes the lock, and waits for it.
func TestPostgresCheckStartUpToDateTakesNoLock(t *testing.T) {
	t.Parallel()
	pool, _ := newPool(t)
	ctx := context.Background()
	_, err := pgMigrate(ctx, pool, migrate.Options{})
	require.NoError(t, err)

	holder, err := pool.Acquire(ctx)
	require.NoError(t, err)
	defer holder.Release()
	_, err = holder.Exec(ctx, `SELECT pg_advisory_lock($1)`, postgres.MigrationLockKey)
	require.NoError(t, err)

	n := len(queueboxList(t))
	upToDate := fmt.Sprintf("schema is up to date at V11; QueueBox's own migrations are up to date at V%d", n)
	opts := migrate.Options{LockTimeout: 300 * time.Millisecond}
	start, err := pgCheckStart(ctx, pool, true, opts)
	require.NoError(t, err)
	assert.Equal(t, migrate.StartResult{Level: migrate.LevelInfo, Message: upToDate,
		Migration: migrate.Result{Dialect: migrations.PostgreSQL, Current: 11, QueueBox: migrate.TrackResult{Current: n}}}, start)

	dbtest.Exec(t, pool, `INSERT INTO flyway_schema_history
		(installed_rank, version, description, type, script, checksum, installed_by, execution_time, success)
		VALUES (12, '99', 'from a newer release', 'SQL', 'V99__from_a_newer_release.sql', 1, 'queuebox', 5, true)`)
	start, err = pgCheckStart(ctx, pool, true, opts)
	require.NoError(t, err)
	assert.Equal(t, migrate.LevelWarning, start.Level)
	assert.Equal(t, upToDate+"; flyway_schema_history records versions that this release "+
		"does not ship (V99); a newer QueueBox migrated this database", start.Message)
	assert.Equal(t, []string{"99"}, start.Unknown)

	dbtest.Exec(t, pool, `DELETE FROM queuebox_schema_history WHERE version = '`+strconv.Itoa(n)+`'`)
	_, err = pgCheckStart(ctx, pool, true, opts)
	require.ErrorIs(t, err, migrate.ErrLockTimeout, "a pending version of the QueueBox track takes the lock")

	dbtest.Exec(t, pool, `DELETE FROM flyway_schema_history WHERE version = '11'`)
	_, err = pgCheckStart(ctx, pool, true, opts)
	require.ErrorIs(t, err, migrate.ErrLockTimeout, "a pending version takes the lock")

	_, err = holder.Exec(ctx, `SELECT pg_advisory_unlock($1)`, postgres.MigrationLockKey)
	require.NoError(t, err)
	start, err = pgCheckStart(ctx, pool, true, opts)
	require.NoError(t, err)
	assert.Equal(t, "applied V11; applied QueueBox's own migrations "+versions(n, n)+
		"; flyway_schema_history records versions that this release does not ship (V99); "+
		"a newer QueueBox migrated this database", start.Message)
}

// TestPostgresQueueBoxTrackRecreatesADroppedTable: an operator who drops a table of the
// QueueBox track and deletes its history row (docs/destination-state.md) gets it back at the
// next run, although later versions are recorded.
func TestPostgresQueueBoxTrackRecreatesADroppedTable(t *testing.T) {
	t.Parallel()
	pool, _ := newPool(t)
	ctx := context.Background()
	_, err := pgMigrate(ctx, pool, migrate.Options{})
	require.NoError(t, err)
	dbtest.Exec(t, pool, `DROP TABLE queuebox_destination_state; DELETE FROM queuebox_schema_history WHERE version = '1'`)

	res, err := pgMigrate(ctx, pool, migrate.Options{})
	require.NoError(t, err)
	assert.Equal(t, []int{1}, res.QueueBox.Applied)
	var exists bool
	require.NoError(t, pool.QueryRow(ctx, `SELECT to_regclass('queuebox_destination_state') IS NOT NULL`).Scan(&exists))
	assert.True(t, exists)
	assert.Len(t, readQueueBoxHistory(t, pool), len(queueboxList(t)))
}
