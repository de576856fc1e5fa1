//go:build !queuebox_no_rabbitmq

package rabbitmq

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

const (
	internalBrokerURL = "amqp://guest:guest@127.0.0.1:5672/"
	internalStartHint = "start it with: make services (scripts/ensure-services.sh), or: rabbitmq-server -detached"
)

// nestedTables is a header table with a table nested levels deep under the entry "n".
func nestedTables(levels int) []byte {
	var e encoder
	inner := func(t *encoder) { t.entry("leaf", 'S', func(e *encoder) { e.longstr("x") }) }
	for range levels {
		prev := inner
		inner = func(t *encoder) { t.entry("n", 'F', func(e *encoder) { e.table(prev) }) }
	}
	e.table(inner)
	return e.b
}

// nestedArrays is a header table whose entry "a" holds arrays nested levels deep.
func nestedArrays(levels int) []byte {
	value := func(e *encoder) { e.u8('I'); e.u32(7) }
	for range levels {
		prev := value
		value = func(e *encoder) {
			e.u8('A')
			var a encoder
			prev(&a)
			e.u32(uint32(len(a.b)))
			e.b = append(e.b, a.b...)
		}
	}
	var e encoder
	e.table(func(t *encoder) {
		t.shortstr("a")
		value(t)
	})
	return e.b
}

// entries is a header table with n entries, distinct names apart from the last repeat ones.
func entries(n, repeats int) []byte {
	var e encoder
	e.table(func(t *encoder) {
		for i := range n {
			name := fmt.Sprintf("k%05d", i)
			if i >= n-repeats {
				name = "k00000"
			}
			t.entry(name, 'I', func(e *encoder) { e.u32(uint32(i)) })
		}
	})
	return e.b
}

// arrayOf is a header table whose entry "a" is an array of n void values and, with tail, one
// type octet with no value after them.
func arrayOf(n int, tail bool) []byte {
	var a encoder
	for range n {
		a.u8('V')
	}
	if tail {
		a.u8('I')
	}
	var e encoder
	e.table(func(t *encoder) {
		t.shortstr("a")
		t.u8('A')
		t.u32(uint32(len(a.b)))
		t.b = append(t.b, a.b...)
	})
	return e.b
}

func TestTableProblem(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		table []byte
		want  string // a part of the problem; empty: none
	}{
		{"Empty", []byte{0, 0, 0, 0}, ""},
		{"Tables32", nestedTables(32), ""},
		{"Tables33", nestedTables(33), "nested more than 32"},
		{"Arrays32", nestedArrays(32), ""},
		{"Arrays33", nestedArrays(33), "nested more than 32"},
		{"Entries8192", entries(8192, 0), ""},
		{"Entries8193", entries(8193, 0), "more than 8192 entries"},
		{"Entries8192AndARepeat", entries(8193, 1), "more than 8192 entries"},
		{"Array8192", arrayOf(8192, false), ""},
		{"Array8193", arrayOf(8193, false), "more than 8192 entries"},
		{"ArrayEndsWithAType", arrayOf(3, true), ""},
		{"UnknownType", []byte{0, 0, 0, 3, 1, 'k', 'Z'}, "type 'Z'"},
		{"Truncated", []byte{0, 0, 0, 4, 1, 'k', 'I', 0}, "runs past the end"},
		{"TableLongerThanItsFrame", []byte{0, 0, 0, 9, 1}, "runs past the end"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tableProblem(tc.table)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("tableProblem = %v, want none", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("tableProblem = %v, want one naming %q", err, tc.want)
			}
		})
	}
}

// TestClientTableLimits holds tableProblem to the AMQP client on the real broker: each table
// goes through RabbitMQ; the raw client takes it back as bytes, and the AMQP client must
// decode exactly the tables that tableProblem accepts. A new version of the client with other
// limits fails here.
func TestClientTableLimits(t *testing.T) {
	for _, tc := range []struct {
		name  string
		table []byte
	}{
		{"Tables32", nestedTables(32)},
		{"Tables33", nestedTables(33)},
		{"Arrays32", nestedArrays(32)},
		{"Arrays33", nestedArrays(33)},
		{"Entries8192", entries(8192, 0)},
		{"Entries8193", entries(8193, 0)},
		{"Entries8192AndARepeat", entries(8193, 1)},
		{"Array8192", arrayOf(8192, false)},
		{"Array8193", arrayOf(8193, false)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := internalQueue(t)
			publishRaw(t, q, tc.table, []byte(`{"id":"limits"}`))
			rc := dialInternal(t)
			var msg *rawMessage
			for deadline := time.Now().Add(30 * time.Second); msg == nil; time.Sleep(10 * time.Millisecond) {
				var err error
				if msg, err = rc.get(q); err != nil {
					t.Fatalf("raw get: %v", err)
				}
				if msg == nil && time.Now().After(deadline) {
					t.Fatalf("the queue holds no message 30 s after the publish")
				}
			}
			if err := rc.requeue(msg.tag); err != nil {
				t.Fatalf("requeue: %v", err)
			}
			if err := rc.close(); err != nil {
				t.Fatalf("close: %v", err)
			}
			if string(msg.headers) != string(tc.table) {
				t.Errorf("the raw client took %d header bytes, want the %d published", len(msg.headers), len(tc.table))
			}
			problem := tableProblem(msg.headers)
			reads, why := clientReads(t, q)
			if reads != (problem == nil) {
				t.Errorf("the AMQP client reads the message: %v (%s); tableProblem = %v", reads, why, problem)
			}
		})
	}
}

