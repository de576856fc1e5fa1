package specsql

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/alternayte/queuebox/shared/specdocs"
	"github.com/alternayte/queuebox/shared/store/postgres/dbtest"
)

// Dialects of a block.
const (
	postgres  = "postgresql"
	sqlServer = "sqlserver"
)

// sqlServerMarks are the signs of a SQL Server block: a bracketed identifier, an N” literal,
// TOP, the SQL Server clock and date functions, a system procedure, and the T-SQL batch forms.
var sqlServerMarks = []*regexp.Regexp{
	regexp.MustCompile(`\[key\]`),
	regexp.MustCompile(`\bN'`),
	regexp.MustCompile(`\bTOP\b`),
	regexp.MustCompile(`\bGETUTCDATE\b`),
	regexp.MustCompile(`\bSYSUTCDATETIME\b`),
	regexp.MustCompile(`\bDATEADD\b`),
	regexp.MustCompile(`\bsp_`),
	regexp.MustCompile(`\bOBJECT_ID\b`),
	regexp.MustCompile(`\bBEGIN TRANSACTION\b`),
}

func classify(sql string) string {
	for _, m := range sqlServerMarks {
		if m.MatchString(sql) {
			return sqlServer
		}
	}
	return postgres
}

// extract returns every sql block of a page, in page order.
func extract(page string) []string { return Blocks(page, "sql") }

// squeeze is Squeeze.
func squeeze(s string) string { return Squeeze(s) }

// Values for the placeholders that the pages use. The dead-letter and runbook pages name
// :message_id, :topic, :state, :destination and :limit.
const messageID = "5d6f2a1e-8c3b-4e7a-9f10-2b4c6d8e0a11"

var placeholders = map[string]string{
	"message_id":  "'" + messageID + "'",
	"topic":       "'order.created'",
	"limit":       "20",
	"state":       "'dead'",
	"destination": "'payments-service'",
}

// fill replaces each :name outside string literals and quoted identifiers with its value, and
// reports the names it found. A :: cast stays. It fails on a name it has no value for.
func fill(sql string) (string, []string, error) {
	var b strings.Builder
	var found []string
	for i := 0; i < len(sql); {
		c := sql[i]
		switch {
		case c == '\'' || c == '"':
			j := i + 1
			for j < len(sql) {
				if sql[j] == c && j+1 < len(sql) && sql[j+1] == c {
					j += 2
					continue
				}
				if sql[j] == c {
					break
				}
				j++
			}
			if j >= len(sql) {
				return "", nil, fmt.Errorf("unterminated %c literal", c)
			}
			b.WriteString(sql[i : j+1])
			i = j + 1
		case c == '-' && i+1 < len(sql) && sql[i+1] == '-':
			return "", nil, fmt.Errorf("a -- comment in a block whose line breaks are lost hides the rest of the block")
		case c == ':' && i+1 < len(sql) && sql[i+1] == ':':
			b.WriteString("::")
			i += 2
		case c == ':' && i+1 < len(sql) && (sql[i+1] == '_' || (sql[i+1] >= 'a' && sql[i+1] <= 'z')):
			j := i + 1
			for j < len(sql) && (sql[j] == '_' || (sql[j] >= 'a' && sql[j] <= 'z') || (sql[j] >= '0' && sql[j] <= '9')) {
				j++
			}
			name := sql[i+1 : j]
			v, ok := placeholders[name]
			if !ok {
				return "", nil, fmt.Errorf("placeholder :%s has no test value; add one", name)
			}
			found = append(found, name)
			b.WriteString(v)
			i = j
		default:
			b.WriteByte(c)
			i++
		}
	}
	return b.String(), found, nil
}

// statements counts the statements of a block: its semicolons outside string literals.
func statements(sql string) int {
	n, quote := 0, byte(0)
	for i := 0; i < len(sql); i++ {
		switch c := sql[i]; {
		case quote != 0 && c == quote:
			quote = 0
		case quote != 0:
		case c == '\'' || c == '"':
			quote = c
		case c == ';':
			n++
		}
	}
	return n
}

