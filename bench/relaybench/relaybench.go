// Package relaybench measures the inbox relay (issue 15, target 5): how many push inbox rows
// per second one relay forwards into the outbox, from a backlog, beside a ceiling measured in
// the same run: PostgreSQL moving the same rows with one statement per batch and none of the
// relay's guarantees (no claim, no lease, no fence, no order per aggregate).
package relaybench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/alternayte/queuebox/bench/benchdb"
	"github.com/alternayte/queuebox/bench/machine"
	"github.com/alternayte/queuebox/shared/kind"
	"github.com/alternayte/queuebox/shared/relay"
	"github.com/alternayte/queuebox/shared/store"
	"github.com/alternayte/queuebox/shared/store/postgres"
	"github.com/alternayte/queuebox/shared/store/postgres/pgtool"
)

// Options are the bench's settings.
type Options struct {
	// ServerURL is the PostgreSQL server on which the bench creates its database.
	ServerURL string
	// Rows is the backlog of push inbox rows of each run.
	Rows int
	// Aggregates are the aggregate counts of the runs; 0 means rows without an aggregate.
	Aggregates []int
	// BatchSize is inbox.relay.batchSize (default 100).
	BatchSize int
	// CPUProfile, when set, is the prefix of one CPU profile per drain.
	CPUProfile string
}

// Run is one drain of a backlog by one relay, and the ceiling on the same backlog size.
type Run struct {
	Aggregates int     `json:"aggregates"`
	Rows       int     `json:"rows"`
	BatchSize  int     `json:"batchSize"`
	Seconds    float64 `json:"seconds"`
	PerSec     float64 `json:"rowsPerSecond"`
	// Summary is the relay's own count.
	Summary relay.Summary `json:"summary"`
	// CeilingPerSec is PostgreSQL moving the same number of rows, BatchSize per statement.
	CeilingPerSec float64 `json:"ceilingRowsPerSecond"`
	Share         float64 `json:"shareOfCeiling"`
	Load1         float64 `json:"loadAvg1"`
	// CPU seconds of the bench process (the relay) during the drain.
	RelayCPU float64  `json:"relayCpuSeconds"`
	Problems []string `json:"problems,omitempty"`
}

// Report is the bench's result.
type Report struct {
	Date     string             `json:"date"`
	Machine  machine.Info       `json:"machine"`
	Postgres benchdb.ServerInfo `json:"postgres"`
	Runs     []Run              `json:"runs"`
	Seconds  float64            `json:"totalSeconds"`
	Problems []string           `json:"problems,omitempty"`
	Options  map[string]any     `json:"options"`
}

const source = "bench"

// Measure runs the bench.
func Measure(ctx context.Context, o Options) (*Report, error) {
	if o.BatchSize <= 0 {
		o.BatchSize = 100
	}
	started := time.Now()
	rep := &Report{Date: started.UTC().Format(time.RFC3339), Machine: machine.Describe(),
		Options: map[string]any{"rows": o.Rows, "aggregates": o.Aggregates, "batchSize": o.BatchSize}}
	db, err := benchdb.Create(ctx, o.ServerURL, 4, logf)
	if err != nil {
		return nil, err
	}
	defer db.Drop()
	if rep.Postgres.Version, rep.Postgres.Settings, err = db.ServerFacts(ctx); err != nil {
		return nil, err
	}
	for _, aggs := range o.Aggregates {
		r, err := runOne(ctx, db, o, aggs)
		if err != nil {
			return rep, err
		}
		rep.Runs = append(rep.Runs, r)
		for _, p := range r.Problems {
			rep.Problems = append(rep.Problems, fmt.Sprintf("%d aggregates: %s", aggs, p))
		}
	}
	rep.Seconds = round(time.Since(started).Seconds(), 1)
	return rep, nil
}

