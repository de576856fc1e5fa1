package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/alternayte/queuebox/bench/benchdb"
	"github.com/alternayte/queuebox/bench/machine"
	"github.com/alternayte/queuebox/bench/outboxbench"
	"github.com/alternayte/queuebox/bench/report"
)

// The systems of the bench, as -systems names them.
const (
	SystemQueueBox  = "queuebox"
	SystemRiver     = "river"
	SystemWatermill = "watermill"
)

// Options are the sizes and settings of a bench run; parseArgs fills the documented defaults.
type Options struct {
	// ServerURL is the PostgreSQL server where each run creates its private database.
	ServerURL string
	// Rows are the sizes; each size is one comparison per key mode.
	Rows []int
	// Keys is the number of distinct keys of the keyed mode; 0 runs the no-keys mode only.
	Keys int
	// Systems are the systems to run, in order.
	Systems []string
	// Tuned are QueueBox's tuned candidates; with ExploreRows above 0 and more than one, the
	// fastest over ExploreRows messages is measured, once per key mode.
	Tuned       []outboxbench.Settings
	ExploreRows int
	// PoolSize is QueueBox's database.poolSize and River's pool size.
	PoolSize  int
	River     RiverSettings
	Watermill WatermillSettings
	// RunTimeout bounds one run; a run cut short is a problem.
	RunTimeout time.Duration
	// Out is the JSON report file; empty writes none.
	Out string
	// Stdout receives the table.
	Stdout io.Writer
}

// RiverSettings are River's client settings.
type RiverSettings struct {
	MaxWorkers        int           `json:"maxWorkers"`
	FetchCooldown     time.Duration `json:"fetchCooldownNs"`
	FetchPollInterval time.Duration `json:"fetchPollIntervalNs"`
}

// WatermillSettings are Watermill's SQL subscriber settings.
type WatermillSettings struct {
	Topics       int           `json:"topics"`
	BatchSize    int           `json:"subscribeBatchSize"`
	PollInterval time.Duration `json:"pollIntervalNs"`
}

// Report is the machine-readable result, written as JSON.
type Report struct {
	Date        string                    `json:"date"`
	Machine     machine.Info              `json:"machine"`
	Postgres    benchdb.ServerInfo        `json:"postgres"`
	Options     ReportOptions             `json:"options"`
	PayloadSize int                       `json:"payloadBytes"`
	Exploration []RunResult               `json:"exploration,omitempty"`
	Comparisons []Comparison              `json:"comparisons"`
	Seconds     float64                   `json:"totalSeconds"`
	Problems    []string                  `json:"problems,omitempty"`
	Versions    map[string]string         `json:"versions"`
	Notes       []string                  `json:"notes,omitempty"`
	Settings    map[string]SystemSettings `json:"settings"`
}

// SystemSettings are one system's settings as the report holds them.
type SystemSettings = map[string]any

// ReportOptions echoes the options that shape the figures.
type ReportOptions struct {
	Rows        []int                  `json:"rows"`
	Keys        int                    `json:"keys"`
	Systems     []string               `json:"systems"`
	Tuned       []outboxbench.Settings `json:"tunedCandidates"`
	ExploreRows int                    `json:"exploreRows"`
	PoolSize    int                    `json:"poolSize"`
	RunTimeout  string                 `json:"runTimeout"`
}

// RunResult is one system draining one backlog.
type RunResult struct {
	// System is queuebox, river or watermill; Variant tells QueueBox's defaults from tuned.
	System  string `json:"system"`
	Variant string `json:"variant"`
	// Label is the table's name of the run.
	Label string `json:"label"`
	Rows  int    `json:"rows"`
	Keys  int    `json:"keys"`
	// PrepareSeconds is the insert or publish before the clock started.
	PrepareSeconds float64 `json:"prepareSeconds"`
	// Seconds runs from the start of delivery to the receiver's first arrival of the last id.
	Seconds       float64 `json:"seconds"`
	RowsPerSecond float64 `json:"rowsPerSecond"`
	Load1         float64 `json:"loadAvg1"`
	CPU           CPUUse  `json:"cpu"`
	// Delivery is what the receiver saw.
	Delivery Delivery `json:"delivery"`
	// Tables are the database's table counters after the run (pg_stat_user_tables, summed).
	Tables TableStats `json:"tables"`
	// Failures are the deliveries the system itself counted as failed (retried).
	Failures int      `json:"failures"`
	Problems []string `json:"problems,omitempty"`
}

