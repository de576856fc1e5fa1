package sqlserver

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	mssql "github.com/microsoft/go-mssqldb"

	"github.com/alternayte/queuebox/migrations"
	"github.com/alternayte/queuebox/shared/store"
	"github.com/alternayte/queuebox/shared/store/storetest"
)

// serverURLVariable names the SQL Server that the integration test runs on, for example
// sqlserver://sa:Secret-1@127.0.0.1:1433. The login must be allowed to create databases.
const serverURLVariable = "QUEUEBOX_TEST_SQLSERVER_URL"

// TestStore runs the dialect-neutral behaviour suite against SQL Server. These machines cannot
// run SQL Server, so the test skips unless QUEUEBOX_TEST_SQLSERVER_URL names a server.
func TestStore(t *testing.T) {
	serverURL := os.Getenv(serverURLVariable)
	if serverURL == "" {
		t.Skip("SQL Server cannot run on this machine; set QUEUEBOX_TEST_SQLSERVER_URL to run")
	}
	storetest.Run(t, storetest.Harness{
		Open: func(t testing.TB, schema storetest.Schema) (store.Store, storetest.Hooks) {
			return openStore(t, serverURL, schema)
		},
		OpenEmpty: func(t testing.TB) *store.Driver { return openEmpty(t, serverURL) },
	})
}

// customDDL is the SQL Server "Create the tables" statement of spec/15-use-custom-tables.md.
const customDDL = `
CREATE TABLE qb_outbox (
    id UNIQUEIDENTIFIER PRIMARY KEY DEFAULT NEWID(),
    topic NVARCHAR(255) NOT NULL,
    [key] NVARCHAR(255),
    aggregate_type NVARCHAR(255),
    body NVARCHAR(MAX) NOT NULL,
    headers NVARCHAR(MAX) NOT NULL DEFAULT '{}',
    state NVARCHAR(50) NOT NULL DEFAULT 'pending',
    attempt INT NOT NULL DEFAULT 0,
    max_attempts INT NOT NULL DEFAULT 5,
    scheduled_at DATETIME2 NOT NULL DEFAULT GETUTCDATE(),
    created_at DATETIME2 NOT NULL DEFAULT GETUTCDATE(),
    updated_at DATETIME2 NOT NULL DEFAULT GETUTCDATE(),
    claimed_at DATETIME2 NULL,
    claim_token UNIQUEIDENTIFIER NULL,
    lease_expires_at DATETIME2 NULL,
    last_error NVARCHAR(MAX) NULL,
    sequence BIGINT IDENTITY(1,1) NOT NULL
);
CREATE INDEX qb_outbox_pending_scheduled ON qb_outbox (state, scheduled_at) WHERE state = 'pending';
CREATE INDEX qb_outbox_state_updated ON qb_outbox (state, updated_at);
CREATE INDEX qb_outbox_processing_claimed ON qb_outbox (claimed_at) WHERE state = 'processing';
CREATE INDEX qb_outbox_key_sequence ON qb_outbox ([key], sequence) WHERE state IN ('pending', 'processing');
CREATE TABLE qb_inbox (
    id UNIQUEIDENTIFIER PRIMARY KEY DEFAULT NEWID(),
    source NVARCHAR(255) NOT NULL,
    dedup_key NVARCHAR(255) NOT NULL,
    aggregate_id NVARCHAR(255),
    event_type NVARCHAR(255),
    payload NVARCHAR(MAX) NOT NULL,
    headers NVARCHAR(MAX) NOT NULL DEFAULT '{}',
    state NVARCHAR(50) NOT NULL DEFAULT 'pending',
    consumption VARCHAR(4) NOT NULL DEFAULT 'push' CHECK (consumption IN ('push', 'pull')),
    attempt INT NOT NULL DEFAULT 0,
    last_error NVARCHAR(MAX) NULL,
    scheduled_at DATETIME2 NOT NULL DEFAULT SYSUTCDATETIME(),
    created_at DATETIME2 NOT NULL DEFAULT GETUTCDATE(),
    processed_at DATETIME2 NULL,
    claimed_at DATETIME2 NULL,
    claim_token UNIQUEIDENTIFIER NULL,
    lease_expires_at DATETIME2 NULL,
    correlation_id NVARCHAR(128) NULL,
    CONSTRAINT qb_inbox_source_idempotency UNIQUE (source, dedup_key)
);
CREATE INDEX qb_inbox_state ON qb_inbox (state);
CREATE INDEX qb_inbox_state_created ON qb_inbox (state, created_at);
CREATE INDEX qb_inbox_aggregate_state ON qb_inbox (aggregate_id, state);
CREATE INDEX qb_inbox_processing_claimed ON qb_inbox (claimed_at) WHERE state = 'processing';
CREATE INDEX qb_inbox_consumption_pending ON qb_inbox (consumption, state, scheduled_at);
CREATE INDEX qb_inbox_pull_pending ON qb_inbox (source, scheduled_at, created_at, id) WHERE consumption = 'pull' AND state = 'pending';
CREATE INDEX qb_inbox_pull_busy ON qb_inbox (source, aggregate_id, lease_expires_at) WHERE consumption = 'pull' AND state = 'processing';
`

