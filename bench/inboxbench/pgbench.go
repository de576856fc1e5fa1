package inboxbench

import (
	"context"
	"fmt"

	"github.com/alternayte/queuebox/bench/benchdb"
	"github.com/alternayte/queuebox/bench/machine"
)

// Ceiling is PostgreSQL's own rate for the write that the inbox did per request before the
// writes were batched: one single-row INSERT ... ON CONFLICT DO NOTHING RETURNING per
// transaction, with a new key each time, measured with pgbench on the bench database. It
// tells how much of a run's figure the server's commits alone allow at that moment.
type Ceiling struct {
	Clients   int     `json:"clients"`
	Threads   int     `json:"threads"`
	Seconds   int     `json:"seconds"`
	TPS       float64 `json:"tps"`
	Rows      int     `json:"rowsInserted"`
	LatencyMs float64 `json:"latencyAvgMs"`
	Pgbench   string  `json:"pgbench"`
	Script    string  `json:"script"`
	Load1     float64 `json:"loadAvg1"`
	// MachineBusyPct is the busy share of all cores during the run; PgbenchSeconds is the
	// CPU of pgbench itself (the server's backends are not counted apart).
	MachineBusyPct float64 `json:"machineBusyPct"`
	PgbenchSeconds float64 `json:"pgbenchCpuSeconds"`
}

// ceilingSource is the source of the ceiling's rows, apart from the bench source.
const ceilingSource = "ceiling"

// ceilingScript inserts a new key per transaction: client_id-i, i counting up per client.
const ceilingScript = `\set i :i + 1
INSERT INTO inbox (source, idempotency_key, payload, headers, correlation_id, consumption, state)
VALUES ('` + ceilingSource + `', CAST(:client_id AS text) || '-' || CAST(:i AS text),
        '{"id":"c0-0","n":0}'::jsonb, '{"content-type":"application/json"}'::jsonb,
        'ceiling', 'pull', 'pending')
ON CONFLICT (source, idempotency_key) DO NOTHING
RETURNING id;
`

// measureCeiling runs ceilingScript with pgbench for the given seconds and counts the rows it
// inserted.
func measureCeiling(ctx context.Context, db *benchDatabase, clients, seconds int) (Ceiling, error) {
	bin, err := benchdb.FindPgbench()
	if err != nil {
		return Ceiling{}, fmt.Errorf("%w, or run with -ceiling-seconds 0", err)
	}
	threads := min(clients, 2)
	c := Ceiling{Clients: clients, Threads: threads, Seconds: seconds, Pgbench: bin, Script: ceilingScript}
	run := benchdb.Pgbench{Bin: bin, URL: db.URL, Script: ceilingScript, Clients: clients, Threads: threads, Seconds: seconds}
	c.Load1 = machine.LoadAverage()[0]
	before := readCPU(0, nil)
	res, runErr := run.Run(ctx)
	after := readCPU(0, nil)
	c.MachineBusyPct = cpuBetween(before, after, 0).MachineBusyPct
	c.PgbenchSeconds = round(res.CPUSeconds, 2)
	if runErr != nil {
		return c, runErr
	}
	c.TPS, c.LatencyMs = res.TPS, res.LatencyMs
	if c.Rows, _, err = db.inboxCounts(ctx, ceilingSource); err != nil {
		return c, err
	}
	return c, nil
}
