package outbox_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/alternayte/queuebox/clients/go/internal/pgtest"
	"github.com/alternayte/queuebox/clients/go/outbox"
)

type order struct {
	OrderID string  `json:"orderId"`
	Amount  float64 `json:"amount"`
}

// outboxRow is what the tests read back from the table.
type outboxRow struct {
	state, payloadType, payload, headers string
	key, aggregateType                   sql.NullString
	maxAttempts                          int
	delay                                time.Duration
}

func readRow(t *testing.T, db *sql.DB, table, payloadColumn, id string) outboxRow {
	t.Helper()
	var r outboxRow
	var delayMS float64
	err := db.QueryRow(fmt.Sprintf(`SELECT state, jsonb_typeof(%[2]s), %[2]s::text, headers::text, key, aggregate_type, max_attempts,
		EXTRACT(EPOCH FROM (scheduled_at - created_at)) * 1000 FROM %[1]s WHERE id = $1`, table, payloadColumn), id).
		Scan(&r.state, &r.payloadType, &r.payload, &r.headers, &r.key, &r.aggregateType, &r.maxAttempts, &delayMS)
	if err != nil {
		t.Fatalf("reading the row %s: %v", id, err)
	}
	r.delay = time.Duration(delayMS) * time.Millisecond
	return r
}

func countRows(t *testing.T, db *sql.DB, table, topic string) int {
	t.Helper()
	var n int
	if err := db.QueryRow(`SELECT count(*) FROM `+table+` WHERE topic = $1`, topic).Scan(&n); err != nil {
		t.Fatalf("counting rows: %v", err)
	}
	return n
}

func jsonEqual(t *testing.T, got []byte, want any) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("unmarshalling %s: %v", got, err)
	}
	wb, _ := json.Marshal(want)
	_ = json.Unmarshal(wb, &w)
	if !reflect.DeepEqual(g, w) {
		t.Fatalf("JSON = %s, want %s", got, wb)
	}
}

