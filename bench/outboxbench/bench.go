// Package outboxbench is the benchmark harness of the outbox delivery (issue 4): delivered rows
// per second from a backlog, with and without keys, at the default and at tuned settings; the
// insert-to-delivery latency at a steady insert rate; and, from the same run, the server's
// ceiling for one fenced single-row update per transaction (pgbench), so that each figure can
// be read against what one commit per row could reach.
//
// The measured process runs QueueBox only, wired as production wires it: a pgx pool, the
// postgres store, the outbox Poller with the webhook publisher and the Prometheus metrics
// registry. The receiver and the producer of the latency run live in a second process, the
// same binary started with -sink. Speed is reported here and never asserted in a test.
package outboxbench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"runtime"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/alternayte/queuebox/bench/benchdb"
	"github.com/alternayte/queuebox/bench/machine"
	"github.com/alternayte/queuebox/bench/report"
	"github.com/alternayte/queuebox/shared/connect/webhook"
	"github.com/alternayte/queuebox/shared/metrics"
	"github.com/alternayte/queuebox/shared/outbox"
	"github.com/alternayte/queuebox/shared/route"
	"github.com/alternayte/queuebox/shared/service"
	"github.com/alternayte/queuebox/shared/store"
	"github.com/alternayte/queuebox/shared/store/postgres"
	"github.com/alternayte/queuebox/shared/store/postgres/pgtool"
)

// Options are the sizes and switches of a bench run. The zero value of a field is not its
// default: main fills the documented defaults from its flags.
type Options struct {
	// ServerURL is the PostgreSQL server where the bench creates its database.
	ServerURL string
	// Rows is the backlog of each measured backlog run (50 000).
	Rows int
	// Keys is the number of distinct keys of the keyed runs (1 000).
	Keys int
	// Tuned are the candidate tuned settings; the best of each key mode is measured in full.
	Tuned []Settings
	// ExploreRows is the backlog of the runs that choose among Tuned; 0 takes Tuned[0].
	ExploreRows int
	// PoolSize is the poller's pool size (database.poolSize, default 10).
	PoolSize int
	// LatencyRate and LatencySeconds set the producer of the latency run (200 rows/s, 20 s).
	LatencyRate    float64
	LatencySeconds float64
	// LatencyPollInterval is outbox.pollIntervalMs of the latency run (100 ms).
	LatencyPollInterval time.Duration
	// CeilingSeconds is the pgbench duration (10 s). CeilingClients are the connection
	// counts to measure; 0 means the connections the poller opened in the backlog runs (the
	// pool size when no backlog run ran). The first one gives the ratios.
	CeilingSeconds int
	CeilingClients []int
	// RunTimeout bounds one backlog run; a run cut short reports its undelivered rows.
	RunTimeout time.Duration
	// ScaleRows is the number of finished rows of the scale phase's history.
	ScaleRows int
	// CaptureRates are the insert rates of the capture phase, CaptureSeconds how long each
	// run inserts.
	CaptureRates   []float64
	CaptureSeconds float64
	// Phases selects ceiling, backlog, latency, scale, floor and capture.
	Phases map[string]bool
	// Out is the JSON report file; empty writes none.
	Out string
	// CPUProfile, when set, is the prefix of one CPU profile per measured backlog run.
	CPUProfile string
	// Signing signs every request of the HTTP destination with Standard Webhooks and one
	// secret (BenchSigningSecret), so that a run measures the cost of signed deliveries.
	Signing bool
	// Tracing, when set, runs the poller with tracing on at 100 % sampling (docs/tracing.md):
	// "local" exports to an OTLP/HTTP receiver in this process that discards the spans, an
	// http:// or https:// URL to that OTLP endpoint. Empty: tracing off.
	Tracing string
	// Stdout receives the table.
	Stdout io.Writer
}

// Targets of issue 4.
const (
	TargetNoKeys   = 5000.0 // rows/s, no keys
	TargetWithKeys = 2500.0 // rows/s, 1 000 keys
	TargetP50Ms    = 70.0
	TargetP99Ms    = 150.0
)

// Report is the machine-readable result, written as JSON.
type Report struct {
	Date     string       `json:"date"`
	Machine  Machine      `json:"machine"`
	Postgres PostgresInfo `json:"postgres"`
	Options  ReportOpts   `json:"options"`
	Ceiling  *Ceiling     `json:"ceiling,omitempty"`
	// OtherCeilings are the ceilings at the other connection counts asked for.
	OtherCeilings []Ceiling    `json:"otherCeilings,omitempty"`
	Exploration   []BacklogRun `json:"exploration,omitempty"`
	Backlog       []BacklogRun `json:"backlog,omitempty"`
	Latency       *LatencyRun  `json:"latency,omitempty"`
	// Capture are the latency runs of the capture phase on its private cluster
	// (CaptureServer): with capture at each rate, then polling at each rate.
	Capture       []LatencyRun  `json:"capture,omitempty"`
	CaptureServer *PostgresInfo `json:"captureServer,omitempty"`
	// Scale is the scale phase: drains beside millions of finished rows.
	Scale *Scale `json:"scale,omitempty"`
	// Floors are the floor phase's runs: parts of a delivery measured alone.
	Floors   []FloorRun `json:"floors,omitempty"`
	Targets  []Target   `json:"targets"`
	Seconds  float64    `json:"totalSeconds"`
	Problems []string   `json:"problems,omitempty"`
}

