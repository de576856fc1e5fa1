package inbox

import (
	"bytes"
	"encoding/json"
	"unicode/utf16"
	"unicode/utf8"
)

// This file finds the values that the attributes' definite JSONPaths select in a body, in one
// pass over the body's text and without decoding it: the values off the paths are skipped,
// and only a selected value is turned into text. The body must be one valid JSON document
// (parseJSON); the scanner does not check the syntax again. What it selects is what
// encoding/json's decoding followed by an RFC 9535 query selects: of duplicate member names
// the last one counts (with its whole value), member names are compared after unescaping,
// and a negative index counts from the end of its array.

// maxScanPaths is the most paths that one scan follows (a bit each in a uint8 mask).
const maxScanPaths = 8

// span is where a selected value lies in the body: body[start:end]. start < 0: none.
type span struct{ start, end int }

// pathScan is one scan of a body for up to maxScanPaths paths.
type pathScan struct {
	body  []byte
	paths []*valuePath // nil entries are skipped
	spans [maxScanPaths]span
}

// selectValues finds, in one pass over body (one valid JSON document: parseJSON reported
// true), the value that each path selects, and stores its text and whether there is one in
// texts and found, by the index of the path. A string is its text, unescaped; a number is its
// JSON text, digit for digit as received; true and false are their JSON text; an object or
// an array is its compact JSON text with the members sorted by name (and without HTML
// escapes). null counts as no value, and a nil path finds nothing. paths has at most
// maxScanPaths entries, and texts and found are at least as long. Only the selected values
// are turned into text: the rest of the body is skipped without allocating. A negative index
// makes its array be scanned twice (once to count the elements).
func selectValues(body []byte, paths []*valuePath, texts []string, found []bool) {
	s := pathScan{body: body, paths: paths}
	var mask uint8
	for k, p := range paths {
		s.spans[k] = span{-1, -1}
		if p != nil {
			mask |= 1 << k
		}
	}
	if mask != 0 {
		s.value(skipSpace(body, 0), 0, mask)
	}
	for k, p := range paths {
		texts[k], found[k] = "", false
		if p != nil {
			texts[k], found[k] = s.text(s.spans[k])
		}
	}
}

// value scans the value that starts at body[i] and returns the index after it. mask holds the
// paths whose first depth steps lead to this value: a path without more steps selects it, the
// others look below it. Every path of mask has its span set (a later duplicate member
// replaces what an earlier one selected).
func (s *pathScan) value(i, depth int, mask uint8) int {
	if mask == 0 {
		return skipValue(s.body, i)
	}
	var here, below uint8
	for k := range len(s.paths) {
		bit := uint8(1) << k
		if mask&bit == 0 {
			continue
		}
		s.spans[k] = span{-1, -1}
		if len(s.paths[k].steps) == depth {
			here |= bit
		} else {
			below |= bit
		}
	}
	var end int
	switch s.body[i] {
	case '{':
		end = s.object(i, depth, below)
	case '[':
		end = s.array(i, depth, below)
	default:
		end = skipValue(s.body, i)
	}
	for k := range len(s.paths) {
		if here&(1<<k) != 0 {
			s.spans[k] = span{i, end}
		}
	}
	return end
}

// object scans the object that starts at body[i] and returns the index after it. Each
// member whose name is the next step of a path of mask is scanned for that path.
func (s *pathScan) object(i, depth int, mask uint8) int {
	for k := range len(s.paths) {
		if bit := uint8(1) << k; mask&bit != 0 && s.paths[k].steps[depth].isIndex {
			mask &^= bit
		}
	}
	if mask == 0 {
		return skipValue(s.body, i)
	}
	b := s.body
	i = skipSpace(b, i+1)
	if b[i] == '}' {
		return i + 1
	}
	for {
		keyEnd := stringEnd(b, i)
		key := b[i+1 : keyEnd-1]
		var sub uint8
		for k := range len(s.paths) {
			if bit := uint8(1) << k; mask&bit != 0 && nameIs(key, s.paths[k].steps[depth].name) {
				sub |= bit
			}
		}
		i = skipSpace(b, skipSpace(b, keyEnd)+1) // after the colon
		i = skipSpace(b, s.value(i, depth+1, sub))
		if b[i] == '}' {
			return i + 1
		}
		i = skipSpace(b, i+1) // after the comma
	}
}

// array scans the array that starts at body[i] and returns the index after it. The element
// whose index is the next step of a path of mask is scanned for that path; a negative index
// counts from the end, so the elements are counted first.
func (s *pathScan) array(i, depth int, mask uint8) int {
	var want [maxScanPaths]int
	count := -1
	for k := range len(s.paths) {
		bit := uint8(1) << k
		if mask&bit == 0 {
			continue
		}
		st := s.paths[k].steps[depth]
		if !st.isIndex {
			mask &^= bit
			continue
		}
		n := st.index
		if n < 0 {
			if count < 0 {
				count = countElements(s.body, i)
			}
			if n += count; n < 0 {
				mask &^= bit
				continue
			}
		}
		want[k] = n
	}
	if mask == 0 {
		return skipValue(s.body, i)
	}
	b := s.body
	i = skipSpace(b, i+1)
	if b[i] == ']' {
		return i + 1
	}
	for n := 0; ; n++ {
		var sub uint8
		for k := range len(s.paths) {
			if bit := uint8(1) << k; mask&bit != 0 && want[k] == n {
				sub |= bit
			}
		}
		i = skipSpace(b, s.value(i, depth+1, sub))
		if b[i] == ']' {
			return i + 1
		}
		i = skipSpace(b, i+1) // after the comma
	}
}

