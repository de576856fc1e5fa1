package queuebox

import (
	"database/sql"
	"embed"
	"fmt"
	"strings"
)

// contractFiles holds copies of the five statements of examples/pull/sql, one folder per
// dialect. A test compares them byte for byte with the originals, so they cannot drift.
//
//go:embed sql/postgresql/*.sql sql/sqlserver/*.sql
var contractFiles embed.FS

// statement is one contract statement, rendered for a dialect and a schema: its :name
// placeholders replaced by the parameter syntax of the dialect.
type statement struct {
	name    string   // claim, renew, complete, retry or dead
	text    string   // the SQL to run
	params  []string // the parameter names, in order of first appearance
	dialect Dialect
	src     string            // the contract text, before rendering
	renames map[string]string // the schema's renames the text was rendered with
}

// statements are the five statements that a worker runs.
type statements struct {
	claim, renew, complete, retry, dead statement
}

// loadStatements reads the contract files of the dialect and renders them for the schema.
func loadStatements(dialect Dialect, schema Schema) (statements, error) {
	renames := schema.renames()
	load := func(name string) (statement, error) {
		raw, err := contractFiles.ReadFile("sql/" + string(dialect) + "/" + name + ".sql")
		if err != nil {
			return statement{}, fmt.Errorf("reading the %s statement: %w", name, err)
		}
		text, params, err := render(string(raw), dialect, renames, nil)
		if err != nil {
			return statement{}, fmt.Errorf("rendering the %s statement: %w", name, err)
		}
		return statement{name: name, text: text, params: params, dialect: dialect, src: string(raw), renames: renames}, nil
	}
	var s statements
	var err error
	for _, x := range []struct {
		name string
		dst  *statement
	}{
		{"claim", &s.claim}, {"renew", &s.renew}, {"complete", &s.complete},
		{"retry", &s.retry}, {"dead", &s.dead},
	} {
		if *x.dst, err = load(x.name); err != nil {
			return statements{}, err
		}
	}
	return s, nil
}

// args binds values to the statement's parameters: positional values in order for
// PostgreSQL ($1, $2, ...), sql.Named values for SQL Server (@name). Every parameter must have
// a value.
func (s statement) args(values map[string]any) ([]any, error) {
	out := make([]any, len(s.params))
	for i, p := range s.params {
		v, ok := values[p]
		if !ok {
			return nil, fmt.Errorf("binding the %s statement: no value for :%s", s.name, p)
		}
		if s.dialect == DialectSQLServer {
			v = sql.Named(p, v)
		}
		out[i] = v
	}
	return out, nil
}

// withLiterals renders the statement again with the named parameters written into its text as
// the given literals, which must be SQL literals (integers here); the other parameters stay
// placeholders, renumbered.
func (s statement) withLiterals(literals map[string]string) (statement, error) {
	text, params, err := render(s.src, s.dialect, s.renames, literals)
	if err != nil {
		return statement{}, fmt.Errorf("rendering the %s statement: %w", s.name, err)
	}
	out := s
	out.text, out.params = text, params
	return out, nil
}

// render rewrites a contract statement for a dialect: each :name placeholder becomes $n
// (PostgreSQL, numbered in order of first appearance, a repeated name keeping its number) or
// @name (SQL Server), or the text that literals gives for that name; and each default table
// or column name that renames changes, where it stands as a whole word outside string
// literals, quoted identifiers, comments, variables and placeholders, becomes the new name
// quoted as an identifier. Everything else stays as written.
// It returns the names of the parameters left as placeholders, in order of first appearance.
func render(src string, dialect Dialect, renames, literals map[string]string) (string, []string, error) {
	r := &renderer{src: src, dialect: dialect, renames: renames, literals: literals, index: map[string]int{}}
	r.b.Grow(len(src) + 64)
	for r.i < len(src) {
		if err := r.step(); err != nil {
			return "", nil, err
		}
	}
	return r.b.String(), r.names, nil
}

// renderer is the state of one render: the source, the position in it, the output, and the
// placeholders named so far in order of first appearance.
type renderer struct {
	src      string
	dialect  Dialect
	renames  map[string]string
	literals map[string]string
	b        strings.Builder
	i        int
	names    []string
	index    map[string]int
}

// at reports whether the source holds c at position i.
func (r *renderer) at(i int, c byte) bool { return i < len(r.src) && r.src[i] == c }

