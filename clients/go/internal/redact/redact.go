// Package redact removes secrets from text before it reaches a log line or the last_error
// column. It is the one rule set that the server and every pull-client library apply (COMPAT,
// "Redaction"); the cases in testdata/redaction/corpus.json pin it for every language.
//
// String applies the rules in this order, which is the numbered order of COMPAT:
//
//  1. Only the first MaxInput characters of the input are examined; the rest is dropped.
//  2. The value of a secret-bearing key is replaced by [REDACTED]. The keys are authorization,
//     proxy-authorization, x-api-key, api-key, apikey, cookie, set-cookie, x-auth-token, token,
//     access_token, refresh_token, client_secret, secret, password, pwd, passwd, credential,
//     credentials, passphrase and private_key, in any letter case, with "-", "_", "." or nothing
//     between their words (client.secret, clientsecret, ApiKey), after an optional prefix of word
//     characters (db_password, STRIPE_SECRET, myToken) and ending on a word boundary
//     (passwordless and tokenizer are not keys). The key may be quoted ("password", 'token'); the
//     separator is "=" or ":", with optional blanks around it. The key, its quotes and the
//     separator stay as written; only the value changes. A value that opens with a quote runs
//     to the matching closing quote (a backslash escapes the next character) or to the end of
//     the line, and keeps its quotes: "password":"[REDACTED]". After "=" an unquoted value ends
//     at whitespace, and it may start with an authentication scheme name and blanks, so
//     Authorization=Bearer abc123 loses the token as well. After ":" an unquoted value runs to
//     one of , ; } ] & " or to the end of the line, without trailing blanks. An empty value
//     stays empty, and a value that already reads [REDACTED] stays as it is.
//  3. The user information of a URL becomes ***: scheme://***@host. The last "@" of the
//     authority wins (postgres://u:p@ss@host). The authority ends at whitespace, "/", "?", "#"
//     or a double quote (a URL inside a JSON string). A password that holds an unencoded "/",
//     "?" or "#" is also caught when the text between ":" and it is not a port number.
//  4. Basic, Bearer, Digest, Negotiate or Token, in any letter case, on a word boundary,
//     followed by blanks and a credential-like token (a run of token68 characters that does
//     not start with "=" and is 16 or more characters long or holds a digit or "=") becomes
//     "Scheme [REDACTED]" (the scheme as written, one space); "Bearer token missing" keeps its
//     words.
//  5. The value of the query parameters password, pwd, secret and token becomes ***. This rule
//     runs after rule 2, which has already replaced such a value, up to the next whitespace,
//     with [REDACTED]; rule 5 turns that into ***, so a secret query parameter always reads
//     name=***, and the parameters after it in the same run of text are gone:
//     "?token=abc&x=1 failed" becomes "?token=*** failed".
//  6. A result longer than MaxLength characters is cut to exactly MaxLength characters, the
//     last of which are "...[truncated]".
//
// Three definitions make every language agree on every input:
//   - a character is a Unicode code point (a rune), so a TypeScript port counts code points,
//     not UTF-16 code units;
//   - whitespace is the six ASCII characters space, \t, \n, \v, \f and \r (not U+00A0);
//   - word characters are ASCII ([0-9A-Za-z_]), and "any letter case" folds ASCII letters only
//     (a long s, U+017F, is not an s).
//
// testdata/redaction/README.md also gives each rule as a regular expression (RE2 syntax,
// which JavaScript also accepts), run over the whole text from left to right, leftmost match
// first. String implements the rules as scanners, which run in time linear in the input in
// practice and allocate nothing for text without secrets; the tests check them against those
// expressions on the corpus, on random text and under the fuzzer.
package redact

import (
	"strings"
	"unicode/utf8"
)

const (
	// MaxInput is the number of characters (code points) of input that String examines. The
	// characters after it are dropped before any rule runs.
	MaxInput = 2512

	// MaxLength is the largest number of characters (code points) that String and Error return.
	// A longer result is cut and ends in "...[truncated]".
	MaxLength = 2000
)

const (
	// redacted replaces the value of a secret-bearing key and an authentication credential.
	redacted = "[REDACTED]"
	// mask replaces URL user information and a secret query parameter value.
	mask = "***"
	// truncationMarker ends a result that was cut to MaxLength characters.
	truncationMarker = "...[truncated]"
)

