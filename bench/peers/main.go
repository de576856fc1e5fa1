// Command peers is the side-by-side bench: QueueBox's outbox delivery beside two peers that
// do the same job on the same machine in the same run, River (riverpgxv5) and Watermill
// (watermill-sql, PostgreSQL, both of its schema adapters), and beside a ceiling that reads
// the rows with one query and POSTs them with no state kept. Each system drains the same
// number of messages from PostgreSQL as HTTP POSTs to one loopback receiver (outboxbench's
// receiver process), timed by the receiver's clock, with no keys and with 1,000 keys, three
// interleaved rounds each; QueueBox runs at its documented defaults, at tuned settings, and at
// the tuned settings in the claim mode lock (outbox.claimMode lock; -lock=false leaves it out).
// The bench prints the median rows/s, the CPU of each party, the ratio QueueBox / best peer
// and each system's fraction of the ceiling, and writes bench/results/peers.json. A run that
// loses a message, duplicates one with no failed delivery, or delivers a key out of order in
// a system that promises per-key order fails the bench.
//
// It lives in its own module so that the service's go.mod never depends on River or
// Watermill. `make bench-peers` runs it; bench/README.md says how to read the figures.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/alternayte/queuebox/bench/benchcmd"
	"github.com/alternayte/queuebox/bench/outboxbench"
)

func main() { benchcmd.Main(run) }

func run(ctx context.Context, args []string) int {
	opts, sink, err := parseArgs(args, os.Stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintln(os.Stderr, "peers:", err)
		return 2
	}
	if sink {
		if err := outboxbench.ServeSink(ctx, os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "peers sink:", err)
			return 1
		}
		return 0
	}
	opts.ServerURL = benchcmd.ServerURL()
	opts.Stdout = os.Stdout
	if _, err := Run(ctx, opts); err != nil {
		fmt.Fprintln(os.Stderr, "peers:", err)
		return 1
	}
	return 0
}