// TestEnqueueDeliveredByQueueBox writes rows with both transaction types in committed and
// rolled-back transactions, on a database that queuebox serve migrates, and checks that
// QueueBox delivers exactly the committed rows, with their payload and headers.
func TestEnqueueDeliveredByQueueBox(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	d, err := pgtest.Create(ctx, t.Name())
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	t.Cleanup(func() { _ = d.Drop(context.Background()) })
	rcv := newReceiver(t)
	startQueueBox(t, d.URL, "  migrate: true", rcv)

	db, err := sql.Open("pgx", d.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	conn, err := pgx.Connect(ctx, d.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := db.ExecContext(ctx, `CREATE TABLE orders (id TEXT PRIMARY KEY, amount NUMERIC NOT NULL)`); err != nil {
		t.Fatal(err)
	}

	// 1. pgx.Tx, committed: the business row and the message.
	created := order{OrderID: "11111111", Amount: 99.99}
	ptx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ptx.Exec(ctx, `INSERT INTO orders (id, amount) VALUES ($1, $2)`, created.OrderID, created.Amount); err != nil {
		t.Fatal(err)
	}
	createdID, err := outbox.Enqueue(ctx, ptx, outbox.Message{
		Topic: "order.created", Key: "cust-42", Payload: created, AggregateType: "order",
		Headers: map[string]string{"X-Tenant": "acme"}, MaxAttempts: 7,
	})
	if err != nil {
		t.Fatalf("Enqueue in a pgx.Tx: %v", err)
	}
	if err := ptx.Commit(ctx); err != nil {
		t.Fatal(err)
	}

	// 2. pgx.Tx, rolled back: neither row exists.
	ptx, err = conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ptx.Exec(ctx, `INSERT INTO orders (id, amount) VALUES ('22222222', 1)`); err != nil {
		t.Fatal(err)
	}
	if _, err := outbox.Enqueue(ctx, ptx, outbox.Message{Topic: "order.cancelled", Key: "cust-42", Payload: order{OrderID: "22222222"}}); err != nil {
		t.Fatalf("Enqueue before a rollback: %v", err)
	}
	if err := ptx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}

	// 3. *sql.Tx, committed, JSON text as json.RawMessage, no headers, a delay.
	stx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	paidID, err := outbox.Enqueue(ctx, stx, outbox.Message{
		Topic: "order.paid", Payload: json.RawMessage(`{"orderId":"11111111","paid":true}`), Delay: 1500 * time.Millisecond,
	})
	if err != nil {
		t.Fatalf("Enqueue in a *sql.Tx: %v", err)
	}
	if err := stx.Commit(); err != nil {
		t.Fatal(err)
	}

	// 4. *sql.Tx, rolled back.
	stx, err = db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := outbox.Enqueue(ctx, stx, outbox.Message{Topic: "order.refunded", Payload: map[string]int{"n": 1}}); err != nil {
		t.Fatal(err)
	}
	if err := stx.Rollback(); err != nil {
		t.Fatal(err)
	}

	for _, topic := range []string{"order.cancelled", "order.refunded"} {
		if n := countRows(t, db, "outbox", topic); n != 0 {
			t.Errorf("%d %s rows after the rollback, want 0", n, topic)
		}
	}
	var orders int
	if err := db.QueryRow(`SELECT count(*) FROM orders`).Scan(&orders); err != nil || orders != 1 {
		t.Errorf("orders = %d (%v), want 1: the committed business row only", orders, err)
	}

	waitFor(t, "QueueBox to send both committed rows", 60*time.Second, func() bool {
		var sent int
		_ = db.QueryRow(`SELECT count(*) FROM outbox WHERE state = 'sent'`).Scan(&sent)
		return sent == 2
	})
	got := rcv.deliveries()
	if len(got) != 2 {
		t.Fatalf("the receiver got %d requests, want 2", len(got))
	}
	byTopic := map[string]delivery{}
	for _, g := range got {
		var body map[string]any
		_ = json.Unmarshal(g.Body, &body)
		if _, ok := body["paid"]; ok {
			byTopic["order.paid"] = g
		} else {
			byTopic["order.created"] = g
		}
	}
	jsonEqual(t, byTopic["order.created"].Body, created)
	if h := byTopic["order.created"].Headers.Get("X-Tenant"); h != "acme" {
		t.Errorf("X-Tenant header = %q, want acme", h)
	}
	jsonEqual(t, byTopic["order.paid"].Body, map[string]any{"orderId": "11111111", "paid": true})

	row := readRow(t, db, "outbox", "payload", createdID)
	if row.payloadType != "object" || row.key.String != "cust-42" || row.aggregateType.String != "order" ||
		row.maxAttempts != 7 || row.headers != `{"X-Tenant": "acme"}` || row.delay != 0 {
		t.Errorf("order.created row = %+v", row)
	}
	row = readRow(t, db, "outbox", "payload", paidID)
	if row.payloadType != "object" || row.key.Valid || row.aggregateType.Valid || row.maxAttempts != 5 ||
		row.headers != "{}" || row.delay != 1500*time.Millisecond {
		t.Errorf("order.paid row = %+v: want an object payload, NULL key and aggregate type, the default 5 attempts, headers {}, a 1.5 s delay", row)
	}
}

// customTables is the PostgreSQL schema of spec/15 ("Create the tables"), with the outbox
// payload column renamed to body and the inbox idempotency key to dedup_key.
const customTables = `
CREATE TABLE qb_outbox ( id UUID PRIMARY KEY DEFAULT gen_random_uuid(), topic VARCHAR(255) NOT NULL, key VARCHAR(255), aggregate_type VARCHAR(255), body JSONB NOT NULL, headers JSONB NOT NULL DEFAULT '{}', state VARCHAR(50) NOT NULL DEFAULT 'pending', attempt INTEGER NOT NULL DEFAULT 0, max_attempts INTEGER NOT NULL DEFAULT 5, scheduled_at TIMESTAMPTZ NOT NULL DEFAULT CURRENT_TIMESTAMP, created_at TIMESTAMPTZ NOT NULL DEFAULT CURRENT_TIMESTAMP, updated_at TIMESTAMPTZ NOT NULL DEFAULT CURRENT_TIMESTAMP, claimed_at TIMESTAMPTZ, claim_token UUID, lease_expires_at TIMESTAMPTZ, last_error TEXT, sequence BIGINT GENERATED BY DEFAULT AS IDENTITY );
CREATE INDEX qb_outbox_key_sequence ON qb_outbox (key, sequence) WHERE state IN ('pending', 'processing');
CREATE TABLE qb_inbox ( id UUID PRIMARY KEY DEFAULT gen_random_uuid(), source VARCHAR(255) NOT NULL, dedup_key VARCHAR(255) NOT NULL, aggregate_id VARCHAR(255), event_type VARCHAR(255), payload JSONB NOT NULL, headers JSONB NOT NULL DEFAULT '{}', state VARCHAR(50) NOT NULL DEFAULT 'pending', consumption VARCHAR(4) NOT NULL DEFAULT 'push' CHECK (consumption IN ('push', 'pull')), attempt INT NOT NULL DEFAULT 0, last_error TEXT, scheduled_at TIMESTAMPTZ NOT NULL DEFAULT CURRENT_TIMESTAMP, created_at TIMESTAMPTZ NOT NULL DEFAULT CURRENT_TIMESTAMP, processed_at TIMESTAMPTZ, claimed_at TIMESTAMPTZ, claim_token UUID, lease_expires_at TIMESTAMPTZ, correlation_id VARCHAR(128), CONSTRAINT qb_inbox_source_idempotency UNIQUE (source, dedup_key) );
`

// TestEnqueueCustomNamesDeliveredByQueueBox writes into the renamed tables of spec/15 with a
// Writer whose Schema carries the same names as QueueBox's database.columnMapping, and checks
// that QueueBox delivers the row.
func TestEnqueueCustomNamesDeliveredByQueueBox(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	d, err := pgtest.Create(ctx, t.Name())
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	t.Cleanup(func() { _ = d.Drop(context.Background()) })
	db, err := sql.Open("pgx", d.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, customTables); err != nil {
		t.Fatalf("creating the tables of spec/15: %v", err)
	}
	rcv := newReceiver(t)
	startQueueBox(t, d.URL, `  migrate: false
  outboxTableName: qb_outbox
  inboxTableName: qb_inbox
  columnMapping:
    outbox:
      payload: body
    inbox:
      idempotencyKey: dedup_key`, rcv)

	w, err := outbox.New(outbox.Config{Schema: outbox.Schema{Table: "qb_outbox", Payload: "body"}})
	if err != nil {
		t.Fatal(err)
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	id, err := w.Enqueue(ctx, tx, outbox.Message{Topic: "order.created", Key: "cust-7", Payload: order{OrderID: "33333333", Amount: 12}})
	if err != nil {
		t.Fatalf("Enqueue into qb_outbox: %v", err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "QueueBox to send the qb_outbox row", 60*time.Second, func() bool {
		var state string
		_ = db.QueryRow(`SELECT state FROM qb_outbox WHERE id = $1`, id).Scan(&state)
		return state == "sent"
	})
	got := rcv.deliveries()
	if len(got) != 1 {
		t.Fatalf("the receiver got %d requests, want 1", len(got))
	}
	jsonEqual(t, got[0].Body, order{OrderID: "33333333", Amount: 12})
	row := readRow(t, db, "qb_outbox", "body", id)
	if row.payloadType != "object" || row.headers != "{}" || row.key.String != "cust-7" {
		t.Errorf("qb_outbox row = %+v", row)
	}
}

// TestEnqueueRefusesPitfalls checks that each pitfall of spec/17 fails with ErrInvalidMessage
// and a text that names it, and that nothing reaches the table.
func TestEnqueueRefusesPitfalls(t *testing.T) {
	db, _ := pgtest.New(t)
	ctx := context.Background()
	payloadJSON, _ := json.Marshal(order{OrderID: "1"})
	cases := []struct {
		name    string
		message outbox.Message
		want    string
	}{
		{"payload is a Go string of JSON", outbox.Message{Topic: "order.created", Payload: string(payloadJSON)}, "encoded twice"},
		{"payload is JSON text of a JSON string", outbox.Message{Topic: "order.created", Payload: json.RawMessage(`"{\"orderId\":\"1\"}"`)}, "encoded twice"},
		{"payload is a string of a JSON array", outbox.Message{Topic: "order.created", Payload: `[1,2]`}, "encoded twice"},
		{"payload is nil", outbox.Message{Topic: "order.created"}, "Payload is required"},
		{"payload is JSON null", outbox.Message{Topic: "order.created", Payload: json.RawMessage("null")}, "JSON null"},
		{"payload is a nil pointer", outbox.Message{Topic: "order.created", Payload: (*order)(nil)}, "JSON null"},
		{"payload bytes are not JSON", outbox.Message{Topic: "order.created", Payload: []byte("not json")}, "not valid JSON"},
		{"payload cannot be marshalled", outbox.Message{Topic: "order.created", Payload: map[string]any{"f": func() {}}}, "cannot be encoded"},
		{"no topic", outbox.Message{Payload: order{}}, "Topic is required"},
		{"topic too long", outbox.Message{Topic: strings.Repeat("t", 256), Payload: order{}}, "Topic has 256 characters"},
		{"key too long", outbox.Message{Topic: "order.created", Key: strings.Repeat("k", 256), Payload: order{}}, "Key has 256 characters"},
		{"aggregate type too long", outbox.Message{Topic: "order.created", AggregateType: strings.Repeat("a", 300), Payload: order{}}, "AggregateType has 300 characters"},
		{"header name", outbox.Message{Topic: "order.created", Payload: order{}, Headers: map[string]string{"X Tenant": "a"}}, `name "X Tenant" is not an HTTP field name`},
		{"header value", outbox.Message{Topic: "order.created", Payload: order{}, Headers: map[string]string{"X-A": "a\r\nX-B: b"}}, "CR, LF or NUL"},
		{"negative max attempts", outbox.Message{Topic: "order.created", Payload: order{}, MaxAttempts: -1}, "MaxAttempts -1 is outside 1 to 2147483647"},
		{"max attempts above int4", outbox.Message{Topic: "order.created", Payload: order{}, MaxAttempts: 1 << 31}, "MaxAttempts 2147483648 is outside"},
		{"negative delay", outbox.Message{Topic: "order.created", Payload: order{}, Delay: -time.Second}, "Delay -1s is outside 0 to 8760h0m0s"},
		{"delay beyond a year", outbox.Message{Topic: "order.created", Payload: order{}, Delay: 366 * 24 * time.Hour}, "Delay 8784h0m0s is outside"},
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := outbox.Enqueue(ctx, tx, c.message)
			if !errors.Is(err, outbox.ErrInvalidMessage) {
				t.Fatalf("Enqueue error = %v, want ErrInvalidMessage", err)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Enqueue error = %q, want it to contain %q", err, c.want)
			}
		})
	}
	if err := tx.Commit(); err != nil {
		t.Fatalf("the transaction is still usable after the refusals, so it commits: %v", err)
	}
	var n int
	if err := db.QueryRow(`SELECT count(*) FROM outbox`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("outbox rows = %d (%v), want 0", n, err)
	}

	// Plain values that look like JSON only inside are not refused: a payload may be a string.
	tx, err = db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	for _, p := range []any{"hello", "42", 42, []int{1, 2}, json.RawMessage(` {"a":1} `)} {
		if _, err := outbox.Enqueue(ctx, tx, outbox.Message{Topic: "order.created", Payload: p}); err != nil {
			t.Errorf("Enqueue of payload %#v: %v", p, err)
		}
	}
}

// TestEnqueueRefusesWhatIsNotATransaction checks that a pool, a *sql.DB, nil and a pgx.Tx on
// a SQL Server Writer are refused with ErrNotTransaction.
func TestEnqueueRefusesWhatIsNotATransaction(t *testing.T) {
	db, d := pgtest.New(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, d.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	m := outbox.Message{Topic: "order.created", Payload: order{}}
	for _, tx := range []any{db, conn, nil, (*sql.Tx)(nil), "tx"} {
		if _, err := outbox.Enqueue(ctx, tx, m); !errors.Is(err, outbox.ErrNotTransaction) {
			t.Errorf("Enqueue with %T: error = %v, want ErrNotTransaction", tx, err)
		}
	}
	w, err := outbox.New(outbox.Config{Dialect: outbox.DialectSQLServer})
	if err != nil {
		t.Fatal(err)
	}
	ptx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ptx.Rollback(ctx) }()
	if _, err := w.Enqueue(ctx, ptx, m); !errors.Is(err, outbox.ErrNotTransaction) || !strings.Contains(err.Error(), "sqlserver") {
		t.Errorf("a pgx.Tx on a SQL Server Writer: error = %v, want ErrNotTransaction naming sqlserver", err)
	}
	var n int
	if err := db.QueryRow(`SELECT count(*) FROM outbox`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("outbox rows = %d (%v), want 0", n, err)
	}
}

// TestEnqueueQuotesMixedCaseNames writes a table whose names need quoting (mixed case, a
// reserved word), which only works when every name is quoted as an identifier.
func TestEnqueueQuotesMixedCaseNames(t *testing.T) {
	db, _ := pgtest.New(t)
	ctx := context.Background()
	if _, err := db.ExecContext(ctx, `CREATE TABLE "AppOutbox" ("Id" UUID PRIMARY KEY DEFAULT gen_random_uuid(), "Topic" TEXT NOT NULL, "order" TEXT, "Kind" TEXT,
		"Body" JSONB NOT NULL, "Meta" JSONB NOT NULL DEFAULT '{}', "Tries" INT NOT NULL DEFAULT 5, "Due" TIMESTAMPTZ NOT NULL DEFAULT CURRENT_TIMESTAMP)`); err != nil {
		t.Fatal(err)
	}
	w, err := outbox.New(outbox.Config{Schema: outbox.Schema{Table: "AppOutbox", ID: "Id", Topic: "Topic", Key: "order",
		AggregateType: "Kind", Payload: "Body", Headers: "Meta", MaxAttempts: "Tries", ScheduledAt: "Due"}})
	if err != nil {
		t.Fatal(err)
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	id, err := w.Enqueue(ctx, tx, outbox.Message{Topic: "order.created", Key: "k", AggregateType: "order", Payload: order{OrderID: "9"},
		Headers: map[string]string{"X-A": "1"}, MaxAttempts: 2, Delay: time.Minute})
	if err != nil {
		t.Fatalf("Enqueue: %v", err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	var key, kind, body, meta string
	var tries int
	var ahead bool
	if err := db.QueryRow(`SELECT "order", "Kind", "Body"::text, "Meta"::text, "Tries", "Due" > now() + INTERVAL '50 seconds' FROM "AppOutbox" WHERE "Id" = $1`, id).
		Scan(&key, &kind, &body, &meta, &tries, &ahead); err != nil {
		t.Fatal(err)
	}
	if key != "k" || kind != "order" || body != `{"amount": 0, "orderId": "9"}` || meta != `{"X-A": "1"}` || tries != 2 || !ahead {
		t.Errorf("row = %q %q %s %s %d %v", key, kind, body, meta, tries, ahead)
	}
}

// TestNewRefusesBadNames checks that a name that is not an identifier or is used twice is
// refused, and an unknown dialect.
func TestNewRefusesBadNames(t *testing.T) {
	_, err := outbox.New(outbox.Config{Schema: outbox.Schema{Table: `outbox"; DROP TABLE orders; --`, Payload: "Topic"}})
	if err == nil || !strings.Contains(err.Error(), `Schema.Table "outbox\"; DROP TABLE orders; --" is not a SQL identifier`) ||
		!strings.Contains(err.Error(), `Schema.Payload "Topic" is also the name of Schema.Topic`) {
		t.Errorf("New error = %v", err)
	}
	if _, err := outbox.New(outbox.Config{Dialect: "mysql"}); err == nil || !strings.Contains(err.Error(), `Dialect "mysql"`) {
		t.Errorf("New with mysql: error = %v", err)
	}
}

// TestStatements pins the text of the INSERT of both dialects.
func TestStatements(t *testing.T) {
	pg, err := outbox.New(outbox.Config{})
	if err != nil {
		t.Fatal(err)
	}
	ms, err := outbox.New(outbox.Config{Dialect: outbox.DialectSQLServer, Schema: outbox.Schema{Table: "qb_outbox", Payload: "body"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		got, want string
	}{
		{pg.Statement(false, false), `INSERT INTO "outbox" ("topic", "key", "aggregate_type", "payload", "headers") VALUES ($1, $2, $3, $4, $5) RETURNING CAST("id" AS TEXT)`},
		{pg.Statement(true, true), `INSERT INTO "outbox" ("topic", "key", "aggregate_type", "payload", "headers", "max_attempts", "scheduled_at") VALUES ($1, $2, $3, $4, $5, $6, CURRENT_TIMESTAMP + CAST($7 AS BIGINT) * INTERVAL '1 millisecond') RETURNING CAST("id" AS TEXT)`},
		{pg.Statement(false, true), `INSERT INTO "outbox" ("topic", "key", "aggregate_type", "payload", "headers", "scheduled_at") VALUES ($1, $2, $3, $4, $5, CURRENT_TIMESTAMP + CAST($6 AS BIGINT) * INTERVAL '1 millisecond') RETURNING CAST("id" AS TEXT)`},
		{ms.Statement(false, false), `INSERT INTO [qb_outbox] ([topic], [key], [aggregate_type], [body], [headers]) OUTPUT CAST(INSERTED.[id] AS NVARCHAR(64)) VALUES (@p1, @p2, @p3, @p4, @p5)`},
		{ms.Statement(true, false), `INSERT INTO [qb_outbox] ([topic], [key], [aggregate_type], [body], [headers], [max_attempts]) OUTPUT CAST(INSERTED.[id] AS NVARCHAR(64)) VALUES (@p1, @p2, @p3, @p4, @p5, @p6)`},
		{ms.Statement(true, true), `INSERT INTO [qb_outbox] ([topic], [key], [aggregate_type], [body], [headers], [max_attempts], [scheduled_at]) OUTPUT CAST(INSERTED.[id] AS NVARCHAR(64)) VALUES (@p1, @p2, @p3, @p4, @p5, @p6, DATEADD(MILLISECOND, CAST(@p8 AS INT), DATEADD(SECOND, CAST(@p7 AS INT), SYSUTCDATETIME())))`},
	} {
		if c.got != c.want {
			t.Errorf("statement\n got %s\nwant %s", c.got, c.want)
		}
	}
}

// TestEncodePayloadAndHeaders pins the JSON that the two helpers produce.
func TestEncodePayloadAndHeaders(t *testing.T) {
	p, err := outbox.EncodePayload(order{OrderID: "1", Amount: 2})
	if err != nil || p != `{"orderId":"1","amount":2}` {
		t.Errorf("EncodePayload = %s, %v", p, err)
	}
	h, err := outbox.EncodeHeaders(nil)
	if err != nil || h != "{}" {
		t.Errorf("EncodeHeaders(nil) = %s, %v", h, err)
	}
	h, err = outbox.EncodeHeaders(map[string]string{"b": "2", "a": "1"})
	if err != nil || h != `{"a":"1","b":"2"}` {
		t.Errorf("EncodeHeaders = %s, %v", h, err)
	}
}
