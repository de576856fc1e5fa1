package template_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/alternayte/queuebox/shared/template"
)

// contractPayload is the payload of RoutingKeyTemplateContractTest, the test that spec/31 cites.
const contractPayload = `{"region":"eu","customer":{"region":"de"}}`

// spacings writes one placeholder name in the forms that the spec and the configuration treat
// as the same placeholder.
func spacings(name string) map[string]string {
	return map[string]string{
		"inner spaces":      "{{ " + name + " }}",
		"no inner spaces":   "{{" + name + "}}",
		"space before only": "{{ " + name + "}}",
		"space after only":  "{{" + name + " }}",
		"double spaces":     "{{  " + name + "  }}",
		"tabs":              "{{\t" + name + "\t}}",
	}
}

// TestRoutingKeyContractTable pins the contract table of spec/31, "Routing key templates", row
// by row, each in every spacing of its placeholder.
func TestRoutingKeyContractTable(t *testing.T) {
	t.Parallel()
	const def = "the-default"
	rows := []struct {
		name    string
		field   string
		payload string
		topic   string
		want    string
	}{
		{name: "topic", field: "topic", payload: contractPayload, topic: "orders.created", want: "orders.created"},
		{name: "top-level payload field", field: "payload.region", payload: `{"region":"eu"}`, topic: "any", want: "eu"},
		{name: "nested field through data", field: "data.customer.region", payload: `{"customer":{"region":"de"}}`, topic: "any", want: "de"},
		{name: "missing payload field", field: "payload.missingField", payload: `{"region":"eu"}`, topic: "any", want: def},
		{name: "unknown bare name", field: "region", payload: `{"region":"eu"}`, topic: "any", want: def},
	}
	for _, r := range rows {
		for spacing, text := range spacings(r.field) {
			t.Run(r.name+"/"+spacing, func(t *testing.T) {
				t.Parallel()
				k := template.CompileRoutingKey(text, def)
				got := k.Render(template.Row{Topic: r.topic, Payload: json.RawMessage(r.payload)})
				assert.Equal(t, r.want, got, "template %q", text)
			})
		}
	}
}

// TestAddressContractTable runs the same table through an address template: the known forms
// render the same value, a missing field renders an empty string (so the address is empty and
// the publish fails), and an unknown name stops the compile.
func TestAddressContractTable(t *testing.T) {
	t.Parallel()
	rows := []struct {
		name       string
		field      string
		payload    string
		want       string
		wantEmpty  bool
		wantReject bool
	}{
		{name: "topic", field: "topic", payload: contractPayload, want: "orders.created"},
		{name: "top-level payload field", field: "payload.region", payload: `{"region":"eu"}`, want: "eu"},
		{name: "nested field through data", field: "data.customer.region", payload: `{"customer":{"region":"de"}}`, want: "de"},
		{name: "missing payload field", field: "payload.missingField", payload: `{"region":"eu"}`, wantEmpty: true},
		{name: "unknown bare name", field: "region", payload: `{"region":"eu"}`, wantReject: true},
	}
	for _, r := range rows {
		for spacing, text := range spacings(r.field) {
			t.Run(r.name+"/"+spacing, func(t *testing.T) {
				t.Parallel()
				a, err := template.CompileAddress(text)
				if r.wantReject {
					require.ErrorIs(t, err, template.ErrUnknownPlaceholder)
					var unknown *template.UnknownPlaceholderError
					require.ErrorAs(t, err, &unknown)
					assert.Equal(t, []string{text}, unknown.Placeholders)
					return
				}
				require.NoError(t, err)
				got, err := a.Render(template.Row{Topic: "orders.created", Payload: json.RawMessage(r.payload)})
				if r.wantEmpty {
					require.ErrorIs(t, err, template.ErrEmptyAddress)
					assert.Contains(t, err.Error(), text, "the error names the placeholder that found no value")
					assert.Empty(t, got)
					return
				}
				require.NoError(t, err)
				assert.Equal(t, r.want, got)
			})
		}
	}
}

