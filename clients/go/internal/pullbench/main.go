// Command pullbench measures the Go pull client: messages completed per second from a backlog
// of pull rows, by one worker and by several workers on one source, each handler doing one
// insert. It creates a fresh migrated database for each run on the server of
// QUEUEBOX_TEST_DATABASE_URL and drops it afterwards.
//
//	cd clients/go && go run ./internal/pullbench -rows 20000 -aggregates 2000 -workers 1,4
//
// -settings runs several worker settings (BatchSize x MaxConcurrency) one after the other,
// for example the defaults and a tuned setting: -settings 10x1,50x8.
package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	queuebox "github.com/alternayte/queuebox/clients/go"
	"github.com/alternayte/queuebox/clients/go/internal/pgtest"
)

var (
	poll       *time.Duration
	cpuProfile string
)

type result struct {
	Workers        int     `json:"workers"`
	Rows           int     `json:"rows"`
	Aggregates     int     `json:"aggregates"`
	BatchSize      int     `json:"batch_size"`
	MaxConcurrency int     `json:"max_concurrency"`
	Seconds        float64 `json:"seconds"`
	PerSecond      float64 `json:"messages_per_second"`
	// CeilingPerSecond is the rate of the same transactions without the library, measured
	// right after the run.
	CeilingPerSecond float64 `json:"ceiling_messages_per_second,omitempty"`
	// ClientCPUMS and DatabaseCPUMS are the CPU time per message of this process and of the
	// PostgreSQL backends of the run (read from /proc, so only for a server on this machine).
	// On a shared machine they move much less than the rates do.
	ClientCPUMS          float64 `json:"client_cpu_ms_per_message"`
	DatabaseCPUMS        float64 `json:"database_cpu_ms_per_message,omitempty"`
	CeilingClientCPUMS   float64 `json:"ceiling_client_cpu_ms_per_message,omitempty"`
	CeilingDatabaseCPUMS float64 `json:"ceiling_database_cpu_ms_per_message,omitempty"`
	LoadBefore           string  `json:"load_before"`
	LoadAfter            string  `json:"load_after"`
}

// cpuUse is the CPU time that a run used: this process and the database backends.
type cpuUse struct {
	client, database float64 // milliseconds
}

// perMessage returns u divided by n messages.
func (u cpuUse) perMessage(n int) (client, database float64) {
	return u.client / float64(n), u.database / float64(n)
}

// processCPU returns the user and system CPU time of this process so far, in milliseconds.
func processCPU() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e6
}

