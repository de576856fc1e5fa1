package pull

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// statement is one contract file with its :name placeholders turned into positional $n
// parameters.
type statement struct {
	file   string   // the path it came from
	sql    string   // the text with $1, $2, ... in place of the placeholders
	params []string // params[i] is the name bound to $(i+1)
}

// contractFiles are the five statements of each dialect.
var contractFiles = []string{"claim", "renew", "complete", "retry", "dead"}

// contractParams are the parameters of each statement, in order of first appearance.
var contractParams = map[string][]string{
	"claim":    {"source", "cand_limit", "batch", "lease_ms"},
	"renew":    {"lease_ms", "id", "token"},
	"complete": {"id", "token"},
	"retry":    {"delay_ms", "error", "id", "token"},
	"dead":     {"error", "id", "token"},
}

// readContract reads sql/<dialect>/<name>.sql.
func readContract(t testing.TB, dialect, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("sql", dialect, name+".sql"))
	if err != nil {
		t.Fatalf("reading contract file: %v", err)
	}
	return string(b)
}

// loadPostgres reads a PostgreSQL contract file and converts its placeholders.
func loadPostgres(t testing.TB, name string) statement {
	t.Helper()
	text := readContract(t, "postgresql", name)
	sql, params, err := positional(text)
	if err != nil {
		t.Fatalf("converting %s.sql: %v", name, err)
	}
	return statement{file: name + ".sql", sql: sql, params: params}
}

