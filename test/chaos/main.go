// Command chaos is the chaos suite of QueueBox (`make chaos`, test/chaos/README.md). It starts
// its own PostgreSQL cluster, a recording receiver and replicas of `queuebox serve` (and, for
// the pull scenario, workers of the Go pull client), breaks them on purpose — kill -9 of
// replicas, relays and workers, restarts of PostgreSQL, a receiver that fails, stalls and
// rejects one key for good, replicas that migrate an empty database at the same moment, network
// partitions between a replica and PostgreSQL while the receiver answers slowly — and
// judges from the database and the receiver's record whether any row was lost or delivered
// out of its key's order. It prints one table per scenario and exits 1 on any loss or order
// violation. It is not part of `make test`.
package main

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"
)

// options are the flags of the suite.
type options struct {
	scenarios []string
	rows      int
	keys      int
	kills     int
	replicas  int
	workers   int
	restarts  int
	port      int
	drain     time.Duration
	pgbin     string
	out       string
	keep      bool
	short     bool
	// partitions is the number of network partitions of the partition scenario.
	partitions int
	// claimMode is the replicas' outbox.claimMode: lease or lock.
	claimMode string
}

var allScenarios = []string{"migrate", "kill", "pgrestart", "faults", "relay", "pull", "partition"}

func main() {
	os.Exit(run())
}

func run() int {
	var o options
	var scen string
	flag.StringVar(&scen, "scenario", "all", "comma-separated scenarios: "+strings.Join(allScenarios, ",")+", or all")
	flag.IntVar(&o.rows, "rows", 10000, "rows (webhooks for relay and pull) per scenario; migrate uses a tenth")
	flag.IntVar(&o.keys, "keys", 200, "keys (aggregates) the rows are spread over")
	flag.IntVar(&o.kills, "kills", 30, "kill -9 count of the kill, relay and pull scenarios")
	flag.IntVar(&o.replicas, "replicas", 3, "queuebox serve replicas")
	flag.IntVar(&o.workers, "workers", 3, "pull worker processes of the pull scenario")
	flag.IntVar(&o.restarts, "restarts", 2, "pg_ctl restart -m fast count of the pgrestart scenario")
	flag.IntVar(&o.partitions, "partitions", 4, "network partitions between a replica and PostgreSQL in the partition scenario")
	flag.IntVar(&o.port, "port", 55532, "the private PostgreSQL port on 127.0.0.1")
	flag.DurationVar(&o.drain, "drain-timeout", 5*time.Minute, "longest wait for a scenario to drain after the chaos")
	flag.StringVar(&o.pgbin, "pgbin", "/usr/lib/postgresql/15/bin", "the folder of initdb and pg_ctl")
	flag.StringVar(&o.out, "out", "", "also write the report (Markdown) to this file")
	flag.BoolVar(&o.keep, "keep", false, "keep the work folder (logs, cluster files) at the end")
	flag.StringVar(&o.claimMode, "claim-mode", "lease", "the replicas' outbox.claimMode: lease or lock")
	flag.BoolVar(&o.short, "short", false, "the short mode: 1,000 rows over 100 keys, 5 kills (about a minute)")
	flag.Parse()
	if o.short {
		set := map[string]bool{}
		flag.Visit(func(f *flag.Flag) { set[f.Name] = true })
		if !set["rows"] {
			o.rows = 1000
		}
		if !set["keys"] {
			o.keys = 100
		}
		if !set["kills"] {
			o.kills = 5
		}
		if !set["partitions"] {
			o.partitions = 2
		}
		if !set["drain-timeout"] {
			o.drain = 2 * time.Minute
		}
	}
	if scen == "all" {
		o.scenarios = allScenarios
	} else {
		for _, s := range strings.Split(scen, ",") {
			s = strings.TrimSpace(s)
			if !contains(allScenarios, s) {
				fmt.Fprintf(os.Stderr, "chaos: unknown scenario %q (known: %s)\n", s, strings.Join(allScenarios, ", "))
				return 2
			}
			o.scenarios = append(o.scenarios, s)
		}
	}
	if o.rows < 10 || o.rows > 1_000_000 || o.keys < 2 || o.keys > o.rows || o.kills < 0 || o.kills > 1000 ||
		o.replicas < 1 || o.replicas > 10 || o.workers < 1 || o.workers > 10 || o.restarts < 0 || o.restarts > 10 ||
		o.partitions < 0 || o.partitions > 20 {
		fmt.Fprintln(os.Stderr, "chaos: -rows 10..1000000, -keys 2..rows, -kills 0..1000, -replicas 1..10, -workers 1..10, -restarts 0..10, -partitions 0..20")
		return 2
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	s, err := newSuite(ctx, o)
	if s != nil {
		defer s.close()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "chaos:", err)
		return 1
	}
	rep := &report{started: time.Now().UTC(), load0: loadAvg(), opts: o}
	for _, name := range o.scenarios {
		if ctx.Err() != nil {
			break
		}
		fmt.Fprintf(os.Stderr, "chaos: scenario %s starting (%s)\n", name, time.Now().UTC().Format("15:04:05"))
		res := s.runScenario(ctx, name)
		rep.results = append(rep.results, res)
		fmt.Fprintf(os.Stderr, "chaos: scenario %s done in %s: %d failure(s)\n", name, res.total.Round(time.Second), len(res.failures))
	}
	rep.ended = time.Now().UTC()
	rep.load1 = loadAvg()
	text := rep.markdown()
	fmt.Print(text)
	if o.out != "" {
		if err := os.WriteFile(o.out, []byte(text), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "chaos: writing the report:", err)
		}
	}
	if ctx.Err() != nil {
		fmt.Fprintln(os.Stderr, "chaos: interrupted")
		return 130
	}
	if rep.failed() {
		return 1
	}
	return 0
}

