package template_test

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/alternayte/queuebox/shared/template"
)

// FuzzPayloadField checks the payload walk against encoding/json: for any payload, the field a.b
// renders what a full decode finds there, and the missing-field default when a decode finds
// nothing or the payload is not JSON.
func FuzzPayloadField(f *testing.F) {
	for _, seed := range []string{
		`{"a":{"b":"x"}}`, `{"a":{"b":12345678901234567890}}`, `{"a":{"b":[1,{"c":"d"}]}}`,
		`{"a":{"b":null}}`, `{"a":[{"b":1}]}`, `{"a":{"b":"\u00e9\n\"q\""}}`, ` { "a" : { "b" : { } } } `,
		`{"a":{"b":1,"b":2}}`, `{"a":1}`, `[]`, `"a"`, `{"a":{"b":`, `{"\u0061":{"b":true}}`, ``,
	} {
		f.Add([]byte(seed))
	}
	k := template.CompileRoutingKey("{{ payload.a.b }}", "\x00missing")
	f.Fuzz(func(t *testing.T, payload []byte) {
		got := k.Render(template.Row{Payload: payload})
		want, ok := referenceField(payload)
		if !ok {
			if got != "\x00missing" {
				t.Fatalf("payload %q: got %q, want the default", payload, got)
			}
			return
		}
		switch w := want.(type) {
		case string:
			if got != w {
				t.Fatalf("payload %q: got %q, want %q", payload, got, w)
			}
		case json.Number:
			if got != string(w) {
				t.Fatalf("payload %q: got %q, want %q", payload, got, w)
			}
		case bool, nil:
			if b, _ := json.Marshal(w); got != string(b) {
				t.Fatalf("payload %q: got %q, want %s", payload, got, b)
			}
		default:
			var back any
			d := json.NewDecoder(bytes.NewReader([]byte(got)))
			d.UseNumber()
			if err := d.Decode(&back); err != nil || !reflect.DeepEqual(back, want) {
				t.Fatalf("payload %q: got %q, which is not the JSON of %#v (%v)", payload, got, want, err)
			}
		}
	})
}

// referenceField decodes payload whole and returns its field a.b.
func referenceField(payload []byte) (any, bool) {
	if !json.Valid(payload) {
		return nil, false
	}
	var v any
	d := json.NewDecoder(bytes.NewReader(payload))
	d.UseNumber()
	if err := d.Decode(&v); err != nil {
		return nil, false
	}
	for _, name := range []string{"a", "b"} {
		m, ok := v.(map[string]any)
		if !ok {
			return nil, false
		}
		if v, ok = m[name]; !ok {
			return nil, false
		}
	}
	return v, true
}
