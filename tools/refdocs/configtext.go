package main

import (
	"fmt"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"unicode"

	"github.com/alternayte/queuebox/shared/config"
)

// none is the cell of a key without a default.
const none = "—"

// displayKey writes a key pattern for a reader: destinations.<name>.url, routes[<n>].
func displayKey(pattern string) string {
	s := strings.ReplaceAll(pattern, "[*]", "[<n>]")
	return strings.ReplaceAll(s, ".*", ".<name>")
}

// indexMark stands for a list position in a key path given to config.EnvVarName.
const indexMark = "987654321"

// envVar returns the variable of a key that a variable can set, or "" for a block.
func envVar(k config.KeyDoc) string {
	if k.Block {
		return ""
	}
	path := strings.ReplaceAll(k.Pattern, "[*]", "["+indexMark+"]")
	path = strings.ReplaceAll(path, ".*", ".<name>")
	switch k.Type.Kind() {
	case reflect.Slice:
		path += "[" + indexMark + "]"
	case reflect.Map:
		path += ".<key>"
	}
	return code(strings.ReplaceAll(config.EnvVarName(path), indexMark, "<N>"))
}

var (
	secretType        = reflect.TypeFor[config.Secret]()
	urlType           = reflect.TypeFor[config.ConnectionURL]()
	durationType      = reflect.TypeFor[config.RetentionDuration]()
	millisecondsType  = reflect.TypeFor[config.Milliseconds]()
	durationTypeNames = map[reflect.Type]string{
		secretType: "secret", urlType: "secret (URL)", durationType: "duration", millisecondsType: "integer (ms)",
	}
)

// typeName names the type of a key for a reader.
func typeName(t reflect.Type) string {
	if n, ok := durationTypeNames[t]; ok {
		return n
	}
	switch t.Kind() {
	case reflect.Pointer:
		return typeName(t.Elem())
	case reflect.Slice:
		return "list of " + plural(typeName(t.Elem()))
	case reflect.Map:
		return "map of " + plural(typeName(t.Elem()))
	case reflect.String:
		return "string"
	case reflect.Int, reflect.Int64:
		return "integer"
	case reflect.Float64:
		return "number"
	case reflect.Bool:
		return "boolean"
	case reflect.Struct:
		return "block"
	}
	return t.String()
}

// plural writes a type name in the plural: integer (ms) gives integers (ms).
func plural(name string) string {
	word, rest, _ := strings.Cut(name, " ")
	if rest != "" {
		rest = " " + rest
	}
	return word + "s" + rest
}

// renderDefault writes the default of k as a cell.
func renderDefault(k config.KeyDoc) string {
	if k.Block {
		return none
	}
	return renderValue(k.Default)
}

// renderValue writes a value as a cell, or none for an empty one.
func renderValue(v reflect.Value) string {
	switch v.Type() {
	case secretType, urlType:
		return none // a secret has no default, and a page never shows one
	case durationType:
		d := v.Interface().(config.RetentionDuration)
		if d.IsZero() {
			return none
		}
		return code(d.String())
	}
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			return none
		}
		return renderValue(v.Elem())
	case reflect.Slice, reflect.Map:
		if v.Len() == 0 {
			return none
		}
		return code(fmt.Sprint(v.Interface()))
	case reflect.String:
		if v.String() == "" {
			return none
		}
		return code(v.String())
	case reflect.Int, reflect.Int64:
		return code(strconv.FormatInt(v.Int(), 10))
	case reflect.Float64:
		return code(strconv.FormatFloat(v.Float(), 'g', -1, 64))
	case reflect.Bool:
		return code(strconv.FormatBool(v.Bool()))
	}
	return code(fmt.Sprint(v.Interface()))
}

// defaultSentence finds the sentence "Default: ..." of a comment.
var defaultSentence = regexp.MustCompile(`Default: (.*?)\.(?:\s+[A-Z]|$)`)