// CPUUse is the CPU time spent during one run, in seconds, split by who spent it, and per
// delivered message in microseconds.
type CPUUse struct {
	WallSeconds    float64 `json:"wallSeconds"`
	MachineBusyPct float64 `json:"machineBusyPct"`
	Process        float64 `json:"processSeconds"`          // the measuring process: the system under test
	Postgres       float64 `json:"postgresBackendsSeconds"` // the system's backends
	Receiver       float64 `json:"receiverSeconds"`
	Other          float64 `json:"otherSeconds"` // WAL writer, checkpointer, autovacuum, other users
	ProcessUsRow   float64 `json:"processUsPerRow"`
	PostgresUsRow  float64 `json:"postgresUsPerRow"`
	ReceiverUsRow  float64 `json:"receiverUsPerRow"`
}

// TableStats are pg_stat_user_tables summed over the run's private database after the run: the
// updated rows (the systems' state changes: claim, finish, ack offsets) and how many of them were
// HOT, and the autovacuum and autoanalyze runs (their CPU is in CPUUse.Other). The counters
// reach the view when a backend reports them (the systems' backends do when their pool closes,
// before the read), so they can lag a little.
type TableStats struct {
	Updates      int64 `json:"updates"`
	HotUpdates   int64 `json:"hotUpdates"`
	Autovacuums  int64 `json:"autovacuums"`
	Autoanalyzes int64 `json:"autoanalyzes"`
}

// tableStats reads the TableStats of db.
func tableStats(ctx context.Context, db *benchdb.Database) (TableStats, error) {
	var t TableStats
	err := db.Admin.QueryRow(ctx, `
SELECT COALESCE(sum(n_tup_upd), 0)::bigint, COALESCE(sum(n_tup_hot_upd), 0)::bigint,
       COALESCE(sum(autovacuum_count), 0)::bigint, COALESCE(sum(autoanalyze_count), 0)::bigint
FROM pg_stat_user_tables`).Scan(&t.Updates, &t.HotUpdates, &t.Autovacuums, &t.Autoanalyzes)
	if err != nil {
		return t, fmt.Errorf("reading the table statistics: %w", err)
	}
	return t, nil
}

// Comparison is every system over one size and key mode, with QueueBox's ratios to the best
// peer (the faster of River and Watermill in this comparison).
type Comparison struct {
	Rows          int         `json:"rows"`
	Keys          int         `json:"keys"`
	Runs          []RunResult `json:"runs"`
	BestPeer      string      `json:"bestPeer,omitempty"`
	BestPeerRate  float64     `json:"bestPeerRowsPerSecond,omitempty"`
	RatioDefaults float64     `json:"ratioDefaultsToBestPeer,omitempty"`
	RatioTuned    float64     `json:"ratioTunedToBestPeer,omitempty"`
}

// Variants of the runs.
const (
	variantDefaults = "defaults"
	variantTuned    = "tuned"
	variantPeer     = "peer"
)

