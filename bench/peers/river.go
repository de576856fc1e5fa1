package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"

	"github.com/alternayte/queuebox/bench/benchdb"
	"github.com/alternayte/queuebox/shared/store/postgres/pgtool"
)

// postArgs is the River job: one message to POST.
type postArgs struct {
	ID      string          `json:"id"`
	Key     string          `json:"key,omitempty"`
	Payload json.RawMessage `json:"payload"`
}

// Kind is the River job kind.
func (postArgs) Kind() string { return "post" }

// postWorker POSTs a job's payload to the receiver.
type postWorker struct {
	river.WorkerDefaults[postArgs]
	poster *poster
	acks   *acks
}

// Work POSTs the payload; an error makes River retry the job later.
func (w *postWorker) Work(ctx context.Context, job *river.Job[postArgs]) error {
	if err := w.poster.post(ctx, job.Args.ID, job.Args.Key, job.Args.Payload); err != nil {
		w.acks.failures.Add(1)
		return err
	}
	w.acks.ack(job.Args.ID)
	return nil
}

// riverSystem is River with the pgx v5 driver, its migrations applied to the private database,
// the jobs inserted with InsertManyTx in one transaction before the clock starts.
type riverSystem struct {
	settings RiverSettings
	poolSize int
	pool     *pgtool.Pool
	client   *river.Client[pgx.Tx]
	poster   *poster
	acks     *acks
	started  bool
}

func riverFactory(s RiverSettings) factory {
	return factory{
		system: SystemRiver, variant: variantPeer,
		label: fmt.Sprintf("River (%d workers, pool %d)", s.MaxWorkers, s.PoolSize),
		order: "no per-key order",
		new:   func() system { return &riverSystem{settings: s, poolSize: s.PoolSize} },
	}
}

func (r *riverSystem) appName() string { return "peers-river" }

func (r *riverSystem) prepare(ctx context.Context, db *benchdb.Database, receiver string, rows, keys int) error {
	var err error
	r.pool, err = pgtool.OpenPool(ctx, db.URL, pgtool.PoolOptions{MaxConns: int32(r.poolSize), AppName: r.appName()})
	if err != nil {
		return fmt.Errorf("opening the River pool: %w", err)
	}
	driver := riverpgxv5.New(r.pool)
	migrator, err := rivermigrate.New(driver, nil)
	if err != nil {
		return fmt.Errorf("preparing River's migrations: %w", err)
	}
	if _, err := migrator.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return fmt.Errorf("applying River's migrations: %w", err)
	}
	r.poster = newPoster(receiver)
	r.acks = newAcks(rows)
	workers := river.NewWorkers()
	if err := river.AddWorkerSafely(workers, &postWorker{poster: r.poster, acks: r.acks}); err != nil {
		return fmt.Errorf("adding the River worker: %w", err)
	}
	r.client, err = river.NewClient(driver, &river.Config{
		Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: r.settings.MaxWorkers}},
		FetchCooldown:     r.settings.FetchCooldown,
		FetchPollInterval: r.settings.FetchPollInterval,
		Workers:           workers,
		Logger:            slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		return fmt.Errorf("creating the River client: %w", err)
	}

	tx, err := r.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("inserting the River jobs: %w", err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	for from := 0; from < rows; from += insertChunk {
		to := min(rows, from+insertChunk)
		params := make([]river.InsertManyParams, 0, to-from)
		for i := from; i < to; i++ {
			k := keyOf(i, keys)
			params = append(params, river.InsertManyParams{Args: postArgs{ID: messageID(i), Key: k, Payload: payload(i, k)}})
		}
		if _, err := r.client.InsertManyTx(ctx, tx, params); err != nil {
			return fmt.Errorf("inserting the River jobs: %w", err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("inserting the River jobs: %w", err)
	}
	if _, err := db.Admin.Exec(ctx, `VACUUM ANALYZE river_job`); err != nil {
		return fmt.Errorf("vacuuming river_job: %w", err)
	}
	return nil
}

func (r *riverSystem) deliver(ctx context.Context) (int, error) {
	if err := r.client.Start(ctx); err != nil {
		return 0, fmt.Errorf("starting the River client: %w", err)
	}
	r.started = true
	return r.acks.wait(ctx)
}

func (r *riverSystem) expected(_ context.Context, _ *benchdb.Database, rows, keys int) (map[string]ref, error) {
	return peerExpected(rows, keys), nil
}

func (r *riverSystem) problems() []string { return nil }

func (r *riverSystem) close() {
	if r.client != nil && r.started {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		if err := r.client.Stop(ctx); err != nil {
			logf("stopping River: %v", err)
		}
		cancel()
	}
	if r.poster != nil {
		r.poster.close()
	}
	if r.pool != nil {
		r.pool.Close()
	}
}
