// Package template renders the address templates and the routing key templates of spec/31
// ("Address templates", "Routing key templates") from an outbox row.
//
// An address template is the RabbitMQ exchange, the Kafka topic or the NATS subject of a
// destination. A routing key template is the routingKeyTemplate of a route or of a RabbitMQ
// destination. A Kafka keyTemplate is a third, narrower kind. All three share one placeholder
// syntax: {{, optional white space, a name, optional white space, }}. So {{topic}},
// {{ topic }} and {{  topic  }} are the same placeholder. The names are:
//
//	{{ topic }}          the topic of the row
//	{{ key }}            the key of the row
//	{{ aggregateType }}  the aggregate_type of the row
//	{{ payload.a.b }}    the field b of the object a of the payload
//	{{ data.a.b }}       the same as payload.a.b
//
// The kinds differ in what they do with a name outside that list and with a value that the
// row does not hold:
//
//   - An address template refuses an unknown name when it compiles, so the configuration stops
//     the start. A value that the row does not hold renders as an empty string, and an address
//     that renders empty (or only white space) fails the publish of that row.
//   - A routing key template never fails. An unknown name, and a value that the row does not
//     hold, render the missing-field default (routingKeyMissingFieldDefault of the route).
//   - A Kafka keyTemplate renders {{ key }} and {{ topic }} only. Any other placeholder stays
//     as written. A blank result means the record has no key.
//
// A payload field renders as follows: a string as its text, a number exactly as the payload
// writes it (12345678901234567890 and 1.50 stay as they are), true and false as such, null as
// the text null, and an object or an array as compact JSON text. A field of an array, a field
// of a scalar, or any field of a payload that is not valid JSON is a value that the row does not
// hold.
//
// Every compiled template is immutable and safe for concurrent use. A rendered value is never
// read as template text again.
package template

import (
	"encoding/json"
	"regexp"
	"strings"
)

// Row holds the fields of an outbox row that a template reads.
type Row struct {
	// Topic is the topic of the row.
	Topic string
	// Key is the key of the row, empty when the row has none (store.OutboxRow folds a null key
	// into the empty string).
	Key string
	// AggregateType is the aggregate_type of the row, empty when the row has none.
	AggregateType string
	// Payload is the payload of the row, a JSON document.
	Payload json.RawMessage
}

// The placeholder names that read a column of the row.
const (
	// NameTopic is the placeholder name of the topic column: {{ topic }}.
	NameTopic = "topic"
	// NameKey is the placeholder name of the key column: {{ key }}.
	NameKey = "key"
	// NameAggregateType is the placeholder name of the aggregate_type column:
	// {{ aggregateType }}.
	NameAggregateType = "aggregateType"
)

// The default templates of the destinations (spec/23).
const (
	// DefaultRabbitMQRoutingKey is the default routingKeyTemplate of a RabbitMQ destination.
	DefaultRabbitMQRoutingKey = "{{ topic }}"
	// DefaultKafkaKey is the default keyTemplate of a Kafka destination.
	DefaultKafkaKey = "{{ key }}"
)

var (
	// placeholderPattern finds a placeholder. It is the pattern that config used before this
	// package existed, so a template keeps the meaning that the configuration checked.
	placeholderPattern = regexp.MustCompile(`\{\{\s*(.*?)\s*\}\}`)
	// payloadFieldPattern matches the name of a payload field: payload or data, then one or
	// more dot-separated field names without white space or braces.
	payloadFieldPattern = regexp.MustCompile(`^(payload|data)(\.[^.\s{}]+)+$`)
)

// Placeholder is one {{ ... }} of a template.
type Placeholder struct {
	// Text is the placeholder as the template writes it, braces and spaces included.
	Text string
	// Name is the text between the braces without the surrounding white space.
	Name string
}

// Placeholders returns the placeholders of text in the order they appear. Text outside them
// is literal.
func Placeholders(text string) []Placeholder {
	var out []Placeholder
	for _, m := range placeholderPattern.FindAllStringSubmatchIndex(text, -1) {
		out = append(out, Placeholder{Text: text[m[0]:m[1]], Name: text[m[2]:m[3]]})
	}
	return out
}

// UnknownAddressPlaceholders returns, as written and in order, the placeholders of an address
// template whose name is not topic, key, aggregateType, payload.<field> or data.<field>. The
// configuration reports each one with the key path of the template.
func UnknownAddressPlaceholders(text string) []string {
	var out []string
	for _, p := range Placeholders(text) {
		if kindOf(p.Name) == partUnknown {
			out = append(out, p.Text)
		}
	}
	return out
}

// partKind is what one part of a compiled template renders.
type partKind uint8

const (
	partLiteral partKind = iota
	partTopic
	partKey
	partAggregateType
	partPayload
	partUnknown
)

// part is one literal run or one placeholder of a compiled template.
type part struct {
	kind partKind
	// text is the literal, or the placeholder as written.
	text string
	// path is the field path of a payload placeholder, without payload or data.
	path []string
}

// kindOf classifies a placeholder name.
func kindOf(name string) partKind {
	switch {
	case name == NameTopic:
		return partTopic
	case name == NameKey:
		return partKey
	case name == NameAggregateType:
		return partAggregateType
	case payloadFieldPattern.MatchString(name):
		return partPayload
	}
	return partUnknown
}

// parse splits text into literal runs and placeholders.
func parse(text string) []part {
	var parts []part
	lit := 0
	for _, m := range placeholderPattern.FindAllStringSubmatchIndex(text, -1) {
		if lit < m[0] {
			parts = append(parts, part{kind: partLiteral, text: text[lit:m[0]]})
		}
		name := text[m[2]:m[3]]
		p := part{kind: kindOf(name), text: text[m[0]:m[1]]}
		if p.kind == partPayload {
			p.path = strings.Split(name, ".")[1:]
		}
		parts = append(parts, p)
		lit = m[1]
	}
	if lit < len(text) {
		parts = append(parts, part{kind: partLiteral, text: text[lit:]})
	}
	return parts
}

// renderSlack is the room that a render reserves for the values beyond the literal parts.
const renderSlack = 48

// literalSize is the number of bytes of the literal parts, a lower bound of a rendered size.
func literalSize(parts []part) int {
	n := 0
	for _, p := range parts {
		if p.kind == partLiteral {
			n += len(p.text)
		}
	}
	return n
}