// computeRatios fills BestPeer and the ratios from the runs: a peer run is one of River or
// Watermill; QueueBox's defaults and tuned runs are divided by the best peer's rows/s. A
// comparison without a peer or without a QueueBox run leaves the ratios zero.
func (c *Comparison) computeRatios() {
	c.BestPeer, c.BestPeerRate, c.RatioDefaults, c.RatioTuned = "", 0, 0, 0
	for _, r := range c.Runs {
		if r.Variant == variantPeer && r.RowsPerSecond > c.BestPeerRate {
			c.BestPeer, c.BestPeerRate = r.Label, r.RowsPerSecond
		}
	}
	if c.BestPeerRate <= 0 {
		return
	}
	for _, r := range c.Runs {
		switch r.Variant {
		case variantDefaults:
			c.RatioDefaults = machine.Round(r.RowsPerSecond/c.BestPeerRate, 2)
		case variantTuned:
			c.RatioTuned = machine.Round(r.RowsPerSecond/c.BestPeerRate, 2)
		}
	}
}

type bench struct {
	opts Options
	sink *outboxbench.Sink
}

// Run runs every comparison, prints the table and writes the report. It returns an error when
// a run could not be made, lost a message or (QueueBox) delivered a key out of order.
func Run(ctx context.Context, opts Options) (*Report, error) {
	started := time.Now()
	rep := &Report{
		Date:    started.UTC().Format(time.RFC3339),
		Machine: machine.Describe(),
		Options: ReportOptions{
			Rows: opts.Rows, Keys: opts.Keys, Systems: opts.Systems, Tuned: opts.Tuned,
			ExploreRows: opts.ExploreRows, PoolSize: opts.PoolSize, RunTimeout: opts.RunTimeout.String(),
		},
		PayloadSize: len(payload(1, "k1")),
		Versions:    moduleVersions(),
		Settings: map[string]SystemSettings{
			SystemQueueBox: {"defaults": outboxbench.DefaultSettings(), "tunedCandidates": opts.Tuned, "poolSize": opts.PoolSize,
				"insert": "INSERT ... SELECT unnest, one transaction"},
			SystemRiver: {"maxWorkers": opts.River.MaxWorkers, "fetchCooldown": opts.River.FetchCooldown.String(),
				"fetchPollInterval": opts.River.FetchPollInterval.String(), "poolSize": opts.PoolSize,
				"insert": "InsertManyTx, one transaction"},
			SystemWatermill: {"topics": opts.Watermill.Topics, "subscribeBatchSize": opts.Watermill.BatchSize,
				"pollInterval": opts.Watermill.PollInterval.String(), "poolSize": watermillPoolSize(opts.Watermill),
				"router": "message.Router, one consumer handler per topic"},
		},
	}
	m := rep.Machine
	logf("load average at start: %.2f %.2f %.2f on %d cores", m.LoadAvgStart[0], m.LoadAvgStart[1], m.LoadAvgStart[2], m.Cores)

	sink, err := outboxbench.StartSink(ctx)
	if err != nil {
		return nil, err
	}
	defer sink.Stop()
	logf("receiver pid %d at %s", sink.PID(), sink.BaseURL())
	b := &bench{opts: opts, sink: sink}
	if rep.Postgres, err = b.serverInfo(ctx); err != nil {
		return nil, err
	}

	modes := []int{0}
	if opts.Keys > 0 {
		modes = append(modes, opts.Keys)
	}
	for _, keys := range modes {
		tuned := opts.Tuned[0]
		if has(opts.Systems, SystemQueueBox) && opts.ExploreRows > 0 && len(opts.Tuned) > 1 {
			best := -1.0
			for _, cand := range opts.Tuned {
				r, err := b.measure(ctx, queueBoxFactory(cand, variantTuned, opts.PoolSize), opts.ExploreRows, keys)
				if err != nil {
					return nil, err
				}
				rep.Exploration = append(rep.Exploration, r)
				rep.Problems = append(rep.Problems, prefixed(runName(r)+" (exploration)", r.Problems)...)
				if r.RowsPerSecond > best {
					tuned, best = cand, r.RowsPerSecond
				}
			}
			logf("%s: best tuned candidate %dx%d", keysLabel(keys), tuned.BatchSize, tuned.Concurrency)
		}
		for _, rows := range opts.Rows {
			c := Comparison{Rows: rows, Keys: keys}
			for _, f := range b.factories(tuned) {
				r, err := b.measure(ctx, f, rows, keys)
				if err != nil {
					return nil, err
				}
				c.Runs = append(c.Runs, r)
				rep.Problems = append(rep.Problems, prefixed(runName(r), r.Problems)...)
			}
			c.computeRatios()
			rep.Comparisons = append(rep.Comparisons, c)
		}
	}
	rep.Machine.LoadAvgEnd = machine.LoadAverage()
	rep.Seconds = machine.Round(time.Since(started).Seconds(), 1)
	printTable(opts.Stdout, rep)
	if opts.Out != "" {
		if err := report.WriteJSON(opts.Out, rep); err != nil {
			return rep, err
		}
		_, _ = fmt.Fprintf(opts.Stdout, "\nreport written to %s\n", opts.Out)
	}
	if len(rep.Problems) > 0 {
		return rep, fmt.Errorf("the bench found problems: %s", strings.Join(rep.Problems, "; "))
	}
	return rep, nil
}

