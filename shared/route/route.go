// Package route matches outbox topics against the configured routes: a topicPattern glob on
// the whole topic, where `*` matches one segment without a dot, `**` matches any text and
// every other character is a literal. Routes are tried in list order and the first match wins.
package route

import (
	"errors"
	"strings"
)

// ErrTripleStar is returned for a pattern that holds `***`, which the configuration refuses.
var ErrTripleStar = errors.New("route: a topic pattern must not contain ***")

// Pattern is a compiled topic glob.
type Pattern struct {
	raw   string
	parts []part
}

type partKind int

const (
	literal partKind = iota
	oneSegment
	anyText
)

type part struct {
	kind partKind
	text string
}

// Compile parses a topic glob.
func Compile(pattern string) (Pattern, error) {
	if strings.Contains(pattern, "***") {
		return Pattern{}, ErrTripleStar
	}
	p := Pattern{raw: pattern}
	for i := 0; i < len(pattern); {
		switch {
		case strings.HasPrefix(pattern[i:], "**"):
			p.parts = append(p.parts, part{kind: anyText})
			i += 2
		case pattern[i] == '*':
			p.parts = append(p.parts, part{kind: oneSegment})
			i++
		default:
			j := strings.IndexByte(pattern[i:], '*')
			if j < 0 {
				j = len(pattern) - i
			}
			p.parts = append(p.parts, part{kind: literal, text: pattern[i : i+j]})
			i += j
		}
	}
	return p, nil
}

// MustCompile is Compile for patterns known to be valid; it panics on an error.
func MustCompile(pattern string) Pattern {
	p, err := Compile(pattern)
	if err != nil {
		panic(err)
	}
	return p
}

// String returns the pattern as written.
func (p Pattern) String() string { return p.raw }

// Match reports whether the whole topic matches the pattern.
func (p Pattern) Match(topic string) bool { return match(p.parts, topic) }

func match(parts []part, s string) bool {
	if len(parts) == 0 {
		return s == ""
	}
	switch head := parts[0]; head.kind {
	case literal:
		return strings.HasPrefix(s, head.text) && match(parts[1:], s[len(head.text):])
	case oneSegment:
		// Any run of characters without a dot, possibly empty.
		for i := 0; i <= len(s); i++ {
			if match(parts[1:], s[i:]) {
				return true
			}
			if i < len(s) && s[i] == '.' {
				return false
			}
		}
		return false
	default: // anyText
		for i := 0; i <= len(s); i++ {
			if match(parts[1:], s[i:]) {
				return true
			}
		}
		return false
	}
}

// Route pairs a pattern with the name of a destination and route-level settings.
type Route struct {
	Pattern     Pattern
	Destination string
	// RoutingKeyTemplate is the route's routing key template, or empty.
	RoutingKeyTemplate string
	// RoutingKeyMissingFieldDefault is the value of a placeholder that finds no value.
	RoutingKeyMissingFieldDefault string
	// Index is the position of the route in the configuration list.
	Index int
}

// Table is an ordered list of routes. It is safe for concurrent use.
type Table struct {
	routes []Route
}

// NewTable returns a table that tries the routes in the given order.
func NewTable(routes []Route) *Table {
	return &Table{routes: append([]Route(nil), routes...)}
}

// Match returns the first route whose pattern matches the topic.
func (t *Table) Match(topic string) (Route, bool) {
	for _, r := range t.routes {
		if r.Pattern.Match(topic) {
			return r, true
		}
	}
	return Route{}, false
}

// Routes returns the routes in order.
func (t *Table) Routes() []Route { return append([]Route(nil), t.routes...) }

// TopicsOf returns, from the given topics, those whose first matching route names the
// destination. The admin replay and the per-destination gauges use it.
func (t *Table) TopicsOf(destination string, topics []string) []string {
	var out []string
	for _, topic := range topics {
		if r, ok := t.Match(topic); ok && r.Destination == destination {
			out = append(out, topic)
		}
	}
	return out
}
