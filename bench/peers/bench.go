package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/alternayte/queuebox/bench/benchcmd"
	"github.com/alternayte/queuebox/bench/benchdb"
	"github.com/alternayte/queuebox/bench/machine"
	"github.com/alternayte/queuebox/bench/outboxbench"
	"github.com/alternayte/queuebox/bench/report"
	"github.com/alternayte/queuebox/shared/outbox"
)

// The systems of the bench, as -systems names them.
const (
	SystemQueueBox  = "queuebox"
	SystemRiver     = "river"
	SystemWatermill = "watermill"
	SystemCeiling   = "ceiling"
)

// Options are the sizes and settings of a bench run; parseArgs fills the documented defaults.
type Options struct {
	// ServerURL is the PostgreSQL server where each run creates its private database.
	ServerURL string
	// Rows are the sizes; each size is one comparison per key mode.
	Rows []int
	// Keys is the number of distinct keys of the keyed mode; 0 runs the no-keys mode only.
	Keys int
	// Systems are the systems to run.
	Systems []string
	// Rounds is the number of interleaved runs of each system per size and key mode; the
	// figures are their medians.
	Rounds int
	// Tuned are QueueBox's tuned candidates; with ExploreRows above 0 and more than one, the
	// fastest over ExploreRows messages is measured, once per key mode.
	Tuned       []outboxbench.Settings
	ExploreRows int
	// PoolSize is QueueBox's database.poolSize at the defaults, TunedPoolSize tuned.
	PoolSize      int
	TunedPoolSize int
	// Lock measures QueueBox a third time in every round: the tuned settings in the claim mode
	// lock (outbox.claimMode), with the tuned pool size. It is left out when the tuned settings
	// claim in the lock mode already.
	Lock      bool
	River     RiverSettings
	Watermill WatermillSettings
	// WatermillSchemas are the Watermill schema adapters to run (offsets, queue), each one
	// system of its own with the Watermill settings.
	WatermillSchemas []string
	// Ceilings are the concurrent requests of the ceiling runs.
	Ceilings []int
	// Payload is "small" (about 85 bytes of JSON) or "large" (about 320).
	Payload string
	// PeersGoDefaultGC runs the peers and the ceiling at Go's default garbage collector
	// settings; by default every system runs with the settings QueueBox's processes set
	// (shared/gctune), which a user of a peer could set as well.
	PeersGoDefaultGC bool
	// RunTimeout bounds one run; a run cut short is a problem.
	RunTimeout time.Duration
	// Out is the JSON report file; empty writes none.
	Out string
	// Stdout receives the table.
	Stdout io.Writer
}

// RiverSettings are River's client settings and its pool size.
type RiverSettings struct {
	PoolSize          int           `json:"poolSize"`
	MaxWorkers        int           `json:"maxWorkers"`
	FetchCooldown     time.Duration `json:"fetchCooldownNs"`
	FetchPollInterval time.Duration `json:"fetchPollIntervalNs"`
}

// WatermillSettings are Watermill's SQL subscriber settings; Schema is its schema adapter
// (offsets or queue).
type WatermillSettings struct {
	Schema       string        `json:"schema"`
	Topics       int           `json:"topics"`
	BatchSize    int           `json:"subscribeBatchSize"`
	PollInterval time.Duration `json:"pollIntervalNs"`
	// Router runs a message.Router handler per topic instead of reading the channels.
	Router bool `json:"router"`
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
	Rows          []int                  `json:"rows"`
	Keys          int                    `json:"keys"`
	Systems       []string               `json:"systems"`
	Rounds        int                    `json:"rounds"`
	Tuned         []outboxbench.Settings `json:"tunedCandidates"`
	ExploreRows   int                    `json:"exploreRows"`
	PoolSize      int                    `json:"poolSize"`
	TunedPoolSize int                    `json:"tunedPoolSize"`
	Lock          bool                   `json:"tunedLock"`
	Ceilings      []int                  `json:"ceilingRequests"`
	Payload       string                 `json:"payload"`
	// PeersGoDefaultGC is set when the peers ran at Go's default garbage collector settings
	// instead of QueueBox's.
	PeersGoDefaultGC bool   `json:"peersGoDefaultGC"`
	RunTimeout       string `json:"runTimeout"`
}