// factories are the measured systems of one comparison, in order.
func (b *bench) factories(tuned outboxbench.Settings) []factory {
	var fs []factory
	for _, s := range b.opts.Systems {
		switch s {
		case SystemQueueBox:
			fs = append(fs, queueBoxFactory(outboxbench.DefaultSettings(), variantDefaults, b.opts.PoolSize),
				queueBoxFactory(tuned, variantTuned, b.opts.PoolSize))
		case SystemRiver:
			fs = append(fs, riverFactory(b.opts.River, b.opts.PoolSize))
		case SystemWatermill:
			fs = append(fs, watermillFactory(b.opts.Watermill))
		}
	}
	return fs
}

// serverInfo reads the server's version and settings from a short-lived private database.
func (b *bench) serverInfo(ctx context.Context) (benchdb.ServerInfo, error) {
	var info benchdb.ServerInfo
	db, err := benchdb.Create(ctx, b.opts.ServerURL, 1, logf)
	if err != nil {
		return info, err
	}
	defer db.Drop()
	info.Version, info.Settings, err = db.ServerFacts(ctx)
	return info, err
}

// measure runs one system over one backlog on its own fresh private database: prepare
// (insert or publish) before the clock, deliver, then check what the receiver saw.
func (b *bench) measure(ctx context.Context, f factory, rows, keys int) (RunResult, error) {
	sys := f.new()
	r := RunResult{System: f.system, Variant: f.variant, Label: f.label, Rows: rows, Keys: keys}
	db, err := benchdb.Create(ctx, b.opts.ServerURL, 2, logf)
	if err != nil {
		return r, err
	}
	defer db.Drop()
	logf("%s: preparing %d messages in %s", runName(r), rows, db.Name)
	prepStart := time.Now()
	if err := sys.prepare(ctx, db, b.sink.BaseURL(), rows, keys); err != nil {
		sys.close()
		return r, fmt.Errorf("%s: %w", runName(r), err)
	}
	r.PrepareSeconds = machine.Round(time.Since(prepStart).Seconds(), 2)
	if err := b.sink.Reset(ctx); err != nil {
		sys.close()
		return r, err
	}

	r.Load1 = machine.LoadAverage()[0]
	before := b.readCPU(ctx, db, sys.appName())
	runCtx, cancel := context.WithTimeout(ctx, b.opts.RunTimeout)
	start := time.Now()
	failures, derr := sys.deliver(runCtx)
	waited := time.Now()
	after := b.readCPU(ctx, db, sys.appName())
	cancel()
	sys.close()
	if ctx.Err() != nil {
		return r, ctx.Err()
	}
	r.Failures = failures
	if derr != nil {
		r.Problems = append(r.Problems, fmt.Sprintf("delivery did not end: %v", derr))
	}

	arrivals, err := b.sink.Arrivals(ctx)
	if err != nil {
		return r, err
	}
	stats, err := b.sink.Stats(ctx)
	if err != nil {
		return r, err
	}
	expected, err := sys.expected(ctx, db, rows, keys)
	if err != nil {
		return r, fmt.Errorf("%s: %w", runName(r), err)
	}
	if r.Tables, err = tableStats(ctx, db); err != nil {
		return r, err
	}
	r.Delivery = checkDelivery(expected, arrivals, stats, keys > 0)
	r.Problems = append(r.Problems, r.Delivery.problems(f.system == SystemQueueBox)...)
	r.Problems = append(r.Problems, sys.problems()...)

	end := waited
	if n := len(arrivals); n > 0 && r.Delivery.Missing == 0 {
		end = time.Unix(0, arrivals[n-1].At)
	}
	elapsed := end.Sub(start).Seconds()
	r.Seconds = machine.Round(elapsed, 3)
	if elapsed > 0 {
		r.RowsPerSecond = machine.Round(float64(r.Delivery.Distinct)/elapsed, 0)
	}
	r.CPU = cpuBetween(before, after, r.Delivery.Distinct)
	logf("%s: %d messages in %.2f s = %.0f msg/s (cpu process %.2f s, postgres %.2f s, receiver %.2f s)%s",
		runName(r), r.Delivery.Distinct, r.Seconds, r.RowsPerSecond, r.CPU.Process, r.CPU.Postgres, r.CPU.Receiver, problemSuffix(r.Problems))
	return r, nil
}

