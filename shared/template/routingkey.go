package template

import "strings"

// RoutingKey is a compiled routingKeyTemplate: the RabbitMQ routing key, or the Kafka record
// key of a route. It never fails. The zero value is not usable; build one with
// CompileRoutingKey.
type RoutingKey struct {
	text           string
	parts          []part
	size           int
	missingDefault string
}

// CompileRoutingKey compiles a routing key template. missingDefault is the
// routingKeyMissingFieldDefault of the route, or "" when the route sets none. Compiling never
// fails: a placeholder with an unknown name renders missingDefault, so a routing key template
// does not stop the start.
func CompileRoutingKey(text, missingDefault string) *RoutingKey {
	parts := parse(text)
	return &RoutingKey{text: text, parts: parts, size: literalSize(parts), missingDefault: missingDefault}
}

// String returns the template as written.
func (k *RoutingKey) String() string { return k.text }

// MissingDefault returns the value that a placeholder without a value renders.
func (k *RoutingKey) MissingDefault() string { return k.missingDefault }

// UnknownPlaceholders returns the placeholders, as written, that render the missing-field
// default for every row because their name is unknown. A caller may log them at start.
func (k *RoutingKey) UnknownPlaceholders() []string {
	var out []string
	for _, p := range k.parts {
		if p.kind == partUnknown {
			out = append(out, p.text)
		}
	}
	return out
}

// Render returns the routing key of row. {{ topic }} renders the topic. {{ key }} and
// {{ aggregateType }} render the column, or the missing-field default when the row has none.
// A payload field renders its value (see the package comment), or the default when the row
// does not hold it. A placeholder with an unknown name renders the default. The result is not
// trimmed, and it may be empty.
func (k *RoutingKey) Render(row Row) string {
	if len(k.parts) == 1 && k.parts[0].kind == partTopic {
		return row.Topic // the RabbitMQ default, {{ topic }}, without a copy
	}
	buf := make([]byte, 0, k.size+renderSlack)
	p := payload{raw: row.Payload}
	for _, pt := range k.parts {
		switch pt.kind {
		case partLiteral:
			buf = append(buf, pt.text...)
		case partTopic:
			buf = append(buf, row.Topic...)
		case partKey:
			buf = append(buf, orDefault(row.Key, k.missingDefault)...)
		case partAggregateType:
			buf = append(buf, orDefault(row.AggregateType, k.missingDefault)...)
		case partPayload:
			if v, ok := p.field(pt.path); ok {
				buf = appendValue(buf, v)
			} else {
				buf = append(buf, k.missingDefault...)
			}
		default:
			buf = append(buf, k.missingDefault...)
		}
	}
	return string(buf)
}

// orDefault returns s, or def when s is empty.
func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// KafkaKey is a compiled keyTemplate of a Kafka destination. It renders {{ key }} and
// {{ topic }}, with or without the inner spaces, and leaves every other placeholder as
// written. The zero value is not usable; build one with CompileKafkaKey.
type KafkaKey struct {
	text  string
	parts []part
	size  int
}

// CompileKafkaKey compiles a Kafka keyTemplate. Compiling never fails.
func CompileKafkaKey(text string) *KafkaKey {
	parts := parse(text)
	for i, p := range parts {
		if p.kind != partTopic && p.kind != partKey {
			parts[i] = part{kind: partLiteral, text: p.text}
		}
	}
	return &KafkaKey{text: text, parts: parts, size: literalSize(parts)}
}

// String returns the template as written.
func (k *KafkaKey) String() string { return k.text }

// Render returns the record key of row, and false when the result is empty or only white
// space: the record then carries no key. {{ key }} of a row without a key renders as an empty
// string. A key that is not blank is not trimmed.
func (k *KafkaKey) Render(row Row) (string, bool) {
	var key string
	if len(k.parts) == 1 && k.parts[0].kind == partKey {
		key = row.Key // the default, {{ key }}, without a copy
	} else {
		buf := make([]byte, 0, k.size+renderSlack)
		for _, pt := range k.parts {
			switch pt.kind {
			case partTopic:
				buf = append(buf, row.Topic...)
			case partKey:
				buf = append(buf, row.Key...)
			default:
				buf = append(buf, pt.text...)
			}
		}
		key = string(buf)
	}
	if strings.TrimSpace(key) == "" {
		return "", false
	}
	return key, true
}
