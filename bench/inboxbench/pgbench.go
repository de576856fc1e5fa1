package inboxbench

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

// Ceiling is PostgreSQL's own rate for the write that the inbox did per request before the
// writes were batched: one single-row INSERT ... ON CONFLICT DO NOTHING RETURNING per
// transaction, with a new key each time, measured with pgbench on the bench database. It
// tells how much of a run's figure the server's commits alone allow at that moment.
type Ceiling struct {
	Clients   int     `json:"clients"`
	Threads   int     `json:"threads"`
	Seconds   int     `json:"seconds"`
	TPS       float64 `json:"tps"`
	Rows      int     `json:"rowsInserted"`
	LatencyMs float64 `json:"latencyAvgMs"`
	Pgbench   string  `json:"pgbench"`
	Script    string  `json:"script"`
	Load1     float64 `json:"loadAvg1"`
	// MachineBusyPct is the busy share of all cores during the run; PgbenchSeconds is the
	// CPU of pgbench itself (the server's backends are not counted apart).
	MachineBusyPct float64 `json:"machineBusyPct"`
	PgbenchSeconds float64 `json:"pgbenchCpuSeconds"`
}

// ceilingSource is the source of the ceiling's rows, apart from the bench source.
const ceilingSource = "ceiling"

// ceilingScript inserts a new key per transaction: client_id-i, i counting up per client.
const ceilingScript = `\set i :i + 1
INSERT INTO inbox (source, idempotency_key, payload, headers, correlation_id, consumption, state)
VALUES ('` + ceilingSource + `', CAST(:client_id AS text) || '-' || CAST(:i AS text),
        '{"id":"c0-0","n":0}'::jsonb, '{"content-type":"application/json"}'::jsonb,
        'ceiling', 'pull', 'pending')
ON CONFLICT (source, idempotency_key) DO NOTHING
RETURNING id;
`

// findPgbench returns the pgbench binary: on PATH, or in a PostgreSQL installation.
func findPgbench() (string, error) {
	if p, err := exec.LookPath("pgbench"); err == nil {
		return p, nil
	}
	matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin/pgbench")
	if len(matches) > 0 {
		return matches[len(matches)-1], nil
	}
	return "", fmt.Errorf("pgbench is not on PATH nor in /usr/lib/postgresql/*/bin (install the PostgreSQL client tools, or run with -ceiling-seconds 0)")
}

var (
	tpsLine     = regexp.MustCompile(`(?m)^tps = ([0-9.]+)`)
	latencyLine = regexp.MustCompile(`(?m)^latency average = ([0-9.]+) ms`)
)

// measureCeiling runs ceilingScript with pgbench for the given seconds and counts the rows it
// inserted.
func measureCeiling(ctx context.Context, db *benchDatabase, clients, seconds int) (Ceiling, error) {
	bin, err := findPgbench()
	if err != nil {
		return Ceiling{}, err
	}
	threads := min(clients, 2)
	c := Ceiling{Clients: clients, Threads: threads, Seconds: seconds, Pgbench: bin, Script: ceilingScript}
	dir, err := os.MkdirTemp("", "inboxbench")
	if err != nil {
		return c, fmt.Errorf("writing the pgbench script: %w", err)
	}
	defer func() { _ = os.RemoveAll(dir) }()
	script := filepath.Join(dir, "inbox_insert.sql")
	if err := os.WriteFile(script, []byte(ceilingScript), 0o600); err != nil {
		return c, fmt.Errorf("writing the pgbench script: %w", err)
	}
	cmd := exec.CommandContext(ctx, bin, "--no-vacuum", "--protocol=prepared",
		"--file="+script, "--client="+strconv.Itoa(clients), "--jobs="+strconv.Itoa(threads),
		"--time="+strconv.Itoa(seconds), "--define=i=0", db.URL)
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	c.Load1 = loadAverage()[0]
	before := readCPU(0, nil)
	runErr := cmd.Run()
	after := readCPU(0, nil)
	c.MachineBusyPct = cpuBetween(before, after, 0).MachineBusyPct
	if cmd.ProcessState != nil {
		c.PgbenchSeconds = round((cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()).Seconds(), 2)
	}
	if runErr != nil {
		return c, fmt.Errorf("running pgbench: %w: %s", runErr, lastLines(out.String(), 5))
	}
	m := tpsLine.FindStringSubmatch(out.String())
	if m == nil {
		return c, fmt.Errorf("reading the pgbench output: no tps line in %q", lastLines(out.String(), 8))
	}
	c.TPS, _ = strconv.ParseFloat(m[1], 64)
	c.TPS = round(c.TPS, 0)
	if m := latencyLine.FindStringSubmatch(out.String()); m != nil {
		c.LatencyMs, _ = strconv.ParseFloat(m[1], 64)
	}
	if c.Rows, _, err = db.inboxCounts(ctx, ceilingSource); err != nil {
		return c, err
	}
	return c, nil
}

// lastLines returns the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
