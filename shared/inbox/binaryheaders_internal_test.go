package inbox

import (
	"encoding/json"
	"net/http"
	"testing"
)

// TestHeaderValuesWithNULTakeTheBase64Form: a received header value that holds U+0000, which
// a JSONB document cannot hold, or that is not UTF-8, is stored in the base64: form of its
// bytes (spec/27), on the HTTP path (a Lambda event is not checked by net/http) and on the
// broker path; distinct values stay distinct. Other control characters stay text, and a name
// still loses its NUL characters.
func TestHeaderValuesWithNULTakeTheBase64Form(t *testing.T) {
	t.Parallel()
	want := map[string]string{
		"nul":    "base64:YQBi",
		"plain":  "ab",
		"int42":  "base64:AAAAKg==",
		"star":   "*",
		"int300": "base64:AAABLA==",
		"ctl":    "\x01,",
		"latin1": "base64:Y2Fm6Q==",
		"ab":     "name",
	}
	received := map[string]string{
		"nul": "a\x00b", "plain": "ab", "int42": "\x00\x00\x00*", "star": "*",
		"int300": "\x00\x00\x01,", "ctl": "\x01,", "latin1": "caf\xe9", "a\x00b": "name",
	}
	check := func(path string, m map[string]string) {
		t.Helper()
		raw, err := encodeHeaders(m)
		if err != nil {
			t.Fatal(err)
		}
		var got map[string]string
		if err := json.Unmarshal(raw, &got); err != nil {
			t.Fatalf("%s: headers %s are not a JSON object: %v", path, raw, err)
		}
		for k, v := range want {
			if got[k] != v {
				t.Errorf("%s: header %q = %q, want %q", path, k, got[k], v)
			}
		}
	}

	r := &http.Request{Header: http.Header{}}
	for k, v := range received {
		r.Header[k] = []string{v}
	}
	check("HTTP", requestHeaders(r))
	check("broker", cleanHeaders(received))
}
