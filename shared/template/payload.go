package template

import (
	"encoding/json"
	"unicode/utf8"
)

// payload is the payload of one row while a template renders it. It checks the JSON once, on
// the first field that a template reads, and every lookup after that walks the valid bytes.
type payload struct {
	raw     []byte
	checked bool
	valid   bool
}

// field returns the raw JSON value at path, or false when the payload does not hold it: the
// payload is not valid JSON, or a step of the path meets no object or no member of that name.
// When an object repeats a name, the last member wins.
func (p *payload) field(path []string) ([]byte, bool) {
	if !p.checked {
		p.checked = true
		p.valid = len(p.raw) > 0 && json.Valid(p.raw)
	}
	if !p.valid {
		return nil, false
	}
	v := p.raw
	for _, name := range path {
		var ok bool
		if v, ok = member(v, name); !ok {
			return nil, false
		}
	}
	return v, true
}

// appendValue appends the text of the valid JSON value v: a string as its decoded text, an
// object or an array as compact JSON, and a number, true, false or null as written.
func appendValue(dst []byte, v []byte) []byte {
	switch v[0] {
	case '"':
		return append(dst, decodeString(v)...)
	case '{', '[':
		return appendCompact(dst, v)
	}
	return append(dst, v...)
}

// member returns the value of the last member called name of the object v, or false when v is
// not an object or has no such member. v must be valid JSON.
func member(v []byte, name string) ([]byte, bool) {
	i := skipSpace(v, 0)
	if v[i] != '{' {
		return nil, false
	}
	var found []byte
	ok := false
	for i = skipSpace(v, i+1); v[i] != '}'; {
		keyEnd := stringEnd(v, i)
		key := v[i:keyEnd]
		start := skipSpace(v, skipSpace(v, keyEnd)+1) // past the colon
		end := valueEnd(v, start)
		if stringEquals(key, name) {
			found, ok = v[start:end], true
		}
		i = skipSpace(v, end)
		if v[i] == ',' {
			i = skipSpace(v, i+1)
		}
	}
	return found, ok
}

// skipSpace returns the index of the first byte at or after i that is not JSON white space.
func skipSpace(v []byte, i int) int {
	for i < len(v) {
		switch v[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// stringEnd returns the index just past the string that starts with the quote at v[i].
func stringEnd(v []byte, i int) int {
	for i++; i < len(v); i++ {
		switch v[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return len(v)
}

// valueEnd returns the index just past the valid JSON value that starts at v[i].
func valueEnd(v []byte, i int) int {
	switch v[i] {
	case '"':
		return stringEnd(v, i)
	case '{', '[':
		depth := 0
		for ; i < len(v); i++ {
			switch v[i] {
			case '"':
				i = stringEnd(v, i) - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1
				}
			}
		}
		return len(v)
	}
	for ; i < len(v); i++ {
		switch v[i] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			return i
		}
	}
	return i
}

// plainString reports whether the quoted JSON string q holds neither an escape nor a byte that
// is not UTF-8, so that its text is the bytes between the quotes.
func plainString(q []byte) bool {
	inner := q[1 : len(q)-1]
	for _, c := range inner {
		if c == '\\' {
			return false
		}
	}
	return utf8.Valid(inner)
}

// decodeString returns the text of the valid quoted JSON string q. A byte that is not UTF-8
// becomes U+FFFD, as encoding/json decodes it.
func decodeString(q []byte) string {
	if plainString(q) {
		return string(q[1 : len(q)-1])
	}
	var s string
	_ = json.Unmarshal(q, &s) // q is valid JSON, so this cannot fail
	return s
}

// stringEquals reports whether the quoted JSON string q decodes to s.
func stringEquals(q []byte, s string) bool {
	if plainString(q) {
		return string(q[1:len(q)-1]) == s
	}
	return decodeString(q) == s
}

// appendCompact appends the valid JSON object or array v as compact JSON text, the form the
// original implementation printed: no white space, members in their order, each string escaped
// only where JSON needs it (quote, backslash, control characters), numbers as written. An
// object that repeats a name keeps the member at its first place with the last value.
func appendCompact(dst []byte, v []byte) []byte {
	i := skipSpace(v, 0)
	switch v[i] {
	case '"':
		return appendQuoted(dst, decodeString(v[i:stringEnd(v, i)]))
	case '[':
		dst = append(dst, '[')
		first := true
		for i = skipSpace(v, i+1); v[i] != ']'; {
			end := valueEnd(v, i)
			if !first {
				dst = append(dst, ',')
			}
			first = false
			dst = appendCompact(dst, v[i:end])
			if i = skipSpace(v, end); v[i] == ',' {
				i = skipSpace(v, i+1)
			}
		}
		return append(dst, ']')
	case '{':
		type entry struct {
			name  string
			value []byte
		}
		var entries []entry
	members:
		for i = skipSpace(v, i+1); v[i] != '}'; {
			keyEnd := stringEnd(v, i)
			name := decodeString(v[i:keyEnd])
			start := skipSpace(v, skipSpace(v, keyEnd)+1)
			end := valueEnd(v, start)
			if i = skipSpace(v, end); v[i] == ',' {
				i = skipSpace(v, i+1)
			}
			for k := range entries {
				if entries[k].name == name {
					entries[k].value = v[start:end]
					continue members
				}
			}
			entries = append(entries, entry{name: name, value: v[start:end]})
		}
		dst = append(dst, '{')
		for k, e := range entries {
			if k > 0 {
				dst = append(dst, ',')
			}
			dst = appendQuoted(dst, e.name)
			dst = append(dst, ':')
			dst = appendCompact(dst, e.value)
		}
		return append(dst, '}')
	}
	end := valueEnd(v, i)
	return append(dst, v[i:end]...)
}

// appendQuoted appends s as a JSON string. It escapes the quote, the backslash and the control
// characters below U+0020 (\b, \t, \n, \f and \r by their short forms) and nothing else.
func appendQuoted(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"':
			dst = append(dst, '\\', '"')
		case c == '\\':
			dst = append(dst, '\\', '\\')
		case c == '\b':
			dst = append(dst, '\\', 'b')
		case c == '\t':
			dst = append(dst, '\\', 't')
		case c == '\n':
			dst = append(dst, '\\', 'n')
		case c == '\f':
			dst = append(dst, '\\', 'f')
		case c == '\r':
			dst = append(dst, '\\', 'r')
		case c < 0x20:
			dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		default:
			dst = append(dst, c)
		}
	}
	return append(dst, '"')
}