func runOne(ctx context.Context, db *benchdb.Database, o Options, aggs int) (Run, error) {
	r := Run{Aggregates: aggs, Rows: o.Rows, BatchSize: o.BatchSize}
	if err := reset(ctx, db); err != nil {
		return r, err
	}
	if err := backlog(ctx, db, o.Rows, aggs); err != nil {
		return r, err
	}
	pool, err := pgtool.OpenPool(ctx, db.URL, pgtool.PoolOptions{MaxConns: 10, AppName: "relaybench"})
	if err != nil {
		return r, fmt.Errorf("opening the relay pool: %w", err)
	}
	defer pool.Close()
	st, err := postgres.New(pool, store.DefaultNames())
	if err != nil {
		return r, err
	}
	rl, err := relay.New(relay.Options{
		Store:   st,
		Config:  relay.Config{BatchSize: o.BatchSize},
		Sources: map[string]relay.Source{source: {Kind: kind.HTTP, Topic: "orders.{{ eventType }}"}},
		Logger:  slog.New(slog.DiscardHandler),
	})
	if err != nil {
		return r, fmt.Errorf("creating the relay: %w", err)
	}
	logf("%d rows, %s: relay draining", o.Rows, aggLabel(aggs))
	r.Load1 = machine.LoadAverage()[0]
	if o.CPUProfile != "" {
		stop, err := machine.StartCPUProfile(fmt.Sprintf("%s-%d.pprof", o.CPUProfile, aggs))
		if err != nil {
			return r, err
		}
		defer stop()
	}
	cpu0 := machine.SelfCPU()
	t0 := time.Now()
	r.Summary = rl.Run(ctx, relay.RunOptions{StopWhenIdle: true})
	elapsed := time.Since(t0)
	r.RelayCPU = round(machine.SelfCPU()-cpu0, 2)
	r.Seconds = round(elapsed.Seconds(), 2)
	r.PerSec = round(float64(r.Summary.Forwarded)/elapsed.Seconds(), 0)
	if r.Problems, err = check(ctx, db, o.Rows, aggs); err != nil {
		return r, err
	}
	if r.Summary.Forwarded != o.Rows || r.Summary.Dead+r.Summary.Failed+r.Summary.ClaimsLost > 0 {
		r.Problems = append(r.Problems, fmt.Sprintf("summary %+v, want %d forwarded and nothing else", r.Summary, o.Rows))
	}

	// The ceiling: the same rows moved by PostgreSQL alone, BatchSize per statement.
	if err := reset(ctx, db); err != nil {
		return r, err
	}
	if err := backlog(ctx, db, o.Rows, aggs); err != nil {
		return r, err
	}
	t0 = time.Now()
	moved := 0
	for moved < o.Rows {
		tag, err := db.Admin.Exec(ctx, ceilingSQL, o.BatchSize)
		if err != nil {
			return r, fmt.Errorf("running the ceiling: %w", err)
		}
		if tag.RowsAffected() == 0 {
			break
		}
		moved += int(tag.RowsAffected())
	}
	r.CeilingPerSec = round(float64(moved)/time.Since(t0).Seconds(), 0)
	if r.CeilingPerSec > 0 {
		r.Share = round(r.PerSec/r.CeilingPerSec, 3)
	}
	logf("%d rows, %s: %.0f rows/s forwarded, ceiling %.0f rows/s (%.0f %%)%s", o.Rows, aggLabel(aggs),
		r.PerSec, r.CeilingPerSec, 100*r.Share, problems(r.Problems))
	return r, nil
}

// ceilingSQL moves up to $1 pending push rows into the outbox in one statement: the data
// movement of the relay with none of its guarantees.
const ceilingSQL = `
WITH moved AS (
    UPDATE inbox SET state = 'processed', processed_at = clock_timestamp()
    WHERE id IN (SELECT id FROM inbox WHERE state = 'pending' AND consumption = 'push'
                 ORDER BY created_at LIMIT $1 FOR UPDATE SKIP LOCKED)
    RETURNING id, aggregate_id, event_type, payload, headers
)
INSERT INTO outbox (topic, key, payload, headers)
SELECT 'orders.' || coalesce(event_type, ''), aggregate_id, payload, headers FROM moved`

func aggLabel(aggs int) string {
	if aggs == 0 {
		return "no aggregate"
	}
	return fmt.Sprintf("%d aggregates", aggs)
}

func problems(p []string) string {
	if len(p) == 0 {
		return ""
	}
	return fmt.Sprintf(" PROBLEMS: %v", p)
}

func round(v float64, places int) float64 { return machine.Round(v, places) }

func logf(format string, args ...any) {
	_, _ = fmt.Fprintf(os.Stderr, time.Now().Format("15:04:05")+" relaybench: "+format+"\n", args...)
}

