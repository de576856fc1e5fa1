// Command lambda measures the Lambda deployment packages: for every function of
// functions/*/main.go it builds the static linux/arm64 bootstrap exactly as `make lambda`
// does (lambdazip.BuildEnv and BuildFlags), zips it as `make lambda` does, and reports the
// size of each binary and zip. It prints a table and writes bench/results/lambda.json. Run it
// from the repository root:
//
//	go run ./bench/lambda [-out bench/results/lambda.json] [-functions poll,relay] [-cold 5]
//
// It then runs each function, built for the host, under the AWS Lambda Runtime Interface
// Emulator (functions/rietest installs it when missing) on a fresh migrated PostgreSQL
// database (dbtest.ServerURL), and reports its cold-start init time (the emulator's INIT
// REPORT; the median, minimum and maximum of -cold cold starts, each a new emulator and
// function process), the round trip of the first invoke, and the median, minimum and maximum
// of -invokes warm invokes. -invokes 0 skips the timing.
//
// It also reports the cost of each broker destination (RabbitMQ, Kafka, NATS) in the poll
// function's package: it builds the poll function once without each (the build tags of
// lambdazip.Connectors, which `make lambda LAMBDA_DESTINATIONS=...` sets) and prints the
// difference to the full build. -connectors=false skips it.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/alternayte/queuebox/bench/benchcmd"
	"github.com/alternayte/queuebox/bench/report"
	"github.com/alternayte/queuebox/deploy/lambdazip"
)

// result is the content of the results file.
type result struct {
	Date      string           `json:"date"`
	GoVersion string           `json:"goVersion"`
	Target    string           `json:"target"`
	BuildEnv  []string         `json:"buildEnv"`
	Flags     []string         `json:"buildFlags"`
	Functions []lambdazip.Size `json:"functions"`
	Seconds   float64          `json:"buildSeconds"`
	// Connectors is the cost of each broker destination in the poll function; nil with
	// -connectors=false.
	Connectors *connectorInfo `json:"connectors,omitempty"`
	// Timing is the cold-start and warm invoke time under the emulator; nil with -invokes 0.
	Timing *timingInfo `json:"timing,omitempty"`
	// Wake is the capture node waking the poll function; nil with -wake 0.
	Wake *wakeInfo `json:"wake,omitempty"`
}

func main() { benchcmd.Main(run) }

func run(ctx context.Context, args []string) int {
	fs := flag.NewFlagSet("lambda", flag.ContinueOnError)
	out := fs.String("out", "bench/results/lambda.json", "the results file; empty writes none")
	only := fs.String("functions", "", "the functions to measure, comma separated; empty measures every function")
	invokes := fs.Int("invokes", 10, "warm invokes per function under the Lambda emulator; 0 skips the timing")
	cold := fs.Int("cold", 5, "cold starts per function under the Lambda emulator; the init time is their median")
	wake := fs.Int("wake", 10, "single-row commits timed from commit to delivery through the capture node waking the poll function under the emulator; 0 skips it")
	wakeGap := fs.Duration("wake-gap", 1100*time.Millisecond, "the pause after each woken row arrives, longer than the capture node's wake interval (1 s)")
	migrate := fs.Bool("migrate", true, "time the functions with QUEUEBOX_DATABASE_MIGRATE=true (Init checks the applied migrations)")
	connectors := fs.Bool("connectors", true, "build the poll function without each broker destination and report each one's cost")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if err := measure(ctx, *out, *only, *invokes, *cold, *migrate, *wake, *wakeGap, *connectors); err != nil {
		fmt.Fprintln(os.Stderr, "lambda bench:", err)
		return 1
	}
	return 0
}

func measure(ctx context.Context, out, only string, invokes, cold int, migrate bool, wake int, wakeGap time.Duration, connectors bool) error {
	names, err := lambdazip.Functions(".")
	if err != nil {
		return err
	}
	if len(names) == 0 {
		return fmt.Errorf("no functions/*/main.go here: run from the repository root")
	}
	if only != "" {
		names = strings.Split(only, ",")
	}
	work, err := os.MkdirTemp("", "queuebox-lambda-bench-")
	if err != nil {
		return fmt.Errorf("creating the work folder: %w", err)
	}
	defer os.RemoveAll(work)

	start := time.Now()
	res := result{
		Date: start.UTC().Format(time.RFC3339), GoVersion: runtime.Version(), Target: "linux/arm64",
		BuildEnv: lambdazip.BuildEnv, Flags: lambdazip.BuildFlags,
	}
	for _, name := range names {
		bootstrap := filepath.Join(work, name, lambdazip.BootstrapName)
		zipPath := filepath.Join(work, name+".zip")
		fmt.Fprintf(os.Stderr, "building functions/%s\n", name)
		if err := lambdazip.Build(ctx, ".", name, bootstrap); err != nil {
			return err
		}
		if err := lambdazip.Zip(zipPath, bootstrap, ""); err != nil {
			return err
		}
		size, err := lambdazip.Measure(name, bootstrap, zipPath)
		if err != nil {
			return err
		}
		res.Functions = append(res.Functions, size)
	}
	res.Seconds = time.Since(start).Round(time.Millisecond).Seconds()
	if err := lambdazip.WriteTable(os.Stdout, res.Functions); err != nil {
		return err
	}
	if connectors {
		if res.Connectors, err = measureConnectors(ctx, work); err != nil {
			return err
		}
		writeConnectorTable(os.Stdout, res.Connectors)
	}
	if invokes > 0 {
		if res.Timing, err = measureTiming(ctx, work, names, invokes, cold, migrate); err != nil {
			return err
		}
		writeTimingTable(os.Stdout, res.Timing)
	}
	if wake > 0 {
		if res.Wake, err = measureWake(ctx, work, wake, wakeGap); err != nil {
			res.Wake = &wakeInfo{Rows: wake, Error: err.Error()}
			fmt.Fprintf(os.Stderr, "wake: %v\n", err)
		}
		writeWakeTable(os.Stdout, res.Wake)
	}
	if out == "" {
		return nil
	}
	if err := report.WriteJSON(out, res); err != nil {
		return err
	}
	fmt.Printf("wrote %s\n", out)
	return nil
}
