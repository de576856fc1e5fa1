package postgres

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alternayte/queuebox/shared/store"
	"github.com/alternayte/queuebox/shared/store/postgres/dbtest"
	"github.com/alternayte/queuebox/shared/store/storetest"
)

// BenchmarkOutboxClaimMarkSent measures the outbox poller's database work: workers loop
// claim → mark sent until b.N rows are sent. One op is one row; rows/s is the throughput.
// The rows are inserted before the timer starts, in one statement (one scheduled_at), which is
// the hardest case for the claim's ordered scan.
//
//	go test -run '^$' -bench OutboxClaimMarkSent -benchtime 20000x ./shared/store/postgres/
func BenchmarkOutboxClaimMarkSent(b *testing.B) {
	cases := []struct {
		name    string
		keys    int
		workers int
		batch   int
	}{
		{name: "no-keys", keys: 0, workers: 4, batch: 100},
		{name: "1000-keys", keys: 1000, workers: 4, batch: 100},
	}
	for _, bc := range cases {
		b.Run(bc.name, func(b *testing.B) {
			s, _ := openStore(b, storetest.SchemaMigrated)
			ps := s.(*Store)
			ctx := context.Background()
			dbtest.Exec(b, ps.pool.pool, `
INSERT INTO outbox (topic, key, payload)
SELECT 'bench', CASE WHEN $2::int > 0 THEN 'k' || (g % $2::int) END, '{"n":1}'
FROM generate_series(1, $1::int) AS g`, b.N, bc.keys)
			dbtest.Exec(b, ps.pool.pool, `ANALYZE outbox`)

			var sent atomic.Int64
			var wg sync.WaitGroup
			b.ResetTimer()
			for w := 0; w < bc.workers; w++ {
				wg.Go(func() {
					for sent.Load() < int64(b.N) {
						msgs, err := ps.OutboxClaim(ctx, store.OutboxClaimParams{Limit: bc.batch, Lease: time.Minute})
						if err != nil {
							b.Errorf("claiming: %v", err)
							return
						}
						if len(msgs) == 0 {
							time.Sleep(time.Millisecond) // every due row is in flight
							continue
						}
						claims := make([]store.Claim, len(msgs))
						for i, m := range msgs {
							claims[i] = m.Claim()
						}
						ids, err := ps.OutboxMarkSent(ctx, claims)
						if err != nil {
							b.Errorf("marking sent: %v", err)
							return
						}
						sent.Add(int64(len(ids)))
					}
				})
			}
			wg.Wait()
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "rows/s")
		})
	}
}

// BenchmarkInboxRelayClaimForward measures the relay: one worker claims and forwards b.N
// push rows over 100 aggregates.
func BenchmarkInboxRelayClaimForward(b *testing.B) {
	s, _ := openStore(b, storetest.SchemaMigrated)
	ps := s.(*Store)
	ctx := context.Background()
	dbtest.Exec(b, ps.pool.pool, `
INSERT INTO inbox (source, idempotency_key, aggregate_id, payload, created_at)
SELECT 'bench', 'evt-' || g, 'agg-' || (g % 100), '{"n":1}', clock_timestamp()
FROM generate_series(1, $1::int) AS g`, b.N)
	dbtest.Exec(b, ps.pool.pool, `ANALYZE inbox`)
	b.ResetTimer()
	forwarded := 0
	for forwarded < b.N {
		msgs, err := ps.InboxRelayClaim(ctx, store.InboxRelayClaimParams{Limit: 100, Lease: time.Minute})
		if err != nil {
			b.Fatalf("claiming: %v", err)
		}
		for _, m := range msgs {
			ok, err := ps.InboxRelayForward(ctx, store.InboxForwardParams{
				Claim:  m.Claim(),
				Outbox: store.OutboxInsertParams{Topic: "relay", Key: m.AggregateID, Payload: m.Payload},
			})
			if err != nil || !ok {
				b.Fatalf("forwarding: %v, %v", ok, err)
			}
			forwarded++
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "rows/s")
}