// order is an outbox row with every column set.
var order = template.Row{
	Topic:         "order.created",
	Key:           "order-42",
	AggregateType: "order",
	Payload: json.RawMessage(`{"region":"eu","priority":"high","amount":12345678901234567890,` +
		`"price":1.50,"tiny":1e-7,"neg":-0,"paid":true,"void":false,"note":null,"empty":"",` +
		`"customer":{"region":"de","tier":{"level":3}},"items":[1,"two",{"n":3}],"obj":{"k":"v","n":[1,2]},` +
		`"city":"Zürich","emoji":"\ud83d\ude00","escaped":"caf\u00e9 \"quoted\" a\\b","slash":"/api/v1/users"}`),
}

// TestRoutingKeyRender covers each placeholder, the value kinds of a payload field, and the
// missing-field default.
func TestRoutingKeyRender(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		template string
		def      string
		row      template.Row
		want     string
	}{
		{name: "topic", template: "{{ topic }}", row: order, want: "order.created"},
		{name: "key", template: "{{ key }}", row: order, want: "order-42"},
		{name: "aggregate type", template: "{{aggregateType}}", row: order, want: "order"},
		{name: "literal around placeholders", template: "events.{{ topic }}.{{ key }}", row: order, want: "events.order.created.order-42"},
		{name: "literal only", template: "static.routing.key", row: order, want: "static.routing.key"},
		{name: "empty template", template: "", def: "d", row: order, want: ""},
		{name: "several placeholders", template: "{{ payload.region }}.{{ topic }}.{{ data.priority }}", row: order, want: "eu.order.created.high"},
		{name: "same placeholder twice", template: "{{ topic }}|{{topic}}", row: order, want: "order.created|order.created"},
		{name: "deeply nested", template: "{{ payload.customer.tier.level }}", row: order, want: "3"},
		{name: "big integer exact", template: "{{ payload.amount }}", row: order, want: "12345678901234567890"},
		{name: "decimal as written", template: "{{ payload.price }}", row: order, want: "1.50"},
		{name: "exponent as written", template: "{{ payload.tiny }}", row: order, want: "1e-7"},
		{name: "negative zero as written", template: "{{ payload.neg }}", row: order, want: "-0"},
		{name: "true", template: "status.{{ payload.paid }}", row: order, want: "status.true"},
		{name: "false", template: "status.{{ payload.void }}", row: order, want: "status.false"},
		{name: "null renders null", template: "p.{{ payload.note }}.s", def: "d", row: order, want: "p.null.s"},
		{name: "empty string is a value", template: "a{{ payload.empty }}b", def: "d", row: order, want: "ab"},
		{name: "object as compact json", template: "obj.{{ payload.obj }}", row: order, want: `obj.{"k":"v","n":[1,2]}`},
		{name: "array as compact json", template: "{{ payload.items }}", row: order, want: `[1,"two",{"n":3}]`},
		{name: "unicode value", template: "{{ payload.city }}", row: order, want: "Zürich"},
		{name: "surrogate pair escape", template: "{{ payload.emoji }}", row: order, want: "😀"},
		{name: "escapes decoded", template: "{{ payload.escaped }}", row: order, want: `café "quoted" a\b`},
		{name: "special characters stay", template: "route.{{ payload.slash }}", row: order, want: "route./api/v1/users"},
		{name: "unicode literal", template: "événements.{{ topic }}", row: order, want: "événements.order.created"},
		{name: "missing field renders empty by default", template: "events.{{ payload.missing }}.suffix", row: order, want: "events..suffix"},
		{name: "missing field renders the default", template: "events.{{ payload.missing }}", def: "unknown", row: order, want: "events.unknown"},
		{name: "missing intermediate object", template: "{{ payload.missing.nested }}", def: "d", row: order, want: "d"},
		{name: "field of a scalar", template: "{{ payload.region.x }}", def: "d", row: order, want: "d"},
		{name: "field of null", template: "{{ payload.note.x }}", def: "d", row: order, want: "d"},
		{name: "field of an array", template: "{{ payload.items.n }}", def: "d", row: order, want: "d"},
		{name: "index of an array", template: "{{ payload.items.0 }}", def: "d", row: order, want: "d"},
		{name: "unknown name", template: "{{ nosuchfield }}", def: "unknown-default", row: order, want: "unknown-default"},
		{name: "unknown prefix", template: "{{ unknown.field }}", def: "d", row: order, want: "d"},
		{name: "names are case sensitive", template: "{{ Topic }}", def: "d", row: order, want: "d"},
		{name: "payload without a field", template: "{{ payload }}", def: "d", row: order, want: "d"},
		{name: "payload with an empty field", template: "{{ data. }}", def: "d", row: order, want: "d"},
		{name: "source placeholder is unknown here", template: "{{ source }}.{{ eventType }}", def: "d", row: order, want: "d.d"},
		{name: "no key renders the default", template: "k.{{ key }}", def: "no-key", row: template.Row{Topic: "t"}, want: "k.no-key"},
		{name: "no aggregate type renders the default", template: "{{ aggregateType }}", def: "no-aggregate", row: template.Row{Topic: "t"}, want: "no-aggregate"},
		{name: "no payload", template: "{{ payload.region }}", def: "d", row: template.Row{Topic: "t"}, want: "d"},
		{name: "payload not json", template: "{{ payload.region }}", def: "d", row: template.Row{Payload: json.RawMessage(`{"region":`)}, want: "d"},
		{name: "payload an array", template: "events.{{ payload.field }}.suffix", row: template.Row{Payload: json.RawMessage(`["a","b"]`)}, want: "events..suffix"},
		{name: "payload a string", template: "{{ payload.field }}", def: "d", row: template.Row{Payload: json.RawMessage(`"field"`)}, want: "d"},
		{name: "payload with white space", template: "{{ payload.a.b }}", row: template.Row{Payload: json.RawMessage(" \n{ \"a\" : { \"b\" :\t\"x\" } } \n")}, want: "x"},
		{name: "repeated name: the last wins", template: "{{ payload.a }}", row: template.Row{Payload: json.RawMessage(`{"a":1,"a":2}`)}, want: "2"},
		{name: "escaped member name", template: "{{ payload.é }}", row: template.Row{Payload: json.RawMessage(`{"\u00e9":"accent"}`)}, want: "accent"},
		{name: "member name with a hyphen", template: "{{ payload.x-tenant }}", row: template.Row{Payload: json.RawMessage(`{"x-tenant":"acme"}`)}, want: "acme"},
		{name: "value is not expanded again", template: "{{ payload.t }}", row: template.Row{Topic: "x", Payload: json.RawMessage(`{"t":"{{ topic }}"}`)}, want: "{{ topic }}"},
		{name: "topic is not defaulted", template: "[{{ topic }}]", def: "d", row: template.Row{}, want: "[]"},
		{name: "unclosed placeholder is literal", template: "{{ topic", def: "d", row: order, want: "{{ topic"},
		{name: "single braces are literal", template: "{topic}", def: "d", row: order, want: "{topic}"},
		{name: "result is not trimmed", template: " {{ topic }} ", row: order, want: " order.created "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			k := template.CompileRoutingKey(tt.template, tt.def)
			assert.Equal(t, tt.want, k.Render(tt.row))
			assert.Equal(t, tt.template, k.String())
			assert.Equal(t, tt.def, k.MissingDefault())
		})
	}
}