// args orders named values by the statement's parameters. Every parameter needs a value, and
// every value must be a parameter.
func (s statement) args(values map[string]any) ([]any, error) {
	out := make([]any, len(s.params))
	for i, p := range s.params {
		v, ok := values[p]
		if !ok {
			return nil, fmt.Errorf("binding %s: no value for :%s", s.file, p)
		}
		out[i] = v
	}
	if len(values) != len(s.params) {
		for k := range values {
			if !contains(s.params, k) {
				return nil, fmt.Errorf("binding %s: :%s is not a parameter", s.file, k)
			}
		}
	}
	return out, nil
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// positional turns every :name placeholder of a PostgreSQL text into $n, numbering names in
// order of first appearance; a repeated name keeps its number. It leaves alone ::casts, string
// literals ('..', E'..'), quoted identifiers, dollar-quoted bodies and comments.
func positional(src string) (string, []string, error) {
	return scanPlaceholders(src, func(name string, index int) string { return fmt.Sprintf("$%d", index) })
}

// scanPlaceholders rewrites each :name placeholder with replace(name, n), where n is the
// 1-based number of the name in order of first appearance, and returns the names in that order.
func scanPlaceholders(src string, replace func(name string, index int) string) (string, []string, error) {
	var b strings.Builder
	var names []string
	index := map[string]int{}
	n := len(src)
	for i := 0; i < n; {
		c := src[i]
		switch {
		case c == '-' && i+1 < n && src[i+1] == '-':
			end := strings.IndexByte(src[i:], '\n')
			if end < 0 {
				end = n - i
			}
			b.WriteString(src[i : i+end])
			i += end
		case c == '/' && i+1 < n && src[i+1] == '*':
			end, err := blockCommentEnd(src, i)
			if err != nil {
				return "", nil, err
			}
			b.WriteString(src[i:end])
			i = end
		case c == '\'':
			escapes := i > 0 && (src[i-1] == 'E' || src[i-1] == 'e') && (i < 2 || !isIdentByte(src[i-2]))
			end, err := quotedEnd(src, i, '\'', escapes)
			if err != nil {
				return "", nil, err
			}
			b.WriteString(src[i:end])
			i = end
		case c == '"':
			end, err := quotedEnd(src, i, '"', false)
			if err != nil {
				return "", nil, err
			}
			b.WriteString(src[i:end])
			i = end
		case c == '$' && (i == 0 || !isIdentByte(src[i-1])):
			tag, ok := dollarTag(src, i)
			if !ok {
				b.WriteByte(c)
				i++
				continue
			}
			end := strings.Index(src[i+len(tag):], tag)
			if end < 0 {
				return "", nil, fmt.Errorf("unterminated dollar-quoted string at byte %d", i)
			}
			end += i + 2*len(tag)
			b.WriteString(src[i:end])
			i = end
		case c == ':' && i+1 < n && src[i+1] == ':':
			b.WriteString("::")
			i += 2
		case c == ':' && i+1 < n && isIdentStart(src[i+1]):
			j := i + 1
			for j < n && isIdentByte(src[j]) {
				j++
			}
			name := src[i+1 : j]
			k, seen := index[name]
			if !seen {
				names = append(names, name)
				k = len(names)
				index[name] = k
			}
			b.WriteString(replace(name, k))
			i = j
		default:
			b.WriteByte(c)
			i++
		}
	}
	return b.String(), names, nil
}

func isIdentStart(c byte) bool {
	return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
}

func isIdentByte(c byte) bool { return isIdentStart(c) || (c >= '0' && c <= '9') }

// quotedEnd returns the index just past the literal that opens at src[i] with quote q. A
// doubled quote stays inside; with escapes, so does a backslash-escaped character.
func quotedEnd(src string, i int, q byte, escapes bool) (int, error) {
	for j := i + 1; j < len(src); j++ {
		switch {
		case escapes && src[j] == '\\':
			j++
		case src[j] == q && j+1 < len(src) && src[j+1] == q:
			j++
		case src[j] == q:
			return j + 1, nil
		}
	}
	return 0, fmt.Errorf("unterminated %c literal at byte %d", q, i)
}

// blockCommentEnd returns the index just past the (possibly nested) comment at src[i].
func blockCommentEnd(src string, i int) (int, error) {
	depth := 0
	for j := i; j+1 < len(src); j++ {
		switch {
		case src[j] == '/' && src[j+1] == '*':
			depth++
			j++
		case src[j] == '*' && src[j+1] == '/':
			depth--
			j++
			if depth == 0 {
				return j + 1, nil
			}
		}
	}
	return 0, fmt.Errorf("unterminated comment at byte %d", i)
}

// dollarTag returns the $tag$ that opens at src[i], if any. $1 is a parameter, not a tag.
func dollarTag(src string, i int) (string, bool) {
	j := i + 1
	if j < len(src) && src[j] == '$' {
		return "$$", true
	}
	if j >= len(src) || !isIdentStart(src[j]) {
		return "", false
	}
	for j < len(src) && isIdentByte(src[j]) {
		j++
	}
	if j < len(src) && src[j] == '$' {
		return src[i : j+1], true
	}
	return "", false
}

func TestPositional(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		in         string
		want       string
		wantParams []string
		wantErr    bool
	}{
		{name: "numbers names in order of first appearance",
			in:   "SELECT :b, :a, :b",
			want: "SELECT $1, $2, $1", wantParams: []string{"b", "a"}},
		{name: "leaves casts alone",
			in:   "SELECT :id::uuid, x::text, CAST(:n AS INT)",
			want: "SELECT $1::uuid, x::text, CAST($2 AS INT)", wantParams: []string{"id", "n"}},
		{name: "leaves string literals alone",
			in:   "SELECT ':not', 'it''s :not', E'\\' :not', :yes",
			want: "SELECT ':not', 'it''s :not', E'\\' :not', $1", wantParams: []string{"yes"}},
		{name: "leaves quoted identifiers alone",
			in:   `SELECT "a:b", "x"":y" FROM t WHERE c = :v`,
			want: `SELECT "a:b", "x"":y" FROM t WHERE c = $1`, wantParams: []string{"v"}},
		{name: "leaves comments alone",
			in:   "-- :one\nSELECT /* :two /* :three */ */ :four",
			want: "-- :one\nSELECT /* :two /* :three */ */ $1", wantParams: []string{"four"}},
		{name: "leaves dollar-quoted bodies alone and keeps $n",
			in:   "DO $x$ SELECT :a $x$; SELECT $$ :b $$, $1, :c",
			want: "DO $x$ SELECT :a $x$; SELECT $$ :b $$, $1, $1", wantParams: []string{"c"}},
		{name: "a lone colon stays",
			in:   "SELECT a[1:2], x : y",
			want: "SELECT a[1:2], x : y", wantParams: nil},
		{name: "names with digits and underscores",
			in:   "LIMIT :cand_limit2",
			want: "LIMIT $1", wantParams: []string{"cand_limit2"}},
		{name: "unterminated string", in: "SELECT 'x", wantErr: true},
		{name: "unterminated comment", in: "SELECT /* x", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, params, err := positional(tt.in)
			if (err != nil) != tt.wantErr {
				t.Fatalf("positional(%q) error = %v, wantErr %v", tt.in, err, tt.wantErr)
			}
			if tt.wantErr {
				return
			}
			if got != tt.want {
				t.Errorf("positional(%q)\n got %q\nwant %q", tt.in, got, tt.want)
			}
			if !reflect.DeepEqual(params, tt.wantParams) {
				t.Errorf("params = %q, want %q", params, tt.wantParams)
			}
		})
	}
}

func TestStatementArgs(t *testing.T) {
	t.Parallel()
	s := statement{file: "x.sql", params: []string{"id", "token"}}
	tests := []struct {
		name    string
		values  map[string]any
		want    []any
		wantErr bool
	}{
		{name: "in parameter order", values: map[string]any{"token": "t", "id": "i"}, want: []any{"i", "t"}},
		{name: "missing value", values: map[string]any{"id": "i"}, wantErr: true},
		{name: "unknown name", values: map[string]any{"id": "i", "token": "t", "tokn": "x"}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := s.args(tt.values)
			if (err != nil) != tt.wantErr {
				t.Fatalf("args error = %v, wantErr %v", err, tt.wantErr)
			}
			if !tt.wantErr && !reflect.DeepEqual(got, tt.want) {
				t.Errorf("args = %v, want %v", got, tt.want)
			}
		})
	}
}
