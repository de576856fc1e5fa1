//go:build !queuebox_no_kafka

package kafka_test

import (
	"encoding/json"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/alternayte/queuebox/shared/connect/consumetest"
	"github.com/alternayte/queuebox/shared/connect/kafka"
	"github.com/alternayte/queuebox/shared/store/postgres/dbtest"
	"github.com/alternayte/queuebox/shared/store/postgres/dbtest/dbstore"
)

// TestHeaderValuesWithNULKeepTheirBytes: a record header whose bytes are valid UTF-8 but hold
// a NUL byte (a big-endian int, as Spring Kafka writes retry_topic-attempts) is binary and
// takes the base64: form, so the int 300 is not stored as "\u0001," and the int 42 not as
// "*"; other control characters stay text.
func TestHeaderValuesWithNULKeepTheirBytes(t *testing.T) {
	pool, st := dbstore.New(t)
	c := newCluster(t, 1, []string{"spring"})
	pr := producer(t, c)
	s := newSource(t, c, kafka.SourceConfig{Topics: []string{"spring"}})
	produceRecord(t, pr, &kgo.Record{Topic: "spring", Value: []byte(`{"id":"nul-1"}`), Headers: []kgo.RecordHeader{
		{Key: "retry_topic-attempts", Value: []byte{0, 0, 0, 1}},
		{Key: "int300", Value: []byte{0, 0, 1, 0x2c}},
		{Key: "int42", Value: []byte{0, 0, 0, 0x2a}},
		{Key: "star", Value: []byte("*")},
		{Key: "ctl", Value: []byte{0x01, 0x2c}},
	}})
	consumetest.Start(t, s, st)
	r := dbtest.WaitInboxRows(t, pool, s.Name(), 1, sourceWait)[0]
	var got map[string]string
	if err := json.Unmarshal(r.Headers, &got); err != nil {
		t.Fatalf("headers column %s: %v", r.Headers, err)
	}
	want := map[string]string{
		"retry_topic-attempts": "base64:AAAAAQ==", "int300": "base64:AAABLA==",
		"int42": "base64:AAAAKg==", "star": "*", "ctl": "\x01,",
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("header %s = %q, want %q", k, got[k], v)
		}
	}
}
