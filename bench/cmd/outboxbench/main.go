// Command outboxbench measures the outbox delivery: rows/s from a backlog (no keys and 1 000
// keys, default and tuned settings), the insert-to-delivery latency at a steady rate, and the
// server's pgbench ceiling for one fenced update per transaction. `make bench` runs it; see
// bench/README.md for how to read the figures. With -sink it is its own helper process (the
// loopback receiver and the producer).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/alternayte/queuebox/bench/benchcmd"
	"github.com/alternayte/queuebox/bench/outboxbench"
)

func main() { benchcmd.Main(run) }

func run(ctx context.Context, args []string) int {
	fs := flag.NewFlagSet("outboxbench", flag.ContinueOnError)
	sink := fs.Bool(outboxbench.SinkFlag, false, "run as the helper process (receiver and producer); used by the bench itself")
	rows := fs.Int("rows", 50000, "backlog rows of each measured backlog run")
	keys := fs.Int("keys", 1000, "distinct keys of the keyed runs (0 skips them)")
	tuned := fs.String("tuned", "500x64,500x128", "tuned candidates, BATCHxCONCURRENCY with an optional claim mode (500x128:lock, outbox.claimMode), comma separated")
	exploreRows := fs.Int("explore-rows", 20000, "backlog rows of the runs that choose the tuned candidate (0 takes the first)")
	poolSize := fs.Int("pool-size", 10, "the poller's database pool size (database.poolSize)")
	rate := fs.Float64("latency-rate", 200, "rows per second inserted during the latency run")
	seconds := fs.Float64("latency-seconds", 20, "seconds of production in the latency run")
	pollMs := fs.Int("latency-poll-ms", 100, "outbox.pollIntervalMs of the latency run")
	scaleRows := fs.Int("scale-rows", 10_000_000, "finished rows in the table during the scale phase's drains")
	captureRates := fs.String("capture-rates", "50,500", "rows per second of the capture phase's runs, comma separated")
	captureSeconds := fs.Float64("capture-seconds", 10, "seconds of production in each run of the capture phase")
	ceilSeconds := fs.Int("ceiling-seconds", 10, "seconds of the pgbench ceiling run")
	ceilClients := fs.String("ceiling-clients", "auto", "pgbench connection counts, comma separated; auto is the poller's connections, the first gives the ratios")
	runTimeout := fs.Duration("run-timeout", 3*time.Minute, "the longest one backlog run may take")
	phases := fs.String("phases", "ceiling,backlog,floor,latency,capture,scale", "phases to run, comma separated")
	out := fs.String("out", "bench/results/outbox.json", "JSON report file (empty writes none)")
	profile := fs.String("cpuprofile", "", "prefix of one CPU profile per measured backlog run")
	signing := fs.Bool("signing", false, "sign every request of the HTTP destination (standard-webhooks, one secret), to measure the cost of signed deliveries")
	tracingTarget := fs.String("tracing", "", `run the poller with tracing on at 100 % sampling: "local" (an OTLP/HTTP receiver in the bench that discards the spans) or an OTLP endpoint URL; empty is off`)
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *sink {
		if err := outboxbench.ServeSink(ctx, os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "outboxbench sink:", err)
			return 1
		}
		return 0
	}
	benchcmd.QueueBoxRuntime(os.Stderr, "outboxbench")
	opts := outboxbench.Options{
		ServerURL:           benchcmd.ServerURL(),
		Rows:                *rows,
		Keys:                *keys,
		ExploreRows:         *exploreRows,
		PoolSize:            *poolSize,
		LatencyRate:         *rate,
		LatencySeconds:      *seconds,
		LatencyPollInterval: time.Duration(*pollMs) * time.Millisecond,
		CaptureSeconds:      *captureSeconds,
		ScaleRows:           *scaleRows,
		CeilingSeconds:      *ceilSeconds,
		RunTimeout:          *runTimeout,
		Phases:              map[string]bool{},
		Out:                 *out,
		CPUProfile:          *profile,
		Signing:             *signing,
		Tracing:             *tracingTarget,
		Stdout:              os.Stdout,
	}
	for _, s := range strings.Split(*tuned, ",") {
		st, err := outboxbench.ParseSettings(s)
		if err != nil {
			fmt.Fprintln(os.Stderr, "outboxbench: -tuned:", err)
			return 2
		}
		opts.Tuned = append(opts.Tuned, st)
	}
	for _, c := range strings.Split(*ceilClients, ",") {
		n := 0
		if c = strings.TrimSpace(c); c != "auto" {
			var err error
			if n, err = strconv.Atoi(c); err != nil || n <= 0 {
				fmt.Fprintf(os.Stderr, "outboxbench: -ceiling-clients: %q is not auto or a count above 0\n", c)
				return 2
			}
		}
		opts.CeilingClients = append(opts.CeilingClients, n)
	}
	for _, p := range strings.Split(*phases, ",") {
		switch p = strings.TrimSpace(p); p {
		case "ceiling", "backlog", "latency", "capture", "scale", "floor":
			opts.Phases[p] = true
		default:
			fmt.Fprintf(os.Stderr, "outboxbench: -phases: unknown phase %q (want ceiling, backlog, latency, capture, scale, floor)\n", p)
			return 2
		}
	}
	for _, r := range strings.Split(*captureRates, ",") {
		v, err := strconv.ParseFloat(strings.TrimSpace(r), 64)
		if err != nil || v <= 0 {
			fmt.Fprintf(os.Stderr, "outboxbench: -capture-rates: %q is not a rate above 0\n", r)
			return 2
		}
		opts.CaptureRates = append(opts.CaptureRates, v)
	}
	if *rows <= 0 || *poolSize <= 0 || *rate <= 0 || *seconds <= 0 || *ceilSeconds <= 0 || *runTimeout <= 0 || *captureSeconds <= 0 || *scaleRows <= 0 {
		fmt.Fprintln(os.Stderr, "outboxbench: -rows, -pool-size, -latency-rate, -latency-seconds, -capture-seconds, -scale-rows, -ceiling-seconds and -run-timeout must be above 0")
		return 2
	}
	if _, err := outboxbench.Run(ctx, opts); err != nil {
		fmt.Fprintln(os.Stderr, "outboxbench:", err)
		return 1
	}
	return 0
}