// cpuSample is one reading of the counters of one run.
type cpuSample struct {
	machine.Sample
	receiver float64
	backends map[int]float64 // the system's PostgreSQL backends by pid
}

func (b *bench) readCPU(ctx context.Context, db *benchdb.Database, app string) cpuSample {
	s := cpuSample{Sample: machine.Read(), receiver: machine.ProcessCPU(b.sink.PID()), backends: map[int]float64{}}
	pids, err := db.ApplicationPIDs(ctx, app)
	if err != nil {
		return s
	}
	for _, pid := range pids {
		s.backends[pid] = machine.ProcessCPU(pid)
	}
	return s
}

// cpuBetween computes the use between two samples; a backend that appeared during the run
// counts from zero, one that ended during it is lost (the pools keep theirs open).
func cpuBetween(a, b cpuSample, rows int) CPUUse {
	backends := 0.0
	for pid, cpu := range b.backends {
		backends += cpu - a.backends[pid]
	}
	u := CPUUse{
		WallSeconds:    machine.Round(b.WallSeconds(a.Sample), 2),
		MachineBusyPct: b.BusyPct(a.Sample),
		Process:        machine.Round(b.SelfSeconds(a.Sample), 2),
		Postgres:       machine.Round(backends, 2),
		Receiver:       machine.Round(b.receiver-a.receiver, 2),
	}
	u.Other = machine.Round(max(0, b.BusySeconds(a.Sample)-u.Process-u.Postgres-u.Receiver), 2)
	if rows > 0 {
		us := func(s float64) float64 { return machine.Round(s*1e6/float64(rows), 0) }
		u.ProcessUsRow, u.PostgresUsRow, u.ReceiverUsRow = us(u.Process), us(u.Postgres), us(u.Receiver)
	}
	return u
}

func has(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func keysLabel(keys int) string {
	if keys == 0 {
		return "no keys"
	}
	return fmt.Sprintf("%d keys", keys)
}

func runName(r RunResult) string {
	return fmt.Sprintf("%s, %d rows, %s", r.Label, r.Rows, keysLabel(r.Keys))
}

func prefixed(p string, ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = p + ": " + s
	}
	return out
}

func problemSuffix(p []string) string {
	if len(p) == 0 {
		return ""
	}
	return " - PROBLEM: " + strings.Join(p, "; ")
}

// logf writes a progress line to stderr.
func logf(format string, args ...any) {
	_, _ = fmt.Fprintf(os.Stderr, time.Now().Format("15:04:05")+" peers: "+format+"\n", args...)
}
