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
	var b strings.Builder
	b.Grow(len(src) + 64)
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
			end := strings.Index(src[i+2:], "*/")
			if end < 0 {
				return "", nil, fmt.Errorf("unterminated comment at byte %d", i)
			}
			end += i + 4
			b.WriteString(src[i:end])
			i = end
		case c == '\'' || c == '"' || (c == '[' && dialect == DialectSQLServer):
			closing := c
			if c == '[' {
				closing = ']'
			}
			end := i + 1
			for {
				k := strings.IndexByte(src[end:], closing)
				if k < 0 {
					return "", nil, fmt.Errorf("unterminated quote at byte %d", i)
				}
				end += k + 1
				// A doubled closing character stays inside.
				if end < n && src[end] == closing {
					end++
					continue
				}
				break
			}
			b.WriteString(src[i:end])
			i = end
		case c == ':' && i+1 < n && src[i+1] == ':':
			b.WriteString("::")
			i += 2
		case c == ':' && i+1 < n && isIdentStart(src[i+1]) && (i == 0 || !isIdentByte(src[i-1])):
			j := i + 1
			for j < n && isIdentByte(src[j]) {
				j++
			}
			name := src[i+1 : j]
			if lit, ok := literals[name]; ok {
				b.WriteString(lit)
				i = j
				continue
			}
			k, seen := index[name]
			if !seen {
				names = append(names, name)
				k = len(names)
				index[name] = k
			}
			if dialect == DialectSQLServer {
				b.WriteString("@" + name)
			} else {
				fmt.Fprintf(&b, "$%d", k)
			}
			i = j
		case c == '@':
			// A T-SQL variable (@qb_now, @@TRANCOUNT, @Resource) is never a column.
			j := i + 1
			for j < n && (src[j] == '@' || isIdentByte(src[j])) {
				j++
			}
			b.WriteString(src[i:j])
			i = j
		case isIdentStart(c) && (i == 0 || !isIdentByte(src[i-1])):
			j := i
			for j < n && isIdentByte(src[j]) {
				j++
			}
			word := src[i:j]
			if mapped, ok := renames[word]; ok {
				word = quoteIdentifier(dialect, mapped)
			}
			b.WriteString(word)
			i = j
		default:
			b.WriteByte(c)
			i++
		}
	}
	return b.String(), names, nil
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