// secretKeys are the secret-bearing keys of rule 2, in the spelling of COMPAT. Each "-", "_" or
// "." between two words stands for any of those separators or none.
var secretKeys = []string{
	"authorization", "proxy-authorization", "x-api-key", "api-key", "apikey", "cookie",
	"set-cookie", "x-auth-token", "token", "access_token", "refresh_token", "client_secret",
	"secret", "password", "pwd", "passwd", "credential", "credentials", "passphrase",
	"private_key",
}

// keyEndings are the last words of secretKeys. A key ends with one of them, which lets rule 2
// skip a separator cheaply.
var keyEndings = []string{
	"authorization", "key", "cookie", "token", "secret", "password", "pwd", "passwd",
	"credential", "credentials", "passphrase",
}

// authSchemes are the authentication scheme names of rule 4.
var authSchemes = []string{"basic", "bearer", "digest", "negotiate", "token"}

// queryNames are the query parameter names of rule 5.
var queryNames = []string{"password", "pwd", "secret", "token"}

// keyWords holds the words of each of secretKeys, in lower case.
var keyWords = func() [][]string {
	out := make([][]string, len(secretKeys))
	for i, key := range secretKeys {
		out[i] = strings.FieldsFunc(key, isKeySeparator)
	}
	return out
}()

// String returns s with every secret that the rules recognise replaced, cut to at most
// MaxLength characters. It is safe for concurrent use.
func String(s string) string {
	s = limitInput(s)
	s = rewrite(s, nextPair, func(b *strings.Builder, s string, m []int) {
		b.WriteString(s[m[0]:m[2]])
		b.WriteString(redactValue(s[m[2]:m[3]]))
	})
	s = rewrite(s, nextUserInfo, func(b *strings.Builder, s string, m []int) {
		b.WriteString(s[m[2]:m[3]])
		b.WriteString(mask)
		b.WriteByte('@')
	})
	s = rewrite(s, nextScheme, func(b *strings.Builder, s string, m []int) {
		b.WriteString(s[m[2]:m[3]])
		b.WriteByte(' ')
		b.WriteString(redacted)
	})
	s = rewrite(s, nextQuery, func(b *strings.Builder, s string, m []int) {
		b.WriteString(s[m[2]:m[3]])
		b.WriteString(mask)
	})
	return truncate(s)
}

// A finder returns the first match of a rule that starts at or after from, or nil. m[0] and
// m[1] are the start and end of the match in s; m[2] and m[3] mark the part that the
// replacement needs.
type finder func(s string, from int) []int

// rewrite replaces every match that next finds with what repl writes for it. It returns s
// itself, without allocating, when nothing matches.
func rewrite(s string, next finder, repl func(b *strings.Builder, s string, m []int)) string {
	var b *strings.Builder
	written := 0
	for from := 0; from < len(s); {
		m := next(s, from)
		if m == nil {
			break
		}
		if b == nil {
			b = new(strings.Builder)
			b.Grow(len(s) + 32)
		}
		b.WriteString(s[written:m[0]])
		repl(b, s, m)
		written = m[1]
		from = max(m[1], m[0]+1)
	}
	if b == nil {
		return s
	}
	b.WriteString(s[written:])
	return b.String()
}

// nextPair finds rule 2 and returns [key start, value end, value start, value end].
//
// A key ends just before an optional quote, blanks and a separator ("=" or ":"); it consists
// of key characters ([0-9A-Za-z_.-]), which never include a separator. So the leftmost match
// is found separator by separator, trying the word starts of the run of key characters before
// each one, leftmost first.
func nextPair(s string, from int) []int {
	for p := from; p < len(s); p++ {
		k := strings.IndexAny(s[p:], "=:")
		if k < 0 {
			return nil
		}
		p += k
		j := p
		for j > from && (s[j-1] == ' ' || s[j-1] == '\t') {
			j--
		}
		if j > from && (s[j-1] == '"' || s[j-1] == '\'') {
			j--
		}
		if j == from || !isWord(s[j-1]) || !hasKeyEnding(s[from:j]) {
			continue
		}
		start := keyStart(s, from, j)
		if start < 0 {
			continue
		}
		if vs, ve, ok := pairValue(s, p); ok {
			return []int{start, ve, vs, ve}
		}
	}
	return nil
}

