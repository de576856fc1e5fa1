package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/alternayte/queuebox/bench/benchdb"
	"github.com/alternayte/queuebox/bench/machine"
	"github.com/alternayte/queuebox/functions/rietest"
	"github.com/alternayte/queuebox/shared/lambdafn"
	"github.com/alternayte/queuebox/shared/store/postgres/logical/logicaltest"
)

// wakeInfo is the capture node waking the poll function under the emulator: per row, from
// the commit of a single-row insert to the row's arrival at the receiver, with the capture
// node (capturenode/, built for the host) reading a private wal_level = logical cluster and
// invoking the poll function in the emulator through the Lambda Invoke API.
type wakeInfo struct {
	// Rows is the number of rows, each inserted alone once the previous one arrived and
	// GapMs passed, so that each is a wake of its own after a quiet interval.
	Rows  int     `json:"rows"`
	GapMs float64 `json:"gapMs"`
	// WakeIntervalMs is the capture node's CAPTURE_WAKE_INTERVAL_MS (its default).
	WakeIntervalMs int `json:"wakeIntervalMs"`
	// The latencies of the rows, and their median, minimum and maximum. The node's start
	// wakes the function once (its first invoke, cold); the first row follows it by GapMs.
	P50Ms      float64   `json:"p50Ms"`
	MaxMs      float64   `json:"maxMs"`
	MinMs      float64   `json:"minMs"`
	RowsMs     []float64 `json:"rowsMs"`
	Duplicates int       `json:"duplicates"`
	Error      string    `json:"error,omitempty"`
}

// wakeReceiver records the first arrival of each X-Message-Id.
type wakeReceiver struct {
	mu       sync.Mutex
	arrivals map[string]time.Time
	dups     int
	arrived  chan struct{}
}

func (r *wakeReceiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	_, _ = io.Copy(io.Discard, req.Body)
	now := time.Now()
	id := req.Header.Get("X-Message-Id")
	r.mu.Lock()
	if _, ok := r.arrivals[id]; ok {
		r.dups++
	} else {
		r.arrivals[id] = now
	}
	r.mu.Unlock()
	select {
	case r.arrived <- struct{}{}:
	default:
	}
	w.WriteHeader(http.StatusOK)
}

func (r *wakeReceiver) arrival(id string) (time.Time, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	t, ok := r.arrivals[id]
	return t, ok
}

// measureWake runs the capture node and the poll function under the emulator and times rows
// single-row commits from commit to arrival.
func measureWake(ctx context.Context, work string, rows int, gap time.Duration) (*wakeInfo, error) {
	info := &wakeInfo{Rows: rows, GapMs: ms(gap), WakeIntervalMs: 1000}
	dir, err := rietest.DefaultEmulatorDir()
	if err != nil {
		return nil, err
	}
	rie, err := rietest.InstallEmulator(ctx, dir)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(os.Stderr, "wake: building functions/poll and capturenode for the host\n")
	bootstrap := filepath.Join(work, "host", "poll", "bootstrap")
	if err := rietest.Build(ctx, ".", "poll", bootstrap); err != nil {
		return nil, err
	}
	node := filepath.Join(work, "capturenode")
	if out, err := exec.CommandContext(ctx, "go", "build", "-o", node, "./capturenode").CombinedOutput(); err != nil {
		return nil, fmt.Errorf("building the capture node: %w: %s", err, out)
	}

	fmt.Fprintf(os.Stderr, "wake: starting a private PostgreSQL cluster with wal_level = logical\n")
	srv, err := logicaltest.StartDurable(ctx)
	if err != nil {
		return nil, fmt.Errorf("starting a PostgreSQL cluster with wal_level = logical: %w", err)
	}
	defer func() { _ = srv.Stop() }()
	db, err := benchdb.Create(ctx, srv.URL, 2, func(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) })
	if err != nil {
		return nil, err
	}
	defer db.Drop()
	if _, err := db.Admin.Exec(ctx, `CREATE PUBLICATION queuebox_outbox FOR TABLE outbox`); err != nil {
		return nil, fmt.Errorf("creating the publication: %w", err)
	}

	rcv := &wakeReceiver{arrivals: map[string]time.Time{}, arrived: make(chan struct{}, 1)}
	receiver := httptest.NewServer(rcv)
	defer receiver.Close()
	dbEnv, err := rietest.DatabaseEnv(db.URL)
	if err != nil {
		return nil, err
	}
	env := map[string]string{
		"AWS_LAMBDA_FUNCTION_TIMEOUT":            "30",
		lambdafn.ModeVariable:                    string(lambdafn.Drain),
		"QUEUEBOX_DESTINATIONS_RECEIVER_BASEURL": receiver.URL,
		"QUEUEBOX_DESTINATIONS_RECEIVER_PATH":    "/events",
		"QUEUEBOX_ROUTES_0_TOPICPATTERN":         "**",
		"QUEUEBOX_ROUTES_0_DESTINATION":          "receiver",
	}
	maps.Copy(env, dbEnv)
	// benchdb.Create applied the migrations without a history table, as the other benches
	// do; the function and the node check the schema instead.
	env["QUEUEBOX_DATABASE_MIGRATE"] = "false"
	emu, err := rietest.Start(rietest.Options{Emulator: rie, Bootstrap: bootstrap, Env: env})
	if err != nil {
		return nil, err
	}
	defer emu.Stop()
	endpoint, err := url.Parse(emu.URL)
	if err != nil {
		return nil, fmt.Errorf("parsing the emulator URL: %w", err)
	}

	stop, base, logs, err := startNode(node, dbEnv, "http://"+endpoint.Host, filepath.Join(work, "capture-state"))
	if err != nil {
		return nil, err
	}
	defer stop()
	if err := waitReady(ctx, base, 60*time.Second); err != nil {
		return nil, fmt.Errorf("%w\ncapture node log:\n%s", err, logs())
	}

	// The node's start wakes the function (its cold start); the first row waits for that
	// wake's interval to pass, as every later row does.
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(gap):
	}
	var lat []float64
	for i := range rows {
		var id string
		if err := db.Admin.QueryRow(ctx, `INSERT INTO outbox (topic, key, payload) VALUES ('order.created', $1, '{"bench":"wake"}') RETURNING id::text`,
			fmt.Sprintf("wake-%d", i)).Scan(&id); err != nil {
			return nil, fmt.Errorf("inserting row %d: %w", i, err)
		}
		committed := time.Now()
		arrived, err := waitArrival(ctx, rcv, id, 30*time.Second)
		if err != nil {
			return nil, fmt.Errorf("row %d: %w\ncapture node log:\n%s\nemulator log:\n%s", i, err, logs(), emu.Logs())
		}
		lat = append(lat, ms(arrived.Sub(committed)))
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(gap):
		}
	}
	info.RowsMs = lat
	info.P50Ms, info.MinMs, info.MaxMs = machine.Median(lat), slices.Min(lat), slices.Max(lat)
	rcv.mu.Lock()
	info.Duplicates = rcv.dups
	rcv.mu.Unlock()
	return info, nil
}

