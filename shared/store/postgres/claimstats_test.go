package postgres

import (
	"context"
	"encoding/json"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/alternayte/queuebox/shared/store"
	"github.com/alternayte/queuebox/shared/store/postgres/dbtest"
	"github.com/alternayte/queuebox/shared/store/storetest"
)

// TestTheClaimsPlanIgnoresStatistics: a burst of 100 000 due rows lands in an outbox whose
// statistics predate it, with autovacuum off for the table so that no analyse comes in
// between: a table never analysed, and a small analysed table of finished rows. In both, each
// claim, run as OutboxClaim runs it (queryClaim), reads the due rows through the ordered scan
// of idx_outbox_pending_scheduled, sorts none of them, uses no bitmap or sequential scan, and
// reads about one block per claimed row (the lock visits each row); a bitmap scan of every
// due row and the sort read about 3 200.
func TestTheClaimsPlanIgnoresStatistics(t *testing.T) {
	t.Parallel()
	states := map[string]string{
		"never analysed": ``,
		"analysed small": `
INSERT INTO outbox (topic, payload, state) SELECT 'old', '{}'::jsonb, 'sent' FROM generate_series(1, 1000);
ANALYZE outbox;`,
	}
	for name, before := range states {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ps := storeBefore(t, "outbox", before)
			dbtest.Exec(t, ps.pool.pool, `
INSERT INTO outbox (topic, payload)
SELECT 'burst', jsonb_build_object('orderId', g, 'amount', 1999, 'currency', 'EUR')
FROM generate_series(1, 100000) AS g`)

			claims := map[string]store.OutboxClaimParams{
				"qb_candidates": {Limit: 500, Lease: time.Minute},
				"qb_window":     {Limit: 500, Lease: time.Minute, Window: 500},
			}
			for cte, params := range claims {
				plan := explainClaim(t, ps, params)
				for _, n := range plan.all() {
					require.NotContains(t, []string{"Bitmap Heap Scan", "Seq Scan"}, n.Type,
						"%s: the claim's plan has a %s on %s", cte, n.Type, n.Relation)
				}
				due := plan.cte("CTE " + cte)
				require.NotNil(t, due, "%s: no such CTE in the plan", cte)
				scan := due.firstScan()
				require.NotNil(t, scan, "%s: no scan under the CTE", cte)
				require.Equal(t, "Index Scan", scan.Type, "%s reads the due rows with a %s", cte, scan.Type)
				require.Equal(t, "idx_outbox_pending_scheduled", scan.Index, "%s reads the due rows through %s", cte, scan.Index)
				require.False(t, due.sorts(), "%s sorts the due rows instead of reading them in index order", cte)
				require.Less(t, due.Hit+due.Read, 1000, "%s read %d blocks to pick 500 of 100 000 due rows", cte, due.Hit+due.Read)
			}
			// The claims ran for real: 1 000 rows are processing, none twice.
			var processing int
			require.NoError(t, ps.pool.pool.QueryRow(context.Background(),
				`SELECT count(*) FROM outbox WHERE state = 'processing'`).Scan(&processing))
			require.Equal(t, 1000, processing)
		})
	}
}

// storeBefore opens a store on a new migrated database, keeps autovacuum off table (so that
// no analyse comes during the test) and runs the statements of before, separated by ";\n".
func storeBefore(t *testing.T, table, before string) *Store {
	t.Helper()
	s, _ := openStore(t, storetest.SchemaMigrated)
	ps := s.(*Store)
	dbtest.Exec(t, ps.pool.pool, `ALTER TABLE `+table+` SET (autovacuum_enabled = false)`)
	if before != "" {
		for _, stmt := range strings.Split(strings.TrimSpace(before), ";\n") {
			dbtest.Exec(t, ps.pool.pool, strings.TrimSuffix(stmt, ";"))
		}
	}
	return ps
}

// planNode is a node of a plan in EXPLAIN's JSON format.
type planNode struct {
	Type     string     `json:"Node Type"`
	Relation string     `json:"Relation Name"`
	Index    string     `json:"Index Name"`
	Subplan  string     `json:"Subplan Name"`
	Hit      int        `json:"Shared Hit Blocks"`
	Read     int        `json:"Shared Read Blocks"`
	Plans    []planNode `json:"Plans"`
}

// all returns n and every node below it.
func (n *planNode) all() []*planNode {
	out := []*planNode{n}
	for i := range n.Plans {
		out = append(out, n.Plans[i].all()...)
	}
	return out
}

// cte returns the node whose Subplan Name is name, or nil.
func (n *planNode) cte(name string) *planNode {
	for _, c := range n.all() {
		if c.Subplan == name {
			return c
		}
	}
	return nil
}

// firstScan returns the first node, depth first, that scans the outbox table.
func (n *planNode) firstScan() *planNode { return n.firstScanOf("outbox") }

// firstScanOf returns the first node, depth first, that scans table.
func (n *planNode) firstScanOf(table string) *planNode {
	for _, c := range n.all() {
		if c.Relation == table && strings.HasSuffix(c.Type, "Scan") {
			return c
		}
	}
	return nil
}

// sorts reports whether n or a node below it, outside its init plans, is a Sort (an
// Incremental Sort, which sorts each run of equal leading keys alone, is not).
func (n *planNode) sorts() bool {
	if n.Type == "Sort" {
		return true
	}
	for i := range n.Plans {
		if n.Plans[i].Subplan == "" && n.Plans[i].sorts() {
			return true
		}
	}
	return false
}