// Machine describes where the bench ran.
type Machine struct {
	Cores        int        `json:"cores"`
	GOMAXPROCS   int        `json:"gomaxprocs"`
	GoVersion    string     `json:"goVersion"`
	OS           string     `json:"os"`
	Arch         string     `json:"arch"`
	LoadAvgStart [3]float64 `json:"loadAvgStart"`
	LoadAvgEnd   [3]float64 `json:"loadAvgEnd"`
}

// PostgresInfo is the server's version and the settings that bound commits.
type PostgresInfo = benchdb.ServerInfo

// ReportOpts echoes the options that shape the figures.
type ReportOpts struct {
	Rows                int        `json:"rows"`
	Keys                int        `json:"keys"`
	ExploreRows         int        `json:"exploreRows"`
	Tuned               []Settings `json:"tunedCandidates"`
	PoolSize            int        `json:"poolSize"`
	LatencyRate         float64    `json:"latencyRate"`
	LatencySeconds      float64    `json:"latencySeconds"`
	LatencyPollInterval int64      `json:"latencyPollIntervalMs"`
	CeilingSeconds      int        `json:"ceilingSeconds"`
	CeilingClients      []int      `json:"ceilingClients"` // 0 is auto: the poller's connections
	// Signing says that the HTTP destination signed every request (standard-webhooks, one secret).
	Signing bool `json:"signing,omitempty"`
	// Tracing is Options.Tracing: empty when the poller ran with tracing off.
	Tracing string `json:"tracing,omitempty"`
}

// BacklogRun is one drain of a backlog by one poller.
type BacklogRun struct {
	Name     string   `json:"name"`
	Keys     int      `json:"keys"`
	Settings Settings `json:"settings"`
	Tuned    bool     `json:"tuned"`
	PoolSize int      `json:"poolSize"`
	Rows     int      `json:"rows"`
	// Burst says that the rows went into a table that looked never analysed (backlogSpec).
	Burst         bool    `json:"burst,omitempty"`
	Seconds       float64 `json:"seconds"`
	RowsPerSecond float64 `json:"rowsPerSecond"`
	// RatioToCeiling is RowsPerSecond divided by the pgbench ceiling.
	RatioToCeiling float64                   `json:"ratioToCeiling,omitempty"`
	Summary        outbox.Summary            `json:"summary"`
	States         map[string]int            `json:"states"`
	Receiver       SinkStats                 `json:"receiver"`
	Statements     map[string]StatementStats `json:"statements"`
	PoolConns      int32                     `json:"poolConnsOpened"`
	Load1          float64                   `json:"loadAvg1"`
	CPU            CPUUse                    `json:"cpu"`
	Problems       []string                  `json:"problems,omitempty"`
}

// LatencyRun is the insert-to-delivery latency at a steady insert rate.
type LatencyRun struct {
	Settings Settings `json:"settings"`
	// Capture is whether postgres-logical capture woke the poller.
	Capture    bool                      `json:"capture"`
	Producer   produceResult             `json:"producer"`
	Latency    latencyResult             `json:"latency"`
	Summary    outbox.Summary            `json:"summary"`
	States     map[string]int            `json:"states"`
	Receiver   SinkStats                 `json:"receiver"`
	Statements map[string]StatementStats `json:"statements"`
	Load1      float64                   `json:"loadAvg1"`
	CPU        CPUUse                    `json:"cpu"`
	Problems   []string                  `json:"problems,omitempty"`
}

// Target is one figure of issue 4 against its goal.
type Target struct {
	Name string  `json:"name"`
	Goal string  `json:"goal"`
	Got  float64 `json:"got"`
	Met  bool    `json:"met"`
}

type bench struct {
	opts   Options
	db     *benchDatabase
	sink   *sinkProcess
	log    *slog.Logger
	tracer trace.Tracer // nil: tracing off
}