// backendCPU returns the CPU time, in milliseconds, of each open PostgreSQL backend of the
// database name, by process id, read from /proc/<pid>/stat (clock ticks of 1/100 s). It returns
// nothing when the server is not on this machine.
func backendCPU(ctx context.Context, admin *sql.DB, name string) map[int]float64 {
	out := map[int]float64{}
	rows, err := admin.QueryContext(ctx, `SELECT pid FROM pg_stat_activity WHERE datname = $1`, name)
	if err != nil {
		return out
	}
	defer rows.Close()
	for rows.Next() {
		var pid int
		if err := rows.Scan(&pid); err != nil {
			return out
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		// The fields after the command name, which is in parentheses: utime and stime are
		// the 14th and 15th fields of the line, the 12th and 13th after the name.
		f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
		if len(f) < 13 {
			continue
		}
		utime, err1 := strconv.ParseFloat(f[11], 64)
		stime, err2 := strconv.ParseFloat(f[12], 64)
		if err1 == nil && err2 == nil {
			out[pid] = (utime + stime) * 10
		}
	}
	return out
}

// backendCPUSince returns the CPU time, in milliseconds, that the backends of the database
// name used since before was read: the backends of the setup count only what they used after.
func backendCPUSince(ctx context.Context, admin *sql.DB, name string, before map[int]float64) float64 {
	total := 0.0
	for pid, ms := range backendCPU(ctx, admin, name) {
		total += ms - before[pid]
	}
	return total
}

func main() {
	rows := flag.Int("rows", 20_000, "pull rows in the backlog")
	aggregates := flag.Int("aggregates", 2_000, "aggregates the rows are spread over")
	workerList := flag.String("workers", "1,4", "comma-separated worker counts, one run each")
	batch := flag.Int("batch", 10, "Options.BatchSize of each worker")
	concurrency := flag.Int("concurrency", 1, "Options.MaxConcurrency of each worker")
	settingList := flag.String("settings", "", "comma-separated BatchSize x MaxConcurrency pairs (10x1,50x8), one run of every worker count each; overrides -batch and -concurrency")
	out := flag.String("out", "", "write the results as JSON to this file")
	ceiling := flag.Bool("ceiling", true, "also measure the ceiling: the same transactions (begin, insert, complete, commit) without the library, as many at once as the workers run handlers")
	poll = flag.Duration("poll", 50*time.Millisecond, "Options.PollInterval of each worker")
	flag.StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of each library run to this path, suffixed with the workers and the setting (.4w.10x1)")
	flag.Parse()

	settings := [][2]int{{*batch, *concurrency}}
	if *settingList != "" {
		settings = nil
		for _, s := range strings.Split(*settingList, ",") {
			b, c, ok := strings.Cut(strings.TrimSpace(s), "x")
			bn, berr := strconv.Atoi(b)
			cn, cerr := strconv.Atoi(c)
			if !ok || berr != nil || cerr != nil || bn < 1 || cn < 1 {
				fmt.Fprintf(os.Stderr, "pullbench: bad setting %q, want BATCHxCONCURRENCY such as 50x8\n", s)
				os.Exit(2)
			}
			settings = append(settings, [2]int{bn, cn})
		}
	}
	var results []result
	for _, setting := range settings {
		for _, s := range strings.Split(*workerList, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(s))
			if err != nil || n < 1 {
				fmt.Fprintf(os.Stderr, "pullbench: bad worker count %q\n", s)
				os.Exit(2)
			}
			r, err := measure(n, *rows, *aggregates, setting[0], setting[1])
			if err != nil {
				fmt.Fprintf(os.Stderr, "pullbench: %v\n", err)
				os.Exit(1)
			}
			if *ceiling {
				c, use, err := measureCeiling(n*setting[1], *rows, *aggregates)
				if err != nil {
					fmt.Fprintf(os.Stderr, "pullbench: %v\n", err)
					os.Exit(1)
				}
				r.CeilingPerSecond = c
				r.CeilingClientCPUMS, r.CeilingDatabaseCPUMS = use.perMessage(*rows)
			}
			results = append(results, r)
			fmt.Printf("workers=%d rows=%d aggregates=%d batch=%d concurrency=%d: %.2f s, %.0f messages/s; ceiling %.0f/s; CPU ms/message client %.3f db %.3f, ceiling client %.3f db %.3f (load %s -> %s)\n",
				r.Workers, r.Rows, r.Aggregates, r.BatchSize, r.MaxConcurrency, r.Seconds, r.PerSecond, r.CeilingPerSecond,
				r.ClientCPUMS, r.DatabaseCPUMS, r.CeilingClientCPUMS, r.CeilingDatabaseCPUMS, r.LoadBefore, r.LoadAfter)
		}
	}
	if *out != "" {
		b, _ := json.MarshalIndent(results, "", "  ")
		if err := os.WriteFile(*out, append(b, '\n'), 0o644); err != nil {
			fmt.Fprintf(os.Stderr, "pullbench: %v\n", err)
			os.Exit(1)
		}
	}
}