// explainClaim runs the claim of params as OutboxClaim does, under EXPLAIN (ANALYZE,
// BUFFERS), so the claim happens, and returns its plan.
func explainClaim(t *testing.T, ps *Store, params store.OutboxClaimParams) *planNode {
	t.Helper()
	rows, err := ps.queryClaim(context.Background(), "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) ", params)
	require.NoError(t, err)
	var text []byte
	require.True(t, rows.Next(), "EXPLAIN returned no row: %v", rows.Err())
	require.NoError(t, rows.Scan(&text))
	rows.Close()
	require.NoError(t, rows.Err())
	var out []struct {
		Plan planNode `json:"Plan"`
	}
	require.NoError(t, json.Unmarshal(text, &out), "the plan: %s", text)
	require.Len(t, out, 1)
	return &out[0].Plan
}

// TestQueryAfterSettingsEndWithTheirStatement: the planner settings that QueryAfter sends
// first hold for the statement after them and are gone when the connection next runs a
// statement; an error of the statement reaches the caller, and the connection is sound after.
func TestQueryAfterSettingsEndWithTheirStatement(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	u, err := url.Parse(dbtest.NewDatabase(t))
	require.NoError(t, err)
	q := u.Query()
	q.Set("pool_max_conns", "1")
	u.RawQuery = q.Encode()
	pool := dbtest.NewPool(t, u.String())
	bp := &boundedPool{pool: pool}

	show := func(rows interface {
		Next() bool
		Scan(...any) error
		Err() error
		Close()
	}) string {
		t.Helper()
		var v string
		require.True(t, rows.Next(), "no row: %v", rows.Err())
		require.NoError(t, rows.Scan(&v))
		require.False(t, rows.Next())
		require.NoError(t, rows.Err())
		rows.Close()
		return v
	}
	rows, err := bp.QueryAfter(ctx, claimPlanSQL, `SELECT current_setting('enable_bitmapscan')`)
	require.NoError(t, err)
	require.Equal(t, "off", show(rows), "the setting holds for the statement after it")
	rows, err = bp.QueryAfter(ctx, claimPlanSQL, `SELECT current_setting('jit')`)
	require.NoError(t, err)
	require.Equal(t, "off", show(rows), "JIT is off for the statement after the settings")
	rows, err = bp.Query(ctx, `SELECT current_setting('enable_bitmapscan')`)
	require.NoError(t, err)
	require.Equal(t, "on", show(rows), "the setting ended with its statement's transaction")

	rows, err = bp.QueryAfter(ctx, claimPlanSQL, `SELECT 1/0`)
	if err == nil {
		for rows.Next() {
		}
		err = rows.Err()
		rows.Close()
	}
	require.ErrorContains(t, err, "division by zero")
	rows, err = bp.Query(ctx, `SELECT current_setting('enable_seqscan')`)
	require.NoError(t, err)
	require.Equal(t, "on", show(rows), "the connection is sound after a failed statement")
}

// TestTheRelayClaimsPlanIgnoresStatistics: a burst of 100 000 pending push rows (a webhook
// storm) lands in an inbox whose statistics predate it, autovacuum off for the table. The
// relay's claim, run after its lock statement as InboxRelayClaim runs it, reads them in
// created_at order through idx_inbox_state_created with no full sort, no bitmap or
// sequential scan, and reads a bounded number of blocks.
func TestTheRelayClaimsPlanIgnoresStatistics(t *testing.T) {
	t.Parallel()
	states := map[string]string{
		"never analysed": ``,
		"analysed small": `
INSERT INTO inbox (source, idempotency_key, payload, state) SELECT 'old', 'o' || g, '{}'::jsonb, 'processed' FROM generate_series(1, 1000) AS g;
ANALYZE inbox;`,
	}
	for name, before := range states {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			ps := storeBefore(t, "inbox", before)
			dbtest.Exec(t, ps.pool.pool, `
INSERT INTO inbox (source, idempotency_key, payload, created_at)
SELECT 'storm', 'k' || g, jsonb_build_object('n', g), clock_timestamp()
FROM generate_series(1, 100000) AS g`)

			tx, err := ps.pool.pool.Begin(ctx)
			require.NoError(t, err)
			defer func() { _ = tx.Rollback(ctx) }()
			_, err = tx.Exec(ctx, ps.sql.inboxRelayLock, ps.names.InboxTable)
			require.NoError(t, err)
			sql, args := ps.sql.inboxRelayClaim, []any{100, micros(time.Minute)}
			if text, ok := ps.relayTexts.text(sql, 100, 0); ok {
				sql, args = text, args[1:]
			}
			var text []byte
			require.NoError(t, tx.QueryRow(ctx, "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) "+sql, args...).Scan(&text))
			var out []struct {
				Plan planNode `json:"Plan"`
			}
			require.NoError(t, json.Unmarshal(text, &out), "the plan: %s", text)
			require.Len(t, out, 1)
			plan := &out[0].Plan
			for _, n := range plan.all() {
				require.NotContains(t, []string{"Bitmap Heap Scan", "Seq Scan"}, n.Type,
					"the relay claim's plan has a %s on %s", n.Type, n.Relation)
			}
			due := plan.cte("CTE qb_candidates")
			require.NotNil(t, due, "no qb_candidates in the plan")
			scan := due.firstScanOf("inbox")
			require.NotNil(t, scan)
			require.Equal(t, "Index Scan", scan.Type)
			require.Equal(t, "idx_inbox_state_created", scan.Index, "the relay claim reads the pending rows through %s", scan.Index)
			require.False(t, due.sorts(), "the relay claim sorts every pending row")
			require.Less(t, due.Hit+due.Read, 600, "the relay claim read %d blocks to pick 100 of 100 000 pending rows", due.Hit+due.Read)
		})
	}
}