// block is what the test knows about one sql block of a page, counted by hand.
type block struct {
	dialect string
	// starts is the beginning of the block, white space squeezed, so that an edit of the page
	// that moves or replaces a block is noticed.
	starts string
	// setup creates application objects that the block needs and the schema does not have.
	setup string
	// rows is the number of rows that a single statement returns or changes; -1 for a block of
	// several statements, whose effect check reads.
	rows int
	// check asserts the effect of the block on the database.
	check func(t *testing.T, db *pgxpool.Pool)
}

// ordersTable is the application table of "Write outbox rows", which the examples write in
// the same transaction as the outbox row.
const ordersTable = `CREATE TABLE orders (
	id UUID PRIMARY KEY,
	customer_id VARCHAR(64) NOT NULL,
	amount NUMERIC(12, 2) NOT NULL,
	created_at TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT CURRENT_TIMESTAMP)`

// pages lists, page by page and in page order, every sql block: its dialect (classified by
// hand) and, for a PostgreSQL block, what it does to the seeded database.
var pages = map[string][]block{
	"17-write-outbox-rows.md": {
		{dialect: postgres, starts: "CREATE TABLE IF NOT EXISTS orders (", rows: 0, check: ordersTableExists},
		{dialect: postgres, starts: "BEGIN; INSERT INTO orders (id, customer_id, amount) VALUES ('11111111-", setup: ordersTable, rows: -1,
			check: func(t *testing.T, db *pgxpool.Pool) {
				wantOne(t, db, `SELECT count(*) FROM orders WHERE id = '11111111-1111-1111-1111-111111111111' AND customer_id = 'cust-42'`)
				wantOne(t, db, `SELECT count(*) FROM outbox WHERE topic = 'order.created' AND key = 'cust-42'
					AND headers = '{"X-Tenant":"acme"}' AND aggregate_type = 'order' AND state = 'pending'
					AND attempt = 0 AND payload ->> 'orderId' = '11111111-1111-1111-1111-111111111111' AND sequence IS NOT NULL`)
			}},
		{dialect: sqlServer, starts: "IF OBJECT_ID('orders', 'U') IS NULL CREATE TABLE orders ("},
		{dialect: sqlServer, starts: "BEGIN TRANSACTION; INSERT INTO orders (id, customer_id, amount) VALUES ('11111111-"},
		{dialect: postgres, starts: "BEGIN; INSERT INTO orders (id, customer_id, amount) VALUES ('22222222-", setup: ordersTable, rows: -1,
			check: func(t *testing.T, db *pgxpool.Pool) {
				wantOne(t, db, `SELECT count(*) FROM orders WHERE id = '22222222-2222-2222-2222-222222222222' AND amount = 12.00`)
				wantOne(t, db, `SELECT count(*) FROM outbox WHERE topic = 'order.paid' AND key IS NULL AND state = 'pending'`)
			}},
		{dialect: sqlServer, starts: "BEGIN TRANSACTION; INSERT INTO orders (id, customer_id, amount) VALUES ('22222222-"},
		{dialect: postgres, starts: "BEGIN; INSERT INTO outbox (topic, key, payload, aggregate_type) VALUES ( 'order.created', 'order-33333333'", rows: -1,
			check: func(t *testing.T, db *pgxpool.Pool) {
				wantOne(t, db, `SELECT count(*) FROM outbox a JOIN outbox b ON a.key = b.key
					WHERE a.key = 'order-33333333' AND a.payload ->> 'step' = '1' AND b.payload ->> 'step' = '2'
					AND a.sequence < b.sequence AND a.topic = 'order.created' AND b.topic = 'order.paid'`)
			}},
		{dialect: sqlServer, starts: "BEGIN TRANSACTION; INSERT INTO outbox (topic, [key], payload, aggregate_type)"},
		{dialect: postgres, starts: "BEGIN; INSERT INTO outbox (topic, payload, scheduled_at, max_attempts) VALUES ( 'order.reminder'", rows: -1,
			check: func(t *testing.T, db *pgxpool.Pool) {
				wantOne(t, db, `SELECT count(*) FROM outbox WHERE topic = 'order.reminder' AND max_attempts = 10
					AND scheduled_at = created_at + interval '5 seconds' AND state = 'pending'`)
			}},
		{dialect: sqlServer, starts: "BEGIN TRANSACTION; INSERT INTO outbox (topic, payload, scheduled_at, max_attempts)"},
	},
	"18-dead-letters.md": {
		{dialect: postgres, starts: "SELECT topic, count(*) AS dead_count FROM outbox WHERE state = 'dead' GROUP BY topic", rows: 2},
		{dialect: postgres, starts: "SELECT id, topic, key, attempt, max_attempts, created_at, updated_at, last_error FROM outbox WHERE state = 'dead'", rows: 3},
		{dialect: postgres, starts: "SELECT id, topic, key, payload, headers, attempt, max_attempts, scheduled_at", rows: 1},
		{dialect: postgres, starts: "UPDATE outbox SET state = 'pending', attempt = 0, scheduled_at = CURRENT_TIMESTAMP, claimed_at = NULL, last_error = NULL, updated_at = CURRENT_TIMESTAMP WHERE id = :message_id", rows: 1, check: requeuedOne},
		{dialect: postgres, starts: "SELECT id, state, attempt, scheduled_at, last_error FROM outbox WHERE id = :message_id", rows: 1},
		{dialect: postgres, starts: "UPDATE outbox SET state = 'pending', attempt = 0, scheduled_at = CURRENT_TIMESTAMP, claimed_at = NULL, last_error = NULL, updated_at = CURRENT_TIMESTAMP WHERE state = 'dead' AND topic = :topic", rows: 2, check: requeuedTopic},
		{dialect: postgres, starts: "SELECT id, source, consumption, idempotency_key, event_type, attempt, created_at, last_error FROM inbox WHERE state = 'dead'", rows: 2},
		{dialect: postgres, starts: "UPDATE inbox SET state = 'pending', attempt = 0", rows: 1,
			check: func(t *testing.T, db *pgxpool.Pool) {
				wantOne(t, db, `SELECT count(*) FROM inbox WHERE id = $1 AND state = 'pending' AND attempt = 0
					AND last_error IS NULL AND claimed_at IS NULL AND processed_at IS NULL
					AND scheduled_at <= clock_timestamp()`, messageID)
				wantCount(t, db, 1, `SELECT count(*) FROM inbox WHERE state = 'dead'`)
			}},
		{dialect: postgres, starts: "DELETE FROM outbox WHERE id = :message_id AND state = 'dead'", rows: 1,
			check: func(t *testing.T, db *pgxpool.Pool) {
				wantCount(t, db, 0, `SELECT count(*) FROM outbox WHERE id = $1`, messageID)
				wantCount(t, db, 2, `SELECT count(*) FROM outbox WHERE state = 'dead'`)
				wantCount(t, db, 1, `SELECT count(*) FROM inbox WHERE id = $1`, messageID)
			}},
	},
	"21-runbook.md": {
		{dialect: postgres, starts: "SELECT topic, count(*) AS dead_count FROM outbox WHERE state = 'dead'", rows: 2},
		{dialect: postgres, starts: "SELECT id, topic, key, attempt, max_attempts, updated_at, last_error FROM outbox WHERE state = 'dead'", rows: 3},
		{dialect: postgres, starts: "SELECT id, topic, key, payload, headers, attempt, scheduled_at, created_at, updated_at, claimed_at, last_error FROM outbox WHERE id = :message_id", rows: 1},
		{dialect: postgres, starts: "SELECT left(last_error, 60) AS reason", rows: 3},
		{dialect: postgres, starts: "SELECT id, source, idempotency_key, event_type, created_at FROM inbox WHERE state = 'dead'", rows: 2},
		{dialect: postgres, starts: "UPDATE outbox SET state = 'pending', attempt = 0, scheduled_at = CURRENT_TIMESTAMP, claimed_at = NULL, last_error = NULL, updated_at = CURRENT_TIMESTAMP WHERE id = :message_id", rows: 1, check: requeuedOne},
		{dialect: postgres, starts: "UPDATE outbox SET state = 'pending', attempt = 0, scheduled_at = CURRENT_TIMESTAMP, claimed_at = NULL, last_error = NULL, updated_at = CURRENT_TIMESTAMP WHERE state = 'dead' AND topic = :topic", rows: 2, check: requeuedTopic},
		{dialect: postgres, starts: "SELECT id, state, attempt, scheduled_at FROM outbox WHERE id = :message_id", rows: 1},
		{dialect: postgres, starts: "SELECT count(*) AS pending_count, min(created_at) AS oldest_created_at, max(created_at)", rows: 1},
		{dialect: postgres, starts: "SELECT id, topic, key, created_at, scheduled_at, attempt FROM outbox WHERE state = 'pending' AND scheduled_at <= CURRENT_TIMESTAMP", rows: 2},
		{dialect: postgres, starts: "SELECT attempt, count(*) AS pending_count FROM outbox WHERE state = 'pending' GROUP BY attempt", rows: 2},
		{dialect: postgres, starts: "SELECT key, count(*) AS waiting_rows, min(created_at) AS oldest_created_at FROM outbox", rows: 1},
		{dialect: postgres, starts: "SELECT count(*) AS stuck_count, min(claimed_at) AS oldest_claim FROM outbox WHERE state = 'processing'", rows: 1},
		{dialect: postgres, starts: "SELECT count(*) AS open_connections FROM pg_stat_activity", rows: 1},
		{dialect: postgres, starts: "SHOW max_connections;", rows: 1},
		{dialect: postgres, starts: "SELECT topic, count(*) AS retry_count, max(attempt) AS worst_attempt", rows: 1},
		{dialect: postgres, starts: "SELECT id, attempt, updated_at, last_error FROM outbox WHERE topic = :topic", rows: 2},
		{dialect: postgres, starts: "SELECT topic, count(*) AS sent_count", rows: 1},
		{dialect: postgres, starts: "SELECT source, consumption, count(*) AS pending_count", rows: 2},
		{dialect: postgres, starts: "SELECT source, aggregate_id, count(*) AS waiting_rows FROM inbox", rows: 1},
	},
	"29-outbox-table.md": {
		{dialect: postgres, starts: "INSERT INTO outbox (topic, key, payload, headers, aggregate_type) VALUES ( 'order.created', 'cust-42'", rows: 1,
			check: func(t *testing.T, db *pgxpool.Pool) {
				wantOne(t, db, `SELECT count(*) FROM outbox WHERE key = 'cust-42' AND headers ->> 'X-Tenant' = 'acme'
					AND aggregate_type = 'order' AND state = 'pending' AND max_attempts = 5`)
			}},
		{dialect: sqlServer, starts: "INSERT INTO outbox (topic, [key], payload, headers, aggregate_type)"},
	},
	"27-inbox-table.md": {
		{dialect: postgres, starts: "SELECT id, source, idempotency_key, event_type, state, created_at, processed_at FROM inbox WHERE source = 'stripe'", rows: 4},
		{dialect: sqlServer, starts: "SELECT TOP 20 id, source, idempotency_key"},
	},
}

