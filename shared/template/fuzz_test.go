package template_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strings"
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
	return referencePath(payload, []string{"a", "b"})
}

// referencePath decodes payload whole and returns the value at path.
func referencePath(payload []byte, path []string) (any, bool) {
	if !json.Valid(payload) {
		return nil, false
	}
	var v any
	d := json.NewDecoder(bytes.NewReader(payload))
	d.UseNumber()
	if err := d.Decode(&v); err != nil {
		return nil, false
	}
	for _, name := range path {
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

// templateSeeds are the templates of the documentation and the tests, with the odd spellings
// that the placeholder syntax allows or refuses.
var templateSeeds = []string{
	"{{ topic }}", "{{ key }}", "{{aggregateType}}", "public.{{ aggregateType }}.v1", "events.{{ aggregateType }}",
	"orders.{{ topic }}", "{{ payload.region }}.{{ payload.priority }}.{{ topic }}", "{{ payload.customer.region }}",
	"{{ data.field }}", "{{ payload.region }}.{{ nope }}", "{{  topic  }}", "{{ topic }", "{{{ topic }}}",
	"{{ payload. }}", "{{ payload..a }}", "{{ payload.a b }}", "{{\ttopic\n}}", "{{ to\npic }}", "{{}}", "{{ }}",
	"literal", "", " ", "{{ payload.a.b }}{{ data.a.b }}{{ key }}{{ topic }}", "{{ payload.é }}", "{{ payload.\xff }}",
}

// FuzzTemplateRender renders any template against any row with the three template kinds and
// checks them against a reference built from the documented rules (package comment): literal
// text is copied, each placeholder renders its value independently of the others (a rendered
// value is never read as template text again), a render is deterministic, an address compiles
// exactly when its text is not blank and every placeholder name is known, and a Kafka key
// renders only {{ key }} and {{ topic }}.
func FuzzTemplateRender(f *testing.F) {
	payloads := []string{`{"region":"eu","priority":"high","customer":{"region":"de"},"field":"f"}`,
		`{"a":{"b":[1,{"c":"d"}]},"é":1.50}`, `{"region":"{{ topic }}"}`, `not json`, ``}
	for i, text := range templateSeeds {
		f.Add(text, "default", "order.created", "order-42", "order", []byte(payloads[i%len(payloads)]))
	}
	f.Add("{{ topic }}", "", "{{ key }}", "k", "", []byte(`{}`))
	f.Add("{{ payload.region }}-{{ key }}", "{{ topic }}", "t", "", "", []byte(`{"region":"{{ key }}"}`))
	f.Fuzz(func(t *testing.T, text, missingDefault, topic, key, aggregateType string, payload []byte) {
		row := template.Row{Topic: topic, Key: key, AggregateType: aggregateType, Payload: payload}
		placeholders := template.Placeholders(text)

		// The reference: the literal runs and, for each placeholder, its own render.
		var want, wantKafka strings.Builder
		rest := text
		var unknown []string
		for _, p := range placeholders {
			at := strings.Index(rest, p.Text)
			if at < 0 {
				t.Fatalf("Placeholders(%q) returned %q, which is not in the rest %q", text, p.Text, rest)
			}
			if p.Name != strings.Trim(p.Name, " \t\n\f\r") || !strings.HasPrefix(p.Text, "{{") || !strings.HasSuffix(p.Text, "}}") ||
				!strings.Contains(p.Text, p.Name) {
				t.Fatalf("placeholder %+v of %q is not {{ name }}", p, text)
			}
			want.WriteString(rest[:at])
			wantKafka.WriteString(rest[:at])
			rest = rest[at+len(p.Text):]
			value, known := referenceValue(t, p.Name, row, missingDefault)
			if !known {
				unknown = append(unknown, p.Text)
			}
			want.WriteString(value)
			switch p.Name {
			case template.NameTopic:
				wantKafka.WriteString(topic)
			case template.NameKey:
				wantKafka.WriteString(key)
			default:
				wantKafka.WriteString(p.Text)
			}
		}
		want.WriteString(rest)
		wantKafka.WriteString(rest)

		// Routing key: the reference, twice the same.
		k := template.CompileRoutingKey(text, missingDefault)
		got := k.Render(row)
		if got != want.String() {
			t.Fatalf("routing key %q, default %q, row %+v: got %q, want %q", text, missingDefault, row, got, want.String())
		}
		if again := template.CompileRoutingKey(text, missingDefault).Render(row); again != got || k.Render(row) != got {
			t.Fatalf("routing key %q: the render is not deterministic: %q then %q", text, got, again)
		}
		if !slices.Equal(k.UnknownPlaceholders(), unknown) {
			t.Fatalf("routing key %q: UnknownPlaceholders = %q, want %q", text, k.UnknownPlaceholders(), unknown)
		}

		// Address: compiles iff not blank and every name is known; renders what a routing key
		// with an empty default renders, and refuses a blank result.
		a, err := template.CompileAddress(text)
		switch {
		case strings.TrimSpace(text) == "":
			if !errors.Is(err, template.ErrEmptyAddress) {
				t.Fatalf("address %q: got %v, want ErrEmptyAddress", text, err)
			}
		case len(unknown) > 0:
			var upe *template.UnknownPlaceholderError
			if !errors.As(err, &upe) || !slices.Equal(upe.Placeholders, unknown) {
				t.Fatalf("address %q: got %v, want the unknown placeholders %q", text, err, unknown)
			}
		case err != nil:
			t.Fatalf("address %q: %v", text, err)
		default:
			wantAddr := template.CompileRoutingKey(text, "").Render(row)
			name, err := a.Render(row)
			if strings.TrimSpace(wantAddr) == "" {
				if !errors.Is(err, template.ErrEmptyAddress) {
					t.Fatalf("address %q, row %+v: got %q, %v, want ErrEmptyAddress", text, row, name, err)
				}
			} else if err != nil || name != wantAddr {
				t.Fatalf("address %q, row %+v: got %q, %v, want %q", text, row, name, err, wantAddr)
			}
			if again, err2 := a.Render(row); again != name || (err == nil) != (err2 == nil) {
				t.Fatalf("address %q: the render is not deterministic", text)
			}
			if a.IsLiteral() != (len(placeholders) == 0) {
				t.Fatalf("address %q: IsLiteral = %v with %d placeholders", text, a.IsLiteral(), len(placeholders))
			}
		}

		// Kafka key.
		kk, ok := template.CompileKafkaKey(text).Render(row)
		if blank := strings.TrimSpace(wantKafka.String()) == ""; ok == blank || (ok && kk != wantKafka.String()) || (!ok && kk != "") {
			t.Fatalf("kafka key %q, row %+v: got %q, %v, want %q", text, row, kk, ok, wantKafka.String())
		}
	})
}

// referenceValue renders the placeholder name for row by the documented rules, and reports
// whether the name is one that an address template knows. A payload field is found by a full
// decode of the payload; an object or an array renders whatever the package writes for it as
// long as that text decodes to the same value (the member order is checked elsewhere).
func referenceValue(t *testing.T, name string, row template.Row, missingDefault string) (string, bool) {
	or := func(s string) string {
		if s == "" {
			return missingDefault
		}
		return s
	}
	switch name {
	case template.NameTopic:
		return row.Topic, true
	case template.NameKey:
		return or(row.Key), true
	case template.NameAggregateType:
		return or(row.AggregateType), true
	}
	path, ok := payloadPath(name)
	if !ok {
		return missingDefault, false
	}
	v, found := referencePath(row.Payload, path)
	if !found || len(bytes.TrimSpace(row.Payload)) == 0 {
		return missingDefault, true
	}
	switch w := v.(type) {
	case string:
		return w, true
	case json.Number:
		return string(w), true
	case bool, nil:
		b, _ := json.Marshal(w)
		return string(b), true
	}
	// An object or an array: take the package's own text of this one placeholder and check it.
	got := template.CompileRoutingKey("{{"+name+"}}", missingDefault).Render(row)
	var back any
	d := json.NewDecoder(strings.NewReader(got))
	d.UseNumber()
	if err := d.Decode(&back); err != nil || !reflect.DeepEqual(back, v) || d.More() {
		t.Fatalf("%s of payload %q renders %q, which is not the JSON of %#v (%v)", name, row.Payload, got, v, err)
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, []byte(got)); err != nil || compact.String() != got {
		t.Fatalf("%s of payload %q renders %q, which is not compact JSON", name, row.Payload, got)
	}
	return got, true
}

// payloadPath returns the field path of payload.<a>.<b> or data.<a>.<b>: every field name
// non-empty and without white space (as RE2 reads
// \s: space, \t, \n, \f and \r) or braces.
func payloadPath(name string) ([]string, bool) {
	root, rest, ok := strings.Cut(name, ".")
	if !ok || (root != "payload" && root != "data") {
		return nil, false
	}
	path := strings.Split(rest, ".")
	for _, p := range path {
		if p == "" || strings.ContainsAny(p, " \t\n\f\r{}") {
			return nil, false
		}
	}
	return path, true
}
