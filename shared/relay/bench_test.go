package relay_test

import (
	"context"
	"testing"
	"time"

	"github.com/alternayte/queuebox/shared/relay"
	"github.com/alternayte/queuebox/shared/store/postgres/dbtest"
)

// BenchmarkForward measures forwarded rows per second of one relay draining b.N pending push
// rows. Every forward is its own transaction (outbox insert plus fenced mark, one commit per
// row) by design: a lost claim must roll back exactly one row's insert.
func BenchmarkForward(b *testing.B) {
	cases := []struct {
		name       string
		aggregates int // 0: rows without an aggregate
	}{
		{name: "no_aggregate", aggregates: 0},
		{name: "100_aggregates", aggregates: 100},
	}
	for _, bc := range cases {
		b.Run(bc.name, func(b *testing.B) {
			fx := newFixture(b)
			dbtest.Exec(b, fx.pool, `
INSERT INTO inbox (source, idempotency_key, aggregate_id, event_type, payload, headers, consumption, state)
SELECT 'stripe', 'evt-' || g,
       CASE WHEN $2::int > 0 THEN 'agg-' || (g % $2::int) END,
       'charge.succeeded', '{"id":"evt","amount":42,"currency":"eur"}',
       '{"User-Agent":"Stripe/1.0","X-Tenant":"acme"}', 'push', 'pending'
FROM generate_series(1, $1::int) g`, b.N, bc.aggregates)
			r := newRelay(b, fx.store, relay.Config{}, nil)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			defer cancel()
			b.ResetTimer()
			start := time.Now()
			sum := r.Run(ctx, relay.RunOptions{StopWhenIdle: true})
			elapsed := time.Since(start)
			b.StopTimer()
			if sum.Forwarded != b.N {
				b.Fatalf("forwarded %d rows, want %d: %+v", sum.Forwarded, b.N, sum)
			}
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "rows/s")
		})
	}
}
