//go:build !queuebox_no_rabbitmq

package rabbitmq_test

import (
	"encoding/json"
	"testing"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/alternayte/queuebox/shared/connect/consumetest"
	"github.com/alternayte/queuebox/shared/connect/rabbitmq"
	"github.com/alternayte/queuebox/shared/store/postgres/dbtest"
	"github.com/alternayte/queuebox/shared/store/postgres/dbtest/dbstore"
)

// TestHeaderValuesWithNULKeepTheirBytes: a header value that holds U+0000, which a JSONB
// document cannot hold, is binary and takes the base64: form, so that the bytes 00 00 00 2a
// (an AMQP byte array of the int 42) are not stored as "*", a string "a\0b" not as "ab", and
// different values stay different. Other control characters stay text.
func TestHeaderValuesWithNULKeepTheirBytes(t *testing.T) {
	pool, st := dbstore.New(t)
	q := newQueue(t)
	s := newSource(t, rabbitmq.SourceConfig{Queue: q})
	ch := testConn(t)
	produce(t, ch, q, amqp.Publishing{Body: []byte(`{"id":"nul-1"}`), Headers: amqp.Table{
		"int42": []byte{0, 0, 0, 0x2a}, "star": "*",
		"int300": []byte{0, 0, 1, 0x2c}, "ctl": []byte{0x01, 0x2c},
		"nul-string": "a\x00b", "plain": "ab",
	}})
	consumetest.Start(t, s, st)
	r := dbtest.WaitInboxRows(t, pool, s.Name(), 1, waitLimit)[0]
	var got map[string]string
	if err := json.Unmarshal(r.Headers, &got); err != nil {
		t.Fatalf("headers column %s: %v", r.Headers, err)
	}
	want := map[string]string{
		"int42": "base64:AAAAKg==", "star": "*",
		"int300": "base64:AAABLA==", "ctl": "\x01,",
		"nul-string": "base64:YQBi", "plain": "ab",
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("header %s = %q, want %q", k, got[k], v)
		}
	}
}
