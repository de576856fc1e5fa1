package inbox

import (
	"bytes"
	"encoding/json"
	"testing"
)

// referenceJSON encodes v as encoding/json does without HTML escapes.
func referenceJSON(t *testing.T, v any) string {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		t.Fatalf("encoding %v: %v", v, err)
	}
	return string(bytes.TrimSuffix(buf.Bytes(), []byte("\n")))
}

// storedForm returns m with each value as StoredHeaderValue makes it.
func storedForm(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = StoredHeaderValue(v)
	}
	return out
}

// The fast paths of appendJSONString and encodeHeaders write what encoding/json writes (for
// the headers, of the values that StoredHeaderValue gives).
func TestJSONEncodingMatchesEncodingJSON(t *testing.T) {
	t.Parallel()
	texts := []string{
		"", "plain", "3f2b1c1e-8d4a-4c1b-9a53-2d0f6f1e7a10", `quote " inside`, `back\slash`,
		"tab\there", "nul\x00", "del\x7f", "<html> & more", "é and 日本", "line\u2028sep\u2029",
		"bad utf-8 \xff\xfe", "ctrl \x1f end", "~ all printable !#$%&'()*+,-./:;<=>?@[]^_`{|}",
	}
	for _, s := range texts {
		if got, want := string(jsonString(s)), referenceJSON(t, s); got != want {
			t.Errorf("jsonString(%q) = %s, want %s", s, got, want)
		}
		if got, want := string(appendJSONString([]byte("x"), s)), "x"+referenceJSON(t, s); got != want {
			t.Errorf("appendJSONString(x, %q) = %s, want %s", s, got, want)
		}
	}
	headers := map[string]string{"content-type": "application/json", "user-agent": "Go-http-client/1.1"}
	for i, s := range texts {
		headers[string(rune('a'+i))+"-h"] = s
	}
	for _, m := range []map[string]string{{}, {"host": "example.com"}, headers} {
		got, err := encodeHeaders(m)
		if err != nil {
			t.Fatal(err)
		}
		if want := referenceJSON(t, storedForm(m)); string(got) != want {
			t.Errorf("encodeHeaders = %s, want %s", got, want)
		}
	}
}
