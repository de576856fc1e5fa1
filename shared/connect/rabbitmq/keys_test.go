//go:build !queuebox_no_rabbitmq

package rabbitmq_test

import (
	"strconv"
	"testing"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/alternayte/queuebox/shared/connect/consumetest"
	"github.com/alternayte/queuebox/shared/connect/rabbitmq"
	"github.com/alternayte/queuebox/shared/inbox"
	"github.com/alternayte/queuebox/shared/store/postgres/dbtest"
	"github.com/alternayte/queuebox/shared/store/postgres/dbtest/dbstore"
)

// TestPrefetchCountBoundsEachStoredBatch: the broker hands the consumer at most
// prefetchCount unacknowledged deliveries, so no insert holds more rows than that, with the
// default (10) and with a set value.
func TestPrefetchCountBoundsEachStoredBatch(t *testing.T) {
	for _, prefetch := range []int{0, 3} {
		t.Run("prefetch="+strconv.Itoa(prefetch), func(t *testing.T) {
			pool, st := dbstore.New(t)
			q := newQueue(t)
			ch := testConn(t)
			const n = 60
			for i := range n {
				produce(t, ch, q, amqp.Publishing{Body: []byte(`{"id":"p-` + strconv.Itoa(i) + `"}`)})
			}
			sink := consumetest.NewFailingSink(st)
			s := newSource(t, rabbitmq.SourceConfig{Queue: q, PrefetchCount: prefetch, Intake: inbox.BrokerSource{Name: unique("rmq-pf")}})
			consumetest.Start(t, s, sink)
			dbtest.WaitInboxRows(t, pool, s.Name(), n, waitLimit)
			want := prefetch
			if want == 0 {
				want = rabbitmq.DefaultPrefetchCount
			}
			if got := sink.MaxBatch(); got > want {
				t.Errorf("an insert held %d rows, above prefetchCount %d", got, want)
			}
		})
	}
}
