// Package inboxbench is the benchmark harness of the inbox (issue 5): accepted webhooks per
// second into one HTTP source on loopback, with new idempotency keys (202) and with keys that
// already exist (200 duplicate), and the latency of each answer.
//
// The measured process runs QueueBox's real local process (localserver.New and Run, built from
// a configuration loaded from QUEUEBOX_ variables by service.LoadEnv) against a private
// database. The source is a pull source, so the inbox relay finds nothing to copy and does not
// compete with the requests for the database. The load generator is a second process, the same binary started with
// -loadgen: keep-alive HTTP clients that post as fast as they are answered. Speed is reported
// here and never asserted in a test.
package inboxbench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strconv"
	"time"

	"github.com/alternayte/queuebox/bench/benchdb"
	"github.com/alternayte/queuebox/bench/machine"
	"github.com/alternayte/queuebox/bench/report"
	"github.com/alternayte/queuebox/shared/localserver"
	"github.com/alternayte/queuebox/shared/service"
)

// Source is the name of the bench's HTTP source, and its path under the inbox base path.
const Source = "bench"

// Targets of issue 5, on the 2-core development machine.
const (
	TargetNewPerSec       = 4000.0 // 202 answers per second, new keys
	TargetDuplicatePerSec = 8000.0 // 200 answers per second, existing keys
)

// Options are the sizes and switches of a bench run. main fills the documented defaults from
// its flags.
type Options struct {
	// ServerURL is the PostgreSQL server where the bench creates its database.
	ServerURL string
	// Clients is the number of concurrent keep-alive clients of the load generator (32).
	Clients int
	// Seconds is the duration of each phase (10).
	Seconds float64
	// PoolSize is QueueBox's database.poolSize (the default of the configuration when 0).
	PoolSize int
	// Out is the JSON report file; empty writes none.
	Out string
	// CPUProfile, when set, is the file of a CPU profile of QueueBox during the new phase.
	CPUProfile string
	// CeilingSeconds is the length of the pgbench ceiling run after the phases (10); 0
	// skips it. CeilingClients is its connection count (the pool size when 0).
	CeilingSeconds int
	CeilingClients int
	// Stdout receives the table.
	Stdout io.Writer
}

// Report is the machine-readable result, written as JSON.
type Report struct {
	Date     string            `json:"date"`
	Machine  Machine           `json:"machine"`
	Postgres PostgresInfo      `json:"postgres"`
	Settings map[string]any    `json:"settings"`
	Phases   []Phase           `json:"phases"`
	Rows     RowCheck          `json:"rows"`
	Targets  []Target          `json:"targets"`
	Ceiling  *Ceiling          `json:"ceiling,omitempty"`
	Seconds  float64           `json:"totalSeconds"`
	Config   map[string]string `json:"queueboxEnvironment"`
	Problems []string          `json:"problems,omitempty"`
}

// Machine describes where the bench ran.
type Machine = machine.Info

// PostgresInfo is the server's version and the settings that bound commits.
type PostgresInfo = benchdb.ServerInfo

// Phase is one measured phase: what the load generator saw and the CPU spent.
type Phase struct {
	PhaseResult
	Load1 float64 `json:"loadAvg1"`
	CPU   CPUUse  `json:"cpu"`
}

// RowCheck compares the inbox rows with the answers: each 202 of the new phase is one row,
// and the duplicates phase adds none.
type RowCheck struct {
	Accepted202     int  `json:"accepted202"`
	RowsAfterNew    int  `json:"rowsAfterNew"`
	DistinctKeys    int  `json:"distinctKeys"`
	RowsAfterDupes  int  `json:"rowsAfterDuplicates"`
	AcceptedInDupes int  `json:"accepted202InDuplicatesPhase"`
	NothingLost     bool `json:"nothingLost"`
	NoDuplicateRows bool `json:"noDuplicateRows"`
}

