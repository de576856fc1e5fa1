package inbox

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/theory/jsonpath"
	"github.com/theory/jsonpath/spec"
)

// valuePath is a compiled definite JSONPath: it selects at most one value of a document.
type valuePath struct {
	raw   string // as configured, for the error texts
	steps []pathStep
}

// pathStep is one step of a definite JSONPath: a member name, or an array index (negative:
// from the end, -1 being the last element).
type pathStep struct {
	name    string
	index   int
	isIndex bool
}

// compilePath compiles a definite JSONPath as the configuration accepts it: $ followed by
// .name, ['name'], ["name"] and [index] steps. A .name step is rewritten to the bracket form
// before RFC 9535 parses the path, because the configuration (like the original Jayway-based
// implementation) also accepts names that the RFC shorthand refuses, such as $.x-id or $.1st.
// A path that can select more than one value is refused.
func compilePath(raw string) (valuePath, error) {
	p, err := parsePath(raw)
	if err != nil {
		return valuePath{}, err
	}
	segments := p.Query().Segments()
	steps := make([]pathStep, 0, len(segments))
	for _, seg := range segments {
		switch sel := seg.Selectors()[0].(type) {
		case spec.Name:
			steps = append(steps, pathStep{name: string(sel)})
		case spec.Index:
			steps = append(steps, pathStep{index: int(sel), isIndex: true})
		default: // a singular query has no other selector
			return valuePath{}, fmt.Errorf("compiling JSONPath %q: unexpected selector %v", raw, sel)
		}
	}
	return valuePath{raw: raw, steps: steps}, nil
}

// parsePath parses a definite JSONPath as compilePath describes it, with RFC 9535, and
// checks that it is singular.
func parsePath(raw string) (*jsonpath.Path, error) {
	bad := func(reason string) (*jsonpath.Path, error) {
		return nil, fmt.Errorf("compiling JSONPath %q: %s; a path must be definite: $ followed by .name, ['name'] or [index] steps", raw, reason)
	}
	if !strings.HasPrefix(raw, "$") {
		return bad("it must start with $")
	}
	var b strings.Builder
	b.WriteByte('$')
	for s := raw[1:]; s != ""; {
		switch s[0] {
		case '.':
			end := strings.IndexAny(s[1:], ".[")
			if end < 0 {
				end = len(s) - 1
			}
			name := s[1 : 1+end]
			if name == "" || strings.ContainsAny(name, "*?()@,:'\" \t") {
				return bad("a .name step must name one member")
			}
			b.WriteString("['")
			b.WriteString(escapeName(name))
			b.WriteString("']")
			s = s[1+end:]
		case '[':
			end := bracketEnd(s)
			if end < 0 {
				return bad("a [ step has no closing ]")
			}
			b.WriteString(s[:end+1])
			s = s[end+1:]
		default:
			return bad("expected . or [ at " + strconv.Quote(s))
		}
	}
	p, err := jsonpath.Parse(b.String())
	if err != nil {
		return bad(err.Error())
	}
	if p.Query().Singular() == nil {
		return bad("it can select more than one value")
	}
	return p, nil
}

// bracketEnd returns the index of the ] that closes the bracket step at the start of s,
// skipping quoted names, or -1.
func bracketEnd(s string) int {
	var quote byte
	for i := 1; i < len(s); i++ {
		c := s[i]
		switch {
		case quote != 0 && c == '\\':
			i++
		case quote != 0 && c == quote:
			quote = 0
		case quote != 0:
		case c == '\'' || c == '"':
			quote = c
		case c == ']':
			return i
		}
	}
	return -1
}

// escapeName writes a member name as the body of an RFC 9535 single-quoted string.
func escapeName(name string) string {
	var b strings.Builder
	for _, r := range name {
		switch {
		case r == '\\' || r == '\'':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x20:
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// compactJSON encodes a decoded value as compact JSON text without HTML escapes.
func compactJSON(v any) (string, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return "", fmt.Errorf("encoding JSON value: %w", err)
	}
	return strings.TrimSuffix(buf.String(), "\n"), nil
}

// KeyLength is how the idempotency key, the aggregate id and the event type are counted
// against MaxKeyLength: as the columns of the database count their characters.
type KeyLength uint8

const (
	// KeyLengthUTF16 counts UTF-16 code units: the characters of SQL Server's NVARCHAR(255)
	// and of the JVM original, where a character outside the Basic Multilingual Plane (an
	// emoji) counts twice. It is never less than the count of code points, so a value within
	// it fits both databases: the default.
	KeyLengthUTF16 KeyLength = iota
	// KeyLengthCodePoints counts Unicode code points: the characters of PostgreSQL's
	// VARCHAR(255).
	KeyLengthCodePoints
)

// count returns the length of s under the rule.
func (k KeyLength) count(s string) int {
	if k == KeyLengthCodePoints {
		return utf8.RuneCountInString(s)
	}
	n := 0
	for _, r := range s {
		if l := utf16.RuneLen(r); l > 0 {
			n += l
		} else {
			n++
		}
	}
	return n
}

// fits reports whether s is at most MaxKeyLength characters under the rule.
func (k KeyLength) fits(s string) bool { return k.count(s) <= MaxKeyLength }
