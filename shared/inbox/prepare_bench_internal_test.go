package inbox

import (
	"context"
	"testing"

	"github.com/alternayte/queuebox/shared/filter"
)

// benchBody is a 300-byte message body: an id, a nested type, an aggregate identifier and
// eight other members.
const benchBody = `{"id":"evt_1Nq8cJ2eZvKYlo2C0x7h3kLm","meta":{"type":"order.created","version":3},` +
	`"customer":"cus_42","created":1700000000,"livemode":false,"currency":"eur","amount":2150,` +
	`"items":[{"sku":"a-100","qty":2,"price":10.5},{"sku":"b-7","qty":1,"price":0.5}],` +
	`"note":"door","tags":["gift","priority"],"x":null}`

// BenchmarkPrepare measures the shared steps of one message (rules.prepare: the JSON check
// and the three JSONPaths, no transform) on a 300-byte body, for an HTTP and a broker source.
func BenchmarkPrepare(b *testing.B) {
	if len(benchBody) < 290 || len(benchBody) > 310 {
		b.Fatalf("the body has %d bytes, want about 300", len(benchBody))
	}
	for _, k := range []struct {
		name string
		kind *kind
	}{{"http", httpKind}, {"broker", brokerKind}} {
		b.Run(k.name, func(b *testing.B) {
			r, err := compileRules(ruleSpec{kind: k.kind, name: "bench", keyPath: "$.id",
				eventTypePath: "$.meta.type", aggregatePath: "$.customer"}, sinks{})
			if err != nil {
				b.Fatal(err)
			}
			lookup := filter.FoldLookup(map[string]string{"content-type": "application/json"})
			m := &message{body: []byte(benchBody), correlationID: "c"}
			ctx := context.Background()
			b.ReportAllocs()
			b.SetBytes(int64(len(benchBody)))
			for b.Loop() {
				p, f := r.prepare(ctx, m, lookup)
				if f != nil || p.IdempotencyKey != "evt_1Nq8cJ2eZvKYlo2C0x7h3kLm" || p.EventType != "order.created" || p.AggregateID != "cus_42" {
					b.Fatalf("prepare = %+v, %v", p, f)
				}
			}
		})
	}
}
