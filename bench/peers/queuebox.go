package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/alternayte/queuebox/bench/benchdb"
	"github.com/alternayte/queuebox/bench/outboxbench"
	"github.com/alternayte/queuebox/shared/outbox"
	"github.com/alternayte/queuebox/shared/service"
	"github.com/alternayte/queuebox/shared/store/postgres/pgtool"
)

// queueBox is QueueBox wired as bench/outboxbench and production wire it: a pgx pool of
// database.poolSize, the postgres store, the outbox Poller with the webhook publisher and the
// metrics registry, drained with Run(StopWhenIdle).
type queueBox struct {
	settings outboxbench.Settings
	poolSize int
	qb       *outboxbench.QueueBox
	summary  outbox.Summary
	states   map[string]int
}

// queueBoxFactory measures QueueBox at s with a pool of poolSize; the label of a variant that
// claims in the lock mode names the claim mode.
func queueBoxFactory(s outboxbench.Settings, variant string, poolSize int) factory {
	name, order := variant, "per key: a key's next row waits for its previous one"
	if s.Lock() {
		name = strings.TrimSuffix(variant, " lock") + ", claim mode lock"
		order = "per key, as in the lease mode: a key's next row waits for its previous one"
	}
	return factory{
		system: SystemQueueBox, variant: variant,
		label: fmt.Sprintf("QueueBox %s (%dx%d, pool %d)", name, s.BatchSize, s.Concurrency, poolSize),
		order: order, ordered: true,
		new: func() system { return &queueBox{settings: s, poolSize: poolSize} },
	}
}

func (q *queueBox) appName() string { return "peers-queuebox" }

// insertChunk is the number of rows of one insert statement (QueueBox and River).
const insertChunk = 5000

// prepare inserts the rows and builds the poller.
func (q *queueBox) prepare(ctx context.Context, db *benchdb.Database, receiver string, rows, keys int) error {
	if err := insertOutbox(ctx, db, rows, keys); err != nil {
		return err
	}
	var err error
	q.qb, err = outboxbench.NewQueueBox(ctx, outboxbench.QueueBoxOptions{
		DatabaseURL: db.URL, ReceiverBase: receiver, Settings: q.settings, PoolSize: q.poolSize,
		AppName: q.appName(), Logger: service.NewLogger(os.Stderr, slog.LevelWarn),
	})
	return err
}

// deliver drains the backlog. The bench sets the garbage collector as QueueBox's processes set
// it at their start (shared/gctune) around it.
func (q *queueBox) deliver(ctx context.Context) (int, error) {
	q.summary = q.qb.Poller.Run(ctx, outbox.RunOptions{StopWhenIdle: true})
	failures := q.summary.Retried + q.summary.Dead
	if ctx.Err() != nil {
		return failures, fmt.Errorf("Run stopped early (sent %d): %w", q.summary.Sent, ctx.Err())
	}
	return failures, nil
}

// expected maps each row id to its key and sequence (the insert order) and counts the rows
// per state.
func (q *queueBox) expected(ctx context.Context, db *benchdb.Database, _, _ int) (map[string]ref, error) {
	m, states, err := outboxRows(ctx, db)
	q.states = states
	return m, err
}

// insertOutbox inserts the rows in one transaction (so they share one scheduled_at, as the
// outbox bench's backlog does) and runs VACUUM ANALYZE on the outbox, so that the planner
// knows the table's size when the clock starts.
func insertOutbox(ctx context.Context, db *benchdb.Database, rows, keys int) error {
	tx, err := db.Admin.Begin(ctx)
	if err != nil {
		return fmt.Errorf("inserting the outbox rows: %w", err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	for from := 0; from < rows; from += insertChunk {
		to := min(rows, from+insertChunk)
		ks := make([]string, 0, to-from)
		ps := make([]string, 0, to-from)
		for i := from; i < to; i++ {
			k := keyOf(i, keys)
			ks = append(ks, k)
			ps = append(ps, string(payload(i, k)))
		}
		_, err := tx.Exec(ctx, `
INSERT INTO outbox (topic, key, payload)
SELECT $1, NULLIF(t.k, ''), t.p::jsonb FROM unnest($2::text[], $3::text[]) WITH ORDINALITY AS t(k, p, n) ORDER BY t.n`,
			topic, ks, ps)
		if err != nil {
			return fmt.Errorf("inserting the outbox rows: %w", err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("inserting the outbox rows: %w", err)
	}
	if _, err := db.Admin.Exec(ctx, `VACUUM ANALYZE outbox`); err != nil {
		return fmt.Errorf("vacuuming the outbox: %w", err)
	}
	return nil
}

// outboxRows maps each outbox row id to its key and sequence and counts the rows per state.
func outboxRows(ctx context.Context, db *benchdb.Database) (map[string]ref, map[string]int, error) {
	rows, err := db.Admin.Query(ctx, `SELECT id::text, COALESCE(key, ''), sequence, state FROM outbox`)
	if err != nil {
		return nil, nil, fmt.Errorf("reading the outbox rows: %w", err)
	}
	m := map[string]ref{}
	states := map[string]int{}
	var id, key, state string
	var seq int64
	err = pgtool.ForEachRow(rows, []any{&id, &key, &seq, &state}, func() error {
		m[id] = ref{key: key, ord: seq}
		states[state]++
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("reading the outbox rows: %w", err)
	}
	return m, states, nil
}

func (q *queueBox) problems() []string {
	var p []string
	if total := len(q.states); total > 0 && (q.states["sent"] == 0 || total > 1) {
		p = append(p, fmt.Sprintf("outbox rows not all sent: %v", q.states))
	}
	if s := q.summary; s.ClaimsLost > 0 || s.Dead > 0 {
		p = append(p, fmt.Sprintf("summary %+v", s))
	}
	return p
}

func (q *queueBox) close() {
	if q.qb != nil {
		q.qb.Close()
	}
}