// keyStart returns the leftmost start, at or after lo and on a word boundary, of a
// secret-bearing key (with its prefix) that ends at j, or -1.
func keyStart(s string, lo, j int) int {
	r := j
	for r > lo && isKeyChar(s[r-1]) {
		r--
	}
	for start := r; start < j; start++ {
		if isWordStart(s, start) && isKey(s[start:j]) {
			return start
		}
	}
	return -1
}

// isKey reports whether t is a secret-bearing key with its optional prefix, all of it:
// \w*(?:password|...) in any ASCII letter case.
func isKey(t string) bool {
	for _, words := range keyWords {
		pos := len(t)
		matched := true
		for k := len(words) - 1; k >= 0; k-- {
			w := words[k]
			if pos < len(w) || !equalFoldASCII(t[pos-len(w):pos], w) {
				matched = false
				break
			}
			pos -= len(w)
			// A separator between two words is optional; one that is there must be taken,
			// since a word never ends with one.
			if k > 0 && pos > 0 && isKeySeparator(rune(t[pos-1])) {
				pos--
			}
		}
		if matched && isAllWord(t[:pos]) {
			return true
		}
	}
	return false
}

// pairValue returns the value of rule 2 after the separator at s[p]: its start and end, and
// whether there is one.
func pairValue(s string, p int) (start, end int, ok bool) {
	i := p + 1
	for i < len(s) && (s[i] == ' ' || s[i] == '\t') {
		i++
	}
	if i == len(s) {
		return 0, 0, false
	}
	if c := s[i]; c == '"' || c == '\'' {
		return i, quotedEnd(s, i), true
	}
	if s[p] == '=' {
		return equalsValue(s, i)
	}
	return colonValue(s, i)
}

// equalsValue returns the unquoted value after "=" that starts at s[i]: an optional scheme
// name and blanks, then a run up to whitespace.
func equalsValue(s string, i int) (start, end int, ok bool) {
	if n := schemeNameLen(s[i:]); n > 0 {
		b := i + n
		for b < len(s) && (s[b] == ' ' || s[b] == '\t') {
			b++
		}
		if b > i+n && b < len(s) && !isSpace(s[b]) {
			return i, spaceEnd(s, b), true
		}
	}
	if isSpace(s[i]) {
		return 0, 0, false
	}
	return i, spaceEnd(s, i), true
}

// colonValue returns the unquoted value after ":" that starts at s[i]: [REDACTED] as it is,
// or a run up to a stop character or the end of the line, without trailing whitespace.
func colonValue(s string, i int) (start, end int, ok bool) {
	if strings.HasPrefix(s[i:], redacted) {
		return i, i + len(redacted), true
	}
	if isSpace(s[i]) || isColonStop(s[i]) {
		return 0, 0, false
	}
	e := i + 1
	for e < len(s) && !isColonStop(s[e]) && s[e] != '\r' && s[e] != '\n' {
		e++
	}
	for isSpace(s[e-1]) {
		e--
	}
	return i, e, true
}

// quotedEnd returns the end of the quoted value that opens at s[i]: after its closing quote,
// or before the end of the line or a backslash that escapes nothing when it is not closed.
func quotedEnd(s string, i int) int {
	q := s[i]
	k := i + 1
	for k < len(s) {
		switch c := s[k]; {
		case c == q:
			return k + 1
		case c == '\r' || c == '\n':
			return k
		case c == '\\':
			if k+1 == len(s) || s[k+1] == '\r' || s[k+1] == '\n' {
				return k
			}
			k += 2
		default:
			k++
		}
	}
	return k
}

// spaceEnd returns the index of the first whitespace at or after i, or len(s).
func spaceEnd(s string, i int) int {
	for i < len(s) && !isSpace(s[i]) {
		i++
	}
	return i
}

// nextUserInfo finds rule 3 and returns [scheme start, match end, scheme start, scheme end].
// A scheme is a run of scheme characters that starts with a letter and ends at "://".
func nextUserInfo(s string, from int) []int {
	noAt := 0 // the tail before this index, up to whitespace or a quote, holds no "@"
	for p := from; p < len(s); {
		k := strings.Index(s[p:], "://")
		if k < 0 {
			return nil
		}
		k += p
		p = k + 3
		start := -1
		for i := k; i > from && isSchemeChar(s[i-1]); i-- {
			if isLetter(s[i-1]) {
				start = i - 1
			}
		}
		if start < 0 {
			continue
		}
		if end := userInfoEnd(s, k+3, &noAt); end > 0 {
			return []int{start, end, start, k + 3}
		}
	}
	return nil
}