// Target is one figure of the issue and whether the run met it.
type Target struct {
	Name   string  `json:"name"`
	Target float64 `json:"target"`
	Got    float64 `json:"got"`
	Met    bool    `json:"met"`
}

// Run creates the database, starts QueueBox and the load generator, runs the new-keys phase
// and the duplicates phase, checks the rows, prints the table and writes the report.
func Run(ctx context.Context, opts Options) (*Report, error) {
	began := time.Now()
	rep := &Report{
		Date:    began.UTC().Format(time.RFC3339),
		Machine: machine.Describe(),
		Settings: map[string]any{
			"clients": opts.Clients, "secondsPerPhase": opts.Seconds, "source": Source,
			"consumption": "pull", "body": `{"id":"c<client>-<n>","n":<n>}`,
		},
	}
	db, err := createDatabase(ctx, opts.ServerURL)
	if err != nil {
		return nil, err
	}
	defer db.Drop()
	if rep.Postgres.Version, rep.Postgres.Settings, err = db.ServerFacts(ctx); err != nil {
		return nil, err
	}

	port, err := freePort()
	if err != nil {
		return nil, err
	}
	env := map[string]string{
		"QUEUEBOX_DATABASE_TYPE":     "postgresql",
		"QUEUEBOX_DATABASE_URL":      db.URL,
		"QUEUEBOX_DATABASE_USERNAME": "",
		"QUEUEBOX_DATABASE_PASSWORD": "",
		// The bench applied the migrations as an operator would with psql (no history table).
		"QUEUEBOX_DATABASE_MIGRATE":                 "false",
		"QUEUEBOX_SERVER_HTTPPORT":                  strconv.Itoa(port),
		"QUEUEBOX_SOURCES_BENCH_TYPE":               "http",
		"QUEUEBOX_SOURCES_BENCH_PATH":               "/" + Source,
		"QUEUEBOX_SOURCES_BENCH_IDEMPOTENCYKEYPATH": "$.id",
		"QUEUEBOX_SOURCES_BENCH_CONSUMPTION":        "pull",
	}
	if u, p, ok := userPassword(db.URL); ok {
		env["QUEUEBOX_DATABASE_USERNAME"], env["QUEUEBOX_DATABASE_PASSWORD"] = u, p
	}
	if env["QUEUEBOX_DATABASE_PASSWORD"] == "" {
		// database.password is required; the test server trusts local connections and
		// ignores it.
		env["QUEUEBOX_DATABASE_PASSWORD"] = "unused"
	}
	if opts.PoolSize > 0 {
		env["QUEUEBOX_DATABASE_POOLSIZE"] = strconv.Itoa(opts.PoolSize)
	}
	cfg, err := service.LoadEnv(env)
	if err != nil {
		return nil, fmt.Errorf("loading the QueueBox configuration: %w", err)
	}
	rep.Config = map[string]string{}
	for k, v := range env {
		if k == "QUEUEBOX_DATABASE_PASSWORD" && v != "" {
			v = "***"
		}
		if k == "QUEUEBOX_DATABASE_URL" {
			v = benchdb.RedactURL(v)
		}
		rep.Config[k] = v
	}
	rep.Settings["poolSize"] = cfg.Database.PoolSize
	rep.Settings["relayEnabled"] = cfg.Inbox.Relay.Enabled

	// QueueBox logs warnings and errors only: a log line per request would measure the logger.
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	qbCtx, stopQB := context.WithCancel(ctx)
	defer stopQB()
	local, err := localserver.New(qbCtx, cfg, log)
	if err != nil {
		return nil, fmt.Errorf("starting QueueBox: %w", err)
	}
	runDone := make(chan error, 1)
	go func() { runDone <- local.Run(qbCtx) }()
	stopped := false
	stop := func() error {
		if stopped {
			return nil
		}
		stopped = true
		stopQB()
		select {
		case err := <-runDone:
			return err
		case <-time.After(30 * time.Second):
			return errors.New("QueueBox did not stop within 30 s")
		}
	}
	defer func() { _ = stop() }()
	select {
	case <-local.Ready():
	case <-time.After(30 * time.Second):
		return nil, errors.New("QueueBox did not listen within 30 s")
	}
	addrs := local.Addrs()
	if len(addrs) == 0 {
		return nil, errors.New("QueueBox does not listen")
	}
	tcp, ok := addrs[0].(*net.TCPAddr)
	if !ok {
		return nil, fmt.Errorf("QueueBox listens on %s, not a TCP address", addrs[0])
	}
	target := fmt.Sprintf("http://127.0.0.1:%d%s/%s", tcp.Port, cfg.Inbox.BasePath, Source)
	rep.Settings["url"] = target

	lg, err := startLoadGen(ctx)
	if err != nil {
		return nil, err
	}
	defer lg.stop()

	for _, name := range []string{PhaseNew, PhaseDuplicates} {
		logf("phase %s: %d clients for %g s", name, opts.Clients, opts.Seconds)
		var stopProfile func()
		if name == PhaseNew && opts.CPUProfile != "" {
			if stopProfile, err = machine.StartCPUProfile(opts.CPUProfile); err != nil {
				return nil, err
			}
		}
		load1 := machine.LoadAverage()[0]
		before := readCPU(lg.pid(), db.backendCPU(ctx))
		res, err := lg.phase(ctx, loadCommand{Phase: name, URL: target, Clients: opts.Clients, Seconds: opts.Seconds})
		after := readCPU(lg.pid(), db.backendCPU(ctx))
		if stopProfile != nil {
			stopProfile()
		}
		if err != nil {
			return nil, err
		}
		rep.Phases = append(rep.Phases, Phase{PhaseResult: res, Load1: load1, CPU: cpuBetween(before, after, res.Requests)})
		if res.TransportError > 0 || len(res.OtherStatus) > 0 {
			rep.Problems = append(rep.Problems, fmt.Sprintf("%s phase: %d transport errors, other statuses %v (first error %q)", name, res.TransportError, res.OtherStatus, res.FirstError))
		}
		rows, distinct, err := db.inboxCounts(ctx, Source)
		if err != nil {
			return nil, err
		}
		if name == PhaseNew {
			rep.Rows.Accepted202 = res.Accepted
			rep.Rows.RowsAfterNew, rep.Rows.DistinctKeys = rows, distinct
		} else {
			rep.Rows.RowsAfterDupes = rows
			rep.Rows.AcceptedInDupes = res.Accepted
		}
	}
	rc := &rep.Rows
	rc.NothingLost = rc.RowsAfterNew == rc.Accepted202 && rc.RowsAfterDupes == rc.RowsAfterNew
	rc.NoDuplicateRows = rc.DistinctKeys == rc.RowsAfterNew && rc.AcceptedInDupes == 0
	if !rc.NothingLost {
		rep.Problems = append(rep.Problems, fmt.Sprintf("rows: %d accepted (202) but %d rows after the new phase and %d after the duplicates phase", rc.Accepted202, rc.RowsAfterNew, rc.RowsAfterDupes))
	}
	if !rc.NoDuplicateRows {
		rep.Problems = append(rep.Problems, fmt.Sprintf("rows: %d rows for %d distinct keys, %d answers 202 to a repeated key", rc.RowsAfterNew, rc.DistinctKeys, rc.AcceptedInDupes))
	}
	if err := stop(); err != nil {
		rep.Problems = append(rep.Problems, "stopping QueueBox: "+err.Error())
	}
	lg.stop()
	if opts.CeilingSeconds > 0 {
		clients := opts.CeilingClients
		if clients <= 0 {
			clients = cfg.Database.PoolSize
		}
		logf("ceiling: pgbench, %d clients for %d s", clients, opts.CeilingSeconds)
		c, err := measureCeiling(ctx, db, clients, opts.CeilingSeconds)
		if err != nil {
			rep.Problems = append(rep.Problems, "ceiling: "+err.Error())
		} else {
			rep.Ceiling = &c
		}
	}

	for _, p := range rep.Phases {
		t := Target{Name: "new keys, 202/s", Target: TargetNewPerSec, Got: p.ExpectedPerSec}
		if p.Phase == PhaseDuplicates {
			t = Target{Name: "duplicates, 200/s", Target: TargetDuplicatePerSec, Got: p.ExpectedPerSec}
		}
		t.Met = t.Got >= t.Target
		rep.Targets = append(rep.Targets, t)
	}
	rep.Machine.LoadAvgEnd = machine.LoadAverage()
	rep.Seconds = round(time.Since(began).Seconds(), 1)
	printTable(opts.Stdout, rep)
	if opts.Out != "" {
		if err := report.WriteJSON(opts.Out, rep); err != nil {
			return rep, err
		}
	}
	if len(rep.Problems) > 0 {
		return rep, fmt.Errorf("%d problems (see the report)", len(rep.Problems))
	}
	return rep, nil
}

