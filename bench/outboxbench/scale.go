package outboxbench

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/alternayte/queuebox/shared/retention"
	"github.com/alternayte/queuebox/shared/store"
	"github.com/alternayte/queuebox/shared/store/postgres"
	"github.com/alternayte/queuebox/shared/store/postgres/pgtool"
)

// ScaleRetention is the retention.outbox.maxAge of the scale phase's retention run: the
// history's first tenth is older.
const ScaleRetention = 7 * 24 * time.Hour

// ScaleRun is one backlog drain of the scale phase, beside the history the table holds.
type ScaleRun struct {
	BacklogRun
	// HistoryRows is the number of finished rows in the table when the drain started.
	HistoryRows int `json:"historyRows"`
	// ClaimMeanMs is the mean time of one claim statement, as the poller saw it.
	ClaimMeanMs float64 `json:"claimMeanMs"`
	// RetentionDeleted is the number of rows the retention cleanup deleted during the drain;
	// RetentionStatements its delete statements.
	RetentionDeleted    int64 `json:"retentionDeleted,omitempty"`
	RetentionStatements int   `json:"retentionStatements,omitempty"`
	// OpenTransaction is whether a transaction of another session held a snapshot during the
	// whole drain.
	OpenTransaction bool `json:"openTransaction,omitempty"`
}

// Scale is the scale phase's result.
type Scale struct {
	HistoryRows int `json:"historyRows"`
	// AgedRows is the part of the history older than ScaleRetention.
	AgedRows       int        `json:"agedRows"`
	FillSeconds    float64    `json:"fillSeconds"`
	TableBytes     int64      `json:"tableBytes"`
	Runs           []ScaleRun `json:"runs"`
	RetentionHours float64    `json:"retentionHours"`
}

// scalePhase drains a backlog at the default settings on an empty table, then again beside
// ScaleRows finished rows with the retention cleanup deleting the aged tenth of them during
// the drain, then once more while a transaction of another session holds a snapshot open the
// whole time (what a forgotten BEGIN or a long report does).
func (b *bench) scalePhase(ctx context.Context, rep *Report) error {
	o := b.opts
	sc := &Scale{HistoryRows: o.ScaleRows, AgedRows: o.ScaleRows / 10, RetentionHours: ScaleRetention.Hours()}
	rep.Scale = sc
	s := DefaultSettings()
	run := func(spec backlogSpec, history int) (*ScaleRun, error) {
		r, err := b.backlog(ctx, spec)
		if err != nil {
			return nil, err
		}
		sr := ScaleRun{BacklogRun: r, HistoryRows: history, ClaimMeanMs: r.Statements["claim"].MeanMs}
		rep.Problems = append(rep.Problems, prefixed(r.Name, r.Problems)...)
		return &sr, nil
	}

	empty, err := run(backlogSpec{Name: "scale: empty table", Rows: o.Rows, Settings: s}, 0)
	if err != nil {
		return err
	}
	sc.Runs = append(sc.Runs, *empty)

	logf("scale: inserting %d finished rows (%d of them older than %s)", sc.HistoryRows, sc.AgedRows, ScaleRetention)
	if err := b.db.resetOutbox(ctx); err != nil {
		return err
	}
	started := time.Now()
	if err := b.db.insertHistory(ctx, sc.HistoryRows, sc.AgedRows); err != nil {
		return err
	}
	sc.FillSeconds = round(time.Since(started).Seconds(), 1)
	if sc.TableBytes, err = b.db.tableSize(ctx); err != nil {
		return err
	}
	logf("scale: history written in %.0f s, the outbox holds %d MB", sc.FillSeconds, sc.TableBytes>>20)

	cleaner, err := b.scaleCleaner(ctx)
	if err != nil {
		return err
	}
	defer cleaner.close()
	var deleted atomic.Int64
	var statements atomic.Int64
	withRetention, err := run(backlogSpec{
		Name: fmt.Sprintf("scale: %.1fM finished rows, retention running", float64(sc.HistoryRows)/1e6), Rows: o.Rows, Settings: s, KeepTable: true,
		During: func(ctx context.Context) {
			for ctx.Err() == nil {
				sum := cleaner.RunOnce(ctx)
				deleted.Add(sum.Deleted())
				for _, t := range sum.Tables {
					statements.Add(int64(t.Statements))
				}
				if sum.Deleted() == 0 {
					sleepCtx(ctx, time.Second)
				}
			}
		},
	}, sc.HistoryRows)
	if err != nil {
		return err
	}
	withRetention.RetentionDeleted, withRetention.RetentionStatements = deleted.Load(), int(statements.Load())
	sc.Runs = append(sc.Runs, *withRetention)

	remaining := sc.HistoryRows - int(withRetention.RetentionDeleted)
	open, err := run(backlogSpec{
		Name: fmt.Sprintf("scale: %.1fM finished rows, a transaction open", float64(remaining)/1e6), Rows: o.Rows, Settings: s, KeepTable: true,
		During: func(ctx context.Context) {
			if err := holdSnapshot(ctx, b.db.URL); err != nil && ctx.Err() == nil {
				logf("scale: holding a snapshot: %v", err)
			}
		},
	}, remaining)
	if err != nil {
		return err
	}
	open.OpenTransaction = true
	sc.Runs = append(sc.Runs, *open)
	return nil
}

// scaleCleaner is the retention cleanup of the scale phase on its own pool: AGE ScaleRetention
// on the outbox, the default batch size.
type scaleCleaner struct {
	*retention.Cleaner
	pool *pgtool.Pool
}

func (c *scaleCleaner) close() { c.pool.Close() }

func (b *bench) scaleCleaner(ctx context.Context) (*scaleCleaner, error) {
	pool, err := pgtool.OpenPool(ctx, b.db.URL, pgtool.PoolOptions{MaxConns: 2, AppName: "outboxbench-retention"})
	if err != nil {
		return nil, fmt.Errorf("opening the retention pool: %w", err)
	}
	st, err := postgres.New(pool, store.DefaultNames())
	if err != nil {
		pool.Close()
		return nil, err
	}
	c, err := retention.New(retention.Options{Store: st, Logger: b.log, Config: retention.Config{
		Enabled: true,
		Outbox:  retention.TableConfig{Policy: retention.PolicyAge, MaxAge: ScaleRetention},
	}})
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("creating the retention cleanup: %w", err)
	}
	return &scaleCleaner{Cleaner: c, pool: pool}, nil
}

// holdSnapshot opens a REPEATABLE READ transaction on its own connection, takes its snapshot
// with a first read, and keeps it open until ctx ends.
func holdSnapshot(ctx context.Context, url string) error {
	pool, err := pgtool.OpenPool(context.Background(), url, pgtool.PoolOptions{MaxConns: 1, AppName: "outboxbench-open-transaction"})
	if err != nil {
		return fmt.Errorf("opening the connection: %w", err)
	}
	defer pool.Close()
	bg := context.Background()
	// One connection held for the whole transaction: the pool would close a connection that
	// it gets back inside a transaction.
	conn, err := pool.Acquire(bg)
	if err != nil {
		return fmt.Errorf("connecting: %w", err)
	}
	defer conn.Release()
	if _, err := conn.Exec(bg, `BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT count(*) FROM outbox WHERE false`); err != nil {
		return fmt.Errorf("opening the transaction: %w", err)
	}
	<-ctx.Done()
	if _, err := conn.Exec(bg, `ROLLBACK`); err != nil {
		return fmt.Errorf("ending the transaction: %w", err)
	}
	return nil
}
