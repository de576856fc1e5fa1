//go:build !queuebox_no_nats

package nats_test

import (
	"encoding/json"
	"testing"

	"github.com/alternayte/queuebox/shared/connect/consumetest"
	qbnats "github.com/alternayte/queuebox/shared/connect/nats"
	"github.com/alternayte/queuebox/shared/store/postgres/dbtest"
	"github.com/alternayte/queuebox/shared/store/postgres/dbtest/dbstore"
)

// TestHeaderValuesWithNULKeepTheirBytes: a NATS header value that holds a NUL byte is binary
// and takes the base64: form, so "a\0b" is not stored as "ab"; other control characters stay
// text.
func TestHeaderValuesWithNULKeepTheirBytes(t *testing.T) {
	pool, st := dbstore.New(t)
	f := newFixture(t)
	s := newSource(t, f, qbnats.SourceConfig{FilterSubject: f.prefix + ".bin.>"})
	f.produce(t, "bin.a", `{"id":"nul-1"}`, map[string]string{"x-nul": "a\x00b", "x-plain": "ab", "x-ctl": "\x01,"})
	consumetest.Start(t, s, st)
	r := dbtest.WaitInboxRows(t, pool, s.Name(), 1, waitLimit)[0]
	var got map[string]string
	if err := json.Unmarshal(r.Headers, &got); err != nil {
		t.Fatalf("headers column %s: %v", r.Headers, err)
	}
	want := map[string]string{"x-nul": "base64:YQBi", "x-plain": "ab", "x-ctl": "\x01,"}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("header %s = %q, want %q", k, got[k], v)
		}
	}
}