// parseArgs reads the command line into Options; sink reports -sink, the receiver process.
func parseArgs(args []string, errOut io.Writer) (opts Options, sink bool, err error) {
	fs := flag.NewFlagSet("peers", flag.ContinueOnError)
	fs.SetOutput(errOut)
	sinkFlag := fs.Bool(outboxbench.SinkFlag, false, "run as the receiver process; used by the bench itself")
	rows := fs.String("rows", "100000", "messages of each run, comma separated (one comparison per size)")
	keys := fs.Int("keys", 1000, "distinct keys of the keyed mode (0 runs no keys only)")
	systems := fs.String("systems", "queuebox,river,watermill,ceiling", "systems to run, comma separated")
	rounds := fs.Int("rounds", 3, "interleaved runs of each system per size and key mode; the figures are their medians")
	tuned := fs.String("tuned", "500x128", "QueueBox tuned candidates, BATCHxCONCURRENCY with an optional claim mode (500x128:lock), comma separated")
	exploreRows := fs.Int("explore-rows", 0, "messages of the runs that choose the tuned candidate, per key mode (0 takes the first)")
	poolSize := fs.Int("pool-size", 10, "QueueBox's database pool size at the defaults")
	tunedPoolSize := fs.Int("tuned-pool-size", 24, "QueueBox's database pool size tuned")
	lock := fs.Bool("lock", true, "measure QueueBox's tuned settings in the claim mode lock too (outbox.claimMode lock, the tuned pool size)")
	riverPoolSize := fs.Int("river-pool-size", 24, "River's database pool size")
	riverWorkers := fs.Int("river-workers", 128, "River MaxWorkers of the default queue")
	riverCooldown := fs.Duration("river-fetch-cooldown", time.Millisecond, "River FetchCooldown")
	riverPoll := fs.Duration("river-fetch-poll", 5*time.Millisecond, "River FetchPollInterval")
	wmSchemas := fs.String("watermill-schemas", "offsets,queue", "Watermill schema adapters to run: offsets (DefaultPostgreSQLSchema), queue (PostgreSQLQueueSchema)")
	wmTopics := fs.Int("watermill-topics", 32, "Watermill topics (each one subscriber, in order)")
	wmBatch := fs.Int("watermill-batch", 1000, "Watermill SubscribeBatchSize of the schema adapter")
	wmPoll := fs.Duration("watermill-poll", 10*time.Millisecond, "Watermill subscriber PollInterval")
	wmRouter := fs.Bool("watermill-router", false, "run a message.Router handler per Watermill topic instead of reading each subscription's channel")
	ceilings := fs.String("ceiling", "64,128", "concurrent requests of the ceiling runs, comma separated")
	peersDefaultGC := fs.Bool("peers-go-default-gc", false, "run the peers and the ceiling at Go's default garbage collector settings instead of QueueBox's")
	payloadFlag := fs.String("payload", "small", "message body: small (about 85 bytes of JSON) or large (about 320)")
	runTimeout := fs.Duration("run-timeout", 3*time.Minute, "the longest one run may take; a run cut short fails")
	out := fs.String("out", "bench/results/peers.json", "JSON report file (empty writes none)")
	if err := fs.Parse(args); err != nil {
		return opts, false, err
	}
	if fs.NArg() > 0 {
		return opts, false, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if *sinkFlag {
		return opts, true, nil
	}
	opts = Options{
		Keys: *keys, Rounds: *rounds, ExploreRows: *exploreRows, PoolSize: *poolSize, TunedPoolSize: *tunedPoolSize, Lock: *lock,
		River: RiverSettings{PoolSize: *riverPoolSize, MaxWorkers: *riverWorkers, FetchCooldown: *riverCooldown,
			FetchPollInterval: *riverPoll},
		Watermill: WatermillSettings{Topics: *wmTopics, BatchSize: *wmBatch, PollInterval: *wmPoll, Router: *wmRouter},
		Payload:   *payloadFlag, PeersGoDefaultGC: *peersDefaultGC,
		RunTimeout: *runTimeout, Out: *out,
	}
	if opts.Rows, err = counts("-rows", *rows); err != nil {
		return opts, false, err
	}
	if opts.Ceilings, err = counts("-ceiling", *ceilings); err != nil {
		return opts, false, err
	}
	for _, s := range splitList(*systems) {
		switch s {
		case SystemQueueBox, SystemRiver, SystemWatermill, SystemCeiling:
			opts.Systems = append(opts.Systems, s)
		default:
			return opts, false, fmt.Errorf("-systems: unknown system %q (want queuebox, river, watermill, ceiling)", s)
		}
	}
	for _, s := range splitList(*wmSchemas) {
		if s != watermillOffsets && s != watermillQueue {
			return opts, false, fmt.Errorf("-watermill-schemas: unknown schema %q (want offsets, queue)", s)
		}
		opts.WatermillSchemas = append(opts.WatermillSchemas, s)
	}
	for _, s := range splitList(*tuned) {
		st, err := outboxbench.ParseSettings(s)
		if err != nil {
			return opts, false, fmt.Errorf("-tuned: %w", err)
		}
		opts.Tuned = append(opts.Tuned, st)
	}
	switch {
	case len(opts.Rows) == 0 || len(opts.Systems) == 0 || len(opts.Tuned) == 0:
		return opts, false, errors.New("-rows, -systems and -tuned need at least one entry")
	case has(opts.Systems, SystemWatermill) && len(opts.WatermillSchemas) == 0:
		return opts, false, errors.New("-watermill-schemas needs at least one entry")
	case has(opts.Systems, SystemCeiling) && len(opts.Ceilings) == 0:
		return opts, false, errors.New("-ceiling needs at least one entry")
	case *payloadFlag != "small" && *payloadFlag != "large":
		return opts, false, fmt.Errorf("-payload: %q is neither small nor large", *payloadFlag)
	case *keys < 0 || *exploreRows < 0:
		return opts, false, errors.New("-keys and -explore-rows must not be negative")
	case *rounds <= 0 || *poolSize <= 0 || *tunedPoolSize <= 0 || *riverPoolSize <= 0 || *riverWorkers <= 0 ||
		*wmTopics <= 0 || *wmBatch <= 0 || *runTimeout <= 0:
		return opts, false, errors.New("-rounds, the pool sizes, -river-workers, -watermill-topics, -watermill-batch and -run-timeout must be above 0")
	case *riverCooldown < time.Millisecond || *riverPoll < *riverCooldown || *wmPoll <= 0:
		return opts, false, errors.New("-river-fetch-cooldown must be at least 1ms, -river-fetch-poll at least the cooldown, -watermill-poll above 0")
	}
	return opts, false, nil
}

// counts parses a comma-separated list of counts above 0.
func counts(flagName, s string) ([]int, error) {
	var out []int
	for _, v := range splitList(s) {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("%s: %q is not a count above 0", flagName, v)
		}
		out = append(out, n)
	}
	return out, nil
}

// splitList splits a comma-separated flag value, dropping blanks.
func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
