package config

import (
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/alternayte/queuebox/shared/kind"
	"github.com/alternayte/queuebox/shared/template"
)

// The patterns compile on first use, not when the package initializes: every process that
// links the package (each Lambda function's cold start) pays for the package initializers.
var (
	sqlIdentifierPattern = lazyRegexp(`^[A-Za-z_][A-Za-z0-9_]*$`)
	captureNamePattern   = lazyRegexp(`^[a-z][a-z0-9_]{0,62}$`)
	indexStep            = lazyRegexp(`^-?[0-9]+$`)
)

// lazyRegexp returns a function that compiles pattern on its first call and returns the
// same *regexp.Regexp on every call.
func lazyRegexp(pattern string) func() *regexp.Regexp {
	return sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(pattern) })
}

// checkDefiniteJSONPath checks that path is a definite JSONPath: $ followed by .name,
// ['name'], ["name"] and [number] steps. A deep scan ($..id), a wildcard ($.items[*]), a filter
// ([?(...)]), a slice or a union can match several values and is refused.
func checkDefiniteJSONPath(path string) error {
	bad := fmt.Errorf("must be a definite JSONPath: $ followed by .name, ['name'] or [index] steps, not %q", path)
	if !strings.HasPrefix(path, "$") {
		return bad
	}
	s := path[1:]
	for s != "" {
		switch s[0] {
		case '.':
			end := strings.IndexAny(s[1:], ".[")
			if end < 0 {
				end = len(s) - 1
			}
			name := s[1 : 1+end]
			if name == "" || strings.ContainsAny(name, "*?()@,:'\" \t") {
				return bad
			}
			s = s[1+end:]
		case '[':
			rest, ok := bracketStep(s)
			if !ok {
				return bad
			}
			s = rest
		default:
			return bad
		}
	}
	return nil
}

// bracketStep consumes one definite bracket step, ['name'], ["name"] or [number], and returns
// the rest of the path.
func bracketStep(s string) (string, bool) {
	if len(s) < 3 {
		return "", false
	}
	if q := s[1]; q == '\'' || q == '"' {
		for i := 2; i < len(s); i++ {
			switch s[i] {
			case '\\':
				i++
			case q:
				if i+1 < len(s) && s[i+1] == ']' {
					return s[i+2:], true
				}
				return "", false
			}
		}
		return "", false
	}
	end := strings.IndexByte(s, ']')
	if end < 0 || !indexStep().MatchString(strings.TrimSpace(s[1:end])) {
		return "", false
	}
	return s[end+1:], true
}

// unknownAddressPlaceholders returns the placeholders of an address template that are not
// {{ topic }}, {{ key }}, {{ aggregateType }}, {{ payload.<field> }} or {{ data.<field> }}.
func unknownAddressPlaceholders(tmpl string) []string {
	return template.UnknownAddressPlaceholders(tmpl)
}

// sourceTopicPlaceholders are the placeholders of a source topic template in the two spellings
// that the relay renders (spec/31, "Source topic template"), with the field each reads.
var sourceTopicPlaceholders = map[string]string{
	"{{ source }}": "source", "{{source}}": "source",
	"{{ eventType }}": "eventType", "{{eventType}}": "eventType",
}

// anyPlaceholder matches a {{ ... }} of a template, whatever it holds.
var anyPlaceholder = lazyRegexp(`\{\{.*?\}\}`)

// readsEventType reports whether a source topic template reads {{ eventType }}.
func readsEventType(tmpl string) bool {
	for _, m := range anyPlaceholder().FindAllString(tmpl, -1) {
		if sourceTopicPlaceholders[m] == "eventType" {
			return true
		}
	}
	return false
}