// incompleteDDL is customDDL without the two columns that CheckSchema checks.
var incompleteDDL = func() string {
	s := strings.Replace(customDDL, "    last_error NVARCHAR(MAX) NULL,\n    sequence BIGINT IDENTITY(1,1) NOT NULL\n", "    last_error NVARCHAR(MAX) NULL\n", 1)
	s = strings.Replace(s, "CREATE INDEX qb_outbox_key_sequence ON qb_outbox ([key], sequence) WHERE state IN ('pending', 'processing');\n", "", 1)
	return strings.Replace(s, "    payload NVARCHAR(MAX) NOT NULL,\n    headers NVARCHAR(MAX) NOT NULL DEFAULT '{}',\n", "    payload NVARCHAR(MAX) NOT NULL,\n", 1)
}()

func TestIncompleteDDLLacksTheCheckedColumns(t *testing.T) {
	t.Parallel()
	if strings.Contains(incompleteDDL, "sequence BIGINT") || strings.Contains(incompleteDDL, "([key], sequence)") ||
		strings.Count(incompleteDDL, "headers NVARCHAR") != 1 {
		t.Fatalf("incompleteDDL still has a checked column:\n%s", incompleteDDL)
	}
	if strings.Count(customDDL, "sequence BIGINT") != 1 || strings.Count(customDDL, "headers NVARCHAR") != 2 {
		t.Fatal("customDDL lost a column")
	}
}

func TestSplitBatches(t *testing.T) {
	t.Parallel()
	got := splitBatches("SET A;\nGO\n\nSELECT 1;\n  go  \nSELECT 2 -- GO here is text\n")
	want := []string{"SET A;", "SELECT 1;", "SELECT 2 -- GO here is text"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("got %q, want %q", got, want)
	}
}

// splitBatches splits a migration file at the lines that read GO, as sqlcmd does, and drops
// empty batches.
func splitBatches(sqlText string) []string {
	var out []string
	var b strings.Builder
	flush := func() {
		if s := strings.TrimSpace(b.String()); s != "" {
			out = append(out, s)
		}
		b.Reset()
	}
	for _, line := range strings.Split(sqlText, "\n") {
		if strings.EqualFold(strings.TrimSpace(line), "GO") {
			flush()
			continue
		}
		b.WriteString(line)
		b.WriteString("\n")
	}
	flush()
	return out
}

// openEmpty is the OpenEmpty of the harness: the driver of Open on a new private database
// without tables.
func openEmpty(t testing.TB, serverURL string) *store.Driver {
	t.Helper()
	d, err := Open(context.Background(), store.OpenConfig{
		ConnString: newDatabase(t, serverURL),
		PoolSize:   4,
		Names:      store.DefaultNames(),
	})
	if err != nil {
		t.Fatalf("opening the driver: %v", err)
	}
	t.Cleanup(d.Close)
	return d
}