func TestRoutingKeyUnknownPlaceholders(t *testing.T) {
	t.Parallel()
	k := template.CompileRoutingKey("{{ region }}.{{ topic }}.{{Topic}}.{{ payload.a }}", "")
	assert.Equal(t, []string{"{{ region }}", "{{Topic}}"}, k.UnknownPlaceholders())
	assert.Empty(t, template.CompileRoutingKey(template.DefaultRabbitMQRoutingKey, "").UnknownPlaceholders())
}

// TestCompactJSON pins the text of an object or an array: compact, members in their order,
// numbers as written, strings escaped only where JSON needs it.
func TestCompactJSON(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		payload string
		want    string
	}{
		{name: "white space removed", payload: "{\"v\": { \"a\" : 1 ,\n \"b\" : [ true , null , \"x\" ] } }", want: `{"a":1,"b":[true,null,"x"]}`},
		{name: "member order kept", payload: `{"v":{"z":1,"a":2,"m":3}}`, want: `{"z":1,"a":2,"m":3}`},
		{name: "numbers as written", payload: `{"v":[12345678901234567890,1.50,1E+3,-0.0]}`, want: `[12345678901234567890,1.50,1E+3,-0.0]`},
		{name: "empty object", payload: `{"v":{}}`, want: `{}`},
		{name: "empty array", payload: `{"v":[ ]}`, want: `[]`},
		{name: "nested empties", payload: `{"v":[{},[],[[]]]}`, want: `[{},[],[[]]]`},
		{name: "non-ascii unescaped", payload: `{"v":{"city":"M\u00fcnchen","emoji":"\ud83d\ude00"}}`, want: `{"city":"München","emoji":"😀"}`},
		{name: "quote and backslash escaped", payload: `{"v":["a\"b","c\\d","e\/f"]}`, want: `["a\"b","c\\d","e/f"]`},
		{name: "control characters escaped", payload: `{"v":["\n\t\r\b\f","\u0001\u001f"]}`, want: `["\n\t\r\b\f","\u0001\u001f"]`},
		{name: "html characters kept", payload: `{"v":["<a>&"]}`, want: `["<a>&"]`},
		{name: "line separator kept", payload: `{"v":["\u2028"]}`, want: "[\"\u2028\"]"},
		{name: "repeated name keeps its first place and last value", payload: `{"v":{"a":1,"b":2,"a":3}}`, want: `{"a":3,"b":2}`},
		{name: "escaped member names", payload: `{"v":{"\u0061":1,"q\"":2}}`, want: `{"a":1,"q\"":2}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.True(t, json.Valid([]byte(tt.payload)), "the test payload is valid JSON")
			k := template.CompileRoutingKey("{{ payload.v }}", "missing")
			got := k.Render(template.Row{Payload: json.RawMessage(tt.payload)})
			assert.Equal(t, tt.want, got)
			assert.True(t, json.Valid([]byte(got)), "the rendered text is JSON")
		})
	}
}

// TestAddressRender covers rendering and the empty-address failure.
func TestAddressRender(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		template string
		row      template.Row
		want     string
		wantErr  string
	}{
		{name: "literal", template: "queuebox-events", row: order, want: "queuebox-events"},
		{name: "literal renders for an empty row", template: "orders-processed", row: template.Row{}, want: "orders-processed"},
		{name: "every placeholder", template: "{{topic}}.{{ key }}.{{ aggregateType }}.{{ payload.region }}.{{data.customer.region}}", row: order, want: "order.created.order-42.order.eu.de"},
		{name: "number field", template: "amount.{{ payload.amount }}", row: order, want: "amount.12345678901234567890"},
		{name: "object field", template: "{{ payload.customer.tier }}", row: order, want: `{"level":3}`},
		{name: "null field", template: "n.{{ payload.note }}", row: order, want: "n.null"},
		{name: "unicode", template: "città.{{ payload.city }}", row: order, want: "città.Zürich"},
		{name: "missing key renders empty", template: "k.{{ key }}", row: template.Row{Topic: "t"}, want: "k."},
		{name: "missing aggregate type renders empty", template: "public.{{ aggregateType }}.v1", row: template.Row{Topic: "t"}, want: "public..v1"},
		{name: "missing field renders empty", template: "{{ payload.missing }}.x", row: order, want: ".x"},
		{name: "not trimmed", template: " {{ topic }}", row: order, want: " order.created"},
		{name: "empty key", template: "{{ key }}", row: template.Row{Topic: "t"},
			wantErr: `template: the address is empty: the address template "{{ key }}" renders empty (no value for {{ key }})`},
		{name: "empty aggregate type", template: "{{aggregateType}}", row: template.Row{Topic: "t"},
			wantErr: `template: the address is empty: the address template "{{aggregateType}}" renders empty (no value for {{aggregateType}})`},
		{name: "missing fields", template: "{{ payload.a }}{{ data.b.c }}", row: order,
			wantErr: `template: the address is empty: the address template "{{ payload.a }}{{ data.b.c }}" renders empty (no value for {{ payload.a }}, {{ data.b.c }})`},
		{name: "payload not json", template: "{{ payload.region }}", row: template.Row{Payload: json.RawMessage(`{"region":"eu"`)},
			wantErr: `no value for {{ payload.region }}`},
		{name: "empty string field", template: "{{ payload.empty }}", row: order,
			wantErr: `renders empty (no value for {{ payload.empty }})`},
		{name: "blank result", template: " {{ key }} ", row: template.Row{Topic: "t"},
			wantErr: `the address template " {{ key }} " renders only white space ("  ") (no value for {{ key }})`},
		{name: "blank value", template: "{{ payload.v }}", row: template.Row{Payload: json.RawMessage(`{"v":" \t"}`)},
			wantErr: `renders only white space (" \t")`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			a, err := template.CompileAddress(tt.template)
			require.NoError(t, err)
			assert.Equal(t, tt.template, a.String())
			got, err := a.Render(tt.row)
			if tt.wantErr != "" {
				require.ErrorIs(t, err, template.ErrEmptyAddress)
				assert.Contains(t, err.Error(), tt.wantErr)
				assert.Empty(t, got)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestAddressIsLiteral(t *testing.T) {
	t.Parallel()
	for text, want := range map[string]bool{
		"queuebox-events":      true,
		"{topic}":              true,
		"{{ topic":             true,
		"events.{{ topic }}":   false,
		"{{ payload.region }}": false,
	} {
		a, err := template.CompileAddress(text)
		require.NoError(t, err, text)
		assert.Equal(t, want, a.IsLiteral(), text)
	}
	c, err := template.ColumnAddress(template.ColumnTopic)
	require.NoError(t, err)
	assert.False(t, c.IsLiteral())
}

// TestCompileAddressRefuses pins the templates that stop the start. The cases of config's
// validate_test.go are here too, so config can call this package and keep its messages.
func TestCompileAddressRefuses(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		template    string
		wantUnknown []string
	}{
		{name: "source topic placeholders", template: "events.{{ eventType }}.{{source}}", wantUnknown: []string{"{{ eventType }}", "{{source}}"}},
		{name: "payload alone", template: "{{ payload }}.{{ data. }}", wantUnknown: []string{"{{ payload }}", "{{ data. }}"}},
		{name: "source", template: "t.{{ source }}", wantUnknown: []string{"{{ source }}"}},
		{name: "one unknown among known", template: "{{ key }}.{{ nope }}", wantUnknown: []string{"{{ nope }}"}},
		{name: "case sensitive", template: "{{ eventType }}.{{source}}.{{ Topic }}", wantUnknown: []string{"{{ eventType }}", "{{source}}", "{{ Topic }}"}},
		{name: "bare field name", template: "public.{{ nosuchfield }}.v1", wantUnknown: []string{"{{ nosuchfield }}"}},
		{name: "empty placeholder", template: "a{{}}b{{ }}", wantUnknown: []string{"{{}}", "{{ }}"}},
		{name: "empty field step", template: "{{ payload..a }}{{ payload.a. }}", wantUnknown: []string{"{{ payload..a }}", "{{ payload.a. }}"}},
		{name: "space inside a field", template: "{{ payload.first name }}", wantUnknown: []string{"{{ payload.first name }}"}},
		{name: "other prefix", template: "{{ body.a }}{{ payloads.a }}", wantUnknown: []string{"{{ body.a }}", "{{ payloads.a }}"}},
		{name: "unicode name", template: "{{ thème }}", wantUnknown: []string{"{{ thème }}"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tt.wantUnknown, template.UnknownAddressPlaceholders(tt.template))
			a, err := template.CompileAddress(tt.template)
			assert.Nil(t, a)
			require.ErrorIs(t, err, template.ErrUnknownPlaceholder)
			var unknown *template.UnknownPlaceholderError
			require.ErrorAs(t, err, &unknown)
			assert.Equal(t, tt.template, unknown.Template)
			assert.Equal(t, tt.wantUnknown, unknown.Placeholders)
			for _, p := range tt.wantUnknown {
				assert.Contains(t, err.Error(), p, "the error names the placeholder")
			}
			assert.Equal(t, err.Error(), template.ValidateAddress(tt.template).Error())
		})
	}
}

func TestUnknownPlaceholderErrorText(t *testing.T) {
	t.Parallel()
	err := template.ValidateAddress("public.{{ nosuchfield }}.v1")
	require.Error(t, err)
	assert.Equal(t, `the address template "public.{{ nosuchfield }}.v1" uses the placeholder {{ nosuchfield }}, `+
		`which an address template does not know: use {{ topic }}, {{ key }}, {{ aggregateType }}, `+
		`{{ payload.<field> }} or {{ data.<field> }}`, err.Error())
	err = template.ValidateAddress("{{ a }}{{ b }}")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "uses the placeholders {{ a }}, {{ b }}, which")
}

func TestCompileAddressAccepts(t *testing.T) {
	t.Parallel()
	for _, text := range []string{
		"literal.subject",
		"{{topic}}.{{ key }}.{{ aggregateType }}.{{ payload.region }}.{{data.customer.id}}",
		"{{ payload.a.b.c }}",
		"{{ payload.x-tenant }}",
		"{{ payload.é }}",
		"{topic}",
		"{{ topic",
		"topic }}",
	} {
		assert.Empty(t, template.UnknownAddressPlaceholders(text), text)
		assert.NoError(t, template.ValidateAddress(text), text)
		_, err := template.CompileAddress(text)
		assert.NoError(t, err, text)
	}
}

func TestCompileAddressRefusesBlank(t *testing.T) {
	t.Parallel()
	for _, text := range []string{"", " ", "\t\n"} {
		_, err := template.CompileAddress(text)
		assert.ErrorIs(t, err, template.ErrEmptyAddress, "%q", text)
	}
}

func TestPlaceholders(t *testing.T) {
	t.Parallel()
	assert.Equal(t, []template.Placeholder{
		{Text: "{{ topic }}", Name: "topic"},
		{Text: "{{payload.a.b}}", Name: "payload.a.b"},
		{Text: "{{  nope\t}}", Name: "nope"},
		{Text: "{{{ x }}", Name: "{ x"},
	}, template.Placeholders("a.{{ topic }}.{{payload.a.b}}.{{  nope\t}}.{{{ x }}}.{{ open"))
	assert.Empty(t, template.Placeholders("no placeholders {} {topic}"))
}

// TestAddressColumns covers exchangeFrom, topicFrom and subjectFrom.
func TestAddressColumns(t *testing.T) {
	t.Parallel()
	assert.Equal(t, []string{"aggregate_type", "topic", "key"}, template.Columns())
	tests := []struct {
		column  string
		want    string
		wantErr string
	}{
		{column: "aggregate_type", want: "order"},
		{column: "topic", want: "order.created"},
		{column: "key", want: "order-42"},
		{column: "aggregateType", wantErr: `template: unknown address column: "aggregateType": use aggregate_type, topic or key`},
		{column: "Topic", wantErr: `"Topic"`},
		{column: "payload", wantErr: `"payload"`},
		{column: "id", wantErr: `"id"`},
	}
	for _, tt := range tests {
		t.Run(tt.column, func(t *testing.T) {
			t.Parallel()
			read, err := template.FromColumn(tt.column)
			a, aerr := template.ColumnAddress(tt.column)
			if tt.wantErr != "" {
				require.ErrorIs(t, err, template.ErrUnknownColumn)
				require.ErrorIs(t, aerr, template.ErrUnknownColumn)
				assert.Contains(t, err.Error(), tt.wantErr)
				return
			}
			require.NoError(t, err)
			require.NoError(t, aerr)
			assert.Equal(t, tt.want, read(order))
			got, err := a.Render(order)
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
			assert.Equal(t, "column "+tt.column, a.String())
		})
	}
}

func TestColumnAddressEmpty(t *testing.T) {
	t.Parallel()
	a, err := template.ColumnAddress(template.ColumnAggregateType)
	require.NoError(t, err)
	_, err = a.Render(template.Row{Topic: "t"})
	require.ErrorIs(t, err, template.ErrEmptyAddress)
	assert.EqualError(t, err, "template: the address is empty: the column aggregate_type of the row is empty")
	_, err = a.Render(template.Row{Topic: "t", AggregateType: "  "})
	require.ErrorIs(t, err, template.ErrEmptyAddress)
	assert.Contains(t, err.Error(), `is only white space ("  ")`)
	got, err := a.Render(template.Row{AggregateType: "{{ topic }}"})
	require.NoError(t, err)
	assert.Equal(t, "{{ topic }}", got, "a column value is no template")
}

// TestNewAddress: a column wins over the template, and the template is not compiled then.
func TestNewAddress(t *testing.T) {
	t.Parallel()
	a, err := template.NewAddress("{{ nosuchfield }}", "key")
	require.NoError(t, err)
	got, err := a.Render(order)
	require.NoError(t, err)
	assert.Equal(t, "order-42", got)

	a, err = template.NewAddress("events.{{ aggregateType }}", "")
	require.NoError(t, err)
	got, err = a.Render(order)
	require.NoError(t, err)
	assert.Equal(t, "events.order", got)

	_, err = template.NewAddress("x", "nope")
	require.ErrorIs(t, err, template.ErrUnknownColumn)
	_, err = template.NewAddress("{{ nope }}", "")
	require.ErrorIs(t, err, template.ErrUnknownPlaceholder)
}

// TestKafkaKey covers the keyTemplate of a Kafka destination: {{ key }} and {{ topic }} render,
// any other placeholder stays as written, and a blank result sends no key.
func TestKafkaKey(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		template string
		row      template.Row
		want     string
		wantNone bool
	}{
		{name: "default", template: template.DefaultKafkaKey, row: order, want: "order-42"},
		{name: "default without a key", template: template.DefaultKafkaKey, row: template.Row{Topic: "t"}, wantNone: true},
		{name: "key without spaces", template: "{{key}}", row: order, want: "order-42"},
		{name: "topic", template: "{{ topic }}", row: order, want: "order.created"},
		{name: "both", template: "{{ topic }}/{{ key }}", row: order, want: "order.created/order-42"},
		{name: "literal", template: "fixed", row: order, want: "fixed"},
		{name: "other placeholders stay as written", template: "{{ aggregateType }}.{{ payload.region }}.{{ nope }}", row: order,
			want: "{{ aggregateType }}.{{ payload.region }}.{{ nope }}"},
		{name: "literal around a missing key", template: "k-{{ key }}", row: template.Row{Topic: "t"}, want: "k-"},
		{name: "blank", template: " {{ key }} ", row: template.Row{Topic: "t"}, wantNone: true},
		{name: "empty template", template: "", row: order, wantNone: true},
		{name: "not trimmed", template: " {{ key }}", row: order, want: " order-42"},
		{name: "unicode key", template: "{{ key }}", row: template.Row{Key: "clé-☃"}, want: "clé-☃"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			k := template.CompileKafkaKey(tt.template)
			assert.Equal(t, tt.template, k.String())
			got, ok := k.Render(tt.row)
			if tt.wantNone {
				assert.False(t, ok)
				assert.Empty(t, got)
				return
			}
			assert.True(t, ok)
			assert.Equal(t, tt.want, got)
		})
	}
}

// TestDocumentedExamples renders every template example of spec/07, spec/12, spec/17, spec/23,
// spec/29, spec/31 and spec/examples/queuebox.yml as the pages describe it.
func TestDocumentedExamples(t *testing.T) {
	t.Parallel()
	t.Run("spec/07 kafka topic public.{{ aggregateType }}.v1", func(t *testing.T) {
		a, err := template.CompileAddress("public.{{ aggregateType }}.v1")
		require.NoError(t, err)
		got, err := a.Render(template.Row{Topic: "order.created", AggregateType: "order", Payload: json.RawMessage(`{}`)})
		require.NoError(t, err)
		assert.Equal(t, "public.order.v1", got)
	})
	t.Run("spec/07 literal exchange, kafka topic and nats subject", func(t *testing.T) {
		for _, name := range []string{"queuebox-events", "orders-processed", "processed.orders"} {
			a, err := template.CompileAddress(name)
			require.NoError(t, err)
			got, err := a.Render(order)
			require.NoError(t, err)
			assert.Equal(t, name, got)
		}
	})
	t.Run("spec/07 and spec/23 rabbitmq routing key {{ topic }}", func(t *testing.T) {
		assert.Equal(t, "{{ topic }}", template.DefaultRabbitMQRoutingKey)
		k := template.CompileRoutingKey(template.DefaultRabbitMQRoutingKey, "")
		assert.Equal(t, "order.created", k.Render(order))
	})
	t.Run("spec/07, spec/23 and spec/25 kafka keyTemplate {{ key }}", func(t *testing.T) {
		assert.Equal(t, "{{ key }}", template.DefaultKafkaKey)
		got, ok := template.CompileKafkaKey(template.DefaultKafkaKey).Render(order)
		assert.True(t, ok)
		assert.Equal(t, "order-42", got, "the rows of one key land in one partition")
		_, ok = template.CompileKafkaKey(template.DefaultKafkaKey).Render(template.Row{Topic: "order.created"})
		assert.False(t, ok, "an empty result sends no record key")
	})
	t.Run("spec/12 {{ payload.region }}.{{ payload.priority }}.{{ topic }} with default", func(t *testing.T) {
		k := template.CompileRoutingKey("{{ payload.region }}.{{ payload.priority }}.{{ topic }}", "default")
		row := template.Row{Topic: "order.created", Payload: json.RawMessage(`{"region":"eu","priority":"high"}`)}
		assert.Equal(t, "eu.high.order.created", k.Render(row))
		row.Payload = json.RawMessage(`{"region":"eu"}`)
		assert.Equal(t, "eu.default.order.created", k.Render(row))
	})
	t.Run("spec/12 nested {{ payload.customer.region }}", func(t *testing.T) {
		k := template.CompileRoutingKey("{{ payload.customer.region }}", "")
		assert.Equal(t, "de", k.Render(template.Row{Payload: json.RawMessage(contractPayload)}))
	})
	t.Run("spec/17 and spec/29 public.orders.{{ aggregateType }}.v1", func(t *testing.T) {
		a, err := template.CompileAddress("public.orders.{{ aggregateType }}.v1")
		require.NoError(t, err)
		got, err := a.Render(template.Row{Topic: "orders.created", Key: "order-1", AggregateType: "Task"})
		require.NoError(t, err)
		assert.Equal(t, "public.orders.Task.v1", got)
	})
	t.Run("spec/examples exchange events.{{ aggregateType }} and subject orders.{{ topic }}", func(t *testing.T) {
		a, err := template.CompileAddress("events.{{ aggregateType }}")
		require.NoError(t, err)
		got, err := a.Render(order)
		require.NoError(t, err)
		assert.Equal(t, "events.order", got)
		s, err := template.CompileAddress("orders.{{ topic }}")
		require.NoError(t, err)
		got, err = s.Render(order)
		require.NoError(t, err)
		assert.Equal(t, "orders.order.created", got)
	})
	t.Run("spec/examples route {{ payload.region }}.{{ topic }} default unknown", func(t *testing.T) {
		k := template.CompileRoutingKey("{{ payload.region }}.{{ topic }}", "unknown")
		assert.Equal(t, "eu.event.signup", k.Render(template.Row{Topic: "event.signup", Payload: json.RawMessage(`{"region":"eu"}`)}))
		assert.Equal(t, "unknown.event.signup", k.Render(template.Row{Topic: "event.signup", Payload: json.RawMessage(`{}`)}))
	})
	t.Run("spec/23 and spec/31 address placeholder table", func(t *testing.T) {
		a, err := template.CompileAddress("{{ topic }}|{{ key }}|{{ aggregateType }}|{{ payload.field }}|{{ data.field }}")
		require.NoError(t, err)
		got, err := a.Render(template.Row{Topic: "t", Key: "k", AggregateType: "a", Payload: json.RawMessage(`{"field":"f"}`)})
		require.NoError(t, err)
		assert.Equal(t, "t|k|a|f|f", got)
	})
}

// TestConcurrentRender renders one compiled template from many goroutines (run with -race).
func TestConcurrentRender(t *testing.T) {
	t.Parallel()
	a, err := template.CompileAddress("{{ payload.region }}.{{ topic }}.{{ payload.obj }}")
	require.NoError(t, err)
	k := template.CompileRoutingKey("{{ payload.region }}.{{ nope }}", "d")
	done := make(chan string, 16)
	for range 16 {
		go func() {
			var b strings.Builder
			for range 200 {
				s, _ := a.Render(order)
				b.WriteString(s)
				b.WriteString(k.Render(order))
			}
			done <- b.String()
		}()
	}
	want := strings.Repeat(`eu.order.created.{"k":"v","n":[1,2]}eu.d`, 200)
	for range 16 {
		assert.Equal(t, want, <-done)
	}
}
