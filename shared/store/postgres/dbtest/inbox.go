package dbtest

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// InboxRow is one row of the inbox table as the tests read it; the nullable text columns
// read as "" when they are NULL.
type InboxRow struct {
	// IdempotencyKey is the idempotency_key column.
	IdempotencyKey string
	// State is the state column: pending, processing, done or dead.
	State string
	// AggregateID is the aggregate_id column.
	AggregateID string
	// EventType is the event_type column.
	EventType string
	// CorrelationID is the correlation_id column.
	CorrelationID string
	// LastError is the last_error column.
	LastError string
	// Payload is the payload column, as PostgreSQL prints the JSON.
	Payload json.RawMessage
	// Headers is the headers column, as PostgreSQL prints the JSON.
	Headers json.RawMessage
}

// InboxRows returns the inbox rows of source in the order they were created, and fails the
// test when they cannot be read.
func InboxRows(t testing.TB, pool *pgxpool.Pool, source string) []InboxRow {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT idempotency_key, state, coalesce(aggregate_id, ''),
		coalesce(event_type, ''), coalesce(correlation_id, ''), coalesce(last_error, ''), payload, headers
		FROM inbox WHERE source = $1 ORDER BY created_at, id`, source)
	if err != nil {
		t.Fatalf("dbtest: reading inbox rows: %v", err)
	}
	defer rows.Close()
	var out []InboxRow
	for rows.Next() {
		var r InboxRow
		if err := rows.Scan(&r.IdempotencyKey, &r.State, &r.AggregateID, &r.EventType, &r.CorrelationID, &r.LastError, &r.Payload, &r.Headers); err != nil {
			t.Fatalf("dbtest: scanning an inbox row: %v", err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("dbtest: reading inbox rows: %v", err)
	}
	return out
}

// WaitInboxRows waits until source holds at least n inbox rows and returns them (InboxRows);
// it fails the test when they are not there within limit, which bounds the wait and is no
// speed assertion.
func WaitInboxRows(t testing.TB, pool *pgxpool.Pool, source string, n int, limit time.Duration) []InboxRow {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		rs := InboxRows(t, pool, source)
		if len(rs) >= n {
			return rs
		}
		if time.Now().After(deadline) {
			t.Fatalf("source %s holds %d inbox rows after %s, want %d", source, len(rs), limit, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
