package outboxbench

import (
	"context"
	"fmt"
	"time"

	"github.com/alternayte/queuebox/bench/benchdb"
	"github.com/alternayte/queuebox/bench/machine"
)

// Ceiling is the commit rate of the server for the write that finishes one row: one fenced
// single-row update per transaction, measured with pgbench.
type Ceiling struct {
	Clients int     `json:"clients"`
	Threads int     `json:"threads"`
	Seconds int     `json:"seconds"`
	TPS     float64 `json:"tps"`
	// RowsUpdated is the number of transactions that changed their row: each one moves a
	// distinct processing row to sent, so none of them is a no-op commit.
	RowsUpdated int     `json:"rowsUpdated"`
	UpdateTPS   float64 `json:"updateTps"`
	LatencyMs   float64 `json:"latencyAvgMs"`
	Pgbench     string  `json:"pgbench"`
	Script      string  `json:"script"`
	Load1       float64 `json:"loadAvg1"`
	CPU         CPUUse  `json:"cpu"`
}

// ceilingScript finishes row n = client_id * 1 000 000 + i, i counting up per client (pgbench
// variables live as long as the client), so every transaction updates a distinct row that is
// still processing. Its id and token are derived from n, so pgbench needs no lookup table.
const ceilingScript = `\set i :i + 1
\set n :client_id * 1000000 + :i
UPDATE outbox
SET state = 'sent', claim_token = NULL, lease_expires_at = NULL, updated_at = clock_timestamp()
WHERE id = md5(CAST(:n AS text))::uuid
  AND state = 'processing'
  AND claim_token = md5('t' || CAST(:n AS text))::uuid
  AND lease_expires_at > clock_timestamp()
RETURNING id;
`

// measureCeiling fills the outbox with rows in state processing under live leases, runs the
// fenced update with pgbench for the given seconds, and empties the outbox again.
func measureCeiling(ctx context.Context, db *benchDatabase, clients, seconds, sinkPID int) (Ceiling, error) {
	bin, err := benchdb.FindPgbench()
	if err != nil {
		return Ceiling{}, err
	}
	threads := min(clients, 2)
	c := Ceiling{Clients: clients, Threads: threads, Seconds: seconds, Pgbench: bin, Script: ceilingScript}
	// Enough rows for 9 000 updates a second, more than this class of machine commits.
	perClient := max(2000, seconds*9000/clients)
	if err := db.resetOutbox(ctx); err != nil {
		return c, err
	}
	_, err = db.Admin.Exec(ctx, `
INSERT INTO outbox (id, topic, payload, state, claim_token, claimed_at, lease_expires_at)
SELECT md5(n::text)::uuid, 'orders.created', '{"orderId": 1, "amount": 1999, "currency": "EUR"}',
       'processing', md5('t' || n::text)::uuid, clock_timestamp(), clock_timestamp() + interval '1 hour'
FROM (SELECT c * 1000000 + i AS n
      FROM generate_series(0, $1::int - 1) AS c, generate_series(1, $2::int) AS i) AS s`, clients, perClient)
	if err != nil {
		return c, fmt.Errorf("filling the outbox for pgbench: %w", err)
	}
	if err := db.vacuum(ctx); err != nil {
		return c, err
	}
	run := benchdb.Pgbench{Bin: bin, URL: db.URL, Script: ceilingScript, Clients: clients, Threads: threads, Seconds: seconds}
	c.Load1 = machine.LoadAverage()[0]
	before := readCPU(sinkPID)
	res, runErr := run.Run(ctx)
	after := readCPU(sinkPID)
	c.CPU = cpuBetween(before, after, 0)
	if runErr != nil {
		return c, runErr
	}
	c.TPS, c.LatencyMs = res.TPS, res.LatencyMs
	counts, err := db.stateCounts(ctx)
	if err != nil {
		return c, err
	}
	c.RowsUpdated = counts["sent"]
	c.UpdateTPS = round(float64(c.RowsUpdated)/float64(seconds), 0)
	return c, db.resetOutbox(ctx)
}

// sleepCtx waits for d or ctx.
func sleepCtx(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}
