// Package filter is the header filter of an inbox source (sources.<name>.filter,
// spec/23-configuration.md): a message passes when it matches every require rule and no
// exclude rule. A rule names a header, in any letter case, and sets exactly one of equals, in,
// matches (a topic glob, as in routes) and exists: true. Values compare in the same letter
// case only, and a rule with equals, in or matches does not match a message without the
// header. The same filter serves the HTTP and the broker sources.
package filter

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/alternayte/queuebox/shared/route"
)

// Lookup returns the value of a header and whether the message carries it. The filter passes
// the header name in lower case; a Lookup must find the header in any letter case. A Lookup
// must be safe for the duration of one Pass call only.
type Lookup func(lowerName string) (string, bool)

// FoldLookup returns a Lookup over a map whose keys may be in any letter case. A key that is
// already in lower case is found without a scan; otherwise the first key that equals the name
// in any letter case wins.
func FoldLookup(m map[string]string) Lookup {
	return func(lowerName string) (string, bool) {
		if v, ok := m[lowerName]; ok {
			return v, true
		}
		for k, v := range m {
			if strings.EqualFold(k, lowerName) {
				return v, true
			}
		}
		return "", false
	}
}

type ruleKind int

const (
	kindEquals ruleKind = iota
	kindIn
	kindMatches
	kindExists
)

type rule struct {
	header  string // lower case
	kind    ruleKind
	equals  string
	in      []string
	matches route.Pattern
}

func (r rule) match(lookup Lookup) bool {
	v, ok := lookup(r.header)
	if !ok {
		return false
	}
	switch r.kind {
	case kindEquals:
		return v == r.equals
	case kindIn:
		return slices.Contains(r.in, v)
	case kindMatches:
		return r.matches.Match(v)
	default: // kindExists
		return true
	}
}

// Filter is a compiled header filter. The zero value and a nil *Filter pass every message.
// A Filter is immutable and safe for concurrent use.
type Filter struct {
	require []rule
	exclude []rule
}

// Config is a filter block (sources.<name>.filter): a message must match every Require rule and
// no Exclude rule. The zero Config passes every message.
type Config struct {
	// Require lists the rules that a message must all match. Default: empty.
	Require []Rule
	// Exclude lists the rules that a message must not match. Default: empty.
	Exclude []Rule
}

// IsZero reports whether the filter has no rule.
func (c Config) IsZero() bool { return len(c.Require) == 0 && len(c.Exclude) == 0 }

// Rule is one rule of a filter. It sets exactly one of Equals, In, Matches and Exists (and
// Exists only as true).
type Rule struct {
	// Header is the header name; it matches in any letter case. Required.
	Header string
	// Equals: the value must equal this string. Nil when not set.
	Equals *string
	// In: the value must equal one entry; the list must not be empty. Nil when not set.
	In []string
	// Matches: the value must match this topic glob. Nil when not set.
	Matches *string
	// Exists: true means the header must be present; false is refused. Nil when not set.
	Exists *bool
}

// New compiles a filter block. It refuses a rule without a header, a rule that sets not
// exactly one of equals, in, matches and exists, an empty in list, exists: false, and a
// matches glob that the routes refuse (***). The configuration loader already checks these;
// New checks them again for a filter built in code.
func New(f Config) (*Filter, error) {
	out := &Filter{}
	for i, r := range f.Require {
		c, err := compile(r)
		if err != nil {
			return nil, fmt.Errorf("compiling filter.require[%d]: %w", i, err)
		}
		out.require = append(out.require, c)
	}
	for i, r := range f.Exclude {
		c, err := compile(r)
		if err != nil {
			return nil, fmt.Errorf("compiling filter.exclude[%d]: %w", i, err)
		}
		out.exclude = append(out.exclude, c)
	}
	return out, nil
}

func compile(r Rule) (rule, error) {
	if strings.TrimSpace(r.Header) == "" {
		return rule{}, errors.New("a rule needs a header")
	}
	out := rule{header: strings.ToLower(r.Header)}
	set := 0
	if r.Equals != nil {
		set++
		out.kind, out.equals = kindEquals, *r.Equals
	}
	if r.In != nil {
		set++
		if len(r.In) == 0 {
			return rule{}, errors.New("in must not be empty")
		}
		out.kind, out.in = kindIn, slices.Clone(r.In)
	}
	if r.Matches != nil {
		set++
		p, err := route.Compile(*r.Matches)
		if err != nil {
			return rule{}, fmt.Errorf("compiling matches: %w", err)
		}
		out.kind, out.matches = kindMatches, p
	}
	if r.Exists != nil {
		set++
		if !*r.Exists {
			return rule{}, errors.New("exists must be true")
		}
		out.kind = kindExists
	}
	if set != 1 {
		return rule{}, fmt.Errorf("a rule sets exactly one of equals, in, matches and exists, not %d", set)
	}
	return out, nil
}

// Empty reports whether the filter has no rule, so that every message passes.
func (f *Filter) Empty() bool { return f == nil || len(f.require) == 0 && len(f.exclude) == 0 }

// Pass reports whether a message with these headers passes: it matches every require rule and
// no exclude rule.
func (f *Filter) Pass(lookup Lookup) bool {
	if f.Empty() {
		return true
	}
	for _, r := range f.require {
		if !r.match(lookup) {
			return false
		}
	}
	for _, r := range f.exclude {
		if r.match(lookup) {
			return false
		}
	}
	return true
}
