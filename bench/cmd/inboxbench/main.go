// Command inboxbench measures the inbox: accepted webhooks per second into one HTTP source on
// loopback, with new keys and with duplicates, and the latency of the answers. `make bench`
// runs it. With -loadgen it is its own load generator process.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"github.com/alternayte/queuebox/bench/benchcmd"
	"github.com/alternayte/queuebox/bench/inboxbench"
)

func main() { benchcmd.Main(run) }

func run(ctx context.Context, args []string) int {
	fs := flag.NewFlagSet("inboxbench", flag.ContinueOnError)
	loadgen := fs.Bool(inboxbench.LoadGenFlag, false, "run as the load generator process; used by the bench itself")
	clients := fs.Int("clients", 32, "concurrent keep-alive HTTP clients of the load generator")
	seconds := fs.Float64("seconds", 10, "seconds of each phase (new keys, duplicates)")
	poolSize := fs.Int("pool-size", 0, "QueueBox's database.poolSize (0 keeps the configuration default)")
	out := fs.String("out", "bench/results/inbox.json", "JSON report file (empty writes none)")
	profile := fs.String("cpuprofile", "", "file of a CPU profile of QueueBox during the new-keys phase")
	ceilingSeconds := fs.Int("ceiling-seconds", 10, "seconds of the pgbench ceiling run after the phases (0 skips it)")
	ceilingClients := fs.Int("ceiling-clients", 0, "connections of the pgbench ceiling run (0: the pool size)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *loadgen {
		if err := inboxbench.ServeLoadGen(ctx, os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "inboxbench load generator:", err)
			return 1
		}
		return 0
	}
	if *clients <= 0 || *seconds <= 0 || *poolSize < 0 || *ceilingSeconds < 0 || *ceilingClients < 0 {
		fmt.Fprintln(os.Stderr, "inboxbench: -clients and -seconds must be above 0, -pool-size, -ceiling-seconds and -ceiling-clients 0 or more")
		return 2
	}
	benchcmd.QueueBoxRuntime(os.Stderr, "inboxbench")
	opts := inboxbench.Options{
		ServerURL:      benchcmd.ServerURL(),
		Clients:        *clients,
		Seconds:        *seconds,
		PoolSize:       *poolSize,
		Out:            *out,
		CPUProfile:     *profile,
		CeilingSeconds: *ceilingSeconds,
		CeilingClients: *ceilingClients,
		Stdout:         os.Stdout,
	}
	if _, err := inboxbench.Run(ctx, opts); err != nil {
		fmt.Fprintln(os.Stderr, "inboxbench:", err)
		return 1
	}
	return 0
}