// reset empties both tables.
func reset(ctx context.Context, db *benchdb.Database) error {
	if _, err := db.Admin.Exec(ctx, `TRUNCATE inbox, outbox`); err != nil {
		return fmt.Errorf("emptying the tables: %w", err)
	}
	return nil
}

// backlog writes rows pending push inbox rows of the source in one statement, in order of
// created_at (clock_timestamp per row), each with an event type and, with aggs above 0, the
// aggregate 'a' || (n % aggs); then vacuums and analyses the inbox.
func backlog(ctx context.Context, db *benchdb.Database, rows, aggs int) error {
	_, err := db.Admin.Exec(ctx, `
INSERT INTO inbox (source, idempotency_key, aggregate_id, event_type, payload, consumption, state, created_at)
SELECT $1, 'k-' || n, CASE WHEN $3::int > 0 THEN 'a' || (n % $3::int) END, 'created',
       jsonb_build_object('id', 'k-' || n, 'n', n, 'amount', 1999, 'currency', 'EUR'),
       'push', 'pending', clock_timestamp()
FROM generate_series(1, $2::int) AS n`, source, rows, aggs)
	if err != nil {
		return fmt.Errorf("writing the backlog: %w", err)
	}
	if _, err := db.Admin.Exec(ctx, `VACUUM ANALYZE inbox`); err != nil {
		return fmt.Errorf("vacuuming the inbox: %w", err)
	}
	return nil
}

// check lists what is wrong after a drain: an inbox row not processed, an outbox row missing
// or twice, and, per aggregate, outbox rows out of the inbox's order.
func check(ctx context.Context, db *benchdb.Database, rows, aggs int) ([]string, error) {
	var problems []string
	var processed, outboxRows, distinct int
	if err := db.Admin.QueryRow(ctx, `SELECT count(*) FILTER (WHERE state = 'processed') FROM inbox`).Scan(&processed); err != nil {
		return nil, fmt.Errorf("counting inbox rows: %w", err)
	}
	if err := db.Admin.QueryRow(ctx, `SELECT count(*), count(DISTINCT payload->>'id') FROM outbox`).Scan(&outboxRows, &distinct); err != nil {
		return nil, fmt.Errorf("counting outbox rows: %w", err)
	}
	if processed != rows {
		problems = append(problems, fmt.Sprintf("%d of %d inbox rows are processed", processed, rows))
	}
	if outboxRows != rows || distinct != rows {
		problems = append(problems, fmt.Sprintf("the outbox holds %d rows of %d messages, want %d of %d", outboxRows, distinct, rows, rows))
	}
	if aggs > 0 {
		// Within one key, the outbox sequence must follow the inbox's n.
		var disorder int
		err := db.Admin.QueryRow(ctx, `
SELECT count(*) FROM (
    SELECT (payload->>'n')::int AS n, lag((payload->>'n')::int) OVER (PARTITION BY key ORDER BY sequence) AS prev
    FROM outbox) s
WHERE prev IS NOT NULL AND prev > n`).Scan(&disorder)
		if err != nil {
			return nil, fmt.Errorf("checking the order: %w", err)
		}
		if disorder > 0 {
			problems = append(problems, fmt.Sprintf("%d outbox rows follow a later row of their aggregate", disorder))
		}
	}
	return problems, nil
}

// Print writes the table of the report.
func Print(w io.Writer, rep *Report) {
	p := func(format string, args ...any) { _, _ = fmt.Fprintf(w, format, args...) }
	p("\ninbox relay bench — %s, %d cores, %s, PostgreSQL %s\n", rep.Date, rep.Machine.Cores, rep.Machine.GoVersion, rep.Postgres.Version)
	p("%-16s %8s %6s %10s %12s %8s %6s %s\n", "run", "rows", "batch", "rows/s", "ceiling/s", "share", "load1", "relay cpu us/row")
	for _, r := range rep.Runs {
		p("%-16s %8d %6d %10.0f %12.0f %7.0f%% %6.2f %.0f%s\n", aggLabel(r.Aggregates), r.Rows, r.BatchSize, r.PerSec, r.CeilingPerSec,
			100*r.Share, r.Load1, 1e6*r.RelayCPU/float64(max(r.Rows, 1)), problems(r.Problems))
	}
	if len(rep.Problems) > 0 {
		p("\nPROBLEMS:\n")
		for _, pr := range rep.Problems {
			p("  %s\n", pr)
		}
	}
	p("total %.0f s\n", rep.Seconds)
}