func loadAverage() string {
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

// prepare creates a fresh migrated database with the business table and the backlog.
func prepare(ctx context.Context, rows, aggregates int) (pgtest.Database, *sql.DB, error) {
	d, err := pgtest.Create(ctx, "pullbench")
	if err != nil {
		return d, nil, err
	}
	admin, err := sql.Open("pgx", d.URL)
	if err != nil {
		return d, nil, err
	}
	dir, err := pgtest.MigrationsDir()
	if err != nil {
		return d, admin, err
	}
	if err := pgtest.Migrate(ctx, admin, dir); err != nil {
		return d, admin, err
	}
	setup := []string{
		`CREATE TABLE bench_orders (idempotency_key TEXT PRIMARY KEY, aggregate_id TEXT NOT NULL)`,
		fmt.Sprintf(`INSERT INTO inbox (source, idempotency_key, aggregate_id, payload, consumption, created_at, scheduled_at)
			SELECT 'orders', 'k-' || g, 'agg-' || (g %% %d), jsonb_build_object('n', g), 'pull',
			       clock_timestamp() - INTERVAL '1 hour' + g * INTERVAL '1 microsecond',
			       clock_timestamp() - INTERVAL '1 hour'
			FROM generate_series(1, %d) AS g`, aggregates, rows),
		`ANALYZE inbox`,
	}
	for _, q := range setup {
		if _, err := admin.ExecContext(ctx, q); err != nil {
			return d, admin, fmt.Errorf("setting up: %w", err)
		}
	}
	return d, admin, nil
}

// measureCeiling runs, with n goroutines, the transactions that a worker runs for each
// message (begin, one insert, the completion's update by id, commit) over the backlog, without
// claims, renewals or the library, and returns the rate.
func measureCeiling(n, rows, aggregates int) (float64, cpuUse, error) {
	ctx := context.Background()
	d, admin, err := prepare(ctx, rows, aggregates)
	defer func() {
		if admin != nil {
			_ = admin.Close()
		}
		_ = d.Drop(context.Background())
	}()
	if err != nil {
		return 0, cpuUse{}, err
	}
	ids := make(chan [2]string, rows)
	res, err := admin.QueryContext(ctx, `SELECT CAST(id AS TEXT), idempotency_key FROM inbox`)
	if err != nil {
		return 0, cpuUse{}, err
	}
	for res.Next() {
		var p [2]string
		if err := res.Scan(&p[0], &p[1]); err != nil {
			return 0, cpuUse{}, err
		}
		ids <- p
	}
	res.Close()
	close(ids)
	db, err := sql.Open("pgx", d.URL)
	if err != nil {
		return 0, cpuUse{}, err
	}
	defer db.Close()
	db.SetMaxIdleConns(n + 2)
	errs := make(chan error, n)
	clientBefore, dbBefore := processCPU(), backendCPU(ctx, admin, d.Name)
	start := time.Now()
	for range n {
		go func() {
			for p := range ids {
				tx, err := db.BeginTx(ctx, nil)
				if err != nil {
					errs <- err
					return
				}
				if _, err := tx.ExecContext(ctx, `INSERT INTO bench_orders (idempotency_key, aggregate_id) VALUES ($1, 'x')`, p[1]); err != nil {
					errs <- err
					return
				}
				if _, err := tx.ExecContext(ctx, `UPDATE inbox SET state = 'processed', processed_at = clock_timestamp() WHERE id = CAST($1 AS UUID)`, p[0]); err != nil {
					errs <- err
					return
				}
				if err := tx.Commit(); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			return 0, cpuUse{}, err
		}
	}
	elapsed := time.Since(start)
	use := cpuUse{client: processCPU() - clientBefore, database: backendCPUSince(ctx, admin, d.Name, dbBefore)}
	return float64(rows) / elapsed.Seconds(), use, nil
}

func measure(workers, rows, aggregates, batch, concurrency int) (result, error) {
	ctx := context.Background()
	d, admin, err := prepare(ctx, rows, aggregates)
	defer func() {
		if admin != nil {
			_ = admin.Close()
		}
		_ = d.Drop(context.Background())
	}()
	if err != nil {
		return result{}, err
	}

	var handled atomic.Int64
	handler := func(ctx context.Context, m queuebox.Message, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO bench_orders (idempotency_key, aggregate_id) VALUES ($1, $2)`, m.IdempotencyKey, m.AggregateID)
		if err == nil {
			handled.Add(1)
		}
		return err
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, workers)
	if cpuProfile != "" {
		f, err := os.Create(fmt.Sprintf("%s.%dw.%dx%d", cpuProfile, workers, batch, concurrency))
		if err != nil {
			stop()
			return result{}, err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			stop()
			return result{}, err
		}
		defer pprof.StopCPUProfile()
	}
	loadBefore := loadAverage()
	clientBefore, dbBefore := processCPU(), backendCPU(ctx, admin, d.Name)
	start := time.Now()
	for range workers {
		db, err := sql.Open("pgx", d.URL)
		if err != nil {
			stop()
			return result{}, err
		}
		db.SetMaxIdleConns(concurrency + 2)
		defer db.Close()
		w, err := queuebox.NewInboxWorker(db, queuebox.Options{
			Source: "orders", BatchSize: batch, MaxConcurrency: concurrency, PollInterval: *poll,
		})
		if err != nil {
			stop()
			return result{}, err
		}
		go func() { done <- w.Run(runCtx, handler) }()
	}
	deadline := time.Now().Add(10 * time.Minute)
	for {
		if handled.Load() >= int64(rows) {
			var processed int
			if err := admin.QueryRowContext(ctx, `SELECT count(*) FROM inbox WHERE state = 'processed'`).Scan(&processed); err != nil {
				stop()
				return result{}, err
			}
			if processed == rows {
				break
			}
		}
		if time.Now().After(deadline) {
			stop()
			return result{}, fmt.Errorf("%d of %d rows handled after 10 minutes", handled.Load(), rows)
		}
		time.Sleep(10 * time.Millisecond)
	}
	elapsed := time.Since(start)
	use := cpuUse{client: processCPU() - clientBefore, database: backendCPUSince(ctx, admin, d.Name, dbBefore)}
	loadAfter := loadAverage()
	stop()
	for range workers {
		if err := <-done; err != nil {
			return result{}, err
		}
	}
	var written int
	if err := admin.QueryRowContext(ctx, `SELECT count(*) FROM bench_orders`).Scan(&written); err != nil {
		return result{}, err
	}
	if written != rows {
		return result{}, fmt.Errorf("%d business rows for %d messages", written, rows)
	}
	r := result{
		Workers: workers, Rows: rows, Aggregates: aggregates, BatchSize: batch, MaxConcurrency: concurrency,
		Seconds: elapsed.Seconds(), PerSecond: float64(rows) / elapsed.Seconds(),
		LoadBefore: loadBefore, LoadAfter: loadAfter,
	}
	r.ClientCPUMS, r.DatabaseCPUMS = use.perMessage(rows)
	return r, nil
}