// suite holds what every scenario shares: the cluster, the binaries and the work folder.
type suite struct {
	o        options
	dir      string
	cl       *cluster
	queuebox string
	worker   string
	rng      *rand.Rand
	groups   []*group
}

func newSuite(ctx context.Context, o options) (*suite, error) {
	root, err := repoRoot()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "queuebox-chaos-")
	if err != nil {
		return nil, fmt.Errorf("creating the work folder: %w", err)
	}
	s := &suite{o: o, dir: dir, rng: rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))}
	fmt.Fprintf(os.Stderr, "chaos: work folder %s\n", dir)
	s.queuebox = filepath.Join(root, "bin", "queuebox")
	if err := build(ctx, root, "go", "build", "-o", s.queuebox, "./local"); err != nil {
		return s, err
	}
	s.worker = filepath.Join(root, "bin", "chaosworker")
	if contains(o.scenarios, "pull") {
		if err := build(ctx, filepath.Join(root, "clients", "go"), "go", "build", "-o", s.worker, "./internal/chaosworker"); err != nil {
			return s, err
		}
	}
	if s.cl, err = startCluster(ctx, o.pgbin, dir, o.port); err != nil {
		return s, err
	}
	return s, nil
}

// close stops every child process and the cluster, and removes the work folder.
func (s *suite) close() {
	for _, g := range s.groups {
		if err := g.stopAll(); err != nil {
			fmt.Fprintln(os.Stderr, "chaos:", err)
		}
	}
	if s.cl != nil {
		if err := s.cl.stop(); err != nil {
			fmt.Fprintln(os.Stderr, "chaos:", err)
		}
	}
	if s.o.keep {
		fmt.Fprintf(os.Stderr, "chaos: kept %s\n", s.dir)
		return
	}
	_ = os.RemoveAll(s.dir)
}

func build(ctx context.Context, dir string, args ...string) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s in %s: %w: %s", strings.Join(args, " "), dir, err, out)
	}
	return nil
}

// repoRoot is the folder of the go.mod of the QueueBox module, found from the working folder.
func repoRoot() (string, error) {
	d, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("reading the working folder: %w", err)
	}
	for range 10 {
		if b, err := os.ReadFile(filepath.Join(d, "go.mod")); err == nil && strings.Contains(string(b), "module github.com/alternayte/queuebox\n") {
			return d, nil
		}
		d = filepath.Dir(d)
	}
	return "", fmt.Errorf("run the suite inside the QueueBox checkout (make chaos)")
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// loadAvg is /proc/loadavg's three averages, or "?".
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

func machine() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%s, %d cores, %s/%s, %s", host, runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, runtime.Version())
}
