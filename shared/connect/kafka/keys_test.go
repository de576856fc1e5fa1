//go:build !queuebox_no_kafka

package kafka_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/alternayte/queuebox/shared/connect/consumetest"
	"github.com/alternayte/queuebox/shared/connect/kafka"
	"github.com/alternayte/queuebox/shared/inbox"
	"github.com/alternayte/queuebox/shared/store/postgres/dbtest"
	"github.com/alternayte/queuebox/shared/store/postgres/dbtest/dbstore"
)

// TestMaxPollRecordsBoundsEachStoredBatch: no insert holds more records than one poll.
func TestMaxPollRecordsBoundsEachStoredBatch(t *testing.T) {
	pool, st := dbstore.New(t)
	c := newCluster(t, 1, []string{"poll"})
	pr := producer(t, c)
	const n = 100
	for i := range n {
		produceRecord(t, pr, &kgo.Record{Topic: "poll", Value: []byte(`{"id":"r-` + strconv.Itoa(i) + `"}`)})
	}
	sink := consumetest.NewFailingSink(st)
	s := newSource(t, c, kafka.SourceConfig{Topics: []string{"poll"}, MaxPollRecords: 7})
	consumetest.Start(t, s, sink)
	dbtest.WaitInboxRows(t, pool, s.Name(), n, sourceWait)
	if got := sink.MaxBatch(); got > 7 {
		t.Errorf("an insert held %d records, above maxPollRecords 7", got)
	}
}

// TestAutoOffsetReset: a new group with earliest reads the records produced before it
// started; with latest it reads only those produced after it joined.
func TestAutoOffsetReset(t *testing.T) {
	pool, st := dbstore.New(t)
	c := newCluster(t, 1, []string{"reset"})
	pr := producer(t, c)
	produceRecord(t, pr, &kgo.Record{Topic: "reset", Value: []byte(`{"id":"before"}`)})

	early := newSource(t, c, kafka.SourceConfig{Topics: []string{"reset"}, GroupID: "qb-early", AutoOffsetReset: "earliest",
		Intake: inbox.BrokerSource{Name: "kafka-early"}})
	late := newSource(t, c, kafka.SourceConfig{Topics: []string{"reset"}, GroupID: "qb-late", AutoOffsetReset: "latest",
		Intake: inbox.BrokerSource{Name: "kafka-late"}})
	consumetest.Start(t, early, st)
	consumetest.Start(t, late, st)
	waitMembers(t, c, "qb-late", 1)
	// The late group has its partition; its position is the end of the log, fetched
	// asynchronously: produce until a record reaches it.
	deadline := time.Now().Add(sourceWait)
	for i := 0; len(dbtest.InboxRows(t, pool, "kafka-late")) == 0; i++ {
		if time.Now().After(deadline) {
			t.Fatal("the latest group stored nothing produced after it joined")
		}
		produceRecord(t, pr, &kgo.Record{Topic: "reset", Value: []byte(`{"id":"after-` + strconv.Itoa(i) + `"}`)})
		time.Sleep(100 * time.Millisecond)
	}
	for _, r := range dbtest.InboxRows(t, pool, "kafka-late") {
		if r.IdempotencyKey == "before" {
			t.Errorf("the latest group stored the record produced before it joined")
		}
	}
	// The earliest group reads the record produced before it started (with those produced
	// after, in any order within a batch).
	deadline = time.Now().Add(sourceWait)
	for found := false; !found; {
		for _, r := range dbtest.InboxRows(t, pool, "kafka-early") {
			found = found || r.IdempotencyKey == "before"
		}
		if !found && time.Now().After(deadline) {
			t.Fatal("the earliest group did not store the record produced before it started")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestSASLSource consumes from a broker that requires SASL/PLAIN; a wrong password leaves
// the component down with a reason that holds no password.
func TestSASLSource(t *testing.T) {
	pool, st := dbstore.New(t)
	c := newCluster(t, 1, []string{"secure"}, kfake.EnableSASL(), kfake.Superuser(kafka.SASLPlain, "qb", "s3cret-pass"))
	admin, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.SASL(plain.Auth{User: "qb", Pass: "s3cret-pass"}.AsMechanism()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(admin.Close)
	produceRecord(t, admin, &kgo.Record{Topic: "secure", Value: []byte(`{"id":"sasl-1"}`)})

	good := newSource(t, c, kafka.SourceConfig{Topics: []string{"secure"}, SecurityProtocol: kafka.SecuritySASLPlaintext,
		SASLMechanism: kafka.SASLPlain, SASLUsername: "qb", SASLPassword: "s3cret-pass"})
	consumetest.Start(t, good, st)
	dbtest.WaitInboxRows(t, pool, good.Name(), 1, sourceWait)

	bad := newSource(t, c, kafka.SourceConfig{Topics: []string{"secure"}, SecurityProtocol: kafka.SecuritySASLPlaintext,
		SASLMechanism: kafka.SASLPlain, SASLUsername: "qb", SASLPassword: "wrong-pass-123"})
	consumetest.Start(t, bad, st)
	deadline := time.Now().Add(sourceWait)
	for {
		err := bad.Check(context.Background())
		if err != nil && !strings.Contains(err.Error(), "not connected yet") {
			if strings.Contains(err.Error(), "wrong-pass-123") {
				t.Errorf("the health reason shows the password: %v", err)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the source with a wrong password is %v, want down", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if rs := dbtest.InboxRows(t, pool, bad.Name()); len(rs) != 0 {
		t.Errorf("the source with a wrong password stored %d rows", len(rs))
	}
}