// handCount is the number of PostgreSQL blocks on each page, counted by reading the page.
var handCount = map[string]int{
	"17-write-outbox-rows.md": 5,
	"18-dead-letters.md":      9,
	"21-runbook.md":           20,
	"29-outbox-table.md":      1,
	"27-inbox-table.md":       1,
}

// seed writes rows that the blocks read, change and delete: dead, pending, processing and sent
// outbox rows, and dead, pending and processed inbox rows. The outbox row and the inbox row
// with the id messageID are both dead.
const seed = `
INSERT INTO outbox (id, topic, key, payload, state, attempt, max_attempts, scheduled_at, created_at,
                    updated_at, claimed_at, claim_token, lease_expires_at, last_error) VALUES
 ('` + messageID + `', 'order.created', 'order-1', '{"orderId":"o-1"}', 'dead', 5, 5,
  now() - interval '2 hours', now() - interval '2 hours', now() - interval '1 hour', now() - interval '1 hour',
  NULL, NULL, 'HTTP 503 from https://payments.internal/events'),
 (gen_random_uuid(), 'order.created', NULL, '{"orderId":"o-2"}', 'dead', 0, 5,
  now() - interval '2 hours', now() - interval '2 hours', now() - interval '90 minutes', NULL,
  NULL, NULL, 'No route matches topic order.created'),
 (gen_random_uuid(), 'invoice.sent', 'inv-1', '{}', 'dead', 5, 5,
  now() - interval '3 hours', now() - interval '3 hours', now() - interval '2 hours', now() - interval '2 hours',
  NULL, NULL, 'timeout after 10000 ms'),
 (gen_random_uuid(), 'order.created', 'order-2', '{}', 'pending', 0, 5,
  now() - interval '1 minute', now() - interval '1 minute', now() - interval '1 minute', NULL, NULL, NULL, NULL),
 (gen_random_uuid(), 'order.paid', 'order-2', '{}', 'pending', 2, 5,
  now() - interval '30 seconds', now() - interval '5 minutes', now() - interval '40 seconds', now() - interval '45 seconds',
  NULL, NULL, 'HTTP 500 from https://payments.internal/events'),
 (gen_random_uuid(), 'order.shipped', NULL, '{}', 'pending', 0, 5,
  now() + interval '1 hour', now(), now(), NULL, NULL, NULL, NULL),
 (gen_random_uuid(), 'order.created', 'order-3', '{}', 'processing', 1, 5,
  now() - interval '20 seconds', now() - interval '20 seconds', now() - interval '10 seconds', now() - interval '10 seconds',
  gen_random_uuid(), now() + interval '5 minutes', NULL),
 (gen_random_uuid(), 'order.created', 'order-4', '{}', 'sent', 0, 5,
  now() - interval '10 minutes', now() - interval '10 minutes', now() - interval '10 minutes' + interval '2 seconds', now() - interval '10 minutes',
  NULL, NULL, NULL);

INSERT INTO inbox (id, source, idempotency_key, aggregate_id, event_type, payload, state, consumption,
                   attempt, created_at, processed_at, claimed_at, last_error) VALUES
 ('` + messageID + `', 'stripe', 'evt_1', 'cus_1', 'invoice.paid', '{}', 'dead', 'push', 0,
  now() - interval '2 hours', NULL, now() - interval '1 hour', 'topic template rendered empty'),
 (gen_random_uuid(), 'orders', 'o-9', NULL, NULL, '{}', 'dead', 'pull', 5,
  now() - interval '3 hours', NULL, now() - interval '2 hours', 'payload does not parse'),
 (gen_random_uuid(), 'stripe', 'evt_2', 'cus_1', 'invoice.created', '{}', 'pending', 'push', 0,
  now() - interval '1 minute', NULL, NULL, NULL),
 (gen_random_uuid(), 'stripe', 'evt_3', 'cus_1', 'invoice.updated', '{}', 'pending', 'push', 0,
  now() - interval '30 seconds', NULL, NULL, NULL),
 (gen_random_uuid(), 'orders', 'o-10', NULL, NULL, '{}', 'pending', 'pull', 0,
  now() - interval '10 seconds', NULL, NULL, NULL),
 (gen_random_uuid(), 'stripe', 'evt_4', 'cus_2', 'invoice.paid', '{}', 'processed', 'push', 0,
  now() - interval '1 hour', now() - interval '59 minutes', now() - interval '59 minutes', NULL);
`