// openStore creates a private database on the server, applies the schema, and returns a store
// on it with its hooks. The database is dropped when the test ends.
func openStore(t testing.TB, serverURL string, schema storetest.Schema) (store.Store, storetest.Hooks) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dbURL := newDatabase(t, serverURL)
	db, err := sql.Open("sqlserver", dbURL)
	if err != nil {
		t.Fatalf("opening the test database: %v", err)
	}

	names := store.DefaultNames()
	var batches []string
	switch schema {
	case storetest.SchemaMigrated:
		list, err := migrations.ListAll(migrations.SQLServer)
		if err != nil {
			t.Fatalf("listing migrations: %v", err)
		}
		for _, m := range list {
			batches = append(batches, splitBatches(m.SQL)...)
		}
	case storetest.SchemaCustom, storetest.SchemaCustomIncomplete:
		batches = []string{customDDL}
		if schema == storetest.SchemaCustomIncomplete {
			batches = []string{incompleteDDL}
		}
		// The owner of a custom schema applies the files of QueueBox's own tables as they are
		// (docs/migrations.md): they name no outbox or inbox table.
		list, err := migrations.ListTrack(migrations.QueueBox, migrations.SQLServer)
		if err != nil {
			t.Fatalf("listing the QueueBox track: %v", err)
		}
		for _, m := range list {
			batches = append(batches, splitBatches(m.SQL)...)
		}
		names = storetest.CustomNames()
	default:
		t.Fatalf("unknown schema %d", schema)
	}
	// One session for the whole schema, so that its SET options hold for every batch; the
	// filtered indexes need QUOTED_IDENTIFIER ON.
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatalf("opening a session: %v", err)
	}
	batches = append([]string{"SET ANSI_NULLS ON; SET QUOTED_IDENTIFIER ON;"}, batches...)
	for _, b := range batches {
		if _, err := conn.ExecContext(ctx, b); err != nil {
			_ = conn.Close()
			t.Fatalf("applying schema batch:\n%s\n%v", b, err)
		}
	}
	_ = conn.Close()

	s, err := New(db, names)
	if err != nil {
		t.Fatalf("creating store: %v", err)
	}
	t.Cleanup(s.Close)
	h, err := newHooks(s)
	if err != nil {
		t.Fatalf("building hooks: %v", err)
	}
	return s, h
}

// newDatabase creates a private database on the server and returns its URL. The database is
// dropped when the test ends.
func newDatabase(t testing.TB, serverURL string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	admin, err := sql.Open("sqlserver", serverURL)
	if err != nil {
		t.Fatalf("opening %s: %v", serverURLVariable, err)
	}
	defer admin.Close()
	if err := admin.PingContext(ctx); err != nil {
		t.Fatalf("SQL Server at %s does not answer: %v", serverURLVariable, err)
	}
	suffix := make([]byte, 6)
	_, _ = rand.Read(suffix)
	dbName := "queuebox_test_" + hex.EncodeToString(suffix)
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE "+quote(dbName)); err != nil {
		t.Fatalf("creating database %s: %v", dbName, err)
	}
	t.Cleanup(func() { dropDatabase(t, serverURL, dbName) })

	u, err := url.Parse(serverURL)
	if err != nil {
		t.Fatalf("parsing %s: %v", serverURLVariable, err)
	}
	q := u.Query()
	q.Set("database", dbName)
	u.RawQuery = q.Encode()
	return u.String()
}

func dropDatabase(t testing.TB, serverURL, dbName string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	admin, err := sql.Open("sqlserver", serverURL)
	if err != nil {
		t.Errorf("opening %s to drop %s: %v", serverURLVariable, dbName, err)
		return
	}
	defer admin.Close()
	stmt := fmt.Sprintf("ALTER DATABASE %[1]s SET SINGLE_USER WITH ROLLBACK IMMEDIATE; DROP DATABASE %[1]s;", quote(dbName))
	if _, err := admin.ExecContext(ctx, stmt); err != nil {
		t.Errorf("dropping database %s: %v", dbName, err)
	}
}

