package main

import (
	"context"
	"fmt"
	"sync"

	"github.com/alternayte/queuebox/bench/benchdb"
	"github.com/alternayte/queuebox/shared/store/postgres/pgtool"
)

// ceilingSystem is what a delivery cannot beat on this machine: one query reads every row of
// the outbox table (the same rows QueueBox gets, inserted the same way) in insert order and a
// fixed number of goroutines POST them to the receiver, each row once, with no state written
// anywhere: no claim, no acknowledgement, no retry. It keeps no per-key order (the requests
// of one key run side by side).
type ceilingSystem struct {
	concurrency int
	db          *benchdb.Database
	pool        *pgtool.Pool
	poster      *poster
	failures    int
}

func ceilingFactory(concurrency int) factory {
	return factory{
		system: SystemCeiling, variant: variantCeiling,
		label: fmt.Sprintf("ceiling (%d requests)", concurrency),
		order: "none: no state, requests side by side",
		new:   func() system { return &ceilingSystem{concurrency: concurrency} },
	}
}

func (c *ceilingSystem) appName() string { return "peers-ceiling" }

func (c *ceilingSystem) prepare(ctx context.Context, db *benchdb.Database, receiver string, rows, keys int) error {
	if err := insertOutbox(ctx, db, rows, keys); err != nil {
		return err
	}
	var err error
	c.pool, err = pgtool.OpenPool(ctx, db.URL, pgtool.PoolOptions{MaxConns: 1, AppName: c.appName()})
	if err != nil {
		return fmt.Errorf("opening the ceiling's connection: %w", err)
	}
	c.db = db
	c.poster = newPoster(receiver)
	return nil
}

// ceilingRow is one row the query read.
type ceilingRow struct {
	id, key string
	body    []byte
}

// deliver streams the query's rows to the workers; a failed POST is counted and not retried,
// so the run then misses that row.
func (c *ceilingSystem) deliver(ctx context.Context) (int, error) {
	work := make(chan ceilingRow, c.concurrency*4)
	var wg sync.WaitGroup
	var mu sync.Mutex
	for range c.concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range work {
				if err := c.poster.post(ctx, r.id, r.key, r.body); err != nil {
					mu.Lock()
					c.failures++
					mu.Unlock()
				}
			}
		}()
	}
	rows, err := c.pool.Query(ctx, `SELECT id::text, COALESCE(key, ''), payload::text FROM outbox ORDER BY sequence`)
	if err == nil {
		var r ceilingRow
		var body string
		err = pgtool.ForEachRow(rows, []any{&r.id, &r.key, &body}, func() error {
			r.body = []byte(body)
			select {
			case work <- r:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})
	}
	close(work)
	wg.Wait()
	if err != nil {
		return c.failures, fmt.Errorf("reading the rows: %w", err)
	}
	return c.failures, nil
}

func (c *ceilingSystem) expected(ctx context.Context, db *benchdb.Database, _, _ int) (map[string]ref, error) {
	m, _, err := outboxRows(ctx, db)
	return m, err
}

func (c *ceilingSystem) problems() []string {
	if c.failures > 0 {
		return []string{fmt.Sprintf("%d POSTs failed", c.failures)}
	}
	return nil
}

func (c *ceilingSystem) close() {
	if c.poster != nil {
		c.poster.close()
	}
	if c.pool != nil {
		c.pool.Close()
	}
}
