// Command pullbench measures the Go pull client: messages completed per second from a backlog
// of pull rows, by one worker and by several workers on one source, each handler doing one
// insert. It creates a fresh migrated database for each run on the server of
// QUEUEBOX_TEST_DATABASE_URL and drops it afterwards.
//
//	cd clients/go && go run ./internal/pullbench -rows 20000 -aggregates 2000 -workers 1,4
package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	queuebox "github.com/alternayte/queuebox/clients/go"
	"github.com/alternayte/queuebox/clients/go/internal/pgtest"
)

var poll *time.Duration

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
	LoadBefore       string  `json:"load_before"`
	LoadAfter        string  `json:"load_after"`
}

func main() {
	rows := flag.Int("rows", 20_000, "pull rows in the backlog")
	aggregates := flag.Int("aggregates", 2_000, "aggregates the rows are spread over")
	workerList := flag.String("workers", "1,4", "comma-separated worker counts, one run each")
	batch := flag.Int("batch", 10, "Options.BatchSize of each worker")
	concurrency := flag.Int("concurrency", 1, "Options.MaxConcurrency of each worker")
	out := flag.String("out", "", "write the results as JSON to this file")
	ceiling := flag.Bool("ceiling", true, "also measure the ceiling: the same transactions (begin, insert, complete, commit) without the library, as many at once as the workers run handlers")
	poll = flag.Duration("poll", 50*time.Millisecond, "Options.PollInterval of each worker")
	flag.Parse()

	var results []result
	for _, s := range strings.Split(*workerList, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			fmt.Fprintf(os.Stderr, "pullbench: bad worker count %q\n", s)
			os.Exit(2)
		}
		r, err := measure(n, *rows, *aggregates, *batch, *concurrency)
		if err != nil {
			fmt.Fprintf(os.Stderr, "pullbench: %v\n", err)
			os.Exit(1)
		}
		if *ceiling {
			c, err := measureCeiling(n*(*concurrency), *rows, *aggregates)
			if err != nil {
				fmt.Fprintf(os.Stderr, "pullbench: %v\n", err)
				os.Exit(1)
			}
			r.CeilingPerSecond = c
		}
		results = append(results, r)
		fmt.Printf("workers=%d rows=%d aggregates=%d batch=%d concurrency=%d: %.2f s, %.0f messages/s; ceiling %.0f/s (load %s -> %s)\n",
			r.Workers, r.Rows, r.Aggregates, r.BatchSize, r.MaxConcurrency, r.Seconds, r.PerSecond, r.CeilingPerSecond, r.LoadBefore, r.LoadAfter)
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
func measureCeiling(n, rows, aggregates int) (float64, error) {
	ctx := context.Background()
	d, admin, err := prepare(ctx, rows, aggregates)
	defer func() {
		if admin != nil {
			_ = admin.Close()
		}
		_ = d.Drop(context.Background())
	}()
	if err != nil {
		return 0, err
	}
	ids := make(chan [2]string, rows)
	res, err := admin.QueryContext(ctx, `SELECT CAST(id AS TEXT), idempotency_key FROM inbox`)
	if err != nil {
		return 0, err
	}
	for res.Next() {
		var p [2]string
		if err := res.Scan(&p[0], &p[1]); err != nil {
			return 0, err
		}
		ids <- p
	}
	res.Close()
	close(ids)
	db, err := sql.Open("pgx", d.URL)
	if err != nil {
		return 0, err
	}
	defer db.Close()
	db.SetMaxIdleConns(n + 2)
	errs := make(chan error, n)
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
			return 0, err
		}
	}
	return float64(rows) / time.Since(start).Seconds(), nil
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
	loadBefore := loadAverage()
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
	return result{
		Workers: workers, Rows: rows, Aggregates: aggregates, BatchSize: batch, MaxConcurrency: concurrency,
		Seconds: elapsed.Seconds(), PerSecond: float64(rows) / elapsed.Seconds(),
		LoadBefore: loadBefore, LoadAfter: loadAfter,
	}, nil
}