// hooks implements storetest.Hooks with the store's own names.
type hooks struct {
	s   *Store
	sql struct {
		now, normalizeInsert, outboxRows, inboxRows                 string
		outboxExpire, outboxAge, outboxEmptyKey, outboxExpiredClaim string
		inboxExpire, inboxAge, inboxExpiredClaim                    string
	}
}

var _ storetest.Hooks = (*hooks)(nil)

func newHooks(s *Store) (*hooks, error) {
	e := newExpander(s.names)
	h := &hooks{s: s}
	h.sql.now = `SELECT SYSUTCDATETIME();`
	// The rows of one InsertOutbox share created_at. A row without a delay is due at that
	// instant too: the bundled default GETUTCDATE() is a DATETIME, rounded to 1/300 s, which
	// can put scheduled_at a millisecond or two after SYSUTCDATETIME().
	h.sql.normalizeInsert = e.expand(`DECLARE @qb_now DATETIME2 = SYSUTCDATETIME();
UPDATE {outbox}
SET {o.created_at} = @qb_now, {o.updated_at} = @qb_now
WHERE {o.id} IN (SELECT CONVERT(UNIQUEIDENTIFIER, ids.value) FROM OPENJSON(@p1) AS ids);
UPDATE {outbox}
SET {o.scheduled_at} = @qb_now
WHERE {o.id} IN (SELECT CONVERT(UNIQUEIDENTIFIER, ids.value) FROM OPENJSON(@p2) AS ids);`)
	h.sql.outboxRows = e.expand(`SELECT {o.id}, {o.topic}, {o.key}, {o.aggregate_type}, {o.payload}, {o.headers},
    {o.state}, {o.attempt}, {o.max_attempts}, {o.scheduled_at}, {o.created_at}, {o.updated_at},
    {o.claimed_at}, {o.claim_token}, {o.lease_expires_at}, {o.last_error}, {o.sequence}
FROM {outbox}
ORDER BY {o.sequence};`)
	h.sql.inboxRows = e.expand(`SELECT {i.id}, {i.source}, {i.idempotency_key}, {i.aggregate_id}, {i.event_type},
    {i.payload}, {i.headers}, {i.correlation_id}, {i.consumption}, {i.state}, {i.attempt},
    {i.last_error}, {i.created_at}, {i.processed_at}, {i.claimed_at}, {i.claim_token},
    {i.lease_expires_at}
FROM {inbox}
ORDER BY {i.created_at}, {i.id};`)
	h.sql.outboxExpire = e.expand(`UPDATE {outbox} SET {o.lease_expires_at} = DATEADD(second, -1, SYSUTCDATETIME()) WHERE {o.id} = @p1;`)
	h.sql.outboxAge = e.expand(`UPDATE {outbox}
SET {o.created_at} = DATEADD(millisecond, @p3, DATEADD(second, @p2, {o.created_at})),
    {o.updated_at} = DATEADD(millisecond, @p3, DATEADD(second, @p2, {o.updated_at}))
WHERE {o.id} = @p1;`)
	h.sql.outboxEmptyKey = e.expand(`UPDATE {outbox} SET {o.key} = N'' WHERE {o.id} = @p1;`)
	h.sql.outboxExpiredClaim = e.expand(`UPDATE {outbox}
SET {o.state} = N'processing', {o.claim_token} = NEWID(),
    {o.claimed_at} = DATEADD(second, -2, SYSUTCDATETIME()),
    {o.lease_expires_at} = DATEADD(second, -1, SYSUTCDATETIME())
WHERE {o.id} = @p1;`)
	h.sql.inboxExpire = e.expand(`UPDATE {inbox} SET {i.lease_expires_at} = DATEADD(second, -1, SYSUTCDATETIME()) WHERE {i.id} = @p1;`)
	h.sql.inboxAge = e.expand(`UPDATE {inbox}
SET {i.created_at} = DATEADD(millisecond, @p3, DATEADD(second, @p2, {i.created_at}))
WHERE {i.id} = @p1;`)
	h.sql.inboxExpiredClaim = e.expand(`UPDATE {inbox}
SET {i.state} = N'processing', {i.claim_token} = NEWID(),
    {i.claimed_at} = DATEADD(second, -2, SYSUTCDATETIME()),
    {i.lease_expires_at} = DATEADD(second, -1, SYSUTCDATETIME())
WHERE {i.id} = @p1;`)
	if len(e.unknown) > 0 {
		return nil, fmt.Errorf("unknown template names %v", e.unknown)
	}
	return h, nil
}