// RunResult is one system draining one backlog.
type RunResult struct {
	// System is queuebox, river or watermill; Variant tells QueueBox's defaults from tuned.
	System  string `json:"system"`
	Variant string `json:"variant"`
	// Label is the table's name of the run; Order how the system keeps a key in order.
	Label string `json:"label"`
	Order string `json:"perKeyOrder"`
	Rows  int    `json:"rows"`
	Keys  int    `json:"keys"`
	// Round is the interleaved round of the run, from 1.
	Round int `json:"round"`
	// PrepareSeconds is the insert or publish before the clock started.
	PrepareSeconds float64 `json:"prepareSeconds"`
	// StartupSeconds runs from the start of delivery (Run, client.Start, router.Run, the
	// ceiling's query) to the receiver's first arrival; it is not on the clock.
	StartupSeconds float64 `json:"startupSeconds"`
	// Seconds is the receiver's clock: its first arrival of the first id to its first
	// arrival of the last id.
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

type bench struct {
	opts Options
	sink *outboxbench.Sink
}

// Run runs every comparison, prints the table and writes the report. It returns an error when
// a run could not be made, lost a message, duplicated one though no delivery failed, or, in a
// system that keeps per-key order, delivered a key out of order.
func Run(ctx context.Context, opts Options) (*Report, error) {
	started := time.Now()
	largePayload = opts.Payload == "large"
	if opts.Rounds <= 0 {
		opts.Rounds = 1
	}
	rep := &Report{
		Date:    started.UTC().Format(time.RFC3339),
		Machine: machine.Describe(),
		Options: ReportOptions{
			Rows: opts.Rows, Keys: opts.Keys, Systems: opts.Systems, Rounds: opts.Rounds, Tuned: opts.Tuned,
			ExploreRows: opts.ExploreRows, PoolSize: opts.PoolSize, TunedPoolSize: opts.TunedPoolSize, Lock: opts.Lock,
			Ceilings: opts.Ceilings, Payload: opts.Payload, PeersGoDefaultGC: opts.PeersGoDefaultGC, RunTimeout: opts.RunTimeout.String(),
		},
		PayloadSize: len(payload(1, "k1")),
		Versions:    moduleVersions(),
		Settings: map[string]SystemSettings{
			SystemQueueBox: {"defaults": outboxbench.DefaultSettings(), "tunedCandidates": opts.Tuned, "poolSize": opts.PoolSize,
				"tunedPoolSize": opts.TunedPoolSize, "tunedLock": opts.Lock, "insert": "INSERT ... SELECT unnest, one transaction, then VACUUM ANALYZE outbox"},
			SystemRiver: {"maxWorkers": opts.River.MaxWorkers, "fetchCooldown": opts.River.FetchCooldown.String(),
				"fetchPollInterval": opts.River.FetchPollInterval.String(), "poolSize": opts.River.PoolSize,
				"insert": "InsertManyTx, one transaction"},
			SystemWatermill: {"schemas": opts.WatermillSchemas, "topics": opts.Watermill.Topics, "subscribeBatchSize": opts.Watermill.BatchSize,
				"pollInterval": opts.Watermill.PollInterval.String(), "poolSize": watermillPoolSize(opts.Watermill),
				"router": opts.Watermill.Router},
			SystemCeiling: {"requests": opts.Ceilings, "read": "one SELECT of the outbox rows in insert order, no state written"},
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
				r, err := b.measure(ctx, queueBoxFactory(cand, variantTuned, opts.TunedPoolSize), opts.ExploreRows, keys)
				if err != nil {
					return nil, err
				}
				rep.Exploration = append(rep.Exploration, r)
				rep.Problems = append(rep.Problems, prefixed(runName(r)+" (exploration)", r.Problems)...)
				if r.RowsPerSecond > best {
					tuned, best = cand, r.RowsPerSecond
				}
			}
			logf("%s: best tuned candidate %s", keysLabel(keys), tuned)
		}
		for _, rows := range opts.Rows {
			c := Comparison{Rows: rows, Keys: keys}
			for round := 1; round <= opts.Rounds; round++ {
				for _, f := range b.factories(tuned) {
					r, err := b.measure(ctx, f, rows, keys)
					if err != nil {
						return nil, err
					}
					r.Round = round
					c.Runs = append(c.Runs, r)
					rep.Problems = append(rep.Problems, prefixed(fmt.Sprintf("%s, round %d", runName(r), round), r.Problems)...)
				}
			}
			c.summarize()
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

// factories are the measured systems of one round, a peer and a QueueBox variant in turn
// (so that a change of the machine's load falls on both), the ceilings first and last.
// QueueBox's variants are its defaults, the tuned settings and, with Options.Lock, the tuned
// settings in the claim mode lock.
func (b *bench) factories(tuned outboxbench.Settings) []factory {
	var peers, queueBox, ceilings []factory
	for _, s := range b.opts.Systems {
		switch s {
		case SystemQueueBox:
			queueBox = append(queueBox, queueBoxFactory(outboxbench.DefaultSettings(), variantDefaults, b.opts.PoolSize),
				queueBoxFactory(tuned, variantTuned, b.opts.TunedPoolSize))
			if b.opts.Lock && !tuned.Lock() {
				lock := tuned
				lock.ClaimMode = outbox.ClaimModeLock
				queueBox = append(queueBox, queueBoxFactory(lock, variantTunedLock, b.opts.TunedPoolSize))
			}
		case SystemRiver:
			peers = append(peers, riverFactory(b.opts.River))
		case SystemWatermill:
			for _, schema := range b.opts.WatermillSchemas {
				w := b.opts.Watermill
				w.Schema = schema
				peers = append(peers, watermillFactory(w))
			}
		case SystemCeiling:
			for _, n := range b.opts.Ceilings {
				ceilings = append(ceilings, ceilingFactory(n))
			}
		}
	}
	var fs []factory
	if len(ceilings) > 0 {
		fs = append(fs, ceilings[0])
	}
	for i := range max(len(peers), len(queueBox)) {
		if i < len(peers) {
			fs = append(fs, peers[i])
		}
		if i < len(queueBox) {
			fs = append(fs, queueBox[i])
		}
	}
	if len(ceilings) > 1 {
		fs = append(fs, ceilings[1:]...)
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
	r := RunResult{System: f.system, Variant: f.variant, Label: f.label, Order: f.order, Rows: rows, Keys: keys}
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
	restoreGC := func() {}
	if f.system == SystemQueueBox || !b.opts.PeersGoDefaultGC {
		restoreGC = benchcmd.QueueBoxRuntime(io.Discard, "peers")
	}
	start := time.Now()
	failures, derr := sys.deliver(runCtx)
	waited := time.Now()
	restoreGC()
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
	r.Problems = append(r.Problems, r.Delivery.problems(f.ordered, failures)...)
	r.Problems = append(r.Problems, sys.problems()...)
	r.StartupSeconds, r.Seconds, r.RowsPerSecond = receiverClock(start, waited, arrivals, r.Delivery.Distinct)
	r.CPU = cpuBetween(before, after, r.Delivery.Distinct)
	logf("%s: %d messages in %.2f s = %.0f msg/s (cpu process %.2f s, postgres %.2f s, receiver %.2f s)%s",
		runName(r), r.Delivery.Distinct, r.Seconds, r.RowsPerSecond, r.CPU.Process, r.CPU.Postgres, r.CPU.Receiver, problemSuffix(r.Problems))
	return r, nil
}

// receiverClock times a run by the receiver's clock: from its first arrival of the first id
// to its first arrival of the last id (arrivals are earliest first), so the system's start
// (connecting, the first query) is not on the clock; startup is the time from the start of
// delivery to that first arrival. Without arrivals the clock runs from start to waited.
func receiverClock(start, waited time.Time, arrivals []outboxbench.Arrival, distinct int) (startup, seconds, rate float64) {
	first, last := start, waited
	if n := len(arrivals); n > 0 {
		first, last = time.Unix(0, arrivals[0].At), time.Unix(0, arrivals[n-1].At)
	}
	elapsed := last.Sub(first).Seconds()
	if elapsed > 0 {
		rate = machine.Round(float64(distinct)/elapsed, 0)
	}
	return machine.Round(first.Sub(start).Seconds(), 3), machine.Round(elapsed, 3), rate
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
