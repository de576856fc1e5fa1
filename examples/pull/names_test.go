package pull

import (
	"context"
	"reflect"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/alternayte/queuebox/shared/store"
	"github.com/alternayte/queuebox/shared/store/postgres/dbtest"
)

// inboxNames returns the inbox table and its columns as (default, mapped) pairs.
func inboxNames(from, to store.Names) map[string]string {
	pairs := map[string]string{from.InboxTable: to.InboxTable}
	f, g := reflect.ValueOf(from.Inbox), reflect.ValueOf(to.Inbox)
	for i := range f.NumField() {
		pairs[f.Field(i).String()] = g.Field(i).String()
	}
	return pairs
}

// renderNames applies the rule of the README: every default table or column name that stands
// as a whole word outside string literals, quoted identifiers, comments and :name placeholders
// becomes the mapped name, quoted by quote.
func renderNames(src string, mapping map[string]string, quote func(string) string) string {
	var b strings.Builder
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
				end = n
			}
			b.WriteString(src[i:end])
			i = end
		case c == '\'' || c == '"' || c == '[':
			closing := c
			if c == '[' {
				closing = ']'
			}
			end := i + 1
			for end < n && src[end] != closing {
				end++
			}
			end = min(end+1, n)
			b.WriteString(src[i:end])
			i = end
		case c == ':' && i+1 < n && src[i+1] == ':':
			b.WriteString("::")
			i += 2
		case (c == ':' || c == '@') && i+1 < n && isIdentStart(src[i+1]):
			j := i + 1
			for j < n && isIdentByte(src[j]) {
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
			if mapped, ok := mapping[word]; ok {
				word = quote(mapped)
			}
			b.WriteString(word)
			i = j
		default:
			b.WriteByte(c)
			i++
		}
	}
	return b.String()
}

// mappedNames renames the inbox table and every inbox column.
func mappedNames() store.Names {
	names := store.DefaultNames()
	names.InboxTable = "app_messages"
	v := reflect.ValueOf(&names.Inbox).Elem()
	for i := range v.NumField() {
		v.Field(i).SetString("m_" + v.Field(i).String())
	}
	return names
}

// TestStatementsRunOnMappedNames renames the inbox table and all of its columns, renders the
// PostgreSQL statements with the rule of the README, and runs a claim, a renew, a retry, a
// second claim, a dead letter and a completion on the renamed table.
func TestStatementsRunOnMappedNames(t *testing.T) {
	t.Parallel()
	names := mappedNames()
	if err := names.Validate(); err != nil {
		t.Fatal(err)
	}
	pairs := inboxNames(store.DefaultNames(), names)
	c := newContract(t)
	ctx := context.Background()

	// Seed with the default names, then rename.
	ids := c.insert(t,
		seed{source: "orders", key: "a1", aggregate: agg("A"), order: 1},
		seed{source: "orders", key: "a2", aggregate: agg("A"), order: 2},
		seed{source: "orders", key: "n1", order: 3},
	)
	def := store.DefaultNames()
	for column, mapped := range pairs {
		if column == def.InboxTable {
			continue
		}
		dbtest.Exec(t, c.pool, "ALTER TABLE inbox RENAME COLUMN "+pgx.Identifier{column}.Sanitize()+" TO "+pgx.Identifier{mapped}.Sanitize())
	}
	dbtest.Exec(t, c.pool, "ALTER TABLE inbox RENAME TO "+pgx.Identifier{names.InboxTable}.Sanitize())

	quote := func(s string) string { return pgx.Identifier{s}.Sanitize() }
	for _, s := range []*statement{&c.claim, &c.renew, &c.complete, &c.retry, &c.dead} {
		rendered := renderNames(readContract(t, "postgresql", strings.TrimSuffix(s.file, ".sql")), pairs, quote)
		sql, params, err := positional(rendered)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(params, s.params) {
			t.Fatalf("%s: rendering changed the parameters to %q", s.file, params)
		}
		s.sql = sql
	}

	first := c.claimN(t, "orders", 10)
	if got := keysOf(first); !reflect.DeepEqual(got, []string{"a1", "n1"}) {
		t.Fatalf("claim on the mapped table = %q, want [a1 n1]", got)
	}
	tokens := map[string]string{}
	for _, m := range first {
		tokens[m.IdempotencyKey] = m.Token
	}
	steps := []struct {
		name   string
		s      statement
		values map[string]any
	}{
		{"renew", c.renew, map[string]any{"id": ids["a1"], "token": tokens["a1"], "lease_ms": 30_000}},
		{"retry", c.retry, map[string]any{"id": ids["a1"], "token": tokens["a1"], "delay_ms": 0, "error": "x"}},
		{"dead", c.dead, map[string]any{"id": ids["n1"], "token": tokens["n1"], "error": "y"}},
	}
	for _, st := range steps {
		if n := c.mustRun(t, st.s, st.values); n != 1 {
			t.Fatalf("%s on the mapped table changed %d rows, want 1", st.name, n)
		}
	}
	second := c.claimN(t, "orders", 10)
	if got := keysOf(second); !reflect.DeepEqual(got, []string{"a2"}) {
		t.Fatalf("claim after the retry = %q, want [a2] (the retried a1 now orders after a2 by scheduled_at)", got)
	}
	if n := c.mustRun(t, c.complete, map[string]any{"id": second[0].ID, "token": second[0].Token}); n != 1 {
		t.Fatalf("complete on the mapped table changed %d rows, want 1", n)
	}
	var states string
	err := c.pool.QueryRow(ctx, `SELECT string_agg(m_idempotency_key || '=' || m_state || '/' || m_attempt, ',' ORDER BY m_idempotency_key) FROM app_messages`).Scan(&states)
	if err != nil {
		t.Fatal(err)
	}
	if want := "a1=pending/1,a2=processed/0,n1=dead/0"; states != want {
		t.Errorf("rows = %s, want %s", states, want)
	}
}

// TestSQLServerRenderingLeavesNoDefaultName renders the SQL Server statements with mapped
// names and checks that no default name is left outside strings and comments, and that the
// parameters survive.
func TestSQLServerRenderingLeavesNoDefaultName(t *testing.T) {
	t.Parallel()
	pairs := inboxNames(store.DefaultNames(), mappedNames())
	quote := func(s string) string { return "[" + strings.ReplaceAll(s, "]", "]]") + "]" }
	for _, name := range contractFiles {
		t.Run(name, func(t *testing.T) {
			text := readContract(t, "sqlserver", name)
			rendered := renderNames(text, pairs, quote)
			_, params, err := scanPlaceholders(rendered, func(string, int) string { return "?" })
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(params, contractParams[name]) {
				t.Errorf("parameters after rendering = %q, want %q", params, contractParams[name])
			}
			// Rendering twice with an identity map over the mapped names finds no default name.
			leftovers := map[string]string{}
			for def := range pairs {
				leftovers[def] = "LEFTOVER_" + def
			}
			again := renderNames(rendered, leftovers, func(s string) string { return s })
			if i := strings.Index(again, "LEFTOVER_"); i >= 0 {
				t.Errorf("a default name is left after rendering: %q", again[max(0, i-40):min(len(again), i+60)])
			}
			if !strings.Contains(rendered, "inserted.[m_id]") && name == "claim" {
				t.Errorf("the OUTPUT clause was not rendered:\n%s", rendered)
			}
		})
	}
}