func (h *hooks) DropDestinationState(ctx context.Context) error {
	_, err := h.s.db.ExecContext(ctx, "DROP TABLE "+store.DestinationStateTable+";")
	return err
}

func (h *hooks) Now(ctx context.Context) (time.Time, error) {
	var now time.Time
	err := h.s.db.QueryRowContext(ctx, h.sql.now).Scan(&now)
	return now.UTC(), err
}

func (h *hooks) InsertOutbox(ctx context.Context, rows []store.OutboxInsertParams) ([]string, error) {
	tx, err := h.s.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	defer func() { _ = tx.Rollback() }()
	ids := make([]string, 0, len(rows))
	due := []string{}
	for _, p := range rows {
		id, err := h.s.outboxInsert(ctx, txRower(tx), p)
		if err != nil {
			return nil, err
		}
		ids = append(ids, id)
		if p.Delay <= 0 {
			due = append(due, id)
		}
	}
	all, _ := json.Marshal(ids)
	dueJSON, _ := json.Marshal(due)
	if _, err := tx.ExecContext(ctx, h.sql.normalizeInsert, string(all), string(dueJSON)); err != nil {
		return nil, err
	}
	return ids, tx.Commit()
}

func (h *hooks) OutboxRows(ctx context.Context) ([]storetest.OutboxRow, error) {
	return queryAll(ctx, h.s.db, h.sql.outboxRows, nil, func(rows *sql.Rows) (storetest.OutboxRow, error) {
		var (
			r                         storetest.OutboxRow
			id                        mssql.UniqueIdentifier
			token                     mssql.NullUniqueIdentifier
			key, aggregateType, lastE sql.NullString
			payload, headers          string
			claimedAt, lease          sql.NullTime
		)
		err := rows.Scan(&id, &r.Topic, &key, &aggregateType, &payload, &headers, &r.State, &r.Attempt,
			&r.MaxAttempts, &r.ScheduledAt, &r.CreatedAt, &r.UpdatedAt, &claimedAt, &token, &lease,
			&lastE, &r.Sequence)
		r.ID = uuidString(id)
		r.Key, r.AggregateType, r.LastError = strPtr(key), strPtr(aggregateType), strPtr(lastE)
		r.Payload, r.Headers = json.RawMessage(payload), json.RawMessage(headers)
		r.ScheduledAt, r.CreatedAt, r.UpdatedAt = r.ScheduledAt.UTC(), r.CreatedAt.UTC(), r.UpdatedAt.UTC()
		r.ClaimedAt, r.LeaseExpiresAt = timePtr(claimedAt), timePtr(lease)
		if token.Valid {
			r.Token = uuidString(token.UUID)
		}
		return r, err
	})
}

func (h *hooks) InboxRows(ctx context.Context) ([]storetest.InboxRow, error) {
	return queryAll(ctx, h.s.db, h.sql.inboxRows, nil, func(rows *sql.Rows) (storetest.InboxRow, error) {
		var (
			r                                       storetest.InboxRow
			id                                      mssql.UniqueIdentifier
			token                                   mssql.NullUniqueIdentifier
			aggregateID, eventType, corrID, lastErr sql.NullString
			payload, headers                        string
			processedAt, claimedAt, lease           sql.NullTime
		)
		err := rows.Scan(&id, &r.Source, &r.IdempotencyKey, &aggregateID, &eventType, &payload, &headers,
			&corrID, &r.Consumption, &r.State, &r.Attempt, &lastErr, &r.CreatedAt, &processedAt,
			&claimedAt, &token, &lease)
		r.ID = uuidString(id)
		r.AggregateID, r.EventType, r.CorrelationID, r.LastError = strPtr(aggregateID), strPtr(eventType), strPtr(corrID), strPtr(lastErr)
		r.Payload, r.Headers = json.RawMessage(payload), json.RawMessage(headers)
		r.CreatedAt = r.CreatedAt.UTC()
		r.ProcessedAt, r.ClaimedAt, r.LeaseExpiresAt = timePtr(processedAt), timePtr(claimedAt), timePtr(lease)
		if token.Valid {
			r.Token = uuidString(token.UUID)
		}
		return r, err
	})
}