func printTable(w io.Writer, rep *Report) {
	if w == nil {
		return
	}
	fmt.Fprintf(w, "inbox bench: %d clients, %g s per phase, source %q (pull), pool %v, %d cores, %s, load %.2f → %.2f\n",
		rep.Settings["clients"], rep.Settings["secondsPerPhase"], Source, rep.Settings["poolSize"], rep.Machine.Cores, rep.Machine.GoVersion,
		rep.Machine.LoadAvgStart[0], rep.Machine.LoadAvgEnd[0])
	fmt.Fprintf(w, "%-11s %9s %9s %8s %8s %8s %8s %6s  %s\n", "phase", "req/s", "expect/s", "p50 ms", "p99 ms", "max ms", "errors", "load1", "cpu µs/req qb/pg/gen (busy %)")
	for _, p := range rep.Phases {
		errs := p.TransportError
		for _, n := range p.OtherStatus {
			errs += n
		}
		fmt.Fprintf(w, "%-11s %9.0f %9.0f %8.2f %8.2f %8.2f %8d %6.2f  %.0f/%.0f/%.0f (%.0f %%)\n", p.Phase, p.RequestsPerSec, p.ExpectedPerSec,
			p.P50Ms, p.P99Ms, p.MaxMs, errs, p.Load1, p.CPU.QueueBoxUsPerRequest, p.CPU.PostgresUsPerRequest, p.CPU.LoadGenUsPerRequest, p.CPU.MachineBusyPct)
	}
	fmt.Fprintf(w, "rows: %d accepted, %d rows (%d distinct keys), %d after duplicates; nothing lost: %v, no duplicate rows: %v\n",
		rep.Rows.Accepted202, rep.Rows.RowsAfterNew, rep.Rows.DistinctKeys, rep.Rows.RowsAfterDupes, rep.Rows.NothingLost, rep.Rows.NoDuplicateRows)
	for _, t := range rep.Targets {
		met := "MISSED"
		if t.Met {
			met = "met"
		}
		fmt.Fprintf(w, "target %-18s ≥ %.0f: %.0f %s\n", t.Name, t.Target, t.Got, met)
	}
	if c := rep.Ceiling; c != nil {
		fmt.Fprintf(w, "ceiling: PostgreSQL alone, one single-row INSERT ... ON CONFLICT DO NOTHING per commit, %d clients: %.0f tps (avg %.2f ms), load1 %.2f, busy %.0f %%\n",
			c.Clients, c.TPS, c.LatencyMs, c.Load1, c.MachineBusyPct)
	}
	for _, p := range rep.Problems {
		fmt.Fprintln(w, "PROBLEM:", p)
	}
}

// freePort returns a port that was free on 127.0.0.1 a moment ago, for server.httpPort.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("finding a free port: %w", err)
	}
	defer func() { _ = ln.Close() }()
	return ln.Addr().(*net.TCPAddr).Port, nil
}