func wantCount(t *testing.T, db *pgxpool.Pool, want int, sql string, args ...any) {
	t.Helper()
	var n int
	if err := db.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		t.Fatalf("checking the effect: %s: %v", squeeze(sql), err)
	}
	if n != want {
		t.Errorf("%s = %d, want %d", squeeze(sql), n, want)
	}
}

func wantOne(t *testing.T, db *pgxpool.Pool, sql string, args ...any) {
	t.Helper()
	wantCount(t, db, 1, sql, args...)
}

func ordersTableExists(t *testing.T, db *pgxpool.Pool) {
	t.Helper()
	wantCount(t, db, 4, `SELECT count(*) FROM information_schema.columns WHERE table_schema = 'public'
		AND table_name = 'orders' AND column_name IN ('id', 'customer_id', 'amount', 'created_at')`)
}

// requeuedOne checks a requeue of the dead outbox row messageID: it is pending again, and the
// other dead rows stay dead.
func requeuedOne(t *testing.T, db *pgxpool.Pool) {
	t.Helper()
	wantOne(t, db, `SELECT count(*) FROM outbox WHERE id = $1 AND state = 'pending' AND attempt = 0
		AND last_error IS NULL AND claimed_at IS NULL AND scheduled_at <= clock_timestamp()
		AND updated_at > created_at + interval '1 hour'`, messageID)
	wantCount(t, db, 2, `SELECT count(*) FROM outbox WHERE state = 'dead'`)
}