// Run runs the phases, prints the table and writes the report. It returns an error when a
// phase could not run or a run lost or duplicated rows; a missed target is not an error.
func Run(ctx context.Context, opts Options) (*Report, error) {
	started := time.Now()
	rep := &Report{
		Date: started.UTC().Format(time.RFC3339),
		Machine: Machine{
			Cores: runtime.NumCPU(), GOMAXPROCS: runtime.GOMAXPROCS(0), GoVersion: runtime.Version(),
			OS: runtime.GOOS, Arch: runtime.GOARCH, LoadAvgStart: machine.LoadAverage(),
		},
		Options: ReportOpts{
			Rows: opts.Rows, Keys: opts.Keys, ExploreRows: opts.ExploreRows, Tuned: opts.Tuned,
			PoolSize: opts.PoolSize, LatencyRate: opts.LatencyRate, LatencySeconds: opts.LatencySeconds,
			LatencyPollInterval: opts.LatencyPollInterval.Milliseconds(),
			CeilingSeconds:      opts.CeilingSeconds, CeilingClients: opts.CeilingClients,
			Signing: opts.Signing, Tracing: opts.Tracing,
		},
	}
	logf("load average at start: %.2f %.2f %.2f on %d cores", rep.Machine.LoadAvgStart[0],
		rep.Machine.LoadAvgStart[1], rep.Machine.LoadAvgStart[2], rep.Machine.Cores)

	db, err := createDatabase(ctx, opts.ServerURL)
	if err != nil {
		return nil, err
	}
	defer db.Drop()
	logf("database %s created and migrated", db.Name)
	if rep.Postgres.Version, rep.Postgres.Settings, err = db.ServerFacts(ctx); err != nil {
		return nil, err
	}
	sp, err := startSink(ctx)
	if err != nil {
		return nil, err
	}
	defer sp.stop()
	logf("receiver pid %d at %s", sp.pid(), sp.base)

	b := &bench{opts: opts, db: db, sink: sp,
		log: service.NewLogger(os.Stderr, slog.LevelWarn)}
	if opts.Tracing != "" {
		tp, stop, err := startTracing(ctx, opts.Tracing)
		if err != nil {
			return nil, err
		}
		defer stop()
		b.tracer = tp.Tracer()
		logf("tracing on at 100 %% sampling, exporting to %s", opts.Tracing)
	}

	if opts.Phases["backlog"] {
		if err := b.backlogPhase(ctx, rep); err != nil {
			return nil, err
		}
	}
	// The floors run beside the backlog runs, before the scale phase fills the table with
	// history and leaves the server vacuuming and checkpointing it.
	if opts.Phases["floor"] {
		if err := b.floorPhase(ctx, rep); err != nil {
			return nil, fmt.Errorf("running the floor phase: %w", err)
		}
	}
	if opts.Phases["ceiling"] {
		if err := b.ceilingPhase(ctx, rep); err != nil {
			return nil, err
		}
	}
	if opts.Phases["latency"] {
		lr, err := b.latencyRun(ctx)
		if err != nil {
			return nil, fmt.Errorf("running the latency run: %w", err)
		}
		rep.Latency = &lr
		rep.Problems = append(rep.Problems, prefixed("latency", lr.Problems)...)
	}
	// The capture runs come before the scale phase too: the 10 million rows it writes leave
	// the disk flushing gigabytes for minutes, and a commit's flush on the capture cluster
	// then waits behind them (p99 at 50 commits/s: 307.9 ms after the scale phase in the
	// make bench of 2026-12-06 03:15, 2.3 ms at 00:15).
	if opts.Phases["capture"] {
		if err := b.capturePhase(ctx, rep); err != nil {
			return nil, fmt.Errorf("running the capture phase: %w", err)
		}
	}
	if opts.Phases["scale"] {
		if err := b.scalePhase(ctx, rep); err != nil {
			return nil, fmt.Errorf("running the scale phase: %w", err)
		}
	}
	rep.Machine.LoadAvgEnd = machine.LoadAverage()
	rep.Seconds = round(time.Since(started).Seconds(), 1)
	rep.Targets = targets(rep)
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

func prefixed(p string, ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = p + ": " + s
	}
	return out
}

func (b *bench) backlogPhase(ctx context.Context, rep *Report) error {
	o := b.opts
	modes := []int{0}
	if o.Keys > 0 {
		modes = append(modes, o.Keys)
	}
	for _, keys := range modes {
		best := o.Tuned[0]
		if o.ExploreRows > 0 && len(o.Tuned) > 1 {
			bestRate := -1.0
			for _, cand := range o.Tuned {
				r, err := b.backlogRun(ctx, keys, o.ExploreRows, cand, true, "")
				if err != nil {
					return err
				}
				rep.Exploration = append(rep.Exploration, r)
				rep.Problems = append(rep.Problems, prefixed(r.Name+" (exploration)", r.Problems)...)
				if r.RowsPerSecond > bestRate {
					best, bestRate = cand, r.RowsPerSecond
				}
			}
			logf("%s: best tuned candidate %s", keysLabel(keys), best)
		}
		for _, run := range []struct {
			s     Settings
			tuned bool
		}{{DefaultSettings(), false}, {best, true}} {
			// Each setting drains the backlog twice: after ANALYZE, and as a burst into a
			// table whose statistics predate the rows.
			for _, burst := range []bool{false, true} {
				spec := backlogSpec{Keys: keys, Rows: o.Rows, Settings: run.s, Tuned: run.tuned, Profile: o.CPUProfile, Burst: burst}
				r, err := b.backlog(ctx, spec)
				if err != nil {
					return err
				}
				rep.Backlog = append(rep.Backlog, r)
				rep.Problems = append(rep.Problems, prefixed(r.Name, r.Problems)...)
			}
		}
	}
	return nil
}

// ceilingPhase runs pgbench at each connection count asked for; the first result gives each
// backlog run its ratio.
func (b *bench) ceilingPhase(ctx context.Context, rep *Report) error {
	auto := b.opts.PoolSize
	if len(rep.Backlog) > 0 {
		auto = 0
		for _, r := range append(rep.Exploration, rep.Backlog...) {
			auto = max(auto, int(r.PoolConns))
		}
	}
	for i, clients := range b.opts.CeilingClients {
		if clients <= 0 {
			clients = auto
		}
		logf("ceiling: pgbench, one fenced single-row update per transaction, %d clients, %d s", clients, b.opts.CeilingSeconds)
		c, err := measureCeiling(ctx, b.db, clients, b.opts.CeilingSeconds, b.sink.pid())
		if err != nil {
			return fmt.Errorf("measuring the ceiling: %w", err)
		}
		logf("ceiling: %.0f tps with %d clients (%d rows updated)", c.TPS, clients, c.RowsUpdated)
		if i > 0 {
			rep.OtherCeilings = append(rep.OtherCeilings, c)
			continue
		}
		rep.Ceiling = &c
		for j := range rep.Backlog {
			if c.TPS > 0 {
				rep.Backlog[j].RatioToCeiling = round(rep.Backlog[j].RowsPerSecond/c.TPS, 2)
			}
		}
	}
	return nil
}

