//go:build !queuebox_no_rabbitmq

package rabbitmq_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/alternayte/queuebox/shared/connect"
	"github.com/alternayte/queuebox/shared/connect/consumetest"
	"github.com/alternayte/queuebox/shared/connect/rabbitmq"
	"github.com/alternayte/queuebox/shared/inbox"
	"github.com/alternayte/queuebox/shared/store/postgres/dbtest"
	"github.com/alternayte/queuebox/shared/store/postgres/dbtest/dbstore"
)

// deepTable is a header table with a table nested levels deep under its entry "n".
func deepTable(levels int) amqp.Table {
	t := amqp.Table{"leaf": "x"}
	for range levels {
		t = amqp.Table{"n": t}
	}
	return t
}

// wideTable is a header table with n entries.
func wideTable(n int) amqp.Table {
	t := amqp.Table{}
	for i := range n {
		t[fmt.Sprintf("k%05d", i)] = int32(i)
	}
	return t
}

// TestUndecodableHeadersAreStoredDeadAndConsumingGoesOn publishes, between good messages, a
// message whose header table RabbitMQ accepts but the AMQP client cannot decode (nested 40
// deep; more than 8,192 entries). The source must store it as a dead row with its body and
// its raw header bytes, acknowledge it, and store every message behind it.
func TestUndecodableHeadersAreStoredDeadAndConsumingGoesOn(t *testing.T) {
	pool, st := dbstore.New(t)
	for _, tc := range []struct {
		name    string
		headers amqp.Table
		reason  string
		args    amqp.Table // of the queue
	}{
		{"NestedTooDeep", amqp.Table{"x-idempotency-key": "ignored", "deep": deepTable(40)}, "nested", nil},
		{"TooManyEntries", wideTable(8193), "entries", nil},
		{"QuorumQueue", amqp.Table{"deep": deepTable(40)}, "nested", amqp.Table{"x-queue-type": "quorum"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := newQueueWith(t, tc.args)
			ch := testConn(t)
			m := &consumetest.Metrics{}
			var logs syncBuffer
			s := newSource(t, rabbitmq.SourceConfig{Queue: q, Backoff: connect.Backoff{Min: 20 * time.Millisecond, Max: 200 * time.Millisecond},
				IntakeOptions: inbox.IntakeOptions{Metrics: m}, Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
			produce(t, ch, q, amqp.Publishing{Body: []byte(`{"id":"before-1"}`)})
			produce(t, ch, q, amqp.Publishing{Body: []byte(`{"id":"poison-1","n":1}`), Headers: tc.headers,
				MessageId: "mid-poison", CorrelationId: "corr-poison"})
			for i := range 3 {
				produce(t, ch, q, amqp.Publishing{Body: []byte(fmt.Sprintf(`{"id":"after-%d"}`, i))})
			}
			consumetest.Start(t, s, st)
			byKey := map[string]dbtest.InboxRow{}
			for _, r := range dbtest.WaitInboxRows(t, pool, s.Name(), 5, waitLimit) {
				byKey[r.IdempotencyKey] = r
			}
			for _, k := range []string{"before-1", "after-0", "after-1", "after-2"} {
				if r, ok := byKey[k]; !ok || r.State != "pending" {
					t.Errorf("row %s = %+v (found %v), want pending", k, r, ok)
				}
			}
			r, ok := byKey["poison-1"]
			if !ok {
				t.Fatalf("no row for the undecodable message; keys %v", keysOf(byKey))
			}
			if r.State != "dead" {
				t.Errorf("the undecodable message is %s, want dead", r.State)
			}
			var body map[string]any
			if err := json.Unmarshal(r.Payload, &body); err != nil || body["id"] != "poison-1" {
				t.Errorf("the dead row's payload = %s, want the message body", r.Payload)
			}
			if !strings.Contains(r.LastError, "cannot decode") || !strings.Contains(r.LastError, tc.reason) {
				t.Errorf("last_error = %q, want it to name the decode failure (%s)", r.LastError, tc.reason)
			}
			if r.CorrelationID != "corr-poison" {
				t.Errorf("correlation id = %q, want the correlation_id property", r.CorrelationID)
			}
			var headers map[string]string
			if err := json.Unmarshal(r.Headers, &headers); err != nil {
				t.Fatalf("headers column %s: %v", r.Headers, err)
			}
			raw, ok := headers[rabbitmq.RawHeadersName]
			if !ok || !strings.HasPrefix(raw, "base64:") {
				t.Fatalf("headers = %.200s, want %s with base64: and the raw table", r.Headers, rabbitmq.RawHeadersName)
			}
			table, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(raw, "base64:"))
			if err != nil || len(table) < 4 {
				t.Fatalf("the raw header table does not decode: %v", err)
			}
			// The field table as on the wire: its length, then its entries.
			if n := int(table[0])<<24 | int(table[1])<<16 | int(table[2])<<8 | int(table[3]); n != len(table)-4 {
				t.Errorf("the raw table says %d bytes and holds %d", n, len(table)-4)
			}
			waitQueueEmpty(t, ch, q)
			waitUp(t, s)
			if n := m.Undecodable.Load(); n != 1 {
				t.Errorf("queuebox_inbox_undecodable_total counted %d, want 1", n)
			}
			if !strings.Contains(logs.String(), `"amqp_message_id":"mid-poison"`) || !strings.Contains(logs.String(), `"reason":"`) {
				t.Errorf("no log line names the undecodable message and its reason:\n%s", logs.String())
			}
		})
	}
}

// TestSeveralUndecodableMessagesInARow puts undecodable messages at the head of the queue,
// one behind the other, between good ones and at the end, some with bodies that are not
// JSON: each is a dead row, and every good message is stored.
func TestSeveralUndecodableMessagesInARow(t *testing.T) {
	pool, st := dbstore.New(t)
	q := newQueue(t)
	ch := testConn(t)
	m := &consumetest.Metrics{}
	s := newSource(t, rabbitmq.SourceConfig{Queue: q, PrefetchCount: 4, Backoff: connect.Backoff{Min: 20 * time.Millisecond, Max: 200 * time.Millisecond},
		IntakeOptions: inbox.IntakeOptions{Metrics: m}})
	deep, wide := amqp.Table{"deep": deepTable(40)}, wideTable(9000)
	msgs := []struct {
		key     string
		body    string
		headers amqp.Table
	}{
		{"p-1", "plain text one", deep},
		{"p-2", `{"id":"p-2"}`, wide},
		{"g-1", `{"id":"g-1"}`, nil},
		{"p-3", `{"id":"p-3"}`, deep},
		{"p-4", "plain text four", wide},
		{"g-2", `{"id":"g-2"}`, nil},
		{"g-3", `{"id":"g-3"}`, nil},
		{"g-4", `{"id":"g-4"}`, nil},
		{"g-5", `{"id":"g-5"}`, nil},
		{"g-6", `{"id":"g-6"}`, nil},
		{"p-5", `{"id":"p-5"}`, deep},
	}
	for _, msg := range msgs {
		produce(t, ch, q, amqp.Publishing{Body: []byte(msg.body), Headers: msg.headers, MessageId: msg.key})
	}
	consumetest.Start(t, s, st)
	byKey := map[string]dbtest.InboxRow{}
	for _, r := range dbtest.WaitInboxRows(t, pool, s.Name(), len(msgs), waitLimit) {
		byKey[r.IdempotencyKey] = r
	}
	for _, msg := range msgs {
		r, ok := byKey[msg.key]
		want := "pending"
		if msg.headers != nil {
			want = "dead"
		}
		if !ok || r.State != want {
			t.Errorf("row %s = %+v (found %v), want %s", msg.key, r, ok, want)
		}
		if strings.HasPrefix(msg.body, "plain") && string(r.Payload) != `{"raw": "`+msg.body+`"}` {
			t.Errorf("row %s payload %s, want the raw body", msg.key, r.Payload)
		}
	}
	waitQueueEmpty(t, ch, q)
	if n := m.Undecodable.Load(); n != 5 {
		t.Errorf("queuebox_inbox_undecodable_total counted %d, want 5", n)
	}
}

// TestUndecodableMessageWhileTheStoreIsDown: while the database refuses every insert, the
// message that the client cannot decode is not acknowledged and nothing is stored; once the
// database returns it is a dead row and the messages behind it are stored.
func TestUndecodableMessageWhileTheStoreIsDown(t *testing.T) {
	pool, st := dbstore.New(t)
	q := newQueue(t)
	ch := testConn(t)
	fs := consumetest.NewFailingSink(st)
	fs.SetDown(true)
	s := newSource(t, rabbitmq.SourceConfig{Queue: q, Backoff: connect.Backoff{Min: 20 * time.Millisecond, Max: 200 * time.Millisecond}})
	produce(t, ch, q, amqp.Publishing{Body: []byte(`{"id":"poison-1"}`), Headers: amqp.Table{"d": deepTable(40)}})
	produce(t, ch, q, amqp.Publishing{Body: []byte(`{"id":"after-1"}`)})
	consumetest.Start(t, s, fs)
	fs.WaitDownFailures(t, 3, waitLimit)
	if got := len(dbtest.InboxRows(t, pool, s.Name())); got != 0 {
		t.Fatalf("%d rows stored while the store was down", got)
	}
	fs.SetDown(false)
	byKey := map[string]dbtest.InboxRow{}
	for _, r := range dbtest.WaitInboxRows(t, pool, s.Name(), 2, waitLimit) {
		byKey[r.IdempotencyKey] = r
	}
	if byKey["poison-1"].State != "dead" || byKey["after-1"].State != "pending" {
		t.Errorf("rows = %+v, want poison-1 dead and after-1 pending", byKey)
	}
	waitQueueEmpty(t, ch, q)
}

// TestUndecodableMessagesWithTwoReplicas runs two sources on one queue, with the default
// backoff: a message that the client cannot decode reaches whichever replica has room, and
// each undecodable message must still end as one dead row, every other message as one pending
// row.
func TestUndecodableMessagesWithTwoReplicas(t *testing.T) {
	pool, st := dbstore.New(t)
	ch := testConn(t)
	q := newQueue(t)
	name := unique("rmq-rep")
	for range 2 {
		s := newSource(t, rabbitmq.SourceConfig{Queue: q, Intake: inbox.BrokerSource{Name: name}})
		consumetest.Start(t, s, st)
		waitUp(t, s)
	}
	want := map[string]string{}
	for i := range 20 {
		key := fmt.Sprintf("g-%d", i)
		produce(t, ch, q, amqp.Publishing{Body: []byte(`{"id":"` + key + `"}`)})
		want[key] = "pending"
		if i%5 == 2 {
			key = fmt.Sprintf("p-%d", i)
			produce(t, ch, q, amqp.Publishing{Body: []byte(`{"id":"` + key + `"}`), Headers: amqp.Table{"d": deepTable(40)}})
			want[key] = "dead"
		}
	}
	rows := dbtest.WaitInboxRows(t, pool, name, len(want), waitLimit)
	waitQueueEmpty(t, ch, q)
	got := map[string]string{}
	for _, r := range dbtest.InboxRows(t, pool, name) {
		if _, dup := got[r.IdempotencyKey]; dup {
			t.Errorf("two rows of %s", r.IdempotencyKey)
		}
		got[r.IdempotencyKey] = r.State
	}
	for k, state := range want {
		if got[k] != state {
			t.Errorf("row %s is %q, want %s", k, got[k], state)
		}
	}
	if len(rows) != len(want) {
		t.Errorf("%d rows, want %d", len(rows), len(want))
	}
}

// syncBuffer is a log destination that tests read while the source writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// waitUp waits until the source's health component is up.
func waitUp(t *testing.T, s *rabbitmq.Source) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for s.Check(context.Background()) != nil {
		if time.Now().After(deadline) {
			t.Fatalf("the source is not up: %v", s.Check(context.Background()))
		}
		time.Sleep(20 * time.Millisecond)
	}
}