// requeuedTopic checks a requeue of every dead outbox row of order.created.
func requeuedTopic(t *testing.T, db *pgxpool.Pool) {
	t.Helper()
	wantCount(t, db, 0, `SELECT count(*) FROM outbox WHERE state = 'dead' AND topic = 'order.created'`)
	wantCount(t, db, 2, `SELECT count(*) FROM outbox WHERE state = 'pending' AND topic = 'order.created'
		AND attempt = 0 AND last_error IS NULL AND claimed_at IS NULL AND key IS DISTINCT FROM 'order-2'`)
	wantOne(t, db, `SELECT count(*) FROM outbox WHERE state = 'dead' AND topic = 'invoice.sent'`)
}

func TestClassify(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		sql  string
		want string
	}{
		{"bracketed key", "INSERT INTO outbox (topic, [key]) VALUES ('a', 'b');", sqlServer},
		{"N literal", "SELECT id FROM inbox WHERE source = N'stripe';", sqlServer},
		{"TOP", "SELECT TOP 20 id FROM inbox;", sqlServer},
		{"GETUTCDATE", "CREATE TABLE t (c DATETIME2 DEFAULT GETUTCDATE());", sqlServer},
		{"SYSUTCDATETIME", "SELECT SYSUTCDATETIME();", sqlServer},
		{"DATEADD", "SELECT DATEADD(SECOND, 5, x);", sqlServer},
		{"system procedure", "EXEC sp_getapplock @Resource = 'x';", sqlServer},
		{"PostgreSQL", "SELECT topic FROM outbox WHERE state = 'dead' AND key <> '' LIMIT 20;", postgres},
		{"PostgreSQL with IN and casts", "SELECT 1 WHERE 'a' IN ('a') AND '{}'::jsonb = '{}';", postgres},
	}
	for _, tt := range tests {
		if got := classify(tt.sql); got != tt.want {
			t.Errorf("%s: classify(%q) = %s, want %s", tt.name, tt.sql, got, tt.want)
		}
	}
}