// userInfoEnd returns the index after the "@" that ends the user information of the URL
// whose authority starts at s[a], or 0 when there is none. *noAt remembers where a search for
// a last "@" ended without one, so that URLs glued together are not scanned again and again.
func userInfoEnd(s string, a int, noAt *int) int {
	// The authority runs to whitespace, "/", "?", "#" or a double quote; its last "@" after at
	// least one character ends the user information.
	at := -1
	for i := a; i < len(s) && !isSpace(s[i]) && !isOneOf(s[i], `/?#"`); i++ {
		if s[i] == '@' && i > a {
			at = i
		}
	}
	if at > 0 {
		return at + 1
	}
	return passwordUserInfoEnd(s, a, noAt)
}

// passwordUserInfoEnd returns the index after the "@" that ends user:password information
// whose password holds "/", "?" or "#" (the text between ":" and that character is not a
// port number): the last "@" before whitespace or a double quote; or 0 when there is none.
func passwordUserInfoEnd(s string, a int, noAt *int) int {
	u := a
	for u < len(s) && !isSpace(s[u]) && !isOneOf(s[u], `/?#@:"`) {
		u++
	}
	if u == len(s) || s[u] != ':' {
		return 0
	}
	v, port := u+1, true
	for v < len(s) && !isSpace(s[v]) && !isOneOf(s[v], `/?#@:"`) {
		port = port && isDigit(s[v])
		v++
	}
	if v == len(s) || !isOneOf(s[v], "/?#") || (v > u+1 && port) {
		return 0
	}
	if v+1 < *noAt {
		return 0
	}
	at := -1
	i := v + 1
	for ; i < len(s) && !isSpace(s[i]) && s[i] != '"'; i++ {
		if s[i] == '@' {
			at = i
		}
	}
	if at < 0 {
		*noAt = i
		return 0
	}
	return at + 1
}

// nextScheme finds rule 4 and returns [scheme start, credential end, scheme start, scheme
// end]. A scheme name starts on a word boundary and is followed by blanks and a credential: a
// run of token68 characters that does not start with "=" and that holds a digit, holds an "=",
// or is 16 or more characters long.
func nextScheme(s string, from int) []int {
	for i := from; i < len(s); i++ {
		switch s[i] | 0x20 {
		case 'b', 'd', 'n', 't':
		default:
			continue
		}
		if i > 0 && isWord(s[i-1]) {
			continue
		}
		n := schemeNameLen(s[i:])
		if n == 0 {
			continue
		}
		b := i + n
		for b < len(s) && (s[b] == ' ' || s[b] == '\t') {
			b++
		}
		if b == i+n || b == len(s) || s[b] == '=' || !isToken68(s[b]) {
			continue
		}
		e, digit, equals := b, false, false
		for e < len(s) && isToken68(s[e]) {
			digit = digit || isDigit(s[e])
			equals = equals || s[e] == '='
			e++
		}
		if digit || equals || e-b >= 16 {
			return []int{i, e, i, i + n}
		}
	}
	return nil
}

// nextQuery finds rule 5 and returns [parameter start, value end, parameter start, value
// start]: "?" or "&", a name of queryNames in any ASCII letter case, "=" and a value of at
// least one character that runs to "&", "#", a double quote or whitespace.
func nextQuery(s string, from int) []int {
	for p := from; p < len(s); p++ {
		k := strings.IndexAny(s[p:], "?&")
		if k < 0 {
			return nil
		}
		p += k
		for _, name := range queryNames {
			a := p + 1 + len(name)
			if a >= len(s) || s[a] != '=' || !equalFoldASCII(s[p+1:a], name) {
				continue
			}
			e := a + 1
			for e < len(s) && !isSpace(s[e]) && !isOneOf(s[e], `&#"`) {
				e++
			}
			if e > a+1 {
				return []int{p, e, p, a + 1}
			}
		}
	}
	return nil
}