func keysLabel(keys int) string {
	if keys == 0 {
		return "no keys"
	}
	return fmt.Sprintf("%d keys", keys)
}

// runName names a backlog run by its keys and settings; a run of the claim mode lock says so.
func runName(keys int, tuned bool, s Settings) string {
	name := keysLabel(keys) + ", default"
	if tuned {
		name = keysLabel(keys) + ", tuned"
	}
	if s.Lock() {
		name += " lock"
	}
	return name
}

// QueueBox is QueueBox's outbox delivery wired as production wires it: a pgx pool of
// database.poolSize, the postgres store, the webhook publisher of one receiver, the metrics
// registry and the outbox Poller, every row routed to the receiver. The outbox bench and the
// side-by-side bench (bench/peers) measure it.
type QueueBox struct {
	// Pool is the poller's pool, Poller the poller.
	Pool   *pgtool.Pool
	Poller *outbox.Poller
	pub    *webhook.Publisher
}

// QueueBoxOptions are how a QueueBox connects and reports.
type QueueBoxOptions struct {
	// DatabaseURL is the database of the outbox; ReceiverBase the receiver's base URL, which
	// gets each message as a POST to /events.
	DatabaseURL, ReceiverBase string
	// Settings are the outbox settings; PoolSize is database.poolSize.
	Settings Settings
	PoolSize int
	// AppName names the pool's connections (application_name), so that their server
	// processes can be found.
	AppName string
	// Timer, when set, sees every statement of the pool.
	Timer pgtool.QueryTimer
	// Logger receives the poller's log lines.
	Logger *slog.Logger
	// Signing signs every request with Standard Webhooks and BenchSigningSecret.
	Signing bool
	// Tracer, when set, makes the poller create its spans (tracing on); nil is off.
	Tracer trace.Tracer
}

// BenchSigningSecret is the secret of a run with signing: a 32-byte key, as a receiver would get
// it. It protects nothing.
const BenchSigningSecret = "whsec_AQIDBAUGBwgJCgsMDQ4PEBESExQVFhcYGRobHB0eHyA="

// NewQueueBox builds a QueueBox. Close it after its runs.
func NewQueueBox(ctx context.Context, o QueueBoxOptions) (*QueueBox, error) {
	qb := &QueueBox{}
	var err error
	qb.Pool, err = pgtool.OpenPool(ctx, o.DatabaseURL, pgtool.PoolOptions{
		MaxConns: int32(o.PoolSize), AppName: o.AppName, Timer: o.Timer,
	})
	if err != nil {
		return nil, fmt.Errorf("opening the poller pool: %w", err)
	}
	st, err := postgres.New(qb.Pool, store.DefaultNames())
	if err != nil {
		qb.Pool.Close()
		return nil, err
	}
	reg := metrics.New(service.Version)
	wc := webhook.Config{Name: "receiver", BaseURL: o.ReceiverBase, Path: "/events"}
	if o.Signing {
		wc.Signing = webhook.Signing{Kind: webhook.SigningStandardWebhooks, Secrets: []string{BenchSigningSecret}}
	}
	if qb.pub, err = webhook.New(wc, reg); err != nil {
		qb.Pool.Close()
		return nil, err
	}
	s := o.Settings
	qb.Poller, err = outbox.New(outbox.Options{
		Store:        st,
		Config:       outbox.Config{BatchSize: s.BatchSize, Concurrency: s.Concurrency, PollInterval: s.PollInterval, ClaimMode: s.ClaimMode},
		Routes:       route.NewTable([]route.Route{{Pattern: route.MustCompile("**"), Destination: "receiver"}}),
		Destinations: []outbox.Destination{{Name: "receiver", Publisher: qb.pub}},
		Metrics:      reg,
		Logger:       o.Logger,
		Tracer:       o.Tracer,
	})
	if err != nil {
		qb.Close()
		return nil, err
	}
	return qb, nil
}

// Close closes the publisher and the pool.
func (qb *QueueBox) Close() {
	if qb.pub != nil {
		_ = qb.pub.Close()
	}
	qb.Pool.Close()
}

// queueBox is the measured QueueBox of one run of this bench, with its statement tracer.
type queueBox struct {
	*QueueBox
	tracer *stmtTracer
}

const pollerAppName = "outboxbench-poller"

func (b *bench) newQueueBox(ctx context.Context, s Settings) (*queueBox, error) {
	tracer := newStmtTracer()
	q, err := NewQueueBox(ctx, QueueBoxOptions{
		DatabaseURL: b.db.URL, ReceiverBase: b.sink.base, Settings: s, PoolSize: b.opts.PoolSize,
		AppName: pollerAppName, Timer: tracer.observe, Logger: b.log, Signing: b.opts.Signing,
		Tracer: b.tracer,
	})
	if err != nil {
		return nil, err
	}
	return &queueBox{QueueBox: q, tracer: tracer}, nil
}

