package postgres

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/alternayte/queuebox/shared/store"
	"github.com/alternayte/queuebox/shared/store/postgres/dbtest"
	"github.com/alternayte/queuebox/shared/store/storetest"
)

// TestOutboxClaimStopsAtTheFirstRowNotDue checks that the claim's scan is bounded by the due
// time: with 5 000 pending rows scheduled an hour ahead (rows waiting for a retry while their
// destination is down), a claim reads a handful of index pages, not every waiting row, and
// still claims the one row that is due.
func TestOutboxClaimStopsAtTheFirstRowNotDue(t *testing.T) {
	s, _ := openStore(t, storetest.SchemaMigrated)
	ps := s.(*Store)
	ctx := context.Background()
	dbtest.Exec(t, ps.pool.pool, `
INSERT INTO outbox (topic, key, payload, scheduled_at)
SELECT 'later', CASE WHEN g % 2 = 0 THEN 'k' || (g % 50) END, '{"n":1}', now() + interval '1 hour'
FROM generate_series(1, 5000) AS g`)
	dbtest.Exec(t, ps.pool.pool, `VACUUM ANALYZE outbox`)

	blocks := func() int {
		t.Helper()
		tx, err := ps.pool.pool.Begin(ctx)
		require.NoError(t, err)
		defer func() { _ = tx.Rollback(ctx) }()
		var plan []byte
		require.NoError(t, tx.QueryRow(ctx, "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) "+ps.sql.outboxClaim,
			100, micros(time.Minute)).Scan(&plan))
		var out []struct {
			Plan struct {
				Hit  int `json:"Shared Hit Blocks"`
				Read int `json:"Shared Read Blocks"`
			} `json:"Plan"`
		}
		require.NoError(t, json.Unmarshal(plan, &out), "the plan: %s", plan)
		require.Len(t, out, 1)
		return out[0].Plan.Hit + out[0].Plan.Read
	}
	// Reading every waiting row touches hundreds of heap and index pages; the bounded scan
	// reads the first leaf of the index and stops.
	got := blocks()
	require.Less(t, got, 20, "the claim read %d blocks with no row due among 5 000", got)

	msgs, err := ps.OutboxClaim(ctx, store.OutboxClaimParams{Limit: 100, Lease: time.Minute})
	require.NoError(t, err)
	require.Empty(t, msgs, "no row is due")

	id, err := ps.OutboxInsert(ctx, store.OutboxInsertParams{Topic: "now", Payload: []byte(`{"n":2}`)})
	require.NoError(t, err)
	msgs, err = ps.OutboxClaim(ctx, store.OutboxClaimParams{Limit: 100, Lease: time.Minute})
	require.NoError(t, err)
	require.Len(t, msgs, 1, "the due row is claimed, the 5 000 waiting rows are not")
	require.Equal(t, id, msgs[0].ID)
}