// unsupportedTopicPlaceholders returns the {{ ... }} of a source topic template that the relay
// does not render (any name but source and eventType, or another spacing than {{ name }} and
// {{name}}), in order and without repeats. The relay would keep such text in the topic as it
// is, so that no route matches the rows.
func unsupportedTopicPlaceholders(tmpl string) []string {
	var out []string
	for _, m := range anyPlaceholder().FindAllString(tmpl, -1) {
		if _, ok := sourceTopicPlaceholders[m]; !ok && !slices.Contains(out, m) {
			out = append(out, m)
		}
	}
	return out
}

// checkHTTPURL checks a destination baseUrl or an OAuth2 tokenUrl: an absolute http or https URL
// with a host, no user info and no . or .. path segment.
func checkHTTPURL(raw string) error {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil || !u.IsAbs() || u.Opaque != "" || u.Hostname() == "" ||
		(!strings.EqualFold(u.Scheme, "http") && !strings.EqualFold(u.Scheme, "https")) {
		return fmt.Errorf("must be an absolute http or https URL with a host, not %q", MaskURL(MaskQuery(raw)))
	}
	if u.User != nil {
		return errors.New("must not hold a user name or a password")
	}
	if hasDotSegment(u.EscapedPath()) {
		return fmt.Errorf("must not hold a . or a .. path segment, not %q", MaskURL(MaskQuery(raw)))
	}
	return nil
}

// hasDotSegment reports whether a URL path holds a . or .. segment, also percent-encoded.
func hasDotSegment(path string) bool {
	path, _, _ = strings.Cut(path, "?")
	path, _, _ = strings.Cut(path, "#")
	for _, seg := range strings.Split(path, "/") {
		if s, err := url.PathUnescape(seg); err == nil {
			seg = s
		}
		if seg == "." || seg == ".." {
			return true
		}
	}
	return false
}

// MaskQuery returns s, a URL or a path, with the value of every query parameter masked as ***
// and its name kept: /x?api_key=abc&v=2 becomes /x?api_key=***&v=***. A query value of a
// destination baseUrl, path or tokenUrl may be a credential, and `config check` and the error
// messages print these keys. The query runs from the first "?" to a "#"; a parameter without
// "=" and an empty value stay as they are.
func MaskQuery(s string) string {
	q := strings.IndexByte(s, '?')
	if q < 0 {
		return s
	}
	query, fragment := s[q+1:], ""
	if h := strings.IndexByte(query, '#'); h >= 0 {
		query, fragment = query[:h], query[h:]
	}
	params := strings.Split(query, "&")
	for i, p := range params {
		if name, value, ok := strings.Cut(p, "="); ok && value != "" {
			params[i] = name + "=***"
		}
	}
	return s[:q+1] + strings.Join(params, "&") + fragment
}

// sourceTopic checks the topic of a push source: not blank, and {{ eventType }} only with a
// source of the event type.
func (v *validator) sourceTopic(p keyPath, s *Source) {
	tp := p.child("topic")
	if strings.TrimSpace(s.Topic) == "" {
		v.add(tp, "must not be blank on a push source: the relay would mark every row dead")
		return
	}
	if bad := unsupportedTopicPlaceholders(s.Topic); len(bad) > 0 {
		v.add(tp, "is %q, which reads %s: a source topic reads only {{ source }} and {{ eventType }} (also written {{source}} and {{eventType}}); any other placeholder would stay as text in every topic, and no route would match the rows",
			s.Topic, strings.Join(bad, ", "))
	}
	if !readsEventType(s.Topic) || s.EventTypePath != "" {
		return
	}
	if s.Kind == kind.HTTP {
		v.add(tp, "reads {{ eventType }}, but %s is not set: an http push source needs it (the topic %q renders empty and the relay marks the row dead)", p.child("eventTypePath"), s.Topic)
		return
	}
	if b := s.Broker(); b != nil && !b.EventTypeFromHeader {
		v.add(tp, "reads {{ eventType }}, but neither %s nor %s: true is set (the topic %q renders empty and the relay marks the row dead)",
			p.child("eventTypePath"), p.child("eventTypeFromHeader"), s.Topic)
	}
}