// backendCPU returns the CPU seconds of the poller pool's server processes. Call it before
// close: the backends end with their connections.
func (qb *queueBox) backendCPU(ctx context.Context, db *benchDatabase) float64 {
	pids, err := db.ApplicationPIDs(ctx, pollerAppName)
	if err != nil {
		return 0
	}
	total := 0.0
	for _, pid := range pids {
		total += machine.ProcessCPU(pid)
	}
	return total
}

func (qb *queueBox) close() { qb.Close() }

// backlogRun inserts rows, drains them with one poller in StopWhenIdle mode, and checks that
// every row is sent and that the receiver saw each one.
func (b *bench) backlogRun(ctx context.Context, keys, rows int, s Settings, tuned bool, profile string) (BacklogRun, error) {
	return b.backlog(ctx, backlogSpec{Keys: keys, Rows: rows, Settings: s, Tuned: tuned, Profile: profile})
}

// backlogSpec is one backlog run.
type backlogSpec struct {
	// Name names the run; empty takes runName.
	Name       string
	Keys, Rows int
	Settings   Settings
	Tuned      bool
	Profile    string
	// KeepTable inserts the backlog beside the rows the table holds (the history of the scale
	// phase) instead of emptying it first; the checks count the backlog's topic only.
	KeepTable bool
	// During, when set, runs while the poller drains; its context ends with the drain.
	During func(ctx context.Context)
	// Burst inserts the backlog into a table that looks never analysed and that autovacuum
	// leaves alone during the run, instead of analysing it first.
	Burst bool
}

// backlog runs spec: it inserts the backlog, drains it with one poller in StopWhenIdle mode,
// and checks that every row is sent and that the receiver saw each one.
func (b *bench) backlog(ctx context.Context, spec backlogSpec) (BacklogRun, error) {
	keys, rows, s, profile := spec.Keys, spec.Rows, spec.Settings, spec.Profile
	r := BacklogRun{Name: spec.Name, Keys: keys, Settings: s, Tuned: spec.Tuned, PoolSize: b.opts.PoolSize, Rows: rows, Burst: spec.Burst}
	if r.Name == "" {
		r.Name = runName(keys, spec.Tuned, s)
		if spec.Burst {
			r.Name += ", burst"
		}
	}
	logf("%s (%s): inserting %d rows", r.Name, s, rows)
	if spec.KeepTable {
		if err := b.db.deleteBacklog(ctx); err != nil {
			return r, err
		}
	} else if err := b.db.resetOutbox(ctx); err != nil {
		return r, err
	}
	if spec.Burst {
		if err := b.db.forgetStatistics(ctx); err != nil {
			return r, err
		}
	}
	if err := b.db.insertBacklog(ctx, rows, keys, !spec.Burst); err != nil {
		return r, err
	}
	if err := b.sink.reset(ctx); err != nil {
		return r, err
	}
	qb, err := b.newQueueBox(ctx, s)
	if err != nil {
		return r, err
	}
	defer qb.close()

	if profile != "" {
		name := fmt.Sprintf("%s-%s.pprof", profile, slug(r.Name))
		stopProfile, err := machine.StartCPUProfile(name)
		if err != nil {
			return r, err
		}
		defer logf("CPU profile written to %s", name)
		defer stopProfile()
	}

	r.Load1 = machine.LoadAverage()[0]
	before := readCPU(b.sink.pid())
	runCtx, cancel := context.WithTimeout(ctx, b.opts.RunTimeout)
	defer cancel()
	stopDuring := func() {}
	if spec.During != nil {
		duringCtx, cancelDuring := context.WithCancel(runCtx)
		var during sync.WaitGroup
		during.Go(func() { spec.During(duringCtx) })
		stopDuring = func() {
			cancelDuring()
			during.Wait()
		}
		defer stopDuring()
	}
	start := time.Now()
	r.Summary = qb.Poller.Run(runCtx, outbox.RunOptions{StopWhenIdle: true})
	elapsed := time.Since(start)
	stopDuring()
	if ctx.Err() == nil && runCtx.Err() != nil {
		r.Problems = append(r.Problems, fmt.Sprintf("cut short after %s (-run-timeout)", b.opts.RunTimeout))
	}
	backends := qb.backendCPU(ctx, b.db)
	after := readCPU(b.sink.pid())
	if ctx.Err() != nil {
		return r, ctx.Err()
	}
	r.CPU = cpuBetween(before, after, backends)
	r.Seconds = round(elapsed.Seconds(), 2)
	r.RowsPerSecond = round(float64(r.Summary.Sent)/elapsed.Seconds(), 0)
	r.Statements = qb.tracer.snapshot()
	r.PoolConns = qb.Pool.Stat().TotalConns()

	if r.States, err = b.db.stateCounts(ctx); err != nil {
		return r, err
	}
	if r.Receiver, err = b.sink.stats(ctx); err != nil {
		return r, err
	}
	r.Problems = append(r.Problems, checkDelivered(rows, r.States, r.Receiver, r.Summary)...)
	if b.opts.Signing && r.Receiver.Signed != r.Receiver.Requests {
		r.Problems = append(r.Problems, fmt.Sprintf("-signing: %d of %d requests carried a webhook-signature", r.Receiver.Signed, r.Receiver.Requests))
	}
	logf("%s (%s): %d rows in %.2f s = %.0f rows/s%s", r.Name, s, r.Summary.Sent, r.Seconds, r.RowsPerSecond, problemSuffix(r.Problems))
	return r, nil
}