// goName finds a word that may be a Go name: a capital after a small letter (BaseURL,
// TimestampHeader) or a run of capitals before a small letter (HTTPPort).
var goName = regexp.MustCompile(`\b[A-Z][A-Za-z0-9]*(?:[a-z0-9][A-Z]|[A-Z][A-Z][a-z])[A-Za-z0-9]*\b`)

// codeReference finds a parenthesis that names the code for its reader (a qualified Go name,
// "(store.ErrPoolTimeout)"), which a reference page leaves out.
var codeReference = regexp.MustCompile(`\s*\([^()]*\b[A-Za-z]\w*\.[A-Z]\w*[a-z]\w*\b[^()]*\)`)

// productWords are names of products that look like Go names.
var productWords = map[string]bool{"JetStream": true}

// qualifiedName finds a qualified Go name: store.ErrPoolTimeout, Retry.MaxDelayMs.
var qualifiedName = regexp.MustCompile(`\b[A-Za-z]\w*\.[A-Z]\w*[a-z]\w*\b`)

// describe makes the doc comment text of k's field speak to a reader: the field's name
// becomes the key's, the names of the other fields of its struct become their keys, and the
// sentence that states the default goes when the Default cell says the same (def).
func describe(text string, k config.KeyDoc, def string, fieldNames map[string]bool) (string, error) {
	if text == "" {
		return "", nil
	}
	if strings.Contains(text, "spec/") || strings.Contains(strings.ToLower(text), "issue ") {
		return "", fmt.Errorf("the doc comment of %s.%s (%s) names the handbook or an issue; a reference page cannot show it", k.Owner.Name(), k.Field, k.Pattern)
	}
	text = codeReference.ReplaceAllString(text, "")
	text = seeCode.ReplaceAllString(text, "")
	text = strings.ReplaceAll(text, "Default: nil", "Default: none")
	text = leadWithKey(text, k)
	text = keyNames(text, k.Owner)
	if m := defaultSentence.FindStringSubmatchIndex(text); m != nil && sameDefault(text[m[2]:m[3]], def) {
		end := m[1]
		if end < len(text) {
			end -= 1 // keep the capital that starts the next sentence
			for end > m[0] && text[end-1] == ' ' {
				end--
			}
		}
		text = strings.TrimSpace(text[:m[0]] + text[end:])
	}
	if bad := codeName(text, fieldNames); bad != "" {
		return "", fmt.Errorf("the doc comment of %s.%s (%s) names %s, a name of the code; say it as a key or in words", k.Owner.Name(), k.Field, k.Pattern, bad)
	}
	return docsPage.ReplaceAllString(text, "[$1](../$1)"), nil
}

// enumeration finds a comment that lists the values of its key: "postgresql or sqlserver",
// "push (the relay ...) or pull", "polling, postgres-logical ... or sqlserver-cdc".
var enumeration = regexp.MustCompile(`^[a-z][\w/-]*(?: \([^)]*\))?(?:, [\w/-]+(?: \([^)]*\))?)* or `)

// leadWithKey rewrites the comment's first word, the field's Go name: "TimeoutMs is the
// request timeout" becomes "The request timeout".
func leadWithKey(text string, k config.KeyDoc) string {
	rest, ok := strings.CutPrefix(text, k.Field)
	if !ok {
		return text
	}
	for _, verb := range []string{" is ", " are "} {
		if r, ok := strings.CutPrefix(rest, verb); ok {
			if enumeration.MatchString(r) || !startsWithWord(r) {
				return code(lastLevel(k.Pattern)) + verb + r // "type is postgresql or sqlserver"
			}
			return capitalize(r)
		}
	}
	if r, ok := strings.CutPrefix(rest, " "); ok {
		return capitalize(r)
	}
	return code(lastLevel(k.Pattern)) + rest
}

// lastLevel returns the last level of a key pattern.
func lastLevel(pattern string) string {
	i := strings.LastIndexAny(pattern, ".]")
	return pattern[i+1:]
}

