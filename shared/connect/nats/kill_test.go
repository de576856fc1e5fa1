//go:build !queuebox_no_nats

package nats_test

import (
	"context"
	"testing"
	"time"

	"github.com/alternayte/queuebox/shared/connect/consumetest"
	qbnats "github.com/alternayte/queuebox/shared/connect/nats"
	"github.com/alternayte/queuebox/shared/inbox"
	"github.com/alternayte/queuebox/shared/store"
	"github.com/alternayte/queuebox/shared/store/postgres"
	"github.com/alternayte/queuebox/shared/store/postgres/dbtest"
)

// TestKilledBetweenCommitAndAckRedeliversStoredOnce runs a consumer in a child process that
// is killed with SIGKILL right after the row of kill-1 commits, before its acknowledgement;
// JetStream delivers the message again after ackWaitMs to the next consumer of the durable,
// which finds it a duplicate, and the inbox holds one row.
func TestKilledBetweenCommitAndAckRedeliversStoredOnce(t *testing.T) {
	const ackWait = 2 * time.Second
	if consumetest.IsKilledChild() {
		pool := dbtest.NewPool(t, consumetest.ChildSetting("DB"))
		st, err := postgres.New(pool, store.DefaultNames())
		if err != nil {
			t.Fatal(err)
		}
		s, err := qbnats.NewSource(qbnats.SourceConfig{Servers: []string{natsURL}, Stream: consumetest.ChildSetting("STREAM"),
			Durable: consumetest.ChildSetting("DURABLE"), AckWait: ackWait, Intake: inbox.BrokerSource{Name: consumetest.ChildSetting("SOURCE")}})
		if err != nil {
			t.Fatal(err)
		}
		_ = s.Run(context.Background(), consumetest.KillAfterCommit(st, "kill-1"))
		t.Fatal("the child consumer returned instead of being killed")
	}
	pool, dbURL := dbtest.Migrated(t)
	st, err := postgres.New(pool, store.DefaultNames())
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t)
	info, err := f.stream.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	name, durable := "nats-kill-"+unique(t), "qb-"+unique(t)
	f.produce(t, "kill", `{"id":"kill-1"}`, nil)
	consumetest.RunKilledChild(t, "TestKilledBetweenCommitAndAckRedeliversStoredOnce",
		map[string]string{"DB": dbURL, "STREAM": info.Config.Name, "DURABLE": durable, "SOURCE": name}, 2*waitLimit)
	if rs := dbtest.InboxRows(t, pool, name); len(rs) != 1 {
		t.Fatalf("after the kill the inbox holds %d rows of kill-1, want the committed one", len(rs))
	}

	sink := consumetest.NewFailingSink(st)
	consumetest.Start(t, newSource(t, f, qbnats.SourceConfig{Durable: durable, AckWait: ackWait, Intake: inbox.BrokerSource{Name: name}}), sink)
	deadline := time.Now().Add(waitLimit + ackWait)
	for sink.Attempts("kill-1") == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the message was not delivered again after the kill")
		}
		time.Sleep(20 * time.Millisecond)
	}
	waitNoPending(t, f, durable)
	if rs := dbtest.InboxRows(t, pool, name); len(rs) != 1 {
		t.Fatalf("the inbox holds %d rows of kill-1, want 1", len(rs))
	}
}