func (h *hooks) ChangeOutbox(ctx context.Context, id string, c storetest.Change) error {
	return h.change(ctx, id, c, h.sql.outboxExpiredClaim, h.sql.outboxExpire, h.sql.outboxAge, h.sql.outboxEmptyKey)
}

func (h *hooks) ChangeInbox(ctx context.Context, id string, c storetest.Change) error {
	if c.EmptyKey {
		return errors.New("the inbox has no key column")
	}
	return h.change(ctx, id, c, h.sql.inboxExpiredClaim, h.sql.inboxExpire, h.sql.inboxAge, "")
}

func (h *hooks) change(ctx context.Context, id string, c storetest.Change, expiredClaim, expire, age, emptyKey string) error {
	exec := func(query string, args ...any) error {
		res, err := h.s.db.ExecContext(ctx, query, args...)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n != 1 {
			return fmt.Errorf("row %s: changed %d rows", id, n)
		}
		return nil
	}
	if c.ExpiredClaim {
		if err := exec(expiredClaim, id); err != nil {
			return err
		}
	}
	if c.ExpireLease {
		if err := exec(expire, id); err != nil {
			return err
		}
	}
	if c.Age != 0 {
		seconds, millis, err := splitDuration(-c.Age)
		if err != nil {
			return err
		}
		if err := exec(age, id, seconds, millis); err != nil {
			return err
		}
	}
	if c.EmptyKey {
		if err := exec(emptyKey, id); err != nil {
			return err
		}
	}
	return nil
}

func strPtr(s sql.NullString) *string {
	if !s.Valid {
		return nil
	}
	return &s.String
}

func timePtr(t sql.NullTime) *time.Time {
	if !t.Valid {
		return nil
	}
	u := t.Time.UTC()
	return &u
}

// TestHookStatements checks the statements of the harness as the store's own are checked, so
// that a fault in the harness does not pass for a fault of the store on a server.
func TestHookStatements(t *testing.T) {
	t.Parallel()
	for _, names := range []store.Names{store.DefaultNames(), storetest.CustomNames(), renamedNames()} {
		db := sql.OpenDB(&fakeDB{answer: func(string, []any) fakeAnswer { return fakeAnswer{} }})
		t.Cleanup(func() { _ = db.Close() })
		s, err := New(db, names)
		if err != nil {
			t.Fatalf("creating store: %v", err)
		}
		h, err := newHooks(s)
		if err != nil {
			t.Fatalf("building hooks: %v", err)
		}
		for _, tc := range []struct {
			text  string
			nargs int
		}{
			{h.sql.now, 0}, {h.sql.normalizeInsert, 2}, {h.sql.outboxRows, 0}, {h.sql.inboxRows, 0},
			{h.sql.outboxExpire, 1}, {h.sql.outboxAge, 3}, {h.sql.outboxEmptyKey, 1}, {h.sql.outboxExpiredClaim, 1},
			{h.sql.inboxExpire, 1}, {h.sql.inboxAge, 3}, {h.sql.inboxExpiredClaim, 1},
		} {
			if err := checkBalanced(tc.text); err != nil {
				t.Errorf("%v:\n%s", err, tc.text)
			}
			if err := checkVariables(tc.text, tc.nargs); err != nil {
				t.Errorf("%v:\n%s", err, tc.text)
			}
		}
	}
}
