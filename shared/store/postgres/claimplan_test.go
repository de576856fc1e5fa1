package postgres

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
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
	ps := storeWith(t, `
INSERT INTO outbox (topic, key, payload, scheduled_at)
SELECT 'later', CASE WHEN g % 2 = 0 THEN 'k' || (g % 50) END, '{"n":1}', now() + interval '1 hour'
FROM generate_series(1, 5000) AS g`)
	ctx := context.Background()

	// Reading every waiting row touches hundreds of heap and index pages; the bounded scan
	// reads the first leaf of the index and stops.
	got := claimBlocks(t, ps, ps.sql.outboxClaim, 100, micros(time.Minute))
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

// storeWith opens a store on a new migrated database, runs insert there and vacuums and
// analyzes the outbox, so that the plans see settled statistics.
func storeWith(t *testing.T, insert string) *Store {
	t.Helper()
	s, _ := openStore(t, storetest.SchemaMigrated)
	ps := s.(*Store)
	dbtest.Exec(t, ps.pool.pool, insert)
	dbtest.Exec(t, ps.pool.pool, `VACUUM ANALYZE outbox`)
	return ps
}

// claimBlocks runs a claim statement under EXPLAIN ANALYZE in a transaction that it rolls
// back, and returns the shared blocks that it read (hit or read).
func claimBlocks(t *testing.T, ps *Store, sql string, args ...any) int {
	t.Helper()
	ctx := context.Background()
	tx, err := ps.pool.pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	var plan []byte
	require.NoError(t, tx.QueryRow(ctx, "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) "+sql, args...).Scan(&plan))
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

// TestOutboxWindowedClaimReadsPastHeldKeysCheaply: 10 keys with 500 rows each, their heads in
// flight. Every due row is then held by its key, so a claim without a window examines all
// 4 990 of them to find nothing; with a window of 100 it examines 100 and then the heads of
// the 10 keys. It checks the blocks that each reads.
func TestOutboxWindowedClaimReadsPastHeldKeysCheaply(t *testing.T) {
	ps := storeWith(t, `
INSERT INTO outbox (topic, key, payload)
SELECT 'hot', 'k' || (g % 10), '{"n":1}'
FROM generate_series(1, 5000) AS g`)
	ctx := context.Background()
	heads, err := ps.OutboxClaim(ctx, store.OutboxClaimParams{Limit: 100, Lease: time.Minute})
	require.NoError(t, err)
	require.Len(t, heads, 10, "the first claim takes the head of each key")

	unbounded := claimBlocks(t, ps, ps.sql.outboxClaim, 100, micros(time.Minute))
	windowed := claimBlocks(t, ps, ps.sql.outboxClaimWindow, 100, micros(time.Minute), 100)
	t.Logf("blocks read: %d without a window, %d with a window of 100", unbounded, windowed)
	require.Less(t, windowed*4, unbounded, "the windowed claim read %d blocks, the unbounded one %d", windowed, unbounded)

	msgs, err := ps.OutboxClaim(ctx, store.OutboxClaimParams{Limit: 100, Lease: time.Minute, Window: 100})
	require.NoError(t, err)
	require.Empty(t, msgs, "every key has its head in flight")
	sent, err := ps.OutboxMarkSent(ctx, []store.Claim{heads[3].Claim()})
	require.NoError(t, err)
	require.Len(t, sent, 1)
	msgs, err = ps.OutboxClaim(ctx, store.OutboxClaimParams{Limit: 100, Lease: time.Minute, Window: 100})
	require.NoError(t, err)
	require.Len(t, msgs, 1, "the sent head lets its key's next row go")
	require.Equal(t, heads[3].Key, msgs[0].Key)
	require.Equal(t, heads[3].Sequence+10, msgs[0].Sequence)
}

// TestOutboxWindowedClaimWalksAtMostWindowKeys: 3 000 keys with 3 rows each, inserted key by
// key, so a window of 100 rows holds 34 free rows and the claim walks keys past it. The walk
// stops after 100 keys: the claim read 2 262 blocks where a walk of all 3 000 keys read
// 16 951, and it still fills its limit with the first row of each key.
func TestOutboxWindowedClaimWalksAtMostWindowKeys(t *testing.T) {
	ps := storeWith(t, `
INSERT INTO outbox (topic, key, payload)
SELECT 'many', 'k' || lpad((g / 3)::text, 5, '0'), '{"n":1}'
FROM generate_series(0, 8999) AS g
ORDER BY g`)
	ctx := context.Background()

	got := claimBlocks(t, ps, ps.sql.outboxClaimWindow, 100, micros(time.Minute), 100)
	require.Less(t, got, 5000, "the windowed claim read %d blocks; a walk of all 3 000 keys read 16 951 when measured", got)

	msgs, err := ps.OutboxClaim(ctx, store.OutboxClaimParams{Limit: 100, Lease: time.Minute, Window: 100})
	require.NoError(t, err)
	require.Len(t, msgs, 100, "the window's 34 free rows and the first rows of the keys past it fill the claim")
	keys := map[string]bool{}
	for _, m := range msgs {
		require.False(t, keys[m.Key], "two rows of key %s in one claim", m.Key)
		keys[m.Key] = true
	}
}

// TestOutboxWindowedClaimLocksByTupleAddress: 1 000 keys with 5 rows each, so the first 500
// rows of the window are free heads of their keys. The windowed claim locks them by tuple
// address (a TID scan) instead of looking each up in the primary key again, and it still
// claims the 500 heads, one row per key.
func TestOutboxWindowedClaimLocksByTupleAddress(t *testing.T) {
	ps := storeWith(t, `
INSERT INTO outbox (topic, key, payload)
SELECT 'many', 'k' || (g % 1000), '{"n":1}'
FROM generate_series(0, 4999) AS g
ORDER BY g`)
	ctx := context.Background()

	var plan string
	require.NoError(t, ps.pool.pool.QueryRow(ctx, "EXPLAIN (FORMAT JSON) "+ps.sql.outboxClaimWindow,
		500, micros(time.Minute), 500).Scan(&plan))
	require.Contains(t, plan, `"Node Type": "Tid Scan"`, "the plan: %s", plan)

	msgs, err := ps.OutboxClaim(ctx, store.OutboxClaimParams{Limit: 500, Lease: time.Minute, Window: 500})
	require.NoError(t, err)
	require.Len(t, msgs, 500)
	keys := map[string]bool{}
	for _, m := range msgs {
		require.False(t, keys[m.Key], "two rows of key %s in one claim", m.Key)
		keys[m.Key] = true
		require.Less(t, m.Sequence, msgs[0].Sequence+1000, "row %d is not the head of its key", m.Sequence)
	}
}

// TestClaimsCarryOnlyTheLeaseAsAParameter: the claims are prepared with their limits in the
// text and the lease as their only parameter. With the limits as parameters the plan cache
// judged the generic plan of the unwindowed outbox claim and of the relay's claim too dear (a
// LIMIT of unknown value) and planned them again at each execution, about 0.3-0.5 ms per
// claim; with no parameter that changes the plan, it can keep the generic plan, which is the
// same plan. Which plan it keeps is its own choice (it compares costs that move with the
// table's size, and a burst of catalog changes elsewhere resets it), so the test checks the
// parameters that pg_prepared_statements records and only logs the plan counts.
func TestClaimsCarryOnlyTheLeaseAsAParameter(t *testing.T) {
	ps := storeWith(t, `
INSERT INTO outbox (topic, key, payload)
SELECT 'plan', NULL, '{"n":1}'
FROM generate_series(1, 1000) AS g;
INSERT INTO inbox (source, idempotency_key, payload)
SELECT 'plan', 'idem-' || g, '{"n":1}'
FROM generate_series(1, 1000) AS g;
ANALYZE inbox`)
	ctx := context.Background()
	cfg := ps.pool.pool.Config().Copy()
	cfg.MinConns, cfg.MaxConns = 0, 1
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	one, err := New(pool, store.DefaultNames())
	require.NoError(t, err)
	t.Cleanup(one.Close)

	const claims = 12
	for range claims {
		msgs, err := one.OutboxClaim(ctx, store.OutboxClaimParams{Limit: 10, Lease: time.Minute})
		require.NoError(t, err)
		require.Len(t, msgs, 10)
		msgs, err = one.OutboxClaim(ctx, store.OutboxClaimParams{Limit: 10, Lease: time.Minute, Window: 20})
		require.NoError(t, err)
		require.Len(t, msgs, 10)
		in, err := one.InboxRelayClaim(ctx, store.InboxRelayClaimParams{Limit: 10, Lease: time.Minute})
		require.NoError(t, err)
		require.Len(t, in, 10)
	}
	rows, err := one.pool.pool.Query(ctx, `
SELECT CASE WHEN statement LIKE '%qb_window%' THEN 'windowed outbox'
            WHEN statement LIKE '%idempotency_key%' THEN 'relay'
            ELSE 'unwindowed outbox' END,
    parameter_types::text, generic_plans, custom_plans
FROM pg_prepared_statements
WHERE statement LIKE '%qb_claimed%' AND statement NOT LIKE '%pg_prepared_statements%'
ORDER BY 1`)
	require.NoError(t, err)
	got := map[string]string{}
	for rows.Next() {
		var name, params string
		var generic, custom int64
		require.NoError(t, rows.Scan(&name, &params, &generic, &custom))
		t.Logf("%s claim: parameters %s, %d generic and %d custom plans in %d executions", name, params, generic, custom, claims)
		require.Equal(t, int64(claims), generic+custom, "%s claim: one prepared statement ran every claim", name)
		got[name] = params
	}
	require.NoError(t, rows.Err())
	require.Equal(t, map[string]string{
		"relay": "{bigint}", "unwindowed outbox": "{bigint}", "windowed outbox": "{bigint}",
	}, got, "each claim is prepared once, with the lease as its only parameter")
}