// checkDelivered lists what is wrong with a drained backlog: a row not sent, a receiver that
// did not see every row, or a lost claim.
func checkDelivered(rows int, states map[string]int, rcv SinkStats, sum outbox.Summary) []string {
	var problems []string
	if states["sent"] != rows {
		problems = append(problems, fmt.Sprintf("%d of %d rows are sent (states %v)", states["sent"], rows, states))
	}
	if rcv.Distinct != rows {
		problems = append(problems, fmt.Sprintf("the receiver saw %d distinct messages, want %d", rcv.Distinct, rows))
	}
	if rcv.Duplicates > 0 {
		problems = append(problems, fmt.Sprintf("the receiver saw %d duplicates", rcv.Duplicates))
	}
	if sum.ClaimsLost > 0 || sum.Retried > 0 || sum.Dead > 0 {
		problems = append(problems, fmt.Sprintf("summary %+v", sum))
	}
	return problems
}

func problemSuffix(p []string) string {
	if len(p) == 0 {
		return ""
	}
	return " — PROBLEM: " + strings.Join(p, "; ")
}

// latencyRun runs one poller continuously while the helper inserts rows at a steady rate,
// then measures, per row, the receiver's arrival time minus the producer's commit time.
func (b *bench) latencyRun(ctx context.Context) (LatencyRun, error) {
	s := DefaultSettings()
	s.PollInterval = b.opts.LatencyPollInterval
	return b.steadyRun(ctx, steadySpec{Settings: s, Rate: b.opts.LatencyRate, Seconds: b.opts.LatencySeconds})
}

// steadySpec is one steady-rate latency run: the poller's settings, the insert rate and how
// long the producer inserts, and whether postgres-logical capture wakes the poller.
type steadySpec struct {
	Settings Settings
	Rate     float64
	Seconds  float64
	// Capture, when set, runs the capture connector of the run's database, waking the poller.
	Capture *captureSpec
}

// steadyRun runs one poller (and the capture connector of spec.Capture) continuously while the
// helper inserts rows at spec.Rate, then measures, per row, the receiver's arrival time minus
// the producer's commit time, and checks that every row was delivered once.
func (b *bench) steadyRun(ctx context.Context, spec steadySpec) (LatencyRun, error) {
	s := spec.Settings
	r := LatencyRun{Settings: s, Capture: spec.Capture != nil}
	if err := b.db.resetOutbox(ctx); err != nil {
		return r, err
	}
	if err := b.db.vacuum(ctx); err != nil {
		return r, err
	}
	if err := b.sink.reset(ctx); err != nil {
		return r, err
	}
	qb, err := b.newQueueBox(ctx, s)
	if err != nil {
		return r, err
	}
	defer qb.close()

	how := "polling"
	if spec.Capture != nil {
		how = "woken by postgres-logical capture"
	}
	logf("latency: %.0f rows/s for %.0f s, one row per transaction, poller at %s, %s", spec.Rate, spec.Seconds, s, how)
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	var captured chan error
	if spec.Capture != nil {
		conn, err := spec.Capture.connector(qb.Poller, b.log)
		if err != nil {
			return r, err
		}
		captured = make(chan error, 1)
		go func() { captured <- conn.Run(runCtx) }()
		if err := spec.Capture.waitStreaming(ctx, conn); err != nil {
			stop()
			<-captured
			return r, err
		}
	}
	summary := make(chan outbox.Summary, 1)
	go func() { summary <- qb.Poller.Run(runCtx, outbox.RunOptions{}) }()
	sleepCtx(ctx, 500*time.Millisecond) // the first idle claim opens the connections
	stopAll := func() {
		stop()
		r.Summary = <-summary
		if captured != nil {
			if err := <-captured; err != nil && !errors.Is(err, context.Canceled) {
				r.Problems = append(r.Problems, "the capture connector failed: "+err.Error())
			}
		}
	}

	r.Load1 = machine.LoadAverage()[0]
	before := readCPU(b.sink.pid())
	err = b.sink.call(ctx, http.MethodPost, "/produce", produceRequest{
		DatabaseURL: b.db.URL, Rate: spec.Rate, Seconds: spec.Seconds, Workers: 4,
	}, &r.Producer)
	if err != nil {
		stopAll()
		return r, err
	}
	r.Receiver, err = b.sink.waitDistinct(ctx, r.Producer.Rows, 30*time.Second)
	after := readCPU(b.sink.pid())
	backends := qb.backendCPU(ctx, b.db)
	stopAll()
	if err != nil {
		return r, err
	}
	r.CPU = cpuBetween(before, after, backends)
	r.Statements = qb.tracer.snapshot()
	if err := b.sink.call(ctx, http.MethodGet, "/latency", nil, &r.Latency); err != nil {
		return r, err
	}
	if r.States, err = b.db.stateCounts(ctx); err != nil {
		return r, err
	}
	if r.Receiver, err = b.sink.stats(ctx); err != nil {
		return r, err
	}
	r.Problems = append(r.Problems, checkDelivered(r.Producer.Rows, r.States, r.Receiver, r.Summary)...)
	if r.Producer.Errors > 0 {
		r.Problems = append(r.Problems, fmt.Sprintf("the producer had %d insert errors: %s", r.Producer.Errors, r.Producer.FirstError))
	}
	logf("latency: %d rows at %.1f rows/s (%s): p50 %.1f ms, p99 %.1f ms, max %.1f ms%s", r.Latency.Rows,
		r.Producer.Rate, how, r.Latency.P50Ms, r.Latency.P99Ms, r.Latency.MaxMs, problemSuffix(r.Problems))
	return r, nil
}

