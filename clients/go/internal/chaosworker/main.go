// Command chaosworker is the pull worker of the chaos suite (test/chaos in the repository
// root, `make chaos`): one process that runs an InboxWorker of this module on one pull source.
// Its handler posts the message to the suite's recording receiver (the external effect, at
// least once) and then records the completion in the table chaos_done through the handler's
// transaction (the database effect, exactly once). The suite kills it with SIGKILL and starts
// it again; it is not a tool for anything else.
package main

import (
	"bytes"
	"context"
	"database/sql"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"

	queuebox "github.com/alternayte/queuebox/clients/go"
)

func main() {
	dsn := flag.String("dsn", "", "the pgx URL of the QueueBox database")
	source := flag.String("source", "", "the pull source")
	receiver := flag.String("receiver", "", "the URL that the handler posts each message to")
	name := flag.String("name", "worker", "this worker's name, written into chaos_done")
	leaseMS := flag.Int("lease-ms", 3000, "the lease of a claim")
	concurrency := flag.Int("concurrency", 4, "handlers at one time")
	batch := flag.Int("batch", 10, "rows per claim")
	flag.Parse()
	if *dsn == "" || *source == "" || *receiver == "" {
		fmt.Fprintln(os.Stderr, "chaosworker: -dsn, -source and -receiver are required")
		os.Exit(2)
	}
	if err := run(*dsn, *source, *receiver, *name, *leaseMS, *concurrency, *batch); err != nil {
		fmt.Fprintln(os.Stderr, "chaosworker:", err)
		os.Exit(1)
	}
}

func run(dsn, source, receiver, name string, leaseMS, concurrency, batch int) error {
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		return fmt.Errorf("opening the database: %w", err)
	}
	defer db.Close()
	db.SetMaxIdleConns(concurrency + 2)
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	worker, err := queuebox.NewInboxWorker(db, queuebox.Options{
		Source:         source,
		BatchSize:      batch,
		LeaseMS:        leaseMS,
		MaxConcurrency: concurrency,
		PollInterval:   100 * time.Millisecond,
		ShutdownGrace:  5 * time.Second,
		RetryPolicy:    queuebox.NewDefaultRetryPolicy(20, 20*time.Millisecond, time.Second, 0.2),
		Logger:         queuebox.SlogLogger(log),
	})
	if err != nil {
		return fmt.Errorf("building the worker: %w", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	client := &http.Client{Timeout: 5 * time.Second}
	return worker.Run(ctx, func(ctx context.Context, m queuebox.Message, tx *sql.Tx) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, receiver, bytes.NewReader(m.Payload))
		if err != nil {
			return fmt.Errorf("building the request: %w", err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Message-Id", m.ID)
		req.Header.Set("X-Idempotency-Key", m.IdempotencyKey)
		resp, err := client.Do(req)
		if err != nil {
			return fmt.Errorf("posting to the receiver: %w", err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("the receiver answered %d", resp.StatusCode)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO chaos_done (inbox_id, idempotency_key, aggregate_id, worker) VALUES ($1, $2, $3, $4)`,
			m.ID, m.IdempotencyKey, m.AggregateID, name); err != nil {
			return fmt.Errorf("recording the completion: %w", err)
		}
		return nil
	})
}
