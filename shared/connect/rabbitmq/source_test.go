//go:build !queuebox_no_rabbitmq

package rabbitmq_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/alternayte/queuebox/shared/connect"
	"github.com/alternayte/queuebox/shared/connect/connecttest"
	"github.com/alternayte/queuebox/shared/connect/consumetest"
	"github.com/alternayte/queuebox/shared/connect/rabbitmq"
	"github.com/alternayte/queuebox/shared/inbox"
	"github.com/alternayte/queuebox/shared/store/postgres/dbtest"
	"github.com/alternayte/queuebox/shared/store/postgres/dbtest/dbstore"
)

// newQueue declares a durable queue for one test and deletes it at the end.
func newQueue(t *testing.T) string {
	t.Helper()
	return newQueueWith(t, nil)
}

// newQueueWith declares a durable queue with args (x-queue-type, say) for one test and
// deletes it at the end.
func newQueueWith(t *testing.T, args amqp.Table) string {
	t.Helper()
	ch := testConn(t)
	q := unique("qb-src")
	if _, err := ch.QueueDeclare(q, true, false, false, false, args); err != nil {
		t.Fatalf("declaring queue %s: %v", q, err)
	}
	t.Cleanup(func() {
		conn, err := amqp.Dial(brokerURL)
		if err != nil {
			return
		}
		defer conn.Close()
		if c, err := conn.Channel(); err == nil {
			_, _ = c.QueueDelete(q, false, false, false)
		}
	})
	return q
}

// produce publishes p to queue through the default exchange and waits for the confirm.
func produce(t *testing.T, ch *amqp.Channel, queue string, p amqp.Publishing) {
	t.Helper()
	if err := ch.PublishWithContext(context.Background(), "", queue, true, false, p); err != nil {
		t.Fatalf("publishing to %s: %v", queue, err)
	}
}

func newSource(t *testing.T, c rabbitmq.SourceConfig) *rabbitmq.Source {
	t.Helper()
	if c.URL == "" {
		c.URL = brokerURL
	}
	if c.Intake.Name == "" {
		c.Intake.Name = unique("rmq")
	}
	s, err := rabbitmq.NewSource(c)
	if err != nil {
		t.Fatalf("NewSource: %v", err)
	}
	return s
}

