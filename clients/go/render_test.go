package queuebox

import (
	"reflect"
	"regexp"
	"strings"
	"testing"
)

// contractParams are the parameters of each statement, in order of first appearance.
var contractParams = map[string][]string{
	"claim":    {"source", "cand_limit", "batch", "lease_ms"},
	"renew":    {"lease_ms", "id", "token"},
	"complete": {"id", "token"},
	"retry":    {"delay_ms", "error", "id", "token"},
	"dead":     {"error", "id", "token"},
}

func (s statements) byName() map[string]statement {
	return map[string]statement{"claim": s.claim, "renew": s.renew, "complete": s.complete, "retry": s.retry, "dead": s.dead}
}

// TestDefaultSchemaChangesOnlyThePlaceholders renders the statements with the default names
// and turns the parameters back into :name placeholders: the result is the contract file
// itself, byte for byte.
func TestDefaultSchemaChangesOnlyThePlaceholders(t *testing.T) {
	t.Parallel()
	tests := []struct {
		dialect Dialect
		back    func(text string, params []string) string
	}{
		{DialectPostgreSQL, func(text string, params []string) string {
			return regexp.MustCompile(`\$([0-9]+)`).ReplaceAllStringFunc(text, func(m string) string {
				var n int
				for _, c := range m[1:] {
					n = n*10 + int(c-'0')
				}
				return ":" + params[n-1]
			})
		}},
		{DialectSQLServer, func(text string, params []string) string {
			return regexp.MustCompile(`@(`+strings.Join(params, "|")+`)\b`).ReplaceAllString(text, ":$1")
		}},
	}
	for _, tt := range tests {
		t.Run(string(tt.dialect), func(t *testing.T) {
			t.Parallel()
			s, err := loadStatements(tt.dialect, DefaultSchema())
			if err != nil {
				t.Fatal(err)
			}
			for name, st := range s.byName() {
				if !reflect.DeepEqual(st.params, contractParams[name]) {
					t.Errorf("%s: parameters %q, want %q", name, st.params, contractParams[name])
				}
				raw, err := contractFiles.ReadFile("sql/" + string(tt.dialect) + "/" + name + ".sql")
				if err != nil {
					t.Fatal(err)
				}
				if got := tt.back(st.text, st.params); got != string(raw) {
					t.Errorf("%s: rendering changed more than the placeholders:\n%s", name, got)
				}
				if strings.Contains(st.text, ":"+st.params[0]) {
					t.Errorf("%s: a placeholder is left: %s", name, st.text)
				}
			}
		})
	}
}

// everyNameMapped renames the table and every column.
func everyNameMapped() Schema {
	s := DefaultSchema()
	for _, f := range s.fields() {
		*f.ptr = "m_" + *f.ptr
	}
	s.Table = "App_Messages"
	return s
}

// TestMappedSchemaLeavesNoDefaultName renders the statements of both dialects with every name
// mapped: no default name is left outside strings and comments, every mapped name is quoted,
// and the parameters survive.
func TestMappedSchemaLeavesNoDefaultName(t *testing.T) {
	t.Parallel()
	schema := everyNameMapped()
	defaults := DefaultSchema().renames() // empty: defaults map to themselves
	if len(defaults) != 0 {
		t.Fatalf("DefaultSchema renames %v", defaults)
	}
	leftovers := map[string]string{}
	for def := range schema.renames() {
		leftovers[def] = "LEFTOVER_" + def
	}
	for _, dialect := range []Dialect{DialectPostgreSQL, DialectSQLServer} {
		t.Run(string(dialect), func(t *testing.T) {
			t.Parallel()
			s, err := loadStatements(dialect, schema)
			if err != nil {
				t.Fatal(err)
			}
			for name, st := range s.byName() {
				if !reflect.DeepEqual(st.params, contractParams[name]) {
					t.Errorf("%s: parameters after rendering %q, want %q", name, st.params, contractParams[name])
				}
				// Rendering the result again with the default names mapped to markers finds none.
				again, _, err := render(st.text, dialect, leftovers, nil)
				if err != nil {
					t.Fatal(err)
				}
				if i := strings.Index(again, "LEFTOVER_"); i >= 0 {
					t.Errorf("%s: a default name is left: %q", name, again[max(0, i-40):min(len(again), i+60)])
				}
				table := quoteIdentifier(dialect, "App_Messages")
				if !strings.Contains(st.text, table) {
					t.Errorf("%s: the mapped table %s is missing:\n%s", name, table, st.text)
				}
			}
			if dialect == DialectSQLServer && !strings.Contains(s.claim.text, "inserted.[m_id]") {
				t.Errorf("the OUTPUT clause was not rendered:\n%s", s.claim.text)
			}
			if dialect == DialectSQLServer && (!strings.Contains(s.claim.text, "@qb_now") || !strings.Contains(s.claim.text, "@@TRANCOUNT")) {
				t.Errorf("a T-SQL variable was changed:\n%s", s.claim.text)
			}
			if dialect == DialectPostgreSQL && !strings.Contains(s.claim.text, `i."m_source" = CAST($1 AS TEXT)`) {
				t.Errorf("the source predicate was not rendered as expected:\n%s", s.claim.text)
			}
		})
	}
}

func TestArgs(t *testing.T) {
	t.Parallel()
	pg, err := loadStatements(DialectPostgreSQL, DefaultSchema())
	if err != nil {
		t.Fatal(err)
	}
	ms, err := loadStatements(DialectSQLServer, DefaultSchema())
	if err != nil {
		t.Fatal(err)
	}
	values := map[string]any{"id": "i", "token": "t", "delay_ms": int64(5), "error": "e"}
	got, err := pg.retry.args(values)
	if err != nil {
		t.Fatal(err)
	}
	if want := []any{int64(5), "e", "i", "t"}; !reflect.DeepEqual(got, want) {
		t.Errorf("PostgreSQL retry args = %v, want %v", got, want)
	}
	got, err = ms.retry.args(values)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 4 || reflect.TypeOf(got[0]).Name() != "NamedArg" {
		t.Fatalf("SQL Server retry args = %#v, want four sql.NamedArg", got)
	}
	if _, err := pg.retry.args(map[string]any{"id": "i"}); err == nil {
		t.Error("args without every value returned no error")
	}
}