func targets(rep *Report) []Target {
	var ts []Target
	best := map[int]float64{}
	for _, r := range rep.Backlog {
		best[r.Keys] = max(best[r.Keys], r.RowsPerSecond)
	}
	if v, ok := best[0]; ok {
		ts = append(ts, Target{Name: "rows/s, no keys (best run)", Goal: ">= 5000", Got: v, Met: v >= TargetNoKeys})
	}
	for k, v := range best {
		if k != 0 {
			ts = append(ts, Target{Name: fmt.Sprintf("rows/s, %d keys (best run)", k), Goal: ">= 2500", Got: v, Met: v >= TargetWithKeys})
		}
	}
	ts = append(ts, burstTargets(rep.Backlog)...)
	if l := rep.Latency; l != nil {
		ts = append(ts,
			Target{Name: "latency p50 ms", Goal: "< 70", Got: l.Latency.P50Ms, Met: l.Latency.P50Ms < TargetP50Ms},
			Target{Name: "latency p99 ms", Goal: "< 150", Got: l.Latency.P99Ms, Met: l.Latency.P99Ms < TargetP99Ms})
	}
	for _, l := range rep.Capture {
		if !l.Capture {
			continue
		}
		rate := fmt.Sprintf("%.0f/s", l.Producer.Rate)
		ts = append(ts,
			Target{Name: "capture p50 ms at " + rate, Goal: "< 10", Got: l.Latency.P50Ms, Met: l.Latency.P50Ms < TargetCaptureP50Ms},
			Target{Name: "capture p99 ms at " + rate, Goal: "< 30", Got: l.Latency.P99Ms, Met: l.Latency.P99Ms < TargetCaptureP99Ms})
	}
	return ts
}

// TargetBurstRatio is the least rate of a burst (rows into a table whose statistics predate
// them) as a fraction of the same drain after ANALYZE.
const TargetBurstRatio = 0.9

// burstTargets compares each burst run with the analysed run of the same keys and settings.
func burstTargets(runs []BacklogRun) []Target {
	var ts []Target
	for _, burst := range runs {
		if !burst.Burst {
			continue
		}
		for _, analysed := range runs {
			if analysed.Burst || analysed.Keys != burst.Keys || analysed.Settings != burst.Settings || analysed.RowsPerSecond <= 0 {
				continue
			}
			ratio := round(burst.RowsPerSecond/analysed.RowsPerSecond, 2)
			ts = append(ts, Target{Name: burst.Name + " / after ANALYZE", Goal: ">= 0.9", Got: ratio, Met: ratio >= TargetBurstRatio})
			break
		}
	}
	return ts
}

