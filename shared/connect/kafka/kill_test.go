//go:build !queuebox_no_kafka

package kafka_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/alternayte/queuebox/shared/connect/consumetest"
	"github.com/alternayte/queuebox/shared/connect/kafka"
	"github.com/alternayte/queuebox/shared/inbox"
	"github.com/alternayte/queuebox/shared/store"
	"github.com/alternayte/queuebox/shared/store/postgres"
	"github.com/alternayte/queuebox/shared/store/postgres/dbtest"
)

// TestKilledBetweenCommitAndAckRedeliversStoredOnce runs a group member in a child process
// that is killed with SIGKILL right after the row of kill-1 commits, before its offset
// commit; the next member of the group reads the record again, finds it a duplicate, and
// the inbox holds one row.
func TestKilledBetweenCommitAndAckRedeliversStoredOnce(t *testing.T) {
	// A short group session, so that the next member gets the dead member's partition soon.
	session := kgo.SessionTimeout(6 * time.Second)
	if consumetest.IsKilledChild() {
		pool := dbtest.NewPool(t, consumetest.ChildSetting("DB"))
		st, err := postgres.New(pool, store.DefaultNames())
		if err != nil {
			t.Fatal(err)
		}
		s, err := kafka.NewSource(kafka.WithClientOpts(kafka.SourceConfig{Brokers: strings.Split(consumetest.ChildSetting("BROKERS"), ","),
			Topics: []string{"kill"}, GroupID: consumetest.ChildSetting("GROUP"), Intake: inbox.BrokerSource{Name: consumetest.ChildSetting("SOURCE")}}, session))
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
	c := newCluster(t, 1, []string{"kill"})
	produceRecord(t, producer(t, c), &kgo.Record{Topic: "kill", Value: []byte(`{"id":"kill-1"}`)})
	name, group := "kafka-kill", "qb-kill"
	consumetest.RunKilledChild(t, "TestKilledBetweenCommitAndAckRedeliversStoredOnce",
		map[string]string{"DB": dbURL, "BROKERS": strings.Join(c.ListenAddrs(), ","), "GROUP": group, "SOURCE": name}, 2*sourceWait)
	if rs := dbtest.InboxRows(t, pool, name); len(rs) != 1 {
		t.Fatalf("after the kill the inbox holds %d rows of kill-1, want the committed one", len(rs))
	}

	sink := consumetest.NewFailingSink(st)
	s, err := kafka.NewSource(kafka.WithClientOpts(kafka.SourceConfig{Brokers: c.ListenAddrs(), Topics: []string{"kill"}, GroupID: group,
		Intake: inbox.BrokerSource{Name: name}}, session))
	if err != nil {
		t.Fatal(err)
	}
	consumetest.Start(t, s, sink)
	deadline := time.Now().Add(2 * sourceWait)
	for sink.Attempts("kill-1") == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the record was not read again after the kill")
		}
		time.Sleep(20 * time.Millisecond)
	}
	for committed(t, c, group, "kill") != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("group %s did not commit the redelivered record", group)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if rs := dbtest.InboxRows(t, pool, name); len(rs) != 1 {
		t.Fatalf("the inbox holds %d rows of kill-1, want 1", len(rs))
	}
}
