package queuebox

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/alternayte/queuebox/clients/go/internal/pgtest"
)

// testStatements loads the statements of the dialect for the default schema.
func testStatements(t *testing.T, dialect Dialect) statements {
	t.Helper()
	schema, err := DefaultSchema().resolve()
	if err != nil {
		t.Fatal(err)
	}
	stmts, err := loadStatements(dialect, schema)
	if err != nil {
		t.Fatal(err)
	}
	return stmts
}

// claimKeys runs the PostgreSQL claim on conn as one autocommit statement and returns the
// idempotency keys of the rows that it claimed.
func claimKeys(ctx context.Context, conn *sql.Conn, claim statement, batch int) ([]string, error) {
	args, err := claim.args(map[string]any{
		"source": "orders", "batch": int64(batch), "lease_ms": int64(60_000),
		"cand_limit": int64(candidateLimit(batch)),
	})
	if err != nil {
		return nil, err
	}
	rows, err := conn.QueryContext(ctx, claim.text, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var keys []string
	for rows.Next() {
		vals := make([]any, 10)
		ptrs := make([]any, 10)
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return nil, err
		}
		keys = append(keys, fmt.Sprint(vals[2]))
	}
	return keys, rows.Err()
}

// TestClaimSkipsRowsThatAnotherClaimTookWhileItRan runs two claims in the race that several
// workers on one source meet all the time: claim B reads the due rows, claim A takes the first
// ones and commits, then B locks. B must take the next heads, not lock A's rows and come back
// empty. To hold B between its snapshot and its locks, B's session resolves clock_timestamp()
// (read by the claim's clock, after the statement's snapshot) to a function that waits for an
// advisory lock that the test holds until A has committed.
func TestClaimSkipsRowsThatAnotherClaimTookWhileItRan(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	db, _ := pgtest.New(t)
	stmts := testStatements(t, DialectPostgreSQL)
	var want []string
	for i := range 20 {
		key := fmt.Sprintf("k%02d", i)
		want = append(want, key)
		if _, err := db.ExecContext(ctx, `INSERT INTO inbox (source, idempotency_key, aggregate_id, payload, consumption, created_at, scheduled_at)
			VALUES ('orders', $1, $1, '{}', 'pull', clock_timestamp() - INTERVAL '1 second' + $2 * INTERVAL '1 microsecond',
			        clock_timestamp() - INTERVAL '1 second')`, key, i); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.ExecContext(ctx, `CREATE FUNCTION public.clock_timestamp() RETURNS timestamptz LANGUAGE plpgsql AS $$
		BEGIN
			PERFORM pg_advisory_xact_lock_shared(4242);
			RETURN pg_catalog.clock_timestamp();
		END $$`); err != nil {
		t.Fatal(err)
	}

	conn := func() *sql.Conn {
		c, err := db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	gate, connA, connB := conn(), conn(), conn()
	if _, err := gate.ExecContext(ctx, `SELECT pg_advisory_lock(4242)`); err != nil {
		t.Fatal(err)
	}
	if _, err := connB.ExecContext(ctx, `SET search_path = public, pg_catalog`); err != nil {
		t.Fatal(err)
	}
	type result struct {
		keys []string
		err  error
	}
	done := make(chan result, 1)
	go func() {
		keys, err := claimKeys(ctx, connB, stmts.claim, 10)
		done <- result{keys, err}
	}()
	// Wait until B has its snapshot and waits for the gate.
	deadline := time.Now().Add(30 * time.Second)
	for {
		var waiting int
		if err := gate.QueryRowContext(ctx, `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("claim B never waited for the gate")
		}
		time.Sleep(10 * time.Millisecond)
	}
	gotA, err := claimKeys(ctx, connA, stmts.claim, 10)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(gotA, want[:10]) {
		t.Fatalf("claim A took %q, want %q", gotA, want[:10])
	}
	if _, err := gate.ExecContext(ctx, `SELECT pg_advisory_unlock(4242)`); err != nil {
		t.Fatal(err)
	}
	b := <-done
	if b.err != nil {
		t.Fatal(b.err)
	}
	slices.Sort(b.keys)
	if !slices.Equal(b.keys, want[10:]) {
		t.Errorf("claim B took %q, want the next ten heads %q", b.keys, want[10:])
	}
}