func capitalize(s string) string {
	for i, r := range s {
		return string(unicode.ToUpper(r)) + s[i+len(string(r)):]
	}
	return s
}

// capitalWord finds a word that starts with a capital.
var capitalWord = regexp.MustCompile(`\b[A-Z][A-Za-z0-9]*\b`)

// keyNames writes the Go names of the fields of owner that the comment names as their keys: a
// name such as BaseURL anywhere, a name that is also a word (Enabled) inside a sentence.
func keyNames(text string, owner reflect.Type) string {
	names := map[string]string{}
	collectKeys(owner, names)
	var b strings.Builder
	last := 0
	for _, m := range capitalWord.FindAllStringIndex(text, -1) {
		w := text[m[0]:m[1]]
		key, ok := names[w]
		if !ok || productWords[w] {
			continue
		}
		if inWord(text, m[0], m[1]) {
			continue // part of a longer name: X-API-Key
		}
		before := strings.TrimRight(text[:m[0]], " ")
		if !goName.MatchString(w) && (before == "" || strings.HasSuffix(before, ".") || w == strings.ToUpper(w)) {
			continue // a word that starts a sentence, or an acronym (HTTP)
		}
		b.WriteString(text[last:m[0]])
		b.WriteString(code(key))
		last = m[1]
	}
	b.WriteString(text[last:])
	return b.String()
}

// seeCode finds a sentence that sends the reader of the code to a Go name: "See Brokers."
var seeCode = regexp.MustCompile(`\s*See [A-Z]\w*\.`)

// docsPage finds a page of docs/ named in a comment.
var docsPage = regexp.MustCompile(`\bdocs/([\w-]+\.md)\b`)

// collectKeys maps the Go name of every key field of the struct t, inline structs included, to
// its key.
func collectKeys(t reflect.Type, out map[string]string) {
	for i := range t.NumField() {
		f := t.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		switch {
		case name == "-" || !f.IsExported():
		case name == "" && strings.Contains(opts, "inline") && f.Type.Kind() == reflect.Struct:
			collectKeys(f.Type, out)
		case name != "":
			out[f.Name] = name
		}
	}
}

// sameDefault reports whether the default that a comment states (text) says no more than the
// Default cell (def): the same value, or no value where the cell has none.
func sameDefault(text, def string) bool {
	value, rest, _ := strings.Cut(text, ",")
	rest = strings.TrimSpace(rest)
	if rest != "" && rest != "none" && rest != "unset" && rest != "off" && rest != "not set" {
		return false
	}
	value = strings.TrimSpace(value)
	if def == none {
		return value == "nil" || value == "empty" || value == "none" || value == "unset"
	}
	return "`"+value+"`" == def || code(value) == def
}

// codeName returns the first name of the code that text holds: a qualified name, or the Go
// name of a key's field (fieldNames); "" when it holds none.
func codeName(text string, fieldNames map[string]bool) string {
	if q := qualifiedName.FindString(text); q != "" {
		return q
	}
	for _, w := range goName.FindAllString(text, -1) {
		if fieldNames[w] && !productWords[w] {
			return w
		}
	}
	return ""
}

// startsWithWord reports whether s starts with a word of small letters, which may take a
// capital (not whsec_ or $.id).
func startsWithWord(s string) bool {
	w, _, _ := strings.Cut(s, " ")
	w = strings.TrimRight(w, ",;:")
	for _, r := range w {
		if r < 'a' || r > 'z' {
			return false
		}
	}
	return w != ""
}

// inWord reports whether text[start:end] is joined to a longer name by a hyphen, a dot or an
// underscore.
func inWord(text string, start, end int) bool {
	joined := func(c byte) bool { return c == '-' || c == '.' || c == '_' }
	return (start > 0 && joined(text[start-1])) || (end < len(text) && joined(text[end]) && end+1 < len(text) && text[end+1] != ' ')
}