// waitArrival waits until the receiver saw the message id, up to within.
func waitArrival(ctx context.Context, rcv *wakeReceiver, id string, within time.Duration) (time.Time, error) {
	deadline := time.NewTimer(within)
	defer deadline.Stop()
	for {
		if t, ok := rcv.arrival(id); ok {
			return t, nil
		}
		select {
		case <-ctx.Done():
			return time.Time{}, ctx.Err()
		case <-deadline.C:
			return time.Time{}, fmt.Errorf("the row %s did not arrive within %s", id, within)
		case <-rcv.arrived:
		}
	}
}

// startNode runs the capture node with capture only, waking the poll function at the
// endpoint, and returns how to stop it, its base URL and its log so far.
func startNode(binary string, dbEnv map[string]string, endpoint, stateDir string) (func(), string, func() string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, "", nil, fmt.Errorf("finding a free port: %w", err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	_ = ln.Close()
	cmd := exec.Command(binary)
	cmd.Env = []string{
		"PATH=" + os.Getenv("PATH"),
		"QUEUEBOX_DATABASE_URL=" + dbEnv["QUEUEBOX_DATABASE_URL"],
		"QUEUEBOX_DATABASE_USERNAME=" + dbEnv["QUEUEBOX_DATABASE_USERNAME"],
		"QUEUEBOX_DATABASE_PASSWORD=" + dbEnv["QUEUEBOX_DATABASE_PASSWORD"],
		"QUEUEBOX_DATABASE_MIGRATE=false",
		fmt.Sprintf("QUEUEBOX_SERVER_HTTPPORT=%d", port),
		"QUEUEBOX_OUTBOX_CAPTURE_MODE=postgres-logical",
		"QUEUEBOX_OUTBOX_CAPTURE_ENABLED=true",
		"QUEUEBOX_OUTBOX_CAPTURE_STATEDIRECTORY=" + stateDir,
		// The emulator serves one function, named function.
		"CAPTURE_POLL_FUNCTION=function",
		"CAPTURE_LAMBDA_ENDPOINT=" + endpoint,
		"AWS_REGION=eu-west-1",
		"AWS_ACCESS_KEY_ID=AKIDQUEUEBOXBENCH",
		"AWS_SECRET_ACCESS_KEY=queuebox-bench-secret",
		"AWS_EC2_METADATA_DISABLED=true",
		"AWS_CONFIG_FILE=" + filepath.Join(stateDir, "no-aws-config"),
		"AWS_SHARED_CREDENTIALS_FILE=" + filepath.Join(stateDir, "no-aws-credentials"),
	}
	logs := &strings.Builder{}
	var mu sync.Mutex
	cmd.Stderr = writerFunc(func(p []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return logs.Write(p)
	})
	cmd.Stdout = cmd.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, "", nil, fmt.Errorf("starting the capture node: %w", err)
	}
	stop := func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
	}
	read := func() string {
		mu.Lock()
		defer mu.Unlock()
		return logs.String()
	}
	return stop, fmt.Sprintf("http://127.0.0.1:%d", port), read, nil
}

// writerFunc is an io.Writer of a function.
type writerFunc func(p []byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// waitReady waits until the node answers 200 on /health/ready.
func waitReady(ctx context.Context, base string, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		resp, err := http.Get(base + "/health/ready")
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the capture node is not ready after %s (last error %v)", within, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// writeWakeTable prints the wake measurement.
func writeWakeTable(w io.Writer, info *wakeInfo) {
	if info.Error != "" {
		fmt.Fprintf(w, "\ncapture node waking the poll function under the emulator: error: %s\n", info.Error)
		return
	}
	fmt.Fprintf(w, "\ncapture node waking the poll function under the emulator (%d single-row commits, each %.0f ms after the one before arrived; wake interval %d ms): commit to arrival p50 %.1f ms (min %.1f, max %.1f), %d duplicates\n",
		info.Rows, info.GapMs, info.WakeIntervalMs, info.P50Ms, info.MinMs, info.MaxMs, info.Duplicates)
}
