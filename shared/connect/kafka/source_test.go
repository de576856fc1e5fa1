//go:build !queuebox_no_kafka

package kafka_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/alternayte/queuebox/shared/connect"
	"github.com/alternayte/queuebox/shared/connect/consumetest"
	"github.com/alternayte/queuebox/shared/connect/kafka"
	"github.com/alternayte/queuebox/shared/inbox"
	"github.com/alternayte/queuebox/shared/store/postgres/dbtest"
	"github.com/alternayte/queuebox/shared/store/postgres/dbtest/dbstore"
)

// sourceWait bounds every wait of the source tests for a condition; it is no speed
// assertion.
const sourceWait = 30 * time.Second

func producer(t *testing.T, c *kfake.Cluster) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func produceRecord(t *testing.T, cl *kgo.Client, r *kgo.Record) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), sourceWait)
	defer cancel()
	if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
		t.Fatalf("producing: %v", err)
	}
}

func newSource(t *testing.T, c *kfake.Cluster, sc kafka.SourceConfig) *kafka.Source {
	t.Helper()
	sc.Brokers = c.ListenAddrs()
	if sc.GroupID == "" {
		sc.GroupID = "qb-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	}
	if sc.Intake.Name == "" {
		sc.Intake.Name = "kafka-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	}
	if sc.Backoff.Min == 0 {
		sc.Backoff = connect.Backoff{Min: 20 * time.Millisecond, Max: 200 * time.Millisecond}
	}
	s, err := kafka.NewSource(sc)
	if err != nil {
		t.Fatalf("NewSource: %v", err)
	}
	return s
}

func TestSourceContract(t *testing.T) {
	pool, st := dbstore.New(t)
	consumetest.Run(t, consumetest.Features{}, func(t *testing.T) consumetest.Target {
		c := newCluster(t, 1, []string{"contract"})
		name := "kafka-" + strconv.FormatInt(time.Now().UnixNano(), 36)
		group := "qb-" + name
		pr := producer(t, c)
		return consumetest.Target{
			NewSource: func(t *testing.T) consumetest.Source {
				return newSource(t, c, kafka.SourceConfig{Topics: []string{"contract"}, GroupID: group, Intake: inbox.BrokerSource{Name: name}})
			},
			Produce: func(t *testing.T, m consumetest.Message) {
				r := &kgo.Record{Topic: "contract", Value: m.Body}
				for k, v := range m.Headers {
					r.Headers = append(r.Headers, kgo.RecordHeader{Key: k, Value: []byte(v)})
				}
				produceRecord(t, pr, r)
			},
			Sink: st,
			Rows: func(t *testing.T) []consumetest.Row {
				var out []consumetest.Row
				for _, r := range dbtest.InboxRows(t, pool, name) {
					out = append(out, consumetest.Row{IdempotencyKey: r.IdempotencyKey, State: r.State, Payload: r.Payload})
				}
				return out
			},
		}
	})
}

// TestAttributeOrdersAndHeaders checks the Kafka orders of spec/25: the key from the
// header, the body path, the record key, the digest; the aggregate from the body path, the
// header, the record key; and the record headers as UTF-8 text or base64: text.
func TestAttributeOrdersAndHeaders(t *testing.T) {
	pool, st := dbstore.New(t)
	c := newCluster(t, 1, []string{"orders"})
	pr := producer(t, c)
	s := newSource(t, c, kafka.SourceConfig{Topics: []string{"orders"}, Intake: inbox.BrokerSource{
		AggregateIDPath: "$.customer", EventTypePath: "$.type",
	}})
	produceRecord(t, pr, &kgo.Record{Topic: "orders", Key: []byte("rk-1"), Value: []byte(`{"id":"from-path","customer":"c-1","type":"created"}`),
		Headers: []kgo.RecordHeader{{Key: "x-idempotency-key", Value: []byte("from-header")}, {Key: "bin", Value: []byte{0xff, 0xfe}}, {Key: "dup", Value: []byte("a")}, {Key: "dup", Value: []byte("b")}}})
	produceRecord(t, pr, &kgo.Record{Topic: "orders", Key: []byte("rk-2"), Value: []byte(`{"id":"from-path-2"}`),
		Headers: []kgo.RecordHeader{{Key: "x-aggregate-id", Value: []byte("agg-h")}, {Key: "x-event-type", Value: []byte("type-h")}}})
	produceRecord(t, pr, &kgo.Record{Topic: "orders", Key: []byte("rk-3"), Value: []byte(`{"other":3}`)})
	produceRecord(t, pr, &kgo.Record{Topic: "orders", Value: []byte(`{"other":4}`)})
	consumetest.Start(t, s, st)
	rs := dbtest.WaitInboxRows(t, pool, s.Name(), 4, sourceWait)
	byKey := map[string]dbtest.InboxRow{}
	for _, r := range rs {
		byKey[r.IdempotencyKey] = r
	}
	if r := byKey["from-header"]; r.AggregateID != "c-1" || r.EventType != "created" {
		t.Errorf("row from-header = %+v", r)
	} else {
		var h map[string]string
		_ = json.Unmarshal(r.Headers, &h)
		if h["bin"] != "base64://4=" || h["dup"] != "b" {
			t.Errorf("headers = %v, want bin base64://4= and dup b", h)
		}
	}
	if r := byKey["from-path-2"]; r.AggregateID != "agg-h" || r.EventType != "type-h" {
		t.Errorf("row from-path-2 = %+v", r)
	}
	if r, ok := byKey["rk-3"]; !ok || r.AggregateID != "rk-3" {
		t.Errorf("no row keyed and aggregated by the record key rk-3: %v", rs)
	}
	found := false
	for k := range byKey {
		found = found || strings.HasPrefix(k, inbox.DigestPrefix)
	}
	if !found {
		t.Errorf("no row keyed by the digest of the body: %v", rs)
	}
}

func committed(t *testing.T, c *kfake.Cluster, group, topic string) int64 {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	offs, err := kadm.NewClient(cl).FetchOffsets(context.Background(), group)
	if err != nil {
		t.Fatalf("fetching the offsets of group %s: %v", group, err)
	}
	o, ok := offs.Lookup(topic, 0)
	if !ok {
		return -1
	}
	return o.At
}

// TestFailureInTheMiddleOfABatchCommitsTheRunBeforeIt fails the store of the sixth record
// of a poll: the five before it are committed, the partition is read again from the sixth,
// and in the end every record is stored once.
func TestFailureInTheMiddleOfABatchCommitsTheRunBeforeIt(t *testing.T) {
	pool, st := dbstore.New(t)
	c := newCluster(t, 1, []string{"mid"})
	pr := producer(t, c)
	for i := range 10 {
		produceRecord(t, pr, &kgo.Record{Topic: "mid", Value: []byte(`{"id":"m-` + strconv.Itoa(i) + `"}`)})
	}
	// The batch fails, the single store of m-5 fails, the next attempts succeed.
	fs := consumetest.NewFailingSink(st)
	fs.FailKey("m-5", 2)
	group := "qb-mid"
	s := newSource(t, c, kafka.SourceConfig{Topics: []string{"mid"}, GroupID: group})
	consumetest.Start(t, s, fs)
	rs := dbtest.WaitInboxRows(t, pool, s.Name(), 10, sourceWait)
	seen := map[string]int{}
	for _, r := range rs {
		seen[r.IdempotencyKey]++
	}
	for i := range 10 {
		if k := "m-" + strconv.Itoa(i); seen[k] != 1 {
			t.Errorf("%s stored %d times, want 1", k, seen[k])
		}
	}
	for i := range 5 {
		// In the failed batch, then alone: never read again after the seek to m-5.
		if k := "m-" + strconv.Itoa(i); fs.Attempts(k) > 2 {
			t.Errorf("%s was stored %d times: it was read again after it was committed", k, fs.Attempts(k))
		}
	}
	if fs.Attempts("m-5") < 3 {
		t.Errorf("m-5 was tried %d times, want the batch, the failed single store, and a re-read", fs.Attempts("m-5"))
	}
	deadline := time.Now().Add(sourceWait)
	for committed(t, c, group, "mid") != 10 {
		if time.Now().After(deadline) {
			t.Fatalf("group %s committed offset %d, want 10", group, committed(t, c, group, "mid"))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestReplicasDivideThePartitions runs two sources of one group on a topic of four
// partitions: each record is stored once, and both members hold partitions.
func TestReplicasDivideThePartitions(t *testing.T) {
	pool, st := dbstore.New(t)
	c := newCluster(t, 4, []string{"split"})
	pr := producer(t, c)
	name, group := "kafka-split", "qb-split"
	for range 2 {
		consumetest.Start(t, newSource(t, c, kafka.SourceConfig{Topics: []string{"split"}, GroupID: group, Intake: inbox.BrokerSource{Name: name}}), st)
	}
	waitMembers(t, c, group, 2)
	const n = 400
	for i := range n {
		produceRecord(t, pr, &kgo.Record{Topic: "split", Key: []byte("k" + strconv.Itoa(i%16)), Value: []byte(`{"id":"s-` + strconv.Itoa(i) + `"}`)})
	}
	rs := dbtest.WaitInboxRows(t, pool, name, n, sourceWait)
	seen := map[string]int{}
	for _, r := range rs {
		seen[r.IdempotencyKey]++
	}
	for i := range n {
		if k := "s-" + strconv.Itoa(i); seen[k] != 1 {
			t.Errorf("%s stored %d times, want 1", k, seen[k])
		}
	}
	if len(rs) != n {
		t.Errorf("%d rows, want %d", len(rs), n)
	}
}

// waitMembers waits until the group has want members, each with partitions assigned.
func waitMembers(t *testing.T, c *kfake.Cluster, group string, want int) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	deadline := time.Now().Add(sourceWait)
	for {
		groups, err := adm.DescribeGroups(context.Background(), group)
		if err == nil {
			g := groups[group]
			assigned := 0
			for _, m := range g.Members {
				if ca, ok := m.Assigned.AsConsumer(); ok && len(ca.Topics) > 0 {
					assigned++
				}
			}
			if g.State == "Stable" && assigned == want {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("group %s did not reach %d members with partitions: %v", group, want, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestDeadRowOfANonJSONBodyKeepsItsAttributes: a value that is not JSON is a dead row, and
// its aggregate identifier comes from the header, then the record key, and its event type
// from the header.
func TestDeadRowOfANonJSONBodyKeepsItsAttributes(t *testing.T) {
	pool, st := dbstore.New(t)
	c := newCluster(t, 1, []string{"raw"})
	pr := producer(t, c)
	s := newSource(t, c, kafka.SourceConfig{Topics: []string{"raw"}, Intake: inbox.BrokerSource{AggregateIDPath: "$.order", EventTypePath: "$.type"}})
	produceRecord(t, pr, &kgo.Record{Topic: "raw", Key: []byte("rk-1"), Value: []byte("plain one"),
		Headers: []kgo.RecordHeader{{Key: "x-event-type", Value: []byte("type-1")}}})
	produceRecord(t, pr, &kgo.Record{Topic: "raw", Key: []byte("rk-2"), Value: []byte("plain two"),
		Headers: []kgo.RecordHeader{{Key: "x-idempotency-key", Value: []byte("k-2")}, {Key: "X-Aggregate-Id", Value: []byte("agg-2")}}})
	consumetest.Start(t, s, st)
	byKey := map[string]dbtest.InboxRow{}
	for _, r := range dbtest.WaitInboxRows(t, pool, s.Name(), 2, sourceWait) {
		byKey[r.IdempotencyKey] = r
	}
	if r := byKey["rk-1"]; r.State != "dead" || r.AggregateID != "rk-1" || r.EventType != "type-1" {
		t.Errorf("row rk-1 = state %q aggregate %q event type %q, want dead rk-1 type-1", r.State, r.AggregateID, r.EventType)
	}
	if r := byKey["k-2"]; r.State != "dead" || r.AggregateID != "agg-2" || r.EventType != "" {
		t.Errorf("row k-2 = state %q aggregate %q event type %q, want dead agg-2 and no event type", r.State, r.AggregateID, r.EventType)
	}
}

// TestTombstones: by default a tombstone (a null value) is a dead Invalid JSON row keyed and
// aggregated by its record key, as any value that is not JSON; with SkipTombstones it is
// committed without a row and counted. An empty value is no tombstone either way.
func TestTombstones(t *testing.T) {
	for _, skip := range []bool{false, true} {
		t.Run(fmt.Sprintf("skipTombstones=%v", skip), func(t *testing.T) {
			pool, st := dbstore.New(t)
			c := newCluster(t, 1, []string{"compacted"})
			pr := producer(t, c)
			m := &consumetest.Metrics{}
			group := "qb-tomb-" + strconv.FormatBool(skip)
			s := newSource(t, c, kafka.SourceConfig{Topics: []string{"compacted"}, GroupID: group, SkipTombstones: skip,
				IntakeOptions: inbox.IntakeOptions{Metrics: m}})
			produceRecord(t, pr, &kgo.Record{Topic: "compacted", Key: []byte("k-1"), Value: []byte(`{"id":"v-1"}`)})
			produceRecord(t, pr, &kgo.Record{Topic: "compacted", Key: []byte("k-1")}) // the tombstone of k-1
			produceRecord(t, pr, &kgo.Record{Topic: "compacted", Key: []byte("k-2"), Value: []byte{}})
			produceRecord(t, pr, &kgo.Record{Topic: "compacted", Key: []byte("k-3"), Value: []byte(`{"id":"v-3"}`)})
			consumetest.Start(t, s, st)
			want := 4
			if skip {
				want = 3
			}
			dbtest.WaitInboxRows(t, pool, s.Name(), want, sourceWait)
			deadline := time.Now().Add(sourceWait)
			for committed(t, c, group, "compacted") != 4 {
				if time.Now().After(deadline) {
					t.Fatalf("group %s committed offset %d, want 4: every record acknowledged", group, committed(t, c, group, "compacted"))
				}
				time.Sleep(20 * time.Millisecond)
			}
			rs := dbtest.InboxRows(t, pool, s.Name())
			byKey := map[string]dbtest.InboxRow{}
			for _, r := range rs {
				byKey[r.IdempotencyKey] = r
			}
			if len(rs) != want {
				t.Fatalf("%d rows, want %d: %v", len(rs), want, rs)
			}
			if r := byKey["k-1"]; skip == (r.State != "") {
				t.Errorf("the tombstone's row = %+v, want one only without skipTombstones", r)
			} else if !skip && (r.State != "dead" || r.LastError != "Invalid JSON" || r.AggregateID != "k-1") {
				t.Errorf("the tombstone's row = %+v, want dead Invalid JSON aggregated by k-1", r)
			}
			if r := byKey["k-2"]; r.State != "dead" || r.LastError != "Invalid JSON" {
				t.Errorf("the empty value's row = %+v, want dead Invalid JSON", r)
			}
			if byKey["v-1"].State != "pending" || byKey["v-3"].State != "pending" {
				t.Errorf("rows v-1 and v-3 = %+v %+v, want pending", byKey["v-1"], byKey["v-3"])
			}
			if n, wantN := m.Tombstones.Load(), map[bool]int64{false: 0, true: 1}[skip]; n != wantN {
				t.Errorf("queuebox_inbox_tombstones_skipped_total counted %d, want %d", n, wantN)
			}
		})
	}
}

// TestMaxBodyBytes: a value over maxBodyBytes is a dead row that names its size, without the
// value, and the records around it are stored.
func TestMaxBodyBytes(t *testing.T) {
	pool, st := dbstore.New(t)
	c := newCluster(t, 1, []string{"sized"})
	pr := producer(t, c)
	m := &consumetest.Metrics{}
	s := newSource(t, c, kafka.SourceConfig{Topics: []string{"sized"}, Intake: inbox.BrokerSource{MaxBodyBytes: 100},
		IntakeOptions: inbox.IntakeOptions{Metrics: m}})
	big := `{"id":"big","pad":"` + strings.Repeat("x", 500) + `"}`
	produceRecord(t, pr, &kgo.Record{Topic: "sized", Value: []byte(`{"id":"small"}`)})
	produceRecord(t, pr, &kgo.Record{Topic: "sized", Key: []byte("rk-big"), Value: []byte(big)})
	produceRecord(t, pr, &kgo.Record{Topic: "sized", Value: []byte(`{"id":"after"}`)})
	consumetest.Start(t, s, st)
	byKey := map[string]dbtest.InboxRow{}
	for _, r := range dbtest.WaitInboxRows(t, pool, s.Name(), 3, sourceWait) {
		byKey[r.IdempotencyKey] = r
	}
	size := strconv.Itoa(len(big))
	if r := byKey["rk-big"]; r.State != "dead" || !strings.Contains(r.LastError, size) || string(r.Payload) != `{"bodyBytes": `+size+`}` || r.AggregateID != "rk-big" {
		t.Errorf("row of the large record = %+v, want dead naming %s bytes, payload {\"bodyBytes\": %s}, aggregate rk-big", r, size, size)
	}
	if byKey["small"].State != "pending" || byKey["after"].State != "pending" {
		t.Errorf("rows small and after = %+v %+v, want pending", byKey["small"], byKey["after"])
	}
	if n := m.TooLarge.Load(); n != 1 {
		t.Errorf("queuebox_inbox_too_large_total counted %d, want 1", n)
	}
}
