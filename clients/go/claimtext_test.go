package queuebox

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/alternayte/queuebox/clients/go/internal/pgtest"
)

// TestClaimTextsWriteTheLimitsIn checks the rendering: the limits become integers in the text,
// the other parameters stay placeholders numbered from 1, and past the bound, or on SQL Server,
// the claim binds every parameter.
func TestClaimTextsWriteTheLimitsIn(t *testing.T) {
	stmts := testStatements(t, DialectPostgreSQL)
	var c claimTexts
	st := c.statement(stmts.claim, 40)
	if got, want := strings.Join(st.params, ","), "source,lease_ms"; got != want {
		t.Fatalf("parameters with the limits written in: %s, want %s", got, want)
	}
	for _, want := range []string{"LIMIT CAST(120 AS INTEGER)", "LIMIT CAST(40 AS INTEGER)", "CAST($1 AS TEXT)", "CAST($2 AS BIGINT)"} {
		if !strings.Contains(st.text, want) {
			t.Errorf("the claim for 40 rows lacks %q:\n%s", want, st.text)
		}
	}
	if strings.Contains(st.text, "$3") {
		t.Errorf("the claim for 40 rows still has a third placeholder:\n%s", st.text)
	}
	if again := c.statement(stmts.claim, 40); again.text != st.text {
		t.Error("a second claim of 40 rows got another text")
	}
	for batch := 1; batch <= maxClaimTexts+5; batch++ {
		got := c.statement(stmts.claim, batch)
		inlined := len(got.params) == 2
		if want := batch < maxClaimTexts || batch == 40; inlined != want {
			t.Errorf("batch %d: limits written in %v, want %v (bound %d)", batch, inlined, want, maxClaimTexts)
		}
	}
	if len(c.texts) != maxClaimTexts {
		t.Errorf("%d texts kept, want the bound %d", len(c.texts), maxClaimTexts)
	}
	mssql := testStatements(t, DialectSQLServer)
	var m claimTexts
	if got := m.statement(mssql.claim, 10); got.text != mssql.claim.text {
		t.Error("the SQL Server claim was rewritten")
	}
}

// TestClaimIsPreparedWithTheLimitsInTheText runs a worker's claims on one connection of the
// real server and reads how the driver prepared them: the lease and the source are the only
// parameters. Whether PostgreSQL then keeps a generic plan is its own choice (it moves with the
// table's size and statistics), so the plan counts are logged, not asserted.
func TestClaimIsPreparedWithTheLimitsInTheText(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	db, _ := pgtest.New(t)
	if _, err := db.ExecContext(ctx, `INSERT INTO inbox (source, idempotency_key, aggregate_id, payload, consumption)
		SELECT 'orders', 'k' || i, 'a' || i, '{}', 'pull' FROM generate_series(1, 20000) AS i`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `ANALYZE inbox`); err != nil {
		t.Fatal(err)
	}
	w, err := NewInboxWorker(db, Options{Source: "orders"})
	if err != nil {
		t.Fatal(err)
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	claimed := 0
	for range 12 {
		keys, err := claimKeys(ctx, conn, w.claims.statement(w.stmts.claim, 10), 10)
		if err != nil {
			t.Fatal(err)
		}
		claimed += len(keys)
	}
	if claimed != 12*10 {
		t.Fatalf("12 claims of 10 rows over 600 aggregates claimed %d rows, want 120", claimed)
	}
	var types string
	var generic, custom int64
	err = conn.QueryRowContext(ctx, `SELECT parameter_types::text, generic_plans, custom_plans
		FROM pg_prepared_statements WHERE statement LIKE '-- QueueBox pull claim%'`).Scan(&types, &generic, &custom)
	if err != nil {
		t.Fatalf("reading the prepared claim: %v", err)
	}
	if types != "{text,bigint}" {
		t.Errorf("the claim was prepared with parameters %s, want {text,bigint}: the source and the lease", types)
	}
	t.Logf("12 claims: %d generic plans, %d custom plans", generic, custom)
}
