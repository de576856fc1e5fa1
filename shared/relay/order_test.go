package relay_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alternayte/queuebox/shared/relay"
	"github.com/alternayte/queuebox/shared/store/postgres/dbtest"
)

// TestOrderPerAggregateUnderThreeRelays runs three relays, each on its own pool as three
// replicas would, over 600 rows in 20 aggregates from two sources. The rows are inserted in a
// shuffled order and their created_at set to the order of their aggregate's stream, so the
// relays must follow created_at, not the insert order. A watcher samples the inbox while they
// run: no aggregate ever has two processing rows. At the end the outbox rows of each key, in
// sequence order, are the inbox rows of the aggregate in created_at order, each exactly once.
func TestOrderPerAggregateUnderThreeRelays(t *testing.T) {
	t.Parallel()
	const (
		aggregates = 20
		perAgg     = 30
		total      = aggregates * perAgg
	)
	fx := newFixture(t)

	type planned struct{ agg, step int }
	plan := make([]planned, 0, total)
	for a := range aggregates {
		for s := range perAgg {
			plan = append(plan, planned{a, s})
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	rng.Shuffle(len(plan), func(i, j int) { plan[i], plan[j] = plan[j], plan[i] })
	base := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	want := make(map[string][]string, aggregates) // aggregate → inbox ids in stream order
	byStep := make(map[string][]string, aggregates)
	for a := range aggregates {
		byStep[fmt.Sprint("agg-", a)] = make([]string, perAgg)
	}
	for _, p := range plan {
		agg := fmt.Sprint("agg-", p.agg)
		src := "stripe"
		if p.step%2 == 1 {
			src = "orders-queue" // one aggregate spans both push sources
		}
		id := insertInbox(t, fx.store, inboxRow{
			Source: src, Key: fmt.Sprintf("%s-%d", agg, p.step), Aggregate: agg,
			EventType: fmt.Sprint("step.", p.step), Payload: fmt.Sprintf(`{"step":%d}`, p.step),
		})
		// Interleave the aggregates in time; within an aggregate, created_at follows step.
		at := base.Add(time.Duration(p.step*aggregates+p.agg) * time.Millisecond)
		dbtest.Exec(t, fx.pool, `UPDATE inbox SET created_at = $2 WHERE id = $1`, id, at)
		byStep[agg][p.step] = id
	}
	for agg, ids := range byStep {
		want[agg] = ids
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	// The watcher samples the inbox until the relays are done.
	var samples, busySamples atomic.Int64
	var violation atomic.Value
	watchDone := make(chan struct{})
	go func() {
		defer close(watchDone)
		for ctx.Err() == nil {
			var worst, processing int
			err := fx.pool.QueryRow(ctx, `
SELECT COALESCE(max(n), 0), COALESCE(sum(n), 0)
FROM (SELECT aggregate_id, count(*) AS n FROM inbox
      WHERE state = 'processing' AND aggregate_id IS NOT NULL GROUP BY aggregate_id) s`).Scan(&worst, &processing)
			if err != nil {
				continue
			}
			samples.Add(1)
			if processing > 0 {
				busySamples.Add(1)
			}
			if worst > 1 {
				violation.Store(fmt.Sprintf("%d processing rows of one aggregate", worst))
			}
		}
	}()

	var wg sync.WaitGroup
	sums := make([]relay.Summary, 3)
	for i := range sums {
		st := openStore(t, dbtest.NewPool(t, fx.url))
		r := newRelay(t, st, relay.Config{BatchSize: 4, PollInterval: 5 * time.Millisecond, ClaimTimeout: 30 * time.Second}, nil)
		wg.Add(1)
		go func() {
			defer wg.Done()
			sums[i] = r.Run(ctx, relay.RunOptions{})
		}()
	}
	waitFor(t, 120*time.Second, "every inbox row to be processed", func() bool {
		return countRows(t, fx.pool, `SELECT count(*) FROM inbox WHERE state = 'processed'`) == total
	})
	cancel()
	wg.Wait()
	<-watchDone

	if v := violation.Load(); v != nil {
		t.Errorf("the watcher saw %s", v)
	}
	if busySamples.Load() == 0 {
		t.Errorf("the watcher took %d samples and none saw a processing row; it proved nothing", samples.Load())
	}
	var forwarded int
	for i, s := range sums {
		t.Logf("relay %d: %+v", i, s)
		forwarded += s.Forwarded
		if s.ClaimsLost+s.Failed+s.Dead+s.Abandoned != 0 {
			t.Errorf("relay %d summary = %+v, want only forwards", i, s)
		}
	}
	if forwarded != total {
		t.Errorf("forwarded %d rows, want %d", forwarded, total)
	}
	if got := countRows(t, fx.pool, `SELECT count(*) FROM outbox`); got != total {
		t.Errorf("outbox rows = %d, want %d", got, total)
	}
	for agg, ids := range want {
		rows := queryOutbox(t, fx.pool, `WHERE key = $1`, agg)
		got := make([]string, len(rows))
		for i, r := range rows {
			got[i], _ = r.Headers["x-inbox-id"].(string)
		}
		if !slices.Equal(got, ids) {
			t.Errorf("aggregate %s: outbox order (by sequence) = %v, want inbox created_at order %v", agg, got, ids)
		}
	}
}
