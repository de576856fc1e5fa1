//go:build !queuebox_no_rabbitmq

package rabbitmq_test

import (
	"context"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/alternayte/queuebox/shared/connect/consumetest"
	"github.com/alternayte/queuebox/shared/connect/rabbitmq"
	"github.com/alternayte/queuebox/shared/inbox"
	"github.com/alternayte/queuebox/shared/store"
	"github.com/alternayte/queuebox/shared/store/postgres"
	"github.com/alternayte/queuebox/shared/store/postgres/dbtest"
)

// TestKilledBetweenCommitAndAckRedeliversStoredOnce runs a consumer in a child process that
// is killed with SIGKILL right after the row of kill-1 commits, before its acknowledgement;
// the broker delivers the message again to the next consumer, which finds it a duplicate,
// and the inbox holds one row.
func TestKilledBetweenCommitAndAckRedeliversStoredOnce(t *testing.T) {
	if consumetest.IsKilledChild() {
		pool := dbtest.NewPool(t, consumetest.ChildSetting("DB"))
		st, err := postgres.New(pool, store.DefaultNames())
		if err != nil {
			t.Fatal(err)
		}
		s := newSource(t, rabbitmq.SourceConfig{Queue: consumetest.ChildSetting("QUEUE"), Intake: inbox.BrokerSource{Name: consumetest.ChildSetting("SOURCE")}})
		_ = s.Run(context.Background(), consumetest.KillAfterCommit(st, "kill-1"))
		t.Fatal("the child consumer returned instead of being killed")
	}
	pool, dbURL := dbtest.Migrated(t)
	st, err := postgres.New(pool, store.DefaultNames())
	if err != nil {
		t.Fatal(err)
	}
	q := newQueue(t)
	name := unique("rmq-kill")
	produce(t, testConn(t), q, amqp.Publishing{Body: []byte(`{"id":"kill-1"}`), DeliveryMode: amqp.Persistent})
	consumetest.RunKilledChild(t, "TestKilledBetweenCommitAndAckRedeliversStoredOnce",
		map[string]string{"DB": dbURL, "QUEUE": q, "SOURCE": name}, 2*waitLimit)
	if rs := dbtest.InboxRows(t, pool, name); len(rs) != 1 {
		t.Fatalf("after the kill the inbox holds %d rows of kill-1, want the committed one", len(rs))
	}

	sink := consumetest.NewFailingSink(st)
	consumetest.Start(t, newSource(t, rabbitmq.SourceConfig{Queue: q, Intake: inbox.BrokerSource{Name: name}}), sink)
	deadline := time.Now().Add(waitLimit)
	for sink.Attempts("kill-1") == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the message was not delivered again after the kill")
		}
		time.Sleep(20 * time.Millisecond)
	}
	waitQueueEmpty(t, testConn(t), q)
	if rs := dbtest.InboxRows(t, pool, name); len(rs) != 1 {
		t.Fatalf("the inbox holds %d rows of kill-1, want 1", len(rs))
	}
}
