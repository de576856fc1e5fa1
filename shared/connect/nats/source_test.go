//go:build !queuebox_no_nats

package nats_test

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"

	"github.com/alternayte/queuebox/shared/connect"
	"github.com/alternayte/queuebox/shared/connect/connecttest"
	"github.com/alternayte/queuebox/shared/connect/consumetest"
	qbnats "github.com/alternayte/queuebox/shared/connect/nats"
	"github.com/alternayte/queuebox/shared/inbox"
	"github.com/alternayte/queuebox/shared/store/postgres/dbtest"
	"github.com/alternayte/queuebox/shared/store/postgres/dbtest/dbstore"
)

func newSource(t *testing.T, f *fixture, c qbnats.SourceConfig) *qbnats.Source {
	t.Helper()
	if len(c.Servers) == 0 {
		c.Servers = []string{natsURL}
	}
	if c.Stream == "" {
		info, err := f.stream.Info(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		c.Stream = info.Config.Name
	}
	if c.Durable == "" {
		c.Durable = "qb-" + unique(t)
	}
	if c.Intake.Name == "" {
		c.Intake.Name = "nats-" + unique(t)
	}
	s, err := qbnats.NewSource(c)
	if err != nil {
		t.Fatalf("NewSource: %v", err)
	}
	return s
}

func (f *fixture) produce(t *testing.T, subject string, body string, headers map[string]string) {
	t.Helper()
	m := natsgo.NewMsg(f.prefix + "." + subject)
	m.Data = []byte(body)
	for k, v := range headers {
		m.Header.Set(k, v)
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if _, err := f.js.PublishMsg(ctx, m); err != nil {
		t.Fatalf("publishing: %v", err)
	}
}

func TestSourceContract(t *testing.T) {
	pool, st := dbstore.New(t)
	consumetest.Run(t, consumetest.Features{RedeliveryWait: 2 * time.Second}, func(t *testing.T) consumetest.Target {
		f := newFixture(t)
		name := "nats-" + unique(t)
		durable := "qb-" + unique(t)
		return consumetest.Target{
			NewSource: func(t *testing.T) consumetest.Source {
				return newSource(t, f, qbnats.SourceConfig{Durable: durable, AckWait: 2 * time.Second, Intake: inbox.BrokerSource{Name: name}})
			},
			Produce: func(t *testing.T, m consumetest.Message) {
				msg := natsgo.NewMsg(f.prefix + ".contract")
				msg.Data = m.Body
				for k, v := range m.Headers {
					msg.Header.Set(k, v)
				}
				if _, err := f.js.PublishMsg(context.Background(), msg); err != nil {
					t.Fatalf("publishing: %v", err)
				}
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

func TestMissingStreamStopsTheSourceNamingIt(t *testing.T) {
	_, st := dbstore.New(t)
	f := newFixture(t)
	stream := "QB_MISSING_" + strings.ToUpper(unique(t))
	s := newSource(t, f, qbnats.SourceConfig{Stream: stream})
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	err := s.Run(ctx, st)
	if !errors.Is(err, connect.ErrStopped) || !strings.Contains(err.Error(), stream) {
		t.Fatalf("Run on a missing stream = %v, want a stop naming %s", err, stream)
	}
	if cerr := s.Check(ctx); cerr == nil || !strings.Contains(cerr.Error(), stream) {
		t.Errorf("health of the stopped source = %v, want down naming the stream", cerr)
	}
	if _, err := f.js.Stream(ctx, stream); err == nil {
		t.Errorf("the source created stream %s; QueueBox never creates a stream", stream)
	}
}

// TestAttributeOrdersAndHeaders checks the NATS orders of spec/25 (the key header, the
// body path, Nats-Msg-Id, the digest; the aggregate and the event type from the body, then
// the headers) and that every header reaches the headers column with its last value;
// filterSubject limits what is read.
func TestAttributeOrdersAndHeaders(t *testing.T) {
	pool, st := dbstore.New(t)
	f := newFixture(t)
	s := newSource(t, f, qbnats.SourceConfig{FilterSubject: f.prefix + ".orders.>", Intake: inbox.BrokerSource{
		AggregateIDPath: "$.customer", EventTypePath: "$.type",
	}})
	f.produce(t, "orders.a", `{"id":"from-path","type":"created"}`, map[string]string{
		"x-idempotency-key": "from-header", "x-aggregate-id": "agg-h", "X-Correlation-Id": "corr-1", "Nats-Msg-Id": "mid-1"})
	f.produce(t, "orders.b", `{"id":"from-path-2","customer":"c-2"}`, map[string]string{"x-event-type": "type-h"})
	f.produce(t, "orders.c", `{"other":3}`, map[string]string{"Nats-Msg-Id": "mid-3"})
	f.produce(t, "other.d", `{"id":"not-read"}`, nil)
	m := natsgo.NewMsg(f.prefix + ".orders.e")
	m.Data = []byte(`{"id":"multi"}`)
	m.Header.Add("x-multi", "first")
	m.Header.Add("x-multi", "last")
	if _, err := f.js.PublishMsg(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	consumetest.Start(t, s, st)
	rs := dbtest.WaitInboxRows(t, pool, s.Name(), 4, waitLimit)
	byKey := map[string]dbtest.InboxRow{}
	for _, r := range rs {
		byKey[r.IdempotencyKey] = r
	}
	if len(rs) != 4 {
		t.Fatalf("rows = %v, want 4 (the other subject filtered out)", rs)
	}
	if r := byKey["from-header"]; r.AggregateID != "agg-h" || r.EventType != "created" || r.CorrelationID != "corr-1" {
		t.Errorf("row from-header = %+v", r)
	}
	if r := byKey["from-path-2"]; r.AggregateID != "c-2" || r.EventType != "type-h" {
		t.Errorf("row from-path-2 = %+v", r)
	}
	if _, ok := byKey["mid-3"]; !ok {
		t.Errorf("no row keyed by Nats-Msg-Id mid-3: %v", rs)
	}
	var h map[string]string
	if err := json.Unmarshal(byKey["multi"].Headers, &h); err != nil || h["x-multi"] != "last" {
		t.Errorf("headers of multi = %s, want x-multi: last", byKey["multi"].Headers)
	}
	var h1 map[string]string
	_ = json.Unmarshal(byKey["from-header"].Headers, &h1)
	if h1["Nats-Msg-Id"] != "mid-1" || h1["x-aggregate-id"] != "agg-h" {
		t.Errorf("headers of from-header = %v, want every received header", h1)
	}
}

// TestReplicasShareTheDurable runs two sources of one durable: every message is stored
// once, and each is acknowledged (the consumer has nothing pending at the end).
func TestReplicasShareTheDurable(t *testing.T) {
	pool, st := dbstore.New(t)
	f := newFixture(t)
	name, durable := "nats-"+unique(t), "qb-"+unique(t)
	for range 2 {
		consumetest.Start(t, newSource(t, f, qbnats.SourceConfig{Durable: durable, BatchSize: 10, Intake: inbox.BrokerSource{Name: name}}), st)
	}
	const n = 300
	for i := range n {
		f.produce(t, "r", `{"id":"r-`+strconv.Itoa(i)+`"}`, nil)
	}
	rs := dbtest.WaitInboxRows(t, pool, name, n, waitLimit)
	seen := map[string]int{}
	for _, r := range rs {
		seen[r.IdempotencyKey]++
	}
	for i := range n {
		if k := "r-" + strconv.Itoa(i); seen[k] != 1 {
			t.Errorf("%s stored %d times, want 1", k, seen[k])
		}
	}
	waitNoPending(t, f, durable)
}

// waitNoPending waits until the durable consumer has nothing pending or unacknowledged.
func waitNoPending(t *testing.T, f *fixture, durable string) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for {
		c, err := f.stream.Consumer(context.Background(), durable)
		if err != nil {
			t.Fatalf("consumer %s: %v", durable, err)
		}
		info, err := c.Info(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if info.NumPending == 0 && info.NumAckPending == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("consumer %s: %d pending, %d unacknowledged", durable, info.NumPending, info.NumAckPending)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestConnectionCutReconnectsAndLosesNothing cuts the source's connection while messages
// flow; the client reconnects and every message is stored once.
func TestConnectionCutReconnectsAndLosesNothing(t *testing.T) {
	pool, st := dbstore.New(t)
	f := newFixture(t)
	px := connecttest.Listen(t, "127.0.0.1:4222")
	durable := "qb-" + unique(t)
	s := newSource(t, f, qbnats.SourceConfig{Servers: []string{"nats://" + px.Addr()}, Durable: durable, AckWait: 2 * time.Second,
		BatchSize: 20, Backoff: connect.Backoff{Min: 50 * time.Millisecond, Max: 500 * time.Millisecond}})
	consumetest.Start(t, s, st)
	const n = 200
	for i := range n {
		f.produce(t, "cut", `{"id":"cut-`+strconv.Itoa(i)+`"}`, nil)
		if i == n/3 || i == 2*n/3 {
			px.Cut()
		}
	}
	rs := dbtest.WaitInboxRows(t, pool, s.Name(), n, waitLimit)
	seen := map[string]int{}
	for _, r := range rs {
		seen[r.IdempotencyKey]++
	}
	for i := range n {
		if k := "cut-" + strconv.Itoa(i); seen[k] != 1 {
			t.Errorf("%s stored %d times, want 1", k, seen[k])
		}
	}
	waitNoPending(t, f, durable)
}

// TestStoreFailureNaksUntilTheDatabaseReturns: nothing is acknowledged while the store
// fails, and once it returns every message is stored once.
func TestStoreFailureNaksUntilTheDatabaseReturns(t *testing.T) {
	pool, st := dbstore.New(t)
	f := newFixture(t)
	fs := consumetest.NewFailingSink(st)
	fs.SetDown(true)
	durable := "qb-" + unique(t)
	s := newSource(t, f, qbnats.SourceConfig{Durable: durable, Backoff: connect.Backoff{Min: 20 * time.Millisecond, Max: 200 * time.Millisecond}})
	for i := range 20 {
		f.produce(t, "down", `{"id":"down-`+strconv.Itoa(i)+`"}`, nil)
	}
	consumetest.Start(t, s, fs)
	fs.WaitDownFailures(t, 3, waitLimit)
	if got := len(dbtest.InboxRows(t, pool, s.Name())); got != 0 {
		t.Fatalf("%d rows stored while the store was down", got)
	}
	fs.SetDown(false)
	dbtest.WaitInboxRows(t, pool, s.Name(), 20, waitLimit)
	waitNoPending(t, f, durable)
}

// TestDeadRowOfANonJSONBodyKeepsItsAttributes: a body that is not JSON is a dead row, and
// its aggregate identifier and event type still come from the attribute headers.
func TestDeadRowOfANonJSONBodyKeepsItsAttributes(t *testing.T) {
	pool, st := dbstore.New(t)
	f := newFixture(t)
	s := newSource(t, f, qbnats.SourceConfig{Intake: inbox.BrokerSource{AggregateIDPath: "$.order", EventTypePath: "$.type"}})
	f.produce(t, "raw", "plain text", map[string]string{"Nats-Msg-Id": "raw-attrs", "X-Aggregate-Id": "agg-1", "x-event-type": "type-1"})
	consumetest.Start(t, s, st)
	r := dbtest.WaitInboxRows(t, pool, s.Name(), 1, waitLimit)[0]
	if r.State != "dead" || r.IdempotencyKey != "raw-attrs" || r.AggregateID != "agg-1" || r.EventType != "type-1" {
		t.Errorf("row = key %q state %q aggregate %q event type %q, want raw-attrs dead agg-1 type-1",
			r.IdempotencyKey, r.State, r.AggregateID, r.EventType)
	}
}

// TestMaxBodyBytes: a body over maxBodyBytes is a dead row that names its size, without the
// body, and the messages around it are stored.
func TestMaxBodyBytes(t *testing.T) {
	pool, st := dbstore.New(t)
	f := newFixture(t)
	m := &consumetest.Metrics{}
	s := newSource(t, f, qbnats.SourceConfig{Intake: inbox.BrokerSource{MaxBodyBytes: 100}, IntakeOptions: inbox.IntakeOptions{Metrics: m}})
	big := `{"id":"big","pad":"` + strings.Repeat("x", 500) + `"}`
	f.produce(t, "sized", `{"id":"small"}`, nil)
	f.produce(t, "sized", big, map[string]string{"Nats-Msg-Id": "mid-big"})
	f.produce(t, "sized", `{"id":"after"}`, nil)
	consumetest.Start(t, s, st)
	byKey := map[string]dbtest.InboxRow{}
	for _, r := range dbtest.WaitInboxRows(t, pool, s.Name(), 3, waitLimit) {
		byKey[r.IdempotencyKey] = r
	}
	size := strconv.Itoa(len(big))
	if r := byKey["mid-big"]; r.State != "dead" || !strings.Contains(r.LastError, size) || string(r.Payload) != `{"bodyBytes": `+size+`}` {
		t.Errorf("row of the large message = %+v, want dead naming %s bytes, payload {\"bodyBytes\": %s}", r, size, size)
	}
	if byKey["small"].State != "pending" || byKey["after"].State != "pending" {
		t.Errorf("rows small and after = %+v %+v, want pending", byKey["small"], byKey["after"])
	}
	if n := m.TooLarge.Load(); n != 1 {
		t.Errorf("queuebox_inbox_too_large_total counted %d, want 1", n)
	}
}

// TestALoneMessageIsStoredWithoutWaitingForTheBatch sets the wait of a fetch far above the
// test's deadline: a lone message, far fewer than batchSize, must still be stored, because a
// fetch hands over what has arrived instead of waiting to fill its batch. A second message,
// sent once the first is stored, must be too.
func TestALoneMessageIsStoredWithoutWaitingForTheBatch(t *testing.T) {
	pool, st := dbstore.New(t)
	f := newFixture(t)
	s := newSource(t, f, qbnats.WithFetchWait(qbnats.SourceConfig{BatchSize: 100}, 10*time.Minute))
	consumetest.Start(t, s, st)
	deadline := time.Now().Add(waitLimit)
	for s.Check(context.Background()) != nil {
		if time.Now().After(deadline) {
			t.Fatalf("the source did not come up: %v", s.Check(context.Background()))
		}
		time.Sleep(20 * time.Millisecond)
	}
	f.produce(t, "lone", `{"id":"lone-1"}`, nil)
	if r := dbtest.WaitInboxRows(t, pool, s.Name(), 1, waitLimit)[0]; r.IdempotencyKey != "lone-1" {
		t.Errorf("row %q, want lone-1", r.IdempotencyKey)
	}
	f.produce(t, "lone", `{"id":"lone-2"}`, nil)
	dbtest.WaitInboxRows(t, pool, s.Name(), 2, waitLimit)
}
