package config

import (
	"fmt"
	"strings"
)

// maxPlaceholderDepth bounds the nesting of placeholders in fallbacks.
const maxPlaceholderDepth = 8

// expandPlaceholders replaces every ${NAME} and ${NAME:-fallback} in s with the value of the
// variable NAME from lookup. ${NAME:-fallback} gives the fallback, itself expanded, when NAME is
// unset or empty. ${NAME} with NAME unset is an error that names the variable. Text that is not
// a well-formed placeholder (no closing brace, or a name that is not a variable name) stays as
// it is.
func expandPlaceholders(s string, lookup func(string) (string, bool)) (string, error) {
	return expandDepth(s, lookup, 0)
}

func expandDepth(s string, lookup func(string) (string, bool), depth int) (string, error) {
	if depth > maxPlaceholderDepth {
		return "", fmt.Errorf("placeholders nest deeper than %d levels", maxPlaceholderDepth)
	}
	if !strings.Contains(s, "${") {
		return s, nil
	}
	var b strings.Builder
	for {
		start := strings.Index(s, "${")
		if start < 0 {
			b.WriteString(s)
			return b.String(), nil
		}
		end := closingBrace(s, start+2)
		if end < 0 {
			b.WriteString(s)
			return b.String(), nil
		}
		body := s[start+2 : end]
		name, fallback, hasFallback := strings.Cut(body, ":-")
		if !isVariableName(name) {
			b.WriteString(s[:start+2])
			s = s[start+2:]
			continue
		}
		b.WriteString(s[:start])
		value, set := lookup(name)
		switch {
		case hasFallback && value == "":
			v, err := expandDepth(fallback, lookup, depth+1)
			if err != nil {
				return "", err
			}
			b.WriteString(v)
		case !set:
			return "", fmt.Errorf("reads the placeholder ${%s}, but the environment variable %s is not set (write ${%s:-fallback} for a default)", name, name, name)
		default:
			b.WriteString(value)
		}
		s = s[end+1:]
	}
}

// closingBrace returns the index of the } that closes a placeholder whose body starts at from,
// counting nested placeholders, or -1.
func closingBrace(s string, from int) int {
	depth := 0
	for i := from; i < len(s); i++ {
		switch {
		case strings.HasPrefix(s[i:], "${"):
			depth++
			i++
		case s[i] == '}':
			if depth == 0 {
				return i
			}
			depth--
		}
	}
	return -1
}

// isVariableName reports whether s is a name that a placeholder can read: a letter or _ first,
// then letters, digits, _, . and -.
func isVariableName(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		switch {
		case r == '_', r >= 'A' && r <= 'Z', r >= 'a' && r <= 'z':
		case i > 0 && (r >= '0' && r <= '9' || r == '.' || r == '-'):
		default:
			return false
		}
	}
	return true
}
