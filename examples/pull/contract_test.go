package pull

import (
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

var dialects = []string{"postgresql", "sqlserver"}

// TestFilesHaveTheContractParameters checks that each file of each dialect uses exactly the
// parameters of the contract, and that even a plain regular expression finds exactly those: no
// ::cast and no :name inside a string or a comment can fool a simple client.
func TestFilesHaveTheContractParameters(t *testing.T) {
	t.Parallel()
	plain := regexp.MustCompile(`:([A-Za-z_][A-Za-z0-9_]*)`)
	for _, dialect := range dialects {
		for _, name := range contractFiles {
			t.Run(dialect+"/"+name, func(t *testing.T) {
				text := readContract(t, dialect, name)
				_, params, err := scanPlaceholders(text, func(string, int) string { return "?" })
				if err != nil {
					t.Fatal(err)
				}
				if want := contractParams[name]; !reflect.DeepEqual(params, want) {
					t.Errorf("parameters = %q, want %q", params, want)
				}
				if strings.Contains(text, "::") {
					t.Errorf("the file holds a :: cast; write CAST(x AS type) so that a plain :name scan works")
				}
				var naive []string
				for _, m := range plain.FindAllStringSubmatch(text, -1) {
					if !contains(naive, m[1]) {
						naive = append(naive, m[1])
					}
				}
				if !reflect.DeepEqual(naive, params) {
					t.Errorf("a plain scan finds %q, the careful scan %q: a :name hides in a string or a comment", naive, params)
				}
			})
		}
	}
}

// sqlServerStatement returns the SQL Server file without its comments, for text checks.
func sqlServerStatement(t *testing.T, name string) string {
	t.Helper()
	var b strings.Builder
	for _, line := range strings.Split(readContract(t, "sqlserver", name), "\n") {
		if i := strings.Index(line, "--"); i >= 0 && !strings.Contains(line[:i], "'") {
			line = line[:i]
		}
		b.WriteString(line)
		b.WriteByte('\n')
	}
	return b.String()
}

// squeeze collapses every run of white space into one space.
func squeeze(s string) string { return strings.Join(strings.Fields(s), " ") }

func TestSQLServerClaim(t *testing.T) {
	t.Parallel()
	text := sqlServerStatement(t, "claim")
	flat := squeeze(text)

	ordered := []struct {
		name string
		want string
	}{
		{"rolls back every error, and a cancelled call", "SET XACT_ABORT ON;"},
		{"its own transaction", "BEGIN TRANSACTION;"},
		{"the per-source lock", "EXEC @qb_lock_result = sp_getapplock @Resource = :source, @LockMode = 'Exclusive', @LockOwner = 'Transaction', @LockTimeout = 10000;"},
		{"checks the lock result", "IF @qb_lock_result < 0 BEGIN"},
		{"rolls back on failure", "ROLLBACK TRANSACTION;"},
		{"raises 51000 with the exact text", "THROW 51000, 'inbox pull claim: sp_getapplock did not acquire the per-source claim lock', 1; END;"},
		{"one clock reading", "DECLARE @qb_now DATETIME2 = SYSUTCDATETIME();"},
		{"the due branch", "SELECT TOP (:cand_limit)"},
		{"the expired branch", "AND i.lease_expires_at <= @qb_now"},
		{"one head per aggregate", "PARTITION BY COALESCE(c.aggregate_id, N'#' + CONVERT(NVARCHAR(36), c.id)) ORDER BY c.scheduled_at, c.created_at, c.id"},
		{"at most batch heads", "SELECT TOP (:batch) h.id"},
		{"the busy check", "AND b.lease_expires_at > @qb_now"},
		{"a new token", "claim_token = NEWID()"},
		{"the lease", "lease_expires_at = DATEADD(MILLISECOND, CAST(:lease_ms AS INT), @qb_now)"},
		{"returns the message fields and the token", "OUTPUT inserted.id, inserted.source, inserted.idempotency_key, inserted.aggregate_id, inserted.event_type, inserted.payload, inserted.headers, inserted.attempt, inserted.correlation_id, inserted.claim_token"},
		{"row locks that skip locked rows", "FROM inbox AS t WITH (UPDLOCK, READPAST, ROWLOCK)"},
		{"the readiness predicate again", "AND ((t.state = N'pending' AND t.scheduled_at <= @qb_now) OR (t.state = N'processing' AND t.lease_expires_at <= @qb_now));"},
		{"commits", "COMMIT TRANSACTION;"},
	}
	at := 0
	for _, tt := range ordered {
		i := strings.Index(flat[at:], tt.want)
		if i < 0 {
			if strings.Contains(flat, tt.want) {
				t.Errorf("%s: %q is out of order", tt.name, tt.want)
			} else {
				t.Errorf("%s: %q is missing", tt.name, tt.want)
			}
			continue
		}
		at += i + len(tt.want)
	}
	if n := strings.Count(flat, "WITH (UPDLOCK, READPAST, ROWLOCK)"); n != 3 {
		t.Errorf("UPDLOCK, READPAST, ROWLOCK appears %d times, want 3 (both candidate reads and the update)", n)
	}
	if n := strings.Count(flat, "THROW 51000"); n != 1 {
		t.Errorf("THROW 51000 appears %d times, want 1", n)
	}
	for _, banned := range []string{"GETDATE", "GETUTCDATE", "CURRENT_TIMESTAMP", "SYSDATETIME()", "NOLOCK"} {
		if strings.Contains(strings.ToUpper(flat), banned) {
			t.Errorf("the claim uses %s; the lease clock is SYSUTCDATETIME() and reads must see committed rows", banned)
		}
	}
}

// TestSQLServerVariablesDoNotShadowParameters guards against Msg 134: a driver binds :name as
// @name (or @p1, @p2, ...), so no DECLARE may use one of those names.
func TestSQLServerVariablesDoNotShadowParameters(t *testing.T) {
	t.Parallel()
	declared := regexp.MustCompile(`(?i)\bDECLARE\s+@([A-Za-z0-9_]+)`)
	positional := regexp.MustCompile(`(?i)^p[0-9]+$`)
	for _, name := range contractFiles {
		t.Run(name, func(t *testing.T) {
			text := sqlServerStatement(t, name)
			for _, m := range declared.FindAllStringSubmatch(text, -1) {
				v := m[1]
				for _, p := range contractParams[name] {
					if strings.EqualFold(v, p) {
						t.Errorf("DECLARE @%s shares a name with the parameter :%s (Msg 134)", v, p)
					}
				}
				for _, all := range contractParams {
					for _, p := range all {
						if strings.EqualFold(v, p) {
							t.Errorf("DECLARE @%s shares a name with a contract parameter", v)
						}
					}
				}
				if positional.MatchString(v) {
					t.Errorf("DECLARE @%s can clash with a positional driver parameter", v)
				}
				if !strings.HasPrefix(v, "qb_") {
					t.Errorf("DECLARE @%s: local variables take the prefix qb_", v)
				}
			}
			if name != "claim" && declared.MatchString(text) {
				t.Errorf("%s.sql declares a variable; only the claim needs them", name)
			}
		})
	}
}

// TestSQLServerFencedStatements checks that renew, complete, retry and dead carry the whole
// fence and set what the contract says.
func TestSQLServerFencedStatements(t *testing.T) {
	t.Parallel()
	fence := "WHERE id = :id AND state = N'processing' AND claim_token = :token AND lease_expires_at > SYSUTCDATETIME();"
	tests := []struct {
		name string
		sets []string
		not  []string
	}{
		{name: "renew", sets: []string{"SET lease_expires_at = DATEADD(MILLISECOND, CAST(:lease_ms AS INT), SYSUTCDATETIME())"},
			not: []string{"state = N'processed'", "claim_token = NULL"}},
		{name: "complete", sets: []string{"state = N'processed'", "processed_at = SYSUTCDATETIME()", "claim_token = NULL", "lease_expires_at = NULL"},
			not: []string{"attempt"}},
		{name: "retry", sets: []string{"state = N'pending'", "scheduled_at = DATEADD(MILLISECOND, CAST(:delay_ms AS INT), SYSUTCDATETIME())",
			"attempt = attempt + 1", "last_error = :error", "claim_token = NULL", "lease_expires_at = NULL"}},
		{name: "dead", sets: []string{"state = N'dead'", "last_error = :error", "claim_token = NULL", "lease_expires_at = NULL"},
			not: []string{"attempt"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			flat := squeeze(sqlServerStatement(t, tt.name))
			if !strings.HasPrefix(flat, "UPDATE inbox SET ") {
				t.Errorf("statement starts %q, want UPDATE inbox SET", flat[:min(len(flat), 40)])
			}
			if !strings.HasSuffix(flat, fence) {
				t.Errorf("statement does not end with the fence %q:\n%s", fence, flat)
			}
			for _, s := range tt.sets {
				if !strings.Contains(flat, s) {
					t.Errorf("missing %q", s)
				}
			}
			for _, s := range tt.not {
				if strings.Contains(flat, s) {
					t.Errorf("holds %q, which this statement must not change", s)
				}
			}
		})
	}
}

// TestREADMEStatesTheRules keeps the rules of the contract in its README.
func TestREADMEStatesTheRules(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := squeeze(string(b))
	for _, want := range []string{
		"alone in its own transaction, and commit it before a handler runs.",
		"one row per `(source, aggregate_id)` under a live lease.",
		"the claim itself takes the row back, with a new token.",
		"affect exactly one row. Zero rows means the claim is lost",
		"inside the handler's transaction",
		"roll the whole transaction back",
		"every third of the lease duration",
		"LEAST(GREATEST(3 * batch, 50), 500)",
		"**Msg 51000**",
		"never retry the call at once",
		"driver timeout to at least 30 seconds",
		"quoted as an identifier",
	} {
		if !strings.Contains(readme, want) {
			t.Errorf("README.md does not state %q", want)
		}
	}
}