func TestSourceContract(t *testing.T) {
	pool, st := dbstore.New(t)
	consumetest.Run(t, consumetest.Features{}, func(t *testing.T) consumetest.Target {
		q := newQueue(t)
		name := unique("rmq")
		ch := testConn(t)
		return consumetest.Target{
			NewSource: func(t *testing.T) consumetest.Source {
				return newSource(t, rabbitmq.SourceConfig{Queue: q, Intake: inbox.BrokerSource{Name: name}})
			},
			Produce: func(t *testing.T, m consumetest.Message) {
				h := amqp.Table{}
				for k, v := range m.Headers {
					h[k] = v
				}
				produce(t, ch, q, amqp.Publishing{Body: m.Body, Headers: h, DeliveryMode: amqp.Persistent})
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

func TestMissingQueueStopsTheSourceNamingIt(t *testing.T) {
	_, st := dbstore.New(t)
	q := unique("qb-missing")
	s := newSource(t, rabbitmq.SourceConfig{Queue: q})
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	err := s.Run(ctx, st)
	if !errors.Is(err, connect.ErrStopped) || !strings.Contains(err.Error(), q) || !strings.Contains(err.Error(), "declareQueue") {
		t.Fatalf("Run on a missing queue = %v, want a stop that names the queue %s and declareQueue", err, q)
	}
	if cerr := s.Check(ctx); cerr == nil || !strings.Contains(cerr.Error(), q) {
		t.Errorf("health of the stopped source = %v, want down naming the queue", cerr)
	}
}

func TestDeclareQueueCreatesTheQueueAndConsumesIt(t *testing.T) {
	pool, st := dbstore.New(t)
	q := unique("qb-declare")
	t.Cleanup(func() {
		if c := testConn(t); c != nil {
			_, _ = c.QueueDelete(q, false, false, false)
		}
	})
	s := newSource(t, rabbitmq.SourceConfig{Queue: q, DeclareQueue: true})
	consumetest.Start(t, s, st)
	ch := testConn(t)
	deadline := time.Now().Add(waitLimit)
	for s.Check(context.Background()) != nil {
		if time.Now().After(deadline) {
			t.Fatalf("the source did not come up: %v", s.Check(context.Background()))
		}
		time.Sleep(20 * time.Millisecond)
	}
	info, err := ch.QueueDeclarePassive(q, true, false, false, false, nil)
	if err != nil {
		t.Fatalf("the queue %s does not exist after the start with declareQueue: %v", q, err)
	}
	if info.Consumers != 1 {
		t.Errorf("queue %s has %d consumers, want 1", q, info.Consumers)
	}
	produce(t, ch, q, amqp.Publishing{Body: []byte(`{"id":"declared-1"}`)})
	rs := dbtest.WaitInboxRows(t, pool, s.Name(), 1, waitLimit)
	if rs[0].IdempotencyKey != "declared-1" || rs[0].State != "pending" {
		t.Errorf("row = %+v, want declared-1 pending", rs[0])
	}
}

// TestAttributeOrders checks each order of spec/25 for RabbitMQ: the idempotency key from
// the header, then idempotencyKeyPath, then message_id, then the digest of the body; the
// aggregate identifier and the event type from the body path, then the header (renamed by
// attributeHeaders); the correlation identifier from X-Correlation-Id in any letter case,
// then correlation_id, then a new UUID, cleaned and cut to 128 characters.
func TestAttributeOrders(t *testing.T) {
	pool, st := dbstore.New(t)
	q := newQueue(t)
	s := newSource(t, rabbitmq.SourceConfig{Queue: q, Intake: inbox.BrokerSource{
		IdempotencyKeyPath: "$.messageId", AggregateIDPath: "$.orderId", EventTypePath: "$.type",
		AttributeHeaders: inbox.AttributeHeaders{IdempotencyKey: "id", AggregateID: "aggregateId", EventType: "eventType"},
	}})
	ch := testConn(t)
	long := strings.Repeat("c", 140)
	msgs := []amqp.Publishing{
		// 1: the key header wins over the path and message_id; the body path wins for the
		// aggregate and the event type; the header correlation id in another letter case.
		{Headers: amqp.Table{"ID": "from-header", "aggregateId": "agg-h", "eventType": "type-h", "x-CORRELATION-id": "corr\x01-1"},
			MessageId: "from-mid", CorrelationId: "prop-1", Body: []byte(`{"messageId":"from-path","orderId":"agg-b","type":"type-b"}`)},
		// 2: no header: the path; the headers give the aggregate and the event type.
		{Headers: amqp.Table{"aggregateId": "agg-h2", "eventType": "type-h2"}, MessageId: "mid-2", CorrelationId: "prop-2",
			Body: []byte(`{"messageId":"from-path-2"}`)},
		// 3: no header, no path value: message_id; correlation id too long, cut.
		{MessageId: "from-mid-3", Headers: amqp.Table{"X-Correlation-Id": long}, Body: []byte(`{"other":1}`)},
		// 4: nothing: the digest of the body; no correlation: a new UUID.
		{Body: []byte(`{"other":4}`)},
	}
	for _, m := range msgs {
		produce(t, ch, q, m)
	}
	consumetest.Start(t, s, st)
	rs := dbtest.WaitInboxRows(t, pool, s.Name(), len(msgs), waitLimit)
	byKey := map[string]dbtest.InboxRow{}
	for _, r := range rs {
		byKey[r.IdempotencyKey] = r
	}
	check := func(key, agg, typ, corr string) {
		t.Helper()
		r, ok := byKey[key]
		if !ok {
			t.Errorf("no row with key %s; keys: %v", key, keysOf(byKey))
			return
		}
		if r.AggregateID != agg || r.EventType != typ {
			t.Errorf("row %s: aggregate %q event type %q, want %q %q", key, r.AggregateID, r.EventType, agg, typ)
		}
		if corr != "" && r.CorrelationID != corr {
			t.Errorf("row %s: correlation %q, want %q", key, r.CorrelationID, corr)
		}
	}
	check("from-header", "agg-b", "type-b", "corr-1")
	check("from-path-2", "agg-h2", "type-h2", "prop-2")
	check("from-mid-3", "", "", strings.Repeat("c", 128))
	check(digestKey(`{"other":4}`), "", "", "")
	if r := byKey[digestKey(`{"other":4}`)]; len(r.CorrelationID) != 36 {
		t.Errorf("row without a correlation id holds %q, want a new UUID", r.CorrelationID)
	}
}

func keysOf(m map[string]dbtest.InboxRow) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// digestKey is the key of a message that gives none: sha256: and the digest of its body.
func digestKey(body string) string {
	sum := sha256.Sum256([]byte(body))
	return inbox.DigestPrefix + hex.EncodeToString(sum[:])
}

// TestHeaderConversion stores a message with every AMQP header type and checks the headers
// column against the rules of spec/27-inbox-table.md.
func TestHeaderConversion(t *testing.T) {
	pool, st := dbstore.New(t)
	q := newQueue(t)
	s := newSource(t, rabbitmq.SourceConfig{Queue: q})
	ch := testConn(t)
	ts := time.Date(2026, 5, 1, 12, 30, 0, 0, time.UTC)
	produce(t, ch, q, amqp.Publishing{Body: []byte(`{"id":"h-1"}`), Headers: amqp.Table{
		"s": "text", "i": int32(-7), "l": int64(1 << 40), "f": 1.5, "b": true, "t": ts,
		"d":      amqp.Decimal{Scale: 2, Value: 12345},
		"nested": amqp.Table{"k": "v", "n": int32(1)}, "arr": []any{"a", int32(2)},
		"utf8": []byte("héllo"), "bin": []byte{0xff, 0x00, 0x01}, "void": nil,
	}})
	consumetest.Start(t, s, st)
	r := dbtest.WaitInboxRows(t, pool, s.Name(), 1, waitLimit)[0]
	var got map[string]string
	if err := json.Unmarshal(r.Headers, &got); err != nil {
		t.Fatalf("headers column %s: %v", r.Headers, err)
	}
	want := map[string]string{
		"s": "text", "i": "-7", "l": "1099511627776", "f": "1.5", "b": "true", "t": "2026-05-01T12:30:00Z",
		"d": "123.45", "nested": `{"k":"v","n":1}`, "arr": `["a",2]`, "utf8": "héllo", "bin": "base64:/wAB", "void": "",
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("header %s = %q, want %q", k, got[k], v)
		}
	}
	if len(got) != len(want) {
		t.Errorf("headers = %v, want exactly %v", got, want)
	}
}

// TestBodiesThatCannotBeStoredAsTheyAre checks the dead rows: a body that is not JSON is a
// dead row {"raw": ...} and acknowledged; the messages behind it are stored.
func TestBodiesThatCannotBeStoredAsTheyAre(t *testing.T) {
	pool, st := dbstore.New(t)
	q := newQueue(t)
	s := newSource(t, rabbitmq.SourceConfig{Queue: q})
	ch := testConn(t)
	produce(t, ch, q, amqp.Publishing{Body: []byte("plain text"), MessageId: "raw-1"})
	produce(t, ch, q, amqp.Publishing{Body: []byte(`{"id":"after-raw"}`)})
	consumetest.Start(t, s, st)
	// Rows of one batch share created_at; they are found by key, not by position.
	byKey := map[string]dbtest.InboxRow{}
	for _, r := range dbtest.WaitInboxRows(t, pool, s.Name(), 2, waitLimit) {
		byKey[r.IdempotencyKey] = r
	}
	if r := byKey["raw-1"]; r.State != "dead" || string(r.Payload) != `{"raw": "plain text"}` {
		t.Errorf("row raw-1 = state %q payload %s, want dead {\"raw\": \"plain text\"}", r.State, r.Payload)
	}
	if r := byKey["after-raw"]; r.State != "pending" {
		t.Errorf("row after-raw = state %q, want pending", r.State)
	}
	waitQueueEmpty(t, ch, q)
}

// waitQueueEmpty waits until the queue holds no message, ready or unacknowledged.
func waitQueueEmpty(t *testing.T, ch *amqp.Channel, q string) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for {
		info, err := ch.QueueDeclarePassive(q, true, false, false, false, nil)
		if err != nil {
			t.Fatalf("inspecting queue %s: %v", q, err)
		}
		if info.Messages == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("queue %s still holds %d messages", q, info.Messages)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestConnectionCutReconnectsAndLosesNothing cuts the consumer's connection while messages
// flow; the source reconnects with backoff and every message is stored once.
func TestConnectionCutReconnectsAndLosesNothing(t *testing.T) {
	pool, st := dbstore.New(t)
	q := newQueue(t)
	px := connecttest.Listen(t, "127.0.0.1:5672")
	s := newSource(t, rabbitmq.SourceConfig{URL: "amqp://guest:guest@" + px.Addr() + "/", Queue: q,
		Backoff: connect.Backoff{Min: 50 * time.Millisecond, Max: 500 * time.Millisecond}})
	consumetest.Start(t, s, st)
	ch := testConn(t)
	const n = 200
	for i := range n {
		produce(t, ch, q, amqp.Publishing{Body: []byte(`{"id":"cut-` + strconv.Itoa(i) + `"}`)})
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
			t.Errorf("message %s stored %d times, want 1", k, seen[k])
		}
	}
	waitQueueEmpty(t, ch, q)
	deadline := time.Now().Add(waitLimit)
	for s.Check(context.Background()) != nil {
		if time.Now().After(deadline) {
			t.Fatalf("the source is not up again after the cuts: %v", s.Check(context.Background()))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestStoreFailureRequeuesUntilTheDatabaseReturns fails the store for a while: nothing is
// acknowledged meanwhile, and once the store returns every message is stored once.
func TestStoreFailureRequeuesUntilTheDatabaseReturns(t *testing.T) {
	pool, st := dbstore.New(t)
	q := newQueue(t)
	fs := consumetest.NewFailingSink(st)
	fs.SetDown(true)
	s := newSource(t, rabbitmq.SourceConfig{Queue: q, Backoff: connect.Backoff{Min: 20 * time.Millisecond, Max: 200 * time.Millisecond}})
	ch := testConn(t)
	for i := range 20 {
		produce(t, ch, q, amqp.Publishing{Body: []byte(`{"id":"down-` + strconv.Itoa(i) + `"}`)})
	}
	consumetest.Start(t, s, fs)
	fs.WaitDownFailures(t, 3, waitLimit)
	if got := len(dbtest.InboxRows(t, pool, s.Name())); got != 0 {
		t.Fatalf("%d rows stored while the store was down", got)
	}
	fs.SetDown(false)
	rs := dbtest.WaitInboxRows(t, pool, s.Name(), 20, waitLimit)
	if len(rs) != 20 {
		t.Errorf("%d rows, want 20", len(rs))
	}
	waitQueueEmpty(t, ch, q)
}

// TestDeadRowOfANonJSONBodyKeepsItsAttributes: a body that is not JSON is a dead row, and
// its aggregate identifier and event type still come from the attribute headers.
func TestDeadRowOfANonJSONBodyKeepsItsAttributes(t *testing.T) {
	pool, st := dbstore.New(t)
	q := newQueue(t)
	s := newSource(t, rabbitmq.SourceConfig{Queue: q, Intake: inbox.BrokerSource{AggregateIDPath: "$.order", EventTypePath: "$.type"}})
	ch := testConn(t)
	produce(t, ch, q, amqp.Publishing{Body: []byte("plain text"), MessageId: "raw-attrs",
		Headers: amqp.Table{"X-Aggregate-Id": "agg-1", "x-event-type": "type-1"}})
	consumetest.Start(t, s, st)
	r := dbtest.WaitInboxRows(t, pool, s.Name(), 1, waitLimit)[0]
	if r.State != "dead" || r.IdempotencyKey != "raw-attrs" || r.AggregateID != "agg-1" || r.EventType != "type-1" {
		t.Errorf("row = key %q state %q aggregate %q event type %q, want raw-attrs dead agg-1 type-1",
			r.IdempotencyKey, r.State, r.AggregateID, r.EventType)
	}
}

// TestDecimalDigitsAreSigned pins the documented reading of an AMQP decimal: its four octets
// of digits are a signed integer, as the JVM implementation reads them, so the digits
// 3000000000 at scale 2 (30000000.00 as amqplib writes it) are stored as -12949672.96.
func TestDecimalDigitsAreSigned(t *testing.T) {
	pool, st := dbstore.New(t)
	q := newQueue(t)
	s := newSource(t, rabbitmq.SourceConfig{Queue: q})
	ch := testConn(t)
	big := uint32(3000000000)
	produce(t, ch, q, amqp.Publishing{Body: []byte(`{"id":"dec-1"}`), Headers: amqp.Table{
		"amount": amqp.Decimal{Scale: 2, Value: int32(big)}, "small": amqp.Decimal{Scale: 2, Value: 2147483647},
	}})
	consumetest.Start(t, s, st)
	r := dbtest.WaitInboxRows(t, pool, s.Name(), 1, waitLimit)[0]
	var h map[string]string
	if err := json.Unmarshal(r.Headers, &h); err != nil {
		t.Fatal(err)
	}
	if h["amount"] != "-12949672.96" || h["small"] != "21474836.47" {
		t.Errorf("decimals = amount %q small %q, want -12949672.96 and 21474836.47", h["amount"], h["small"])
	}
}

// TestMaxBodyBytes: without maxBodyBytes a body of any size is stored as it is (here 2 MiB,
// above the data port's default limit); with it, a larger body is a dead row that names its
// size, without the body, and the messages around it are stored.
func TestMaxBodyBytes(t *testing.T) {
	pool, st := dbstore.New(t)
	big := `{"id":"big","pad":"` + strings.Repeat("x", 2<<20) + `"}`
	t.Run("Default", func(t *testing.T) {
		q := newQueue(t)
		s := newSource(t, rabbitmq.SourceConfig{Queue: q})
		produce(t, testConn(t), q, amqp.Publishing{Body: []byte(big)})
		consumetest.Start(t, s, st)
		if r := dbtest.WaitInboxRows(t, pool, s.Name(), 1, waitLimit)[0]; r.State != "pending" || r.IdempotencyKey != "big" {
			t.Errorf("row = key %q state %q, want big pending", r.IdempotencyKey, r.State)
		}
	})
	t.Run("Limit", func(t *testing.T) {
		q := newQueue(t)
		m := &consumetest.Metrics{}
		s := newSource(t, rabbitmq.SourceConfig{Queue: q, Intake: inbox.BrokerSource{MaxBodyBytes: 100},
			IntakeOptions: inbox.IntakeOptions{Metrics: m}})
		ch := testConn(t)
		produce(t, ch, q, amqp.Publishing{Body: []byte(`{"id":"small"}`)})
		produce(t, ch, q, amqp.Publishing{Body: []byte(big), MessageId: "mid-big", Headers: amqp.Table{"x-aggregate-id": "agg-big"}})
		produce(t, ch, q, amqp.Publishing{Body: []byte(`{"id":"after"}`)})
		consumetest.Start(t, s, st)
		byKey := map[string]dbtest.InboxRow{}
		for _, r := range dbtest.WaitInboxRows(t, pool, s.Name(), 3, waitLimit) {
			byKey[r.IdempotencyKey] = r
		}
		size := strconv.Itoa(len(big))
		if r := byKey["mid-big"]; r.State != "dead" || !strings.Contains(r.LastError, size) || !strings.Contains(r.LastError, "100") ||
			string(r.Payload) != `{"bodyBytes": `+size+`}` || r.AggregateID != "agg-big" {
			t.Errorf("row of the large message = %+v, want dead, naming %s bytes and the limit 100, payload {\"bodyBytes\": %s}", r, size, size)
		}
		if byKey["small"].State != "pending" || byKey["after"].State != "pending" {
			t.Errorf("rows small and after = %+v %+v, want pending", byKey["small"], byKey["after"])
		}
		if n := m.TooLarge.Load(); n != 1 {
			t.Errorf("queuebox_inbox_too_large_total counted %d, want 1", n)
		}
		waitQueueEmpty(t, ch, q)
	})
	t.Run("Undecodable", func(t *testing.T) {
		// A message whose headers the AMQP client cannot decode obeys the limit too.
		q := newQueue(t)
		m := &consumetest.Metrics{}
		s := newSource(t, rabbitmq.SourceConfig{Queue: q, Intake: inbox.BrokerSource{MaxBodyBytes: 100},
			Backoff: connect.Backoff{Min: 20 * time.Millisecond, Max: 200 * time.Millisecond}, IntakeOptions: inbox.IntakeOptions{Metrics: m}})
		ch := testConn(t)
		produce(t, ch, q, amqp.Publishing{Body: []byte(big), MessageId: "mid-big", Headers: amqp.Table{"deep": deepTable(40)}})
		produce(t, ch, q, amqp.Publishing{Body: []byte(`{"id":"after"}`)})
		consumetest.Start(t, s, st)
		byKey := map[string]dbtest.InboxRow{}
		for _, r := range dbtest.WaitInboxRows(t, pool, s.Name(), 2, waitLimit) {
			byKey[r.IdempotencyKey] = r
		}
		size := strconv.Itoa(len(big))
		if r := byKey["mid-big"]; r.State != "dead" || string(r.Payload) != `{"bodyBytes": `+size+`}` ||
			!strings.Contains(r.LastError, "cannot decode") || !strings.Contains(r.LastError, "maxBodyBytes of 100") {
			t.Errorf("row of the large undecodable message = state %q payload %.80s last_error %q, want dead, payload {\"bodyBytes\": %s}, naming both causes",
				r.State, r.Payload, r.LastError, size)
		}
		if byKey["after"].State != "pending" {
			t.Errorf("row after = %+v, want pending", byKey["after"])
		}
		if u, l := m.Undecodable.Load(), m.TooLarge.Load(); u != 1 || l != 1 {
			t.Errorf("undecodable %d, too large %d, want 1 and 1", u, l)
		}
		waitQueueEmpty(t, ch, q)
	})
}