// redactValue returns the replacement of one value of rule 2. A quoted value keeps its quotes,
// and an empty quoted value stays empty.
func redactValue(v string) string {
	if v == "" || (v[0] != '"' && v[0] != '\'') {
		return redacted
	}
	q := v[0]
	closed := false
	i := 1
	for i < len(v) {
		if v[i] == '\\' {
			i += 2
			continue
		}
		if v[i] == q {
			closed = true
			break
		}
		i++
	}
	switch {
	case closed && i == 1, !closed && len(v) == 1:
		return v
	case closed:
		return string(q) + redacted + string(q)
	default:
		return string(q) + redacted
	}
}

// hasKeyEnding reports whether s ends with one of keyEndings, in any ASCII letter case.
func hasKeyEnding(s string) bool {
	for _, e := range keyEndings {
		if len(s) >= len(e) && equalFoldASCII(s[len(s)-len(e):], e) {
			return true
		}
	}
	return false
}

// schemeNameLen returns the length of the name of authSchemes that s starts with, in any
// ASCII letter case, or 0.
func schemeNameLen(s string) int {
	for _, name := range authSchemes {
		if len(s) >= len(name) && s[0]|0x20 == name[0] && equalFoldASCII(s[:len(name)], name) {
			return len(name)
		}
	}
	return 0
}

// equalFoldASCII reports whether s equals the lower-case ASCII word lower in any ASCII letter
// case. Unlike strings.EqualFold it folds nothing beyond ASCII.
func equalFoldASCII(s, lower string) bool {
	if len(s) != len(lower) {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != lower[i] {
			return false
		}
	}
	return true
}

// isLetter reports whether c is an ASCII letter.
func isLetter(c byte) bool { return 'a' <= c|0x20 && c|0x20 <= 'z' }

// isWord reports whether c is a word character: [0-9A-Za-z_].
func isWord(c byte) bool { return isLetter(c) || '0' <= c && c <= '9' || c == '_' }

// isKeyChar reports whether c can be part of a key of rule 2: a word character, "-" or ".".
func isKeyChar(c byte) bool { return isWord(c) || c == '-' || c == '.' }

// isKeySeparator reports whether r may stand between the words of a key: "-", "_" or ".".
func isKeySeparator(r rune) bool { return r == '-' || r == '_' || r == '.' }

// isAllWord reports whether every byte of s is a word character.
func isAllWord(s string) bool {
	for i := 0; i < len(s); i++ {
		if !isWord(s[i]) {
			return false
		}
	}
	return true
}

// isSpace reports whether c is whitespace: space, \t, \n, \v, \f or \r.
func isSpace(c byte) bool { return c == ' ' || '\t' <= c && c <= '\r' }

// isColonStop reports whether c ends an unquoted value after ":": one of , ; } ] & ".
func isColonStop(c byte) bool {
	return c == ',' || c == ';' || c == '}' || c == ']' || c == '&' || c == '"'
}

// isDigit reports whether c is an ASCII digit.
func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// isOneOf reports whether c is one of the ASCII characters of set.
func isOneOf(c byte, set string) bool { return strings.IndexByte(set, c) >= 0 }

// isToken68 reports whether c can be part of a credential of rule 4: [A-Za-z0-9._~+/=-].
func isToken68(c byte) bool { return isWord(c) && c != '_' || isOneOf(c, "._~+/=-") }

// isSchemeChar reports whether c can be part of a URL scheme: [A-Za-z0-9+.-].
func isSchemeChar(c byte) bool {
	return isLetter(c) || '0' <= c && c <= '9' || c == '+' || c == '.' || c == '-'
}

// isWordStart reports whether a word character starts at s[i] (\b before a word character).
func isWordStart(s string, i int) bool {
	return isWord(s[i]) && (i == 0 || !isWord(s[i-1]))
}

// limitInput returns the first MaxInput characters of s (rule 1).
func limitInput(s string) string {
	if len(s) <= MaxInput { // a character is at least one byte
		return s
	}
	n := 0
	for i := range s {
		if n == MaxInput {
			return s[:i]
		}
		n++
	}
	return s
}

// truncate cuts s to exactly MaxLength characters ending in truncationMarker when it is longer
// (rule 6).
func truncate(s string) string {
	if len(s) <= MaxLength || utf8.RuneCountInString(s) <= MaxLength {
		return s
	}
	keep := MaxLength - utf8.RuneCountInString(truncationMarker)
	n := 0
	for i := range s {
		if n == keep {
			return s[:i] + truncationMarker
		}
		n++
	}
	return s
}
