package redact

import (
	"regexp"
	"strings"
)

// The rules as regular expressions, as testdata/redaction/README.md gives them. String must
// give the same result as running these over the whole text, in order.

// whitespace is the body of a character class of whitespace: the six ASCII whitespace
// characters and nothing else (Go's \s lacks \v, JavaScript's adds Unicode spaces).
const whitespace = `\t\n\v\f\r `

var (
	// keyPattern is a secret-bearing key with its optional prefix: \w*(?:password|...).
	keyPattern = `\w*(?:` + keyAlternatives() + `)`

	// quotedValue is a value that opens with a quote, up to the closing quote or the end of
	// the line. A backslash escapes the character after it.
	quotedValue = `"(?:[^"\\\r\n]|\\[^\r\n])*"?|'(?:[^'\\\r\n]|\\[^\r\n])*'?`

	// pairPattern is rule 2. Group 1 is the value after "=", group 2 the value after ":".
	pairPattern = `\b` + keyPattern + `\b["']?[ \t]*(?:` +
		`=[ \t]*(` + quotedValue + `|(?:` + foldAlternatives(authSchemes) + `[ \t]+)?[^` + whitespace + `]+)` +
		`|` +
		`:[ \t]*(` + quotedValue + `|\[REDACTED\]|[^` + whitespace + `,;}\]&"](?:[^,;}\]&"\r\n]*[^` + whitespace + `,;}\]&"])?)` +
		`)`

	// userInfoPattern is rule 3. Group 1 is the scheme with "://". The first alternative is an
	// authority that holds an "@" (the greedy run makes the last "@" win); the second is
	// user:password where the password holds "/", "?" or "#" and is not a port number.
	userInfoPattern = `([A-Za-z][A-Za-z0-9+.\-]*://)(?:` +
		`[^` + whitespace + `/?#"]+` +
		`|` +
		`[^` + whitespace + `/?#@:"]*:(?:[^` + whitespace + `/?#@:"]*[^` + whitespace + `/?#@:"0-9][^` + whitespace + `/?#@:"]*)?[/?#][^` + whitespace + `"]*` +
		`)@`

	// schemePattern is rule 4. Group 1 is the scheme name as written.
	schemePattern = `\b(` + foldAlternatives(authSchemes) + `)[ \t]+(?:` +
		`[A-Za-z0-9._~+/\-]*[0-9][A-Za-z0-9._~+/=\-]*` +
		`|[A-Za-z0-9._~+/\-]+=[A-Za-z0-9._~+/=\-]*` +
		`|[A-Za-z0-9._~+/\-][A-Za-z0-9._~+/=\-]{15,}` +
		`)`

	// queryPattern is rule 5. Group 1 is the "?" or "&", the name and the "=".
	queryPattern = `([?&]` + foldAlternatives(queryNames) + `=)[^&#"` + whitespace + `]+`

	refPair     = regexp.MustCompile(pairPattern)
	refUserInfo = regexp.MustCompile(userInfoPattern)
	refScheme   = regexp.MustCompile(schemePattern)
	refQuery    = regexp.MustCompile(queryPattern)
)

// keyAlternatives returns the alternatives of secretKeys, each separator written as [-_.]?.
func keyAlternatives() string {
	alts := make([]string, len(keyWords))
	for i, words := range keyWords {
		folded := make([]string, len(words))
		for j, w := range words {
			folded[j] = fold(w)
		}
		alts[i] = strings.Join(folded, `[-_.]?`)
	}
	return strings.Join(alts, "|")
}

// foldAlternatives returns (?:w1|w2|...) with every word matching in any ASCII letter case.
func foldAlternatives(words []string) string {
	alts := make([]string, len(words))
	for i, w := range words {
		alts[i] = fold(w)
	}
	return `(?:` + strings.Join(alts, "|") + `)`
}

// fold returns a pattern for the lower-case ASCII word w in any ASCII letter case: "pwd"
// becomes [pP][wW][dD]. Go's (?i) is not used because it folds beyond ASCII.
func fold(w string) string {
	var b strings.Builder
	for i := 0; i < len(w); i++ {
		c := w[i]
		if 'a' <= c && c <= 'z' {
			b.WriteString("[" + string(c) + string(c-'a'+'A') + "]")
		} else {
			b.WriteString(regexp.QuoteMeta(string(c)))
		}
	}
	return b.String()
}

// referenceString is String written with the expressions.
func referenceString(s string) string {
	s = limitInput(s)
	s = refReplace(refPair, s, func(s string, m []int) string {
		start, end := m[2], m[3]
		if start < 0 {
			start, end = m[4], m[5]
		}
		return s[m[0]:start] + redactValue(s[start:end])
	})
	s = refReplace(refUserInfo, s, func(s string, m []int) string { return s[m[2]:m[3]] + mask + "@" })
	s = refReplace(refScheme, s, func(s string, m []int) string { return s[m[2]:m[3]] + " " + redacted })
	s = refReplace(refQuery, s, func(s string, m []int) string { return s[m[2]:m[3]] + mask })
	return truncate(s)
}

// refReplace replaces every match of re in s with what repl returns for it.
func refReplace(re *regexp.Regexp, s string, repl func(s string, m []int) string) string {
	var b strings.Builder
	last := 0
	for _, m := range re.FindAllStringSubmatchIndex(s, -1) {
		b.WriteString(s[last:m[0]])
		b.WriteString(repl(s, m))
		last = m[1]
	}
	b.WriteString(s[last:])
	return b.String()
}