// clientReads consumes queue with the AMQP client and reports whether it received the
// message, or the error with which it closed the connection.
func clientReads(t *testing.T, queue string) (bool, string) {
	t.Helper()
	conn, err := amqp.Dial(internalBrokerURL)
	if err != nil {
		t.Fatalf("RabbitMQ is not reachable (%v); %s", err, internalStartHint)
	}
	defer conn.Close()
	closed := conn.NotifyClose(make(chan *amqp.Error, 1))
	ch, err := conn.Channel()
	if err != nil {
		t.Fatalf("channel: %v", err)
	}
	d, err := ch.Consume(queue, "", true, false, false, false, nil)
	if err != nil {
		t.Fatalf("consume: %v", err)
	}
	select {
	case m, ok := <-d:
		if ok {
			return true, fmt.Sprintf("%d headers", len(m.Headers))
		}
		e := <-closed
		return false, fmt.Sprint(e)
	case <-time.After(30 * time.Second):
		t.Fatalf("the AMQP client neither received the message nor failed within 30 s")
	}
	return false, ""
}

func dialInternal(t *testing.T) *rawConn {
	t.Helper()
	rc, err := dialRaw(context.Background(), internalBrokerURL, "queuebox test", 15*time.Second)
	if err != nil {
		t.Fatalf("RabbitMQ is not reachable at 127.0.0.1:5672 with the raw client (%v); %s", err, internalStartHint)
	}
	return rc
}

// internalQueue declares a queue for one test and deletes it at the end.
func internalQueue(t *testing.T) string {
	t.Helper()
	conn, err := amqp.Dial(internalBrokerURL)
	if err != nil {
		t.Fatalf("RabbitMQ is not reachable (%v); %s", err, internalStartHint)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatalf("channel: %v", err)
	}
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	q := "qb-limits-" + hex.EncodeToString(b)
	if _, err := ch.QueueDeclare(q, false, false, false, false, nil); err != nil {
		t.Fatalf("declaring %s: %v", q, err)
	}
	t.Cleanup(func() {
		if conn, err := amqp.Dial(internalBrokerURL); err == nil {
			if ch, err := conn.Channel(); err == nil {
				_, _ = ch.QueueDelete(q, false, false, false)
			}
			conn.Close()
		}
	})
	return q
}

// publishRaw publishes body with the header table as given, byte for byte, through the
// default exchange to queue, on the raw client: the AMQP client would re-encode the table.
func publishRaw(t *testing.T, queue string, table, body []byte) {
	t.Helper()
	rc := dialInternal(t)
	var m encoder
	m.method(classBasic, 40) // basic.publish
	m.u16(0)
	m.shortstr("")
	m.shortstr(queue)
	m.u8(0)
	if err := rc.send(rawChannel, m.b); err != nil {
		t.Fatalf("publish: %v", err)
	}
	var h []byte
	h = binary.BigEndian.AppendUint16(h, classBasic)
	h = binary.BigEndian.AppendUint16(h, 0)
	h = binary.BigEndian.AppendUint64(h, uint64(len(body)))
	h = binary.BigEndian.AppendUint16(h, flagHeaders)
	h = append(h, table...)
	for _, f := range []struct {
		typ     byte
		payload []byte
	}{{frameHeader, h}, {frameBody, body}} {
		frame := []byte{f.typ}
		frame = binary.BigEndian.AppendUint16(frame, rawChannel)
		frame = binary.BigEndian.AppendUint32(frame, uint32(len(f.payload)))
		frame = append(append(frame, f.payload...), frameEnd)
		if err := rc.write(frame); err != nil {
			t.Fatalf("publish: %v", err)
		}
	}
	// The close-ok of the channel follows the publish: the broker took it, or refused it
	// with the close.
	if err := rc.close(); err != nil {
		t.Fatalf("the broker refused the raw publish: %v", err)
	}
}
