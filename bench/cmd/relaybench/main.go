// Command relaybench measures the inbox relay's forward rate from a backlog of push rows,
// beside PostgreSQL moving the same rows alone (bench/README.md, "The inbox relay"). `make
// bench` runs it.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/alternayte/queuebox/bench/benchcmd"
	"github.com/alternayte/queuebox/bench/relaybench"
	"github.com/alternayte/queuebox/bench/report"
)

func main() { benchcmd.Main(run) }

func run(ctx context.Context, args []string) int {
	fs := flag.NewFlagSet("relaybench", flag.ContinueOnError)
	rows := fs.Int("rows", 20000, "push inbox rows of each run's backlog")
	aggs := fs.String("aggregates", "0,1000", "aggregate counts of the runs, comma separated (0: no aggregate)")
	batch := fs.Int("batch-size", 100, "inbox.relay.batchSize")
	profile := fs.String("cpuprofile", "", "prefix of one CPU profile per drain (<prefix>-<aggregates>.pprof)")
	out := fs.String("out", "bench/results/relay.json", "JSON report file (empty writes none)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	o := relaybench.Options{ServerURL: benchcmd.ServerURL(), Rows: *rows, BatchSize: *batch, CPUProfile: *profile}
	for _, a := range strings.Split(*aggs, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(a))
		if err != nil || n < 0 {
			fmt.Fprintf(os.Stderr, "relaybench: -aggregates: %q is not a count of 0 or more\n", a)
			return 2
		}
		o.Aggregates = append(o.Aggregates, n)
	}
	if *rows <= 0 || *batch <= 0 {
		fmt.Fprintln(os.Stderr, "relaybench: -rows and -batch-size must be above 0")
		return 2
	}
	benchcmd.QueueBoxRuntime(os.Stderr, "relaybench")
	rep, err := relaybench.Measure(ctx, o)
	if rep != nil {
		relaybench.Print(os.Stdout, rep)
		if *out != "" {
			if werr := report.WriteJSON(*out, rep); werr != nil {
				fmt.Fprintln(os.Stderr, "relaybench:", werr)
				return 1
			}
			fmt.Printf("report written to %s\n", *out)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "relaybench:", err)
		return 1
	}
	if len(rep.Problems) > 0 {
		fmt.Fprintln(os.Stderr, "relaybench: the bench found problems")
		return 1
	}
	return 0
}