func printTable(w io.Writer, rep *Report) {
	p := func(format string, args ...any) { _, _ = fmt.Fprintf(w, format, args...) }
	m := rep.Machine
	p("\nQueueBox outbox delivery bench — %s, %d cores, %s, PostgreSQL %s\n", rep.Date, m.Cores, m.GoVersion, rep.Postgres.Version)
	p("load average at start %.2f %.2f %.2f, at end %.2f %.2f %.2f\n\n",
		m.LoadAvgStart[0], m.LoadAvgStart[1], m.LoadAvgStart[2], m.LoadAvgEnd[0], m.LoadAvgEnd[1], m.LoadAvgEnd[2])
	if c := rep.Ceiling; c != nil {
		p("ceiling: pgbench, 1 fenced single-row update per transaction, %d clients (the poller's connections): %.0f tps (%d rows updated, latency %.2f ms, load %.2f)\n",
			c.Clients, c.TPS, c.RowsUpdated, c.LatencyMs, c.Load1)
		for _, c := range rep.OtherCeilings {
			p("ceiling at %d clients: %.0f tps (%d rows updated, latency %.2f ms, load %.2f)\n", c.Clients, c.TPS, c.RowsUpdated, c.LatencyMs, c.Load1)
		}
		p("\n")
	}
	if len(rep.Backlog) > 0 {
		p("%-28s %6s %5s %7s %8s %8s %8s %7s %6s %s\n", "backlog run", "batch", "conc", "rows", "seconds", "rows/s", "/ceiling", "target", "load1", "cpu poller/pg/rcv/other s (busy %)")
		for _, r := range rep.Backlog {
			goal := TargetNoKeys
			if r.Keys > 0 {
				goal = TargetWithKeys
			}
			mark := "miss"
			if r.RowsPerSecond >= goal {
				mark = "met"
			}
			p("%-28s %6d %5d %7d %8.2f %8.0f %8.2f %7s %6.2f %.1f/%.1f/%.1f/%.1f (%.0f%%)\n", r.Name, r.Settings.BatchSize, r.Settings.Concurrency,
				r.Rows, r.Seconds, r.RowsPerSecond, r.RatioToCeiling, fmt.Sprintf("%.0f %s", goal, mark), r.Load1,
				r.CPU.PollerProcess, r.CPU.PostgresOurs, r.CPU.Receiver, r.CPU.OtherMachine, r.CPU.MachineBusyPct)
		}
		p("\n")
		for _, r := range rep.Backlog {
			p("%-28s statements: %s\n", r.Name, statementLine(r.Statements))
		}
		p("\n")
	}
	if l := rep.Latency; l != nil {
		p("latency at %.1f rows/s (one insert per transaction), %s: p50 %.1f ms, p90 %.1f ms, p99 %.1f ms, max %.1f ms over %d rows (load %.2f)\n",
			l.Producer.Rate, l.Settings, l.Latency.P50Ms, l.Latency.P90Ms, l.Latency.P99Ms, l.Latency.MaxMs, l.Latency.Rows, l.Load1)
		p("latency statements: %s\n\n", statementLine(l.Statements))
	}
	if sc := rep.Scale; sc != nil {
		p("scale: %d finished rows (%d older than the %.0f h retention), written in %.0f s, outbox %d MB; drains of %d rows at the defaults:\n",
			sc.HistoryRows, sc.AgedRows, sc.RetentionHours, sc.FillSeconds, sc.TableBytes>>20, o0(sc.Runs).Rows)
		p("%-46s %10s %8s %12s %10s %6s %s\n", "run", "history", "rows/s", "claim ms avg", "deleted", "load1", "cpu poller/pg/rcv/other s")
		for _, r := range sc.Runs {
			p("%-46s %10d %8.0f %12.2f %10d %6.2f %.1f/%.1f/%.1f/%.1f\n", r.Name, r.HistoryRows, r.RowsPerSecond, r.ClaimMeanMs, r.RetentionDeleted,
				r.Load1, r.CPU.PollerProcess, r.CPU.PostgresOurs, r.CPU.Receiver, r.CPU.OtherMachine)
		}
		p("\n")
	}
	if len(rep.Floors) > 0 {
		p("floors (issue 15, target 2): parts of a delivery measured alone, CPU per row\n")
		p("%-22s %7s %6s %8s %8s %12s %10s %10s %6s\n", "floor", "rows", "conc", "seconds", "rows/s", "process us", "pg us", "rcv us", "load1")
		for _, f := range rep.Floors {
			p("%-22s %7d %6d %8.2f %8.0f %12.1f %10.1f %10.1f %6.2f\n", f.Name, f.Rows, max(f.Concurrency, f.Batch), f.Seconds, f.RowsPerSec,
				f.ProcessUsPerRow, f.PostgresUsPerRow, f.ReceiverUsPerRow, f.Load1)
		}
		p("\n")
	}
	if len(rep.Capture) > 0 {
		p("latency on a private cluster with wal_level = logical (durable commits), one insert per transaction:\n")
		p("%-44s %8s %8s %8s %8s %8s %6s %6s %s\n", "run", "rows/s", "p50 ms", "p90 ms", "p99 ms", "max ms", "rows", "load1", "cpu poller/pg/rcv+producer s, claims")
		for _, l := range rep.Capture {
			name := fmt.Sprintf("polling, pollIntervalMs %d", l.Settings.PollInterval.Milliseconds())
			if l.Capture {
				name = fmt.Sprintf("capture, pollIntervalMs %d", l.Settings.PollInterval.Milliseconds())
			}
			p("%-44s %8.1f %8.1f %8.1f %8.1f %8.1f %6d %6.2f %.1f/%.1f/%.1f, %d\n", name, l.Producer.Rate, l.Latency.P50Ms, l.Latency.P90Ms,
				l.Latency.P99Ms, l.Latency.MaxMs, l.Latency.Rows, l.Load1, l.CPU.PollerProcess, l.CPU.PostgresOurs, l.CPU.Receiver, l.Statements["claim"].Count)
		}
		p("\n")
	}
	p("targets:\n")
	for _, t := range rep.Targets {
		mark := "MISSED"
		if t.Met {
			mark = "met"
		}
		p("  %-28s %-8s got %-9.1f %s\n", t.Name, t.Goal, t.Got, mark)
	}
	if len(rep.Problems) > 0 {
		p("\nPROBLEMS:\n")
		for _, pr := range rep.Problems {
			p("  %s\n", pr)
		}
	}
	p("total %.0f s\n", rep.Seconds)
}

// o0 returns the first run, or a zero one.
func o0(runs []ScaleRun) ScaleRun {
	if len(runs) == 0 {
		return ScaleRun{}
	}
	return runs[0]
}

func statementLine(st map[string]StatementStats) string {
	var parts []string
	for _, k := range []string{"claim", "markSent", "renew", "reclaim", "stats", "retry", "markDead", "other"} {
		if s, ok := st[k]; ok {
			parts = append(parts, fmt.Sprintf("%s %d× %.2f ms avg %.1f rows", k, s.Count, s.MeanMs, s.RowsPerStatement))
		}
	}
	return strings.Join(parts, ", ")
}

func slug(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
		} else if b.Len() > 0 && !strings.HasSuffix(b.String(), "-") {
			b.WriteByte('-')
		}
	}
	return strings.TrimSuffix(b.String(), "-")
}

// logf writes a progress line to stderr.
func logf(format string, args ...any) {
	_, _ = fmt.Fprintf(os.Stderr, time.Now().Format("15:04:05")+" outboxbench: "+format+"\n", args...)
}