func TestFill(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		sql       string
		want      string
		wantNames []string
		wantErr   bool
	}{
		{name: "values", sql: "SELECT 1 FROM outbox WHERE id = :message_id AND topic = :topic LIMIT :limit;",
			want:      "SELECT 1 FROM outbox WHERE id = '" + messageID + "' AND topic = 'order.created' LIMIT 20;",
			wantNames: []string{"message_id", "topic", "limit"}},
		{name: "casts and strings stay", sql: `SELECT '{"a":"b"}'::jsonb, ':topic', ":limit";`,
			want: `SELECT '{"a":"b"}'::jsonb, ':topic', ":limit";`},
		{name: "unknown placeholder", sql: "SELECT :nope;", wantErr: true},
		{name: "flattened comment", sql: "BEGIN; SELECT 1; -- note COMMIT;", wantErr: true},
	}
	for _, tt := range tests {
		got, names, err := fill(tt.sql)
		if (err != nil) != tt.wantErr {
			t.Errorf("%s: fill error = %v, wantErr %v", tt.name, err, tt.wantErr)
			continue
		}
		if tt.wantErr {
			continue
		}
		if got != tt.want || strings.Join(names, ",") != strings.Join(tt.wantNames, ",") {
			t.Errorf("%s: fill = %q %q, want %q %q", tt.name, got, names, tt.want, tt.wantNames)
		}
	}
}