// wordStart reports whether an identifier may start at position i: no identifier byte
// before it.
func (r *renderer) wordStart(i int) bool { return i == 0 || !isIdentByte(r.src[i-1]) }

// step renders the token at the current position and moves past it.
func (r *renderer) step() error {
	c := r.src[r.i]
	switch {
	case c == '-' && r.at(r.i+1, '-'):
		r.lineComment()
	case c == '/' && r.at(r.i+1, '*'):
		return r.blockComment()
	case c == '\'' || c == '"' || (c == '[' && r.dialect == DialectSQLServer):
		return r.quoted(c)
	case c == ':' && r.at(r.i+1, ':'):
		r.b.WriteString("::")
		r.i += 2
	case c == ':' && r.i+1 < len(r.src) && isIdentStart(r.src[r.i+1]) && r.wordStart(r.i):
		r.placeholder()
	case c == '@':
		r.variable()
	case isIdentStart(c) && r.wordStart(r.i):
		r.word()
	default:
		r.b.WriteByte(c)
		r.i++
	}
	return nil
}

// lineComment copies a -- comment up to its line's end.
func (r *renderer) lineComment() {
	end := strings.IndexByte(r.src[r.i:], '\n')
	if end < 0 {
		end = len(r.src) - r.i
	}
	r.b.WriteString(r.src[r.i : r.i+end])
	r.i += end
}

// blockComment copies a /* */ comment.
func (r *renderer) blockComment() error {
	end := strings.Index(r.src[r.i+2:], "*/")
	if end < 0 {
		return fmt.Errorf("unterminated comment at byte %d", r.i)
	}
	end += r.i + 4
	r.b.WriteString(r.src[r.i:end])
	r.i = end
	return nil
}

// quoted copies a string literal or a quoted identifier opened by c; a doubled closing
// character stays inside.
func (r *renderer) quoted(c byte) error {
	closing := c
	if c == '[' {
		closing = ']'
	}
	end := r.i + 1
	for {
		k := strings.IndexByte(r.src[end:], closing)
		if k < 0 {
			return fmt.Errorf("unterminated quote at byte %d", r.i)
		}
		end += k + 1
		if !r.at(end, closing) {
			break
		}
		end++
	}
	r.b.WriteString(r.src[r.i:end])
	r.i = end
	return nil
}

// identEnd is the end of the identifier bytes from position j.
func (r *renderer) identEnd(j int) int {
	for j < len(r.src) && isIdentByte(r.src[j]) {
		j++
	}
	return j
}

// placeholder renders :name as its literal, or as the dialect's placeholder ($n on
// PostgreSQL, @name on SQL Server), numbering each name once.
func (r *renderer) placeholder() {
	j := r.identEnd(r.i + 1)
	name := r.src[r.i+1 : j]
	r.i = j
	if lit, ok := r.literals[name]; ok {
		r.b.WriteString(lit)
		return
	}
	k, seen := r.index[name]
	if !seen {
		r.names = append(r.names, name)
		k = len(r.names)
		r.index[name] = k
	}
	if r.dialect == DialectSQLServer {
		r.b.WriteString("@" + name)
	} else {
		fmt.Fprintf(&r.b, "$%d", k)
	}
}

// variable copies a T-SQL variable (@qb_now, @@TRANCOUNT, @Resource), which is never a
// column.
func (r *renderer) variable() {
	j := r.i + 1
	for j < len(r.src) && (r.src[j] == '@' || isIdentByte(r.src[j])) {
		j++
	}
	r.b.WriteString(r.src[r.i:j])
	r.i = j
}

// word copies an identifier, or the quoted new name when renames maps it.
func (r *renderer) word() {
	j := r.identEnd(r.i)
	word := r.src[r.i:j]
	if mapped, ok := r.renames[word]; ok {
		word = quoteIdentifier(r.dialect, mapped)
	}
	r.b.WriteString(word)
	r.i = j
}

// quoteIdentifier quotes a name as an identifier of the dialect. The schema check has already
// refused every name that is not a plain identifier; the doubling is a second guard.
func quoteIdentifier(dialect Dialect, name string) string {
	if dialect == DialectSQLServer {
		return "[" + strings.ReplaceAll(name, "]", "]]") + "]"
	}
	return `"` + strings.ReplaceAll(name, `"`, `""`) + `"`
}

func isIdentStart(c byte) bool {
	return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
}

func isIdentByte(c byte) bool { return isIdentStart(c) || (c >= '0' && c <= '9') }