// countElements returns the number of elements of the array that starts at body[i].
func countElements(body []byte, i int) int {
	i = skipSpace(body, i+1)
	if body[i] == ']' {
		return 0
	}
	for n := 1; ; n++ {
		i = skipSpace(body, skipValue(body, i))
		if body[i] == ']' {
			return n
		}
		i = skipSpace(body, i+1)
	}
}

// text returns the text of a selected value as selectValues describes it, and whether there
// is one: none for no span and for null.
func (s *pathScan) text(sp span) (string, bool) {
	if sp.start < 0 {
		return "", false
	}
	v := s.body[sp.start:sp.end]
	switch v[0] {
	case 'n':
		return "", false
	case '"':
		return unquote(v[1 : len(v)-1]), true
	case '{', '[':
		// Rare: decode just this value, so that its text is what the encoder writes of
		// what encoding/json decodes (the last of duplicate names, the members sorted).
		d := json.NewDecoder(bytes.NewReader(v))
		d.UseNumber()
		var doc any
		if err := d.Decode(&doc); err != nil {
			return "", false
		}
		text, err := compactJSON(doc)
		if err != nil {
			return "", false
		}
		return text, true
	}
	return string(v), true // a number as written, true or false
}

// skipSpace returns the index of the first byte at or after i that is not JSON whitespace.
func skipSpace(body []byte, i int) int {
	for i < len(body) {
		switch body[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// skipValue returns the index after the valid JSON value that starts at body[i].
func skipValue(body []byte, i int) int {
	switch body[i] {
	case '"':
		return stringEnd(body, i)
	case '{', '[':
		depth := 0
		for ; ; i++ {
			switch body[i] {
			case '"':
				i = stringEnd(body, i) - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1
				}
			}
		}
	}
	for i < len(body) {
		switch body[i] {
		case ',', ']', '}', ' ', '\t', '\n', '\r':
			return i
		}
		i++
	}
	return i
}

// stringEnd returns the index after the closing quote of the valid JSON string that starts
// at body[i].
func stringEnd(body []byte, i int) int {
	j := i + 1
	for {
		j += bytes.IndexByte(body[j:], '"')
		escapes := 0
		for p := j - 1; body[p] == '\\'; p-- {
			escapes++
		}
		if escapes%2 == 0 {
			return j + 1
		}
		j++
	}
}

// nameIs reports whether the member name key (the text between the quotes, as received)
// unescapes to name.
func nameIs(key []byte, name string) bool {
	if bytes.IndexByte(key, '\\') < 0 {
		return string(key) == name
	}
	if len(name) > len(key) { // unescaping never makes a name longer
		return false
	}
	var buf [128]byte
	return string(appendUnquoted(buf[:0], key)) == name
}

// unquote returns the text of a valid JSON string s (without its quotes), unescaped as
// encoding/json unescapes it.
func unquote(s []byte) string {
	if bytes.IndexByte(s, '\\') < 0 {
		return string(s)
	}
	return string(appendUnquoted(make([]byte, 0, len(s)), s))
}

// appendUnquoted appends the unescaped text of a valid JSON string s of UTF-8 text (without
// its quotes) to dst, as encoding/json unescapes it: a \u escape of a surrogate half that is
// not the first of a valid pair is U+FFFD, and the escape after it is read on its own.
func appendUnquoted(dst, s []byte) []byte {
	for i := 0; i < len(s); {
		if s[i] != '\\' {
			j := bytes.IndexByte(s[i:], '\\')
			if j < 0 {
				return append(dst, s[i:]...)
			}
			dst = append(dst, s[i:i+j]...)
			i += j
			continue
		}
		c := s[i+1]
		i += 2
		switch c {
		case 'b':
			dst = append(dst, '\b')
		case 'f':
			dst = append(dst, '\f')
		case 'n':
			dst = append(dst, '\n')
		case 'r':
			dst = append(dst, '\r')
		case 't':
			dst = append(dst, '\t')
		case 'u':
			r := hex4(s[i : i+4])
			i += 4
			if utf16.IsSurrogate(r) {
				if i+6 <= len(s) && s[i] == '\\' && s[i+1] == 'u' {
					if d := utf16.DecodeRune(r, hex4(s[i+2:i+6])); d != utf8.RuneError {
						dst = utf8.AppendRune(dst, d)
						i += 6
						continue
					}
				}
				r = utf8.RuneError
			}
			dst = utf8.AppendRune(dst, r)
		default: // " \ /
			dst = append(dst, c)
		}
	}
	return dst
}

// hex4 returns the value of four hexadecimal digits.
func hex4(h []byte) rune {
	var r rune
	for _, c := range h {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		default:
			c -= 'A' - 10
		}
		r = r<<4 | rune(c)
	}
	return r
}
