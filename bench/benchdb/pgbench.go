package benchdb

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

// FindPgbench returns the pgbench binary: on PATH, or in a PostgreSQL installation.
func FindPgbench() (string, error) {
	if p, err := exec.LookPath("pgbench"); err == nil {
		return p, nil
	}
	matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin/pgbench")
	if len(matches) > 0 {
		return matches[len(matches)-1], nil
	}
	return "", fmt.Errorf("pgbench is not on PATH nor in /usr/lib/postgresql/*/bin (install the PostgreSQL client tools)")
}

// Pgbench is one run of pgbench with a custom script: --no-vacuum, --protocol=prepared, and
// the variable i defined as 0 for the script to count with.
type Pgbench struct {
	// Bin is the pgbench binary (FindPgbench).
	Bin string
	// URL is the database.
	URL string
	// Script is the text of the transaction script.
	Script string
	// Clients, Threads and Seconds are --client, --jobs and --time.
	Clients, Threads, Seconds int
}

// PgbenchResult is what one run printed, and the CPU of pgbench itself.
type PgbenchResult struct {
	// TPS is the transactions per second, rounded.
	TPS float64
	// LatencyMs is the average latency, 0 when pgbench printed none.
	LatencyMs float64
	// CPUSeconds is the user and system time of the pgbench process.
	CPUSeconds float64
}

var (
	tpsLine     = regexp.MustCompile(`(?m)^tps = ([0-9.]+)`)
	latencyLine = regexp.MustCompile(`(?m)^latency average = ([0-9.]+) ms`)
)

// Run writes the script to a temporary file, runs pgbench and reads its figures.
func (p Pgbench) Run(ctx context.Context) (PgbenchResult, error) {
	var res PgbenchResult
	dir, err := os.MkdirTemp("", "pgbench")
	if err != nil {
		return res, fmt.Errorf("writing the pgbench script: %w", err)
	}
	defer func() { _ = os.RemoveAll(dir) }()
	script := filepath.Join(dir, "script.sql")
	if err := os.WriteFile(script, []byte(p.Script), 0o600); err != nil {
		return res, fmt.Errorf("writing the pgbench script: %w", err)
	}
	cmd := exec.CommandContext(ctx, p.Bin, "--no-vacuum", "--protocol=prepared",
		"--file="+script, "--client="+strconv.Itoa(p.Clients), "--jobs="+strconv.Itoa(p.Threads),
		"--time="+strconv.Itoa(p.Seconds), "--define=i=0", p.URL)
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	runErr := cmd.Run()
	if cmd.ProcessState != nil {
		res.CPUSeconds = (cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()).Seconds()
	}
	if runErr != nil {
		return res, fmt.Errorf("running pgbench: %w: %s", runErr, lastLines(out.String(), 5))
	}
	m := tpsLine.FindStringSubmatch(out.String())
	if m == nil {
		return res, fmt.Errorf("reading the pgbench output: no tps line in %q", lastLines(out.String(), 8))
	}
	tps, _ := strconv.ParseFloat(m[1], 64)
	res.TPS = float64(int64(tps + 0.5))
	if m := latencyLine.FindStringSubmatch(out.String()); m != nil {
		res.LatencyMs, _ = strconv.ParseFloat(m[1], 64)
	}
	return res, nil
}

// lastLines returns the last n lines of s, joined with " | ".
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}