// TestSpecSQLBlocksRun extracts every sql block of the pages, checks the blocks against the
// list counted by hand, and runs each PostgreSQL block on its own fresh migrated and seeded
// database.
func TestSpecSQLBlocksRun(t *testing.T) {
	t.Parallel()
	dir := specdocs.Dir(t)
	for page, want := range pages {
		t.Run(page, func(t *testing.T) {
			t.Parallel()
			text, err := os.ReadFile(filepath.Join(dir, page))
			if err != nil {
				t.Fatalf("reading %s: %v", page, err)
			}
			found := extract(string(text))
			pg := 0
			for _, b := range found {
				if classify(b) == postgres {
					pg++
				}
			}
			if pg != handCount[page] {
				t.Errorf("%s holds %d PostgreSQL sql blocks, counted by hand %d: the page changed; recount and update the list", page, pg, handCount[page])
			}
			if len(found) != len(want) {
				t.Fatalf("%s holds %d sql blocks, the list has %d: the page changed; update the list", page, len(found), len(want))
			}
			listed := 0
			for _, b := range want {
				if b.dialect == postgres {
					listed++
				}
			}
			if listed != handCount[page] {
				t.Fatalf("the list of %s has %d PostgreSQL blocks, the hand count says %d", page, listed, handCount[page])
			}
			ran, skipped := 0, 0
			for i, sql := range found {
				b := want[i]
				if got := classify(sql); got != b.dialect {
					t.Errorf("block %d of %s is classified %s, listed as %s: %s", i, page, got, b.dialect, squeeze(sql))
					continue
				}
				if !strings.HasPrefix(squeeze(sql), b.starts) {
					t.Errorf("block %d of %s starts %q, the list says %q: the page changed", i, page, squeeze(sql), b.starts)
					continue
				}
				if b.dialect != postgres {
					skipped++
					continue
				}
				ran++
				t.Run(fmt.Sprintf("block %02d", i), func(t *testing.T) {
					t.Parallel()
					runBlock(t, sql, b)
				})
			}
			t.Logf("%s: %d PostgreSQL blocks run, %d SQL Server blocks skipped", page, ran, skipped)
		})
	}
}

// runBlock fills the placeholders of one block, runs it on a fresh seeded database and checks
// the rows it returned or changed and its effect.
func runBlock(t *testing.T, sql string, b block) {
	t.Helper()
	filled, _, err := fill(sql)
	if err != nil {
		t.Fatalf("filling the placeholders of %q: %v", squeeze(sql), err)
	}
	db, _ := dbtest.Migrated(t)
	dbtest.Exec(t, db, seed)
	if b.setup != "" {
		dbtest.Exec(t, db, b.setup)
	}
	ctx := context.Background()
	if statements(filled) > 1 {
		// Several statements (BEGIN; ...; COMMIT;) run as one simple-protocol query, as psql
		// would send them.
		if _, err := db.Exec(ctx, filled); err != nil {
			t.Fatalf("running %q: %v", squeeze(filled), err)
		}
		if b.rows != -1 {
			t.Fatalf("the list gives a row count for a block of several statements")
		}
	} else {
		rows, err := db.Query(ctx, filled)
		if err != nil {
			t.Fatalf("running %q: %v", squeeze(filled), err)
		}
		returned := 0
		for rows.Next() {
			returned++
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			t.Fatalf("running %q: %v", squeeze(filled), err)
		}
		tag := rows.CommandTag()
		got := returned
		if tag.Insert() || tag.Update() || tag.Delete() {
			got = int(tag.RowsAffected())
		}
		if got != b.rows {
			t.Errorf("%q returned or changed %d rows, want %d", squeeze(filled), got, b.rows)
		}
	}
	if b.check != nil {
		b.check(t, db)
	}
}
