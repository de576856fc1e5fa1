package relay

import (
	"strings"

	"github.com/alternayte/queuebox/shared/kind"
)

// The placeholders of a source topic template (spec/31, "Source topic template"). Each works in
// exactly these two spellings; any other text, an unknown placeholder or another spacing such
// as {{source }}, stays as it is.
var topicPlaceholders = []struct {
	text  string
	field topicField
}{
	{"{{ source }}", fieldSource},
	{"{{source}}", fieldSource},
	{"{{ eventType }}", fieldEventType},
	{"{{eventType}}", fieldEventType},
}

type topicField uint8

const (
	fieldLiteral topicField = iota
	fieldSource
	fieldEventType
)

// The default topic templates of a source that sets no topic.
const (
	// DefaultHTTPTopic is the default template of an HTTP source.
	DefaultHTTPTopic = "{{ eventType }}"
	// DefaultBrokerTopic is the default template of a RabbitMQ, Kafka or NATS source, whose
	// message carries no event type of its own.
	DefaultBrokerTopic = "{{ source }}"
)

// TopicTemplate is a compiled sources.<name>.topic template. The zero value renders an empty
// topic. A TopicTemplate is immutable and safe for concurrent use.
type TopicTemplate struct {
	text  string
	parts []topicPart
}

type topicPart struct {
	field   topicField
	literal string
}

// CompileTopic compiles a topic template. {{ source }} and {{ eventType }}, with or without the
// inner spaces, are placeholders; every other character is literal text, so compiling never
// fails.
func CompileTopic(text string) TopicTemplate {
	t := TopicTemplate{text: text}
	lit := 0
	for i := 0; i < len(text); {
		field, n := placeholderAt(text, i)
		if n == 0 {
			i++
			continue
		}
		if lit < i {
			t.parts = append(t.parts, topicPart{literal: text[lit:i]})
		}
		t.parts = append(t.parts, topicPart{field: field})
		i += n
		lit = i
	}
	if lit < len(text) {
		t.parts = append(t.parts, topicPart{literal: text[lit:]})
	}
	return t
}

// placeholderAt returns the placeholder that starts at text[i] and its length, or 0.
func placeholderAt(text string, i int) (topicField, int) {
	if text[i] != '{' {
		return fieldLiteral, 0
	}
	for _, p := range topicPlaceholders {
		if strings.HasPrefix(text[i:], p.text) {
			return p.field, len(p.text)
		}
	}
	return fieldLiteral, 0
}

// String returns the template as written.
func (t TopicTemplate) String() string { return t.text }

// Render returns the topic for a message of source whose event type is eventType (empty when
// the row has none), with leading and trailing white space removed. The inserted values are
// never read as template text again.
func (t TopicTemplate) Render(source, eventType string) string {
	var b strings.Builder
	for _, p := range t.parts {
		switch p.field {
		case fieldSource:
			b.WriteString(source)
		case fieldEventType:
			b.WriteString(eventType)
		default:
			b.WriteString(p.literal)
		}
	}
	return strings.TrimSpace(b.String())
}

// DefaultTopic returns the default template of a source kind: {{ eventType }} for http and
// {{ source }} for every other kind, each a broker source of a connector. It reports false
// for an empty kind.
func DefaultTopic(k kind.Kind) (string, bool) {
	switch {
	case k == "":
		return "", false
	case k == kind.HTTP:
		return DefaultHTTPTopic, true
	}
	return DefaultBrokerTopic, true
}
