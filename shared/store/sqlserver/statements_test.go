package sqlserver

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/alternayte/queuebox/shared/store"
)

// renamedNames renames both tables and every column, so that a default name that leaks into a
// statement shows.
func renamedNames() store.Names {
	return store.Names{
		OutboxTable: "t_outbox",
		InboxTable:  "t_inbox",
		Outbox: store.OutboxColumns{
			ID: "x_id", Topic: "x_topic", Key: "x_key", AggregateType: "x_aggregate_type",
			Payload: "x_payload", Headers: "x_headers", State: "x_state", Attempt: "x_attempt",
			MaxAttempts: "x_max_attempts", ScheduledAt: "x_scheduled_at", CreatedAt: "x_created_at",
			UpdatedAt: "x_updated_at", ClaimedAt: "x_claimed_at", ClaimToken: "x_claim_token",
			LeaseExpiresAt: "x_lease_expires_at", LastError: "x_last_error", Sequence: "x_sequence",
		},
		Inbox: store.InboxColumns{
			ID: "y_id", Source: "y_source", IdempotencyKey: "y_idempotency_key",
			AggregateID: "y_aggregate_id", EventType: "y_event_type", Payload: "y_payload",
			Headers: "y_headers", State: "y_state", Consumption: "y_consumption", Attempt: "y_attempt",
			LastError: "y_last_error", ScheduledAt: "y_scheduled_at", CreatedAt: "y_created_at",
			ProcessedAt: "y_processed_at", ClaimedAt: "y_claimed_at", ClaimToken: "y_claim_token",
			LeaseExpiresAt: "y_lease_expires_at", CorrelationID: "y_correlation_id",
		},
	}
}

// defaultColumnNames are the default table and column names of both tables.
func defaultColumnNames() []string {
	d := store.DefaultNames()
	var out []string
	for _, v := range []any{d.Outbox, d.Inbox} {
		rv := reflect.ValueOf(v)
		for i := range rv.NumField() {
			out = append(out, rv.Field(i).String())
		}
	}
	out = append(out, d.OutboxTable, d.InboxTable)
	slices.Sort(out)
	return slices.Compact(out)
}

// allStatements returns every statement of st by field name; the outbox insert variants are
// outboxInsert[0] to outboxInsert[15].
func allStatements(st statements) map[string]string {
	out := map[string]string{}
	addStatements(out, "", reflect.ValueOf(st))
	return out
}

// addStatements adds the string fields of v, the elements of its arrays and, under the
// field's name, the fields of its nested statement structs (replay).
func addStatements(out map[string]string, prefix string, rv reflect.Value) {
	rt := rv.Type()
	for i := range rv.NumField() {
		f, name := rv.Field(i), prefix+rt.Field(i).Name
		switch f.Kind() {
		case reflect.String:
			out[name] = f.String()
		case reflect.Array:
			for j := range f.Len() {
				out[fmt.Sprintf("%s[%d]", name, j)] = f.Index(j).String()
			}
		case reflect.Struct:
			addStatements(out, name+".", f)
		}
	}
}

func mustStatements(t *testing.T, n store.Names) statements {
	t.Helper()
	st, err := buildStatements(n)
	require.NoError(t, err)
	return st
}

var (
	stringLiteral = regexp.MustCompile(`N?'(?:[^']|'')*'`)
	bracketed     = regexp.MustCompile(`\[(?:[^\]]|\]\])*\]`)
	placeholderRE = regexp.MustCompile(`@p([0-9]+)\b`)
	variableRE    = regexp.MustCompile(`(^|[^@\w])@([A-Za-z_][A-Za-z0-9_]*)`)
	declareRE     = regexp.MustCompile(`(?i)\bDECLARE\s+@([A-Za-z_][A-Za-z0-9_]*)`)
)

// withoutLiterals replaces every string literal with ”.
func withoutLiterals(s string) string { return stringLiteral.ReplaceAllString(s, "''") }

func TestStatementsUseOnlyConfiguredNames(t *testing.T) {
	t.Parallel()
	n := renamedNames()
	allowed := map[string]bool{}
	for _, v := range []any{n.Outbox, n.Inbox} {
		rv := reflect.ValueOf(v)
		for i := range rv.NumField() {
			allowed[quote(rv.Field(i).String())] = true
		}
	}
	allowed[quote(n.OutboxTable)] = true
	allowed[quote(n.InboxTable)] = true

	for name, text := range allStatements(mustStatements(t, n)) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			require.NotEmpty(t, text)
			code := withoutLiterals(text)
			for _, ident := range bracketed.FindAllString(code, -1) {
				assert.True(t, allowed[ident], "statement names %s, which is not a configured name", ident)
			}
			rest := bracketed.ReplaceAllString(code, "[]")
			for _, def := range defaultColumnNames() {
				re := regexp.MustCompile(`(?i)\b` + regexp.QuoteMeta(def) + `\b`)
				assert.False(t, re.MatchString(rest), "default name %q appears outside a quoted configured name:\n%s", def, text)
			}
		})
	}
}

func TestStatementsQuoteConfiguredNames(t *testing.T) {
	t.Parallel()
	st := mustStatements(t, renamedNames())
	tests := []struct {
		name string
		text string
		want []string
	}{
		{"outbox claim locks the renamed table", st.outboxClaim, []string{
			"N'queuebox_outbox_claim_t_outbox'", "FROM [t_outbox] AS o WITH (UPDLOCK, READPAST, ROWLOCK)",
			"o.[x_key] IS NULL", "earlier.[x_key] = o.[x_key]", "earlier.[x_sequence] < o.[x_sequence]",
			"inserted.[x_payload]", "inserted.[x_sequence]",
		}},
		{"relay claim locks the renamed table", st.inboxRelayClaim, []string{
			"N'queuebox_inbox_claim_t_inbox'", "FROM [t_inbox] AS i WITH (UPDLOCK, READPAST, ROWLOCK)",
			"busy.[y_aggregate_id] = i.[y_aggregate_id]", "inserted.[y_idempotency_key]",
		}},
		{"inbox insert deduplicates on the renamed columns", st.inboxInsert, []string{
			"INSERT INTO [t_inbox] ([y_source], [y_idempotency_key]",
			"existing.[y_source] = @p1", "existing.[y_idempotency_key] = @p2",
		}},
		{"fence on the renamed columns", st.outboxMarkSent, []string{
			"o.[x_id] = batch.batch_id", "o.[x_claim_token] = batch.batch_token",
			"o.[x_state] = N'processing'", "o.[x_lease_expires_at] > SYSUTCDATETIME()",
		}},
		{"insert with every optional column", st.outboxInsert[insertID|insertHeaders|insertMaxAttempts|insertScheduledAt], []string{
			"INSERT INTO [t_outbox] ([x_topic], [x_key], [x_aggregate_type], [x_payload], [x_id], [x_headers], [x_max_attempts], [x_scheduled_at])",
			"OUTPUT inserted.[x_id]",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			for _, w := range tt.want {
				assert.Contains(t, tt.text, w)
			}
		})
	}
}

func TestStatementClauses(t *testing.T) {
	t.Parallel()
	st := mustStatements(t, store.DefaultNames())
	lockClauses := func(lock, message string) []string {
		return []string{
			"DECLARE @qb_lock_result INT;",
			"EXEC @qb_lock_result = sp_getapplock @Resource = N'" + lock + "', @LockMode = 'Exclusive', @LockOwner = 'Transaction', @LockTimeout = 10000;",
			"IF @qb_lock_result < 0",
			"THROW 51000, N'" + message + lock + "', 1;",
			"DECLARE @qb_now DATETIME2 = SYSUTCDATETIME();",
		}
	}
	outboxFenceClauses := []string{
		"JOIN OPENJSON(@p1) WITH (",
		"batch_id UNIQUEIDENTIFIER '$.id'",
		"batch_token UNIQUEIDENTIFIER '$.token'",
		"ON o.[id] = batch.batch_id",
		"AND o.[claim_token] = batch.batch_token",
		"WHERE o.[state] = N'processing'",
		"AND o.[lease_expires_at] > SYSUTCDATETIME();",
	}
	inboxFenceClauses := []string{
		"WHERE [id] = @p1",
		"AND [state] = N'processing'",
		"AND [claim_token] = @p2",
		"AND [lease_expires_at] > SYSUTCDATETIME();",
	}
	tests := []struct {
		name    string
		text    string
		want    []string
		wantNot []string
	}{
		{
			name: "outbox claim",
			text: st.outboxClaim,
			want: append(lockClauses("queuebox_outbox_claim_outbox", "outbox claim: sp_getapplock did not acquire the claim lock "),
				"SELECT TOP (@p1) o.*",
				"FROM [outbox] AS o WITH (UPDLOCK, READPAST, ROWLOCK)",
				"WHERE o.[state] = N'pending'",
				"AND o.[scheduled_at] <= @qb_now",
				"AND (o.[key] IS NULL",
				"OR o.[key] = N''",
				"OR NOT EXISTS (",
				"FROM [outbox] AS earlier",
				"WHERE earlier.[key] = o.[key]",
				"AND earlier.[sequence] < o.[sequence]",
				"AND earlier.[state] IN (N'pending', N'processing')))",
				"ORDER BY o.[scheduled_at], o.[sequence]",
				"UPDATE candidates",
				"SET [state] = N'processing',",
				"[claim_token] = NEWID(),",
				"[claimed_at] = @qb_now,",
				"[lease_expires_at] = DATEADD(millisecond, @p2, @qb_now),",
				"[updated_at] = @qb_now",
				"OUTPUT inserted.[id], inserted.[topic], inserted.[key], inserted.[aggregate_type],",
				"inserted.[payload], inserted.[headers], inserted.[attempt], inserted.[max_attempts],",
				"inserted.[scheduled_at], inserted.[created_at], inserted.[sequence],",
				"inserted.[claim_token], inserted.[lease_expires_at];",
			),
			// The earlier-row probe must see locked rows, never skip them.
			wantNot: []string{"[outbox] AS earlier WITH", "[processing]"},
		},
		{
			name: "outbox renew",
			text: st.outboxRenew,
			want: append([]string{
				"UPDATE o",
				"SET o.[lease_expires_at] = DATEADD(millisecond, @p2, SYSUTCDATETIME())",
				"OUTPUT inserted.[id], inserted.[claim_token]",
			}, outboxFenceClauses...),
			wantNot: []string{"[state] = N'sent'", "[updated_at]"},
		},
		{
			name: "outbox mark sent",
			text: st.outboxMarkSent,
			want: append([]string{
				"SET o.[state] = N'sent',",
				"o.[claim_token] = NULL,",
				"o.[lease_expires_at] = NULL,",
				"o.[updated_at] = SYSUTCDATETIME()",
				"OUTPUT inserted.[id]\n",
			}, outboxFenceClauses...),
			wantNot: []string{"[attempt]"},
		},
		{
			name: "outbox retry",
			text: st.outboxRetry,
			want: append([]string{
				"SET o.[state] = N'pending',",
				"o.[attempt] = o.[attempt] + 1,",
				"o.[scheduled_at] = DATEADD(millisecond, batch.batch_delay_ms, SYSUTCDATETIME()),",
				"o.[last_error] = batch.batch_last_error,",
				"o.[claim_token] = NULL,",
				"o.[lease_expires_at] = NULL,",
				"batch_delay_ms INT '$.delay_ms'",
				"batch_last_error NVARCHAR(MAX) '$.last_error'",
				"OUTPUT inserted.[id]\n",
			}, outboxFenceClauses...),
		},
		{
			name: "outbox mark dead",
			text: st.outboxMarkDead,
			want: append([]string{
				"SET o.[state] = N'dead',",
				"o.[last_error] = batch.batch_last_error,",
				"o.[claim_token] = NULL,",
				"o.[lease_expires_at] = NULL,",
				"batch_last_error NVARCHAR(MAX) '$.last_error'",
				"OUTPUT inserted.[id]\n",
			}, outboxFenceClauses...),
			wantNot: []string{"[attempt]", "delay_ms"},
		},
		{
			name: "outbox reclaim",
			text: st.outboxReclaim,
			want: []string{
				"UPDATE [outbox]", "SET [state] = N'pending',", "[claim_token] = NULL,",
				"[lease_expires_at] = NULL,", "WHERE [state] = N'processing'",
				"AND ([lease_expires_at] <= SYSUTCDATETIME() OR [lease_expires_at] IS NULL);",
			},
			wantNot: []string{"[attempt]"},
		},
		{
			name: "outbox replay",
			text: st.outboxReplay,
			want: []string{
				"SET [state] = N'pending',", "[attempt] = 0,", "[scheduled_at] = SYSUTCDATETIME(),",
				"[last_error] = NULL,", "[claimed_at] = NULL,", "[claim_token] = NULL,",
				"[lease_expires_at] = NULL,", "WHERE [state] IN (N'sent', N'dead')",
				"(@p1 IS NULL OR [id] IN (", "SELECT CONVERT(UNIQUEIDENTIFIER, replay.value) FROM OPENJSON(@p1) AS replay))",
				"(@p2 IS NULL OR [topic] IN (", "SELECT replay.value FROM OPENJSON(@p2) AS replay))",
				"(@p3 IS NULL OR [created_at] > CAST(@p3 AS DATETIME2))",
				"(@p4 IS NULL OR [created_at] < CAST(@p4 AS DATETIME2))",
				"OPTION (RECOMPILE);",
			},
		},
		{
			name: "outbox stats",
			text: st.outboxStats,
			want: []string{
				"SELECT [topic], COUNT_BIG(*), DATEDIFF_BIG(millisecond, MIN([created_at]), SYSUTCDATETIME())",
				"WHERE [state] = N'pending'", "GROUP BY [topic];",
			},
		},
		{
			name: "outbox delete finished",
			text: st.outboxDeleteFinished,
			want: []string{
				"DELETE TOP (@p1)", "FROM [outbox]", "WHERE [state] IN (N'sent', N'dead')",
				"AND [updated_at] < DATEADD(millisecond, @p3, DATEADD(second, @p2, SYSUTCDATETIME()));",
			},
		},
		{
			name: "outbox delete excess",
			text: st.outboxDeleteExcess,
			want: []string{
				"ROW_NUMBER() OVER (ORDER BY o.[updated_at] DESC, o.[sequence] DESC) AS qb_rank",
				"WHERE o.[state] = @p2", "DELETE TOP (@p1)", "FROM ranked", "WHERE qb_rank > @p3;",
			},
		},
		{
			name: "inbox insert",
			text: st.inboxInsert,
			want: []string{
				"INSERT INTO [inbox] ([source], [idempotency_key], [aggregate_id], [event_type],",
				"[payload], [headers], [correlation_id], [consumption], [state], [last_error])",
				"OUTPUT inserted.[id]",
				"SELECT @p1, @p2, @p3, @p4, @p5, @p6, @p7, @p8, @p9, @p10",
				"WHERE NOT EXISTS (",
				"FROM [inbox] AS existing WITH (UPDLOCK, HOLDLOCK)",
				"WHERE existing.[source] = @p1",
				"AND existing.[idempotency_key] = @p2);",
			},
		},
		{
			name: "inbox relay claim",
			text: st.inboxRelayClaim,
			want: append(lockClauses("queuebox_inbox_claim_inbox", "inbox relay claim: sp_getapplock did not acquire the claim lock "),
				"SELECT TOP (@p1) i.*",
				"FROM [inbox] AS i WITH (UPDLOCK, READPAST, ROWLOCK)",
				"WHERE i.[state] = N'pending'",
				"AND i.[consumption] = N'push'",
				"AND (i.[aggregate_id] IS NULL",
				"OR i.[aggregate_id] = N''",
				"FROM [inbox] AS busy",
				"WHERE busy.[aggregate_id] = i.[aggregate_id]",
				"AND busy.[consumption] = N'push'",
				"AND busy.[state] = N'processing')",
				"FROM [inbox] AS earlier",
				"AND earlier.[state] = N'pending'",
				"AND (earlier.[created_at] < i.[created_at]",
				"OR (earlier.[created_at] = i.[created_at] AND earlier.[id] < i.[id])",
				"ORDER BY i.[created_at], i.[id]",
				"SET [state] = N'processing',",
				"[claim_token] = NEWID(),",
				"[claimed_at] = @qb_now,",
				"[lease_expires_at] = DATEADD(millisecond, @p2, @qb_now)",
				"OUTPUT inserted.[id], inserted.[source], inserted.[idempotency_key], inserted.[aggregate_id],",
				"inserted.[event_type], inserted.[payload], inserted.[headers], inserted.[correlation_id],",
				"inserted.[consumption], inserted.[attempt], inserted.[created_at],",
				"inserted.[claim_token], inserted.[lease_expires_at];",
			),
			wantNot: []string{"N'pull'", "[attempt] =", "[inbox] AS busy WITH", "[inbox] AS earlier WITH"},
		},
		{
			name: "inbox relay processed",
			text: st.inboxRelayProcessed,
			want: append([]string{
				"UPDATE [inbox]", "SET [state] = N'processed',", "[processed_at] = SYSUTCDATETIME(),",
				"[claim_token] = NULL,", "[lease_expires_at] = NULL",
			}, inboxFenceClauses...),
		},
		{
			name: "inbox relay dead",
			text: st.inboxRelayDead,
			want: append([]string{
				"SET [state] = N'dead',", "[last_error] = @p3,", "[claim_token] = NULL,", "[lease_expires_at] = NULL",
			}, inboxFenceClauses...),
			wantNot: []string{"[attempt]"},
		},
		{
			name: "inbox relay renew",
			text: st.inboxRelayRenew,
			want: append([]string{
				"SET [lease_expires_at] = DATEADD(millisecond, @p3, SYSUTCDATETIME())",
			}, inboxFenceClauses...),
		},
		{
			name: "inbox relay reclaim",
			text: st.inboxRelayReclaim,
			want: []string{
				"SET [state] = N'pending',", "[claim_token] = NULL,", "[lease_expires_at] = NULL",
				"WHERE [state] = N'processing'", "AND [consumption] = N'push'",
				"AND ([lease_expires_at] <= SYSUTCDATETIME() OR [lease_expires_at] IS NULL);",
			},
		},
		{
			name: "inbox stats",
			text: st.inboxStats,
			want: []string{
				"SELECT COUNT_BIG(*), DATEDIFF_BIG(millisecond, MIN([created_at]), SYSUTCDATETIME())",
				"FROM [inbox]", "WHERE [state] = N'pending';",
			},
			wantNot: []string{"[consumption]"},
		},
		{
			name: "inbox delete finished",
			text: st.inboxDeleteFinished,
			want: []string{
				"DELETE TOP (@p1)", "FROM [inbox]", "WHERE [state] IN (N'processed', N'dead')",
				"AND [created_at] < DATEADD(millisecond, @p3, DATEADD(second, @p2, SYSUTCDATETIME()));",
			},
		},
		{
			name: "check schema",
			text: st.checkSchema,
			want: []string{"SELECT OBJECT_ID(@p1), COL_LENGTH(@p1, @p2), OBJECT_ID(@p3), COL_LENGTH(@p3, @p4);"},
		},
		{
			name: "outbox insert without optional columns",
			text: st.outboxInsert[0],
			want: []string{
				"INSERT INTO [outbox] ([topic], [key], [aggregate_type], [payload])",
				"OUTPUT inserted.[id]",
				"VALUES (@p1, @p2, @p3, @p4);",
			},
		},
		{
			name: "outbox insert with a delay",
			text: st.outboxInsert[insertScheduledAt],
			want: []string{
				"INSERT INTO [outbox] ([topic], [key], [aggregate_type], [payload], [scheduled_at])",
				"VALUES (@p1, @p2, @p3, @p4, DATEADD(millisecond, @p6, DATEADD(second, @p5, SYSUTCDATETIME())));",
			},
		},
		{
			name: "outbox insert with every optional column",
			text: st.outboxInsert[insertID|insertHeaders|insertMaxAttempts|insertScheduledAt],
			want: []string{
				"INSERT INTO [outbox] ([topic], [key], [aggregate_type], [payload], [id], [headers], [max_attempts], [scheduled_at])",
				"VALUES (@p1, @p2, @p3, @p4, @p5, @p6, @p7, DATEADD(millisecond, @p9, DATEADD(second, @p8, SYSUTCDATETIME())));",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			for _, w := range tt.want {
				assert.Contains(t, tt.text, w)
			}
			for _, w := range tt.wantNot {
				assert.NotContains(t, tt.text, w)
			}
		})
	}
}

func TestStatementsUseTheDatabaseClock(t *testing.T) {
	t.Parallel()
	for name, text := range allStatements(mustStatements(t, store.DefaultNames())) {
		for _, clock := range []string{"GETDATE", "GETUTCDATE", "CURRENT_TIMESTAMP", "SYSDATETIME()", "SYSDATETIMEOFFSET"} {
			assert.NotContains(t, strings.ToUpper(text), clock, "%s: every time comes from SYSUTCDATETIME()", name)
		}
	}
}

func TestStatementsAreBalanced(t *testing.T) {
	t.Parallel()
	for _, names := range []store.Names{store.DefaultNames(), renamedNames()} {
		for name, text := range allStatements(mustStatements(t, names)) {
			assert.NoError(t, checkBalanced(text), "%s:\n%s", name, text)
		}
	}
}

// checkBalanced checks that the parentheses of a T-SQL text are balanced outside string
// literals and bracketed identifiers, and that every literal and identifier is closed.
func checkBalanced(s string) error {
	depth := 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\'':
			for i++; ; i++ {
				if i >= len(s) {
					return fmt.Errorf("unterminated string literal")
				}
				if s[i] == '\'' {
					if i+1 < len(s) && s[i+1] == '\'' {
						i++
						continue
					}
					break
				}
			}
		case '[':
			for i++; ; i++ {
				if i >= len(s) {
					return fmt.Errorf("unterminated bracketed identifier")
				}
				if s[i] == ']' {
					if i+1 < len(s) && s[i+1] == ']' {
						i++
						continue
					}
					break
				}
			}
		case ']':
			return fmt.Errorf("] outside an identifier at %d", i)
		case '(':
			depth++
		case ')':
			depth--
			if depth < 0 {
				return fmt.Errorf(") without ( at %d", i)
			}
		}
	}
	if depth != 0 {
		return fmt.Errorf("%d unclosed (", depth)
	}
	return nil
}

func TestCheckBalancedFindsFaults(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		text    string
		wantErr bool
	}{
		{"balanced", "SELECT (1) FROM [a]]b] WHERE x = N'it''s (';", false},
		{"open paren", "SELECT (1", true},
		{"close paren", "SELECT 1)", true},
		{"open literal", "SELECT 'a", true},
		{"open identifier", "SELECT [a", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := checkBalanced(tt.text)
			if tt.wantErr {
				assert.Error(t, err)
			} else {
				assert.NoError(t, err)
			}
		})
	}
}

// execNamedArguments are the named arguments of the procedures the statements call; they are
// neither parameters nor local variables.
var execNamedArguments = map[string]bool{"resource": true, "lockmode": true, "lockowner": true, "locktimeout": true}

// checkVariables checks the variables of a statement that is sent with nargs positional
// parameters: the placeholders used are exactly @p1..@pN, every other variable is a declared
// local (or a named argument of a procedure), and no local shares a name with a parameter
// (Msg 134). T-SQL compares variable names without regard to case.
func checkVariables(text string, nargs int) error {
	code := bracketed.ReplaceAllString(withoutLiterals(text), "[]")
	used := map[int]bool{}
	for _, m := range placeholderRE.FindAllStringSubmatch(code, -1) {
		n, _ := strconv.Atoi(m[1])
		used[n] = true
	}
	var problems []string
	for n := range used {
		if n < 1 || n > nargs {
			problems = append(problems, fmt.Sprintf("@p%d has no argument (%d sent)", n, nargs))
		}
	}
	for n := 1; n <= nargs; n++ {
		if !used[n] {
			problems = append(problems, fmt.Sprintf("argument %d is sent but @p%d is not used", n, n))
		}
	}
	locals := map[string]bool{}
	for _, m := range declareRE.FindAllStringSubmatch(code, -1) {
		name := strings.ToLower(m[1])
		if regexp.MustCompile(`^p[0-9]+$`).MatchString(name) {
			problems = append(problems, fmt.Sprintf("local @%s has the name of a parameter (Msg 134)", m[1]))
		}
		if locals[name] {
			problems = append(problems, fmt.Sprintf("local @%s is declared twice", m[1]))
		}
		locals[name] = true
	}
	for _, m := range variableRE.FindAllStringSubmatch(code, -1) {
		name := strings.ToLower(m[2])
		if placeholderRE.MatchString("@"+name) || locals[name] || execNamedArguments[name] {
			continue
		}
		problems = append(problems, fmt.Sprintf("@%s is neither a parameter nor a declared local", m[2]))
	}
	sort.Strings(problems)
	if len(problems) > 0 {
		return fmt.Errorf("%s", strings.Join(problems, "; "))
	}
	return nil
}

func TestCheckVariablesFindsFaults(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		text    string
		nargs   int
		wantErr bool
	}{
		{"matching", "DECLARE @qb_x INT = @p1; SELECT @qb_x, @p2;", 2, false},
		{"local named like a parameter", "DECLARE @p1 INT; SELECT @p1;", 1, true},
		{"local named like a parameter in another case", "DECLARE @P2 INT; SELECT @p1, @P2;", 2, true},
		{"placeholder without argument", "SELECT @p1, @p2;", 1, true},
		{"argument without placeholder", "SELECT @p1;", 2, true},
		{"undeclared variable", "SELECT @p1, @other;", 1, true},
		{"variable in a literal is text", "SELECT @p1, N'@other';", 1, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := checkVariables(tt.text, tt.nargs)
			if tt.wantErr {
				assert.Error(t, err)
			} else {
				assert.NoError(t, err)
			}
		})
	}
}

// exerciseStore calls every method of the store with valid parameters on a fake database that
// answers every query with no rows and every exec with one row, and returns what it sent.
func exerciseStore(t *testing.T, names store.Names) ([]fakeEvent, statements) {
	t.Helper()
	f := &fakeDB{answer: func(string, []any) fakeAnswer { return fakeAnswer{rowsAffected: 1} }}
	db := sql.OpenDB(f)
	t.Cleanup(func() { _ = db.Close() })
	s, err := New(db, names)
	require.NoError(t, err)
	ctx := context.Background()
	claim := store.Claim{ID: "3f2b1c1e-8d4a-4c1b-9a53-2d0f6f1e7a10", Token: "9b7e5d2c-1a3f-4e8b-b6c4-0f1e2d3c4b5a"}
	from, to := time.Now().Add(-time.Hour), time.Now()

	// Results do not matter here (the fake returns no rows); the statements and arguments do.
	for set := insertColumns(0); set < insertVariants; set++ {
		_, _ = s.OutboxInsert(ctx, insertParamsFor(set))
	}
	_, _ = s.OutboxClaim(ctx, store.OutboxClaimParams{Limit: 10, Lease: time.Minute})
	_, _ = s.OutboxRenew(ctx, store.OutboxRenewParams{Claims: []store.Claim{claim}, Lease: time.Minute})
	_, _ = s.OutboxMarkSent(ctx, []store.Claim{claim})
	_, _ = s.OutboxRetry(ctx, []store.OutboxRetryParams{{Claim: claim, Delay: time.Second, LastError: "boom"}})
	_, _ = s.OutboxMarkDead(ctx, []store.OutboxDeadParams{{Claim: claim, LastError: "boom"}})
	_, _ = s.OutboxDefer(ctx, []store.OutboxDeferParams{{Claim: claim, Delay: 5 * time.Second}})
	_, _ = s.OutboxReclaim(ctx)
	_, _ = s.OutboxReplay(ctx, store.OutboxReplayParams{IDs: []string{claim.ID}, Topics: []string{"a"}, CreatedFrom: &from, CreatedTo: &to})
	_, _ = s.OutboxReplay(ctx, store.OutboxReplayParams{Topics: []string{"a"}})
	outSel := store.OutboxSelection{States: []string{store.OutboxDead}, IDs: []string{claim.ID}, Topics: []string{"a"}, CreatedFrom: &from, CreatedTo: &to}
	_, _ = s.OutboxSelectionCount(ctx, outSel)
	_, _ = s.OutboxSelectionScan(ctx, outSel, store.ScanParams{After: claim.ID, Limit: 10, Bodies: true})
	_, _ = s.OutboxReplayBatch(ctx, outSel, claim.ID, 10)
	inSel := store.InboxSelection{States: []string{store.InboxDead}, IDs: []string{claim.ID}, Sources: []string{"s"}, Consumption: store.ConsumptionPull, CreatedFrom: &from, CreatedTo: &to}
	_, _ = s.InboxSelectionCount(ctx, inSel)
	_, _ = s.InboxSelectionScan(ctx, inSel, store.ScanParams{After: claim.ID, Limit: 10})
	_, _ = s.InboxReplayBatch(ctx, inSel, "", 10)
	_, _ = s.OutboxStats(ctx)
	_, _ = s.OutboxFinishedTopics(ctx)
	_, _ = s.OutboxDeleteFinished(ctx, store.DeleteFinishedParams{MaxAge: 36 * time.Hour, Limit: 100})
	_, _ = s.OutboxDeleteExcess(ctx, store.DeleteExcessParams{State: store.OutboxDead, Keep: 10, Limit: 100})
	_, _ = s.InboxInsert(ctx, store.InboxInsertParams{Source: "s", IdempotencyKey: "k", Payload: json.RawMessage(`{}`)})
	_, _ = s.InboxInsertBatch(ctx, []store.InboxInsertParams{
		{Source: "s", IdempotencyKey: "k1", Payload: json.RawMessage(`{}`)},
		{Source: "s", IdempotencyKey: "k2", Payload: json.RawMessage(`{}`)},
	})
	_, _ = s.InboxRelayClaim(ctx, store.InboxRelayClaimParams{Limit: 10, Lease: time.Minute})
	_, _ = s.InboxRelayForward(ctx, store.InboxForwardParams{Claim: claim, Outbox: store.OutboxInsertParams{Topic: "t", Payload: json.RawMessage(`{}`)}})
	_, _ = s.InboxRelayDead(ctx, claim, "boom")
	_, _ = s.InboxRelayRenew(ctx, claim, time.Minute)
	_, _ = s.InboxRelayReclaim(ctx)
	_, _ = s.InboxStats(ctx)
	_, _ = s.InboxDeleteFinished(ctx, store.DeleteFinishedParams{MaxAge: time.Hour, Limit: 100})
	_ = s.CheckSchema(ctx)
	_, _ = s.DestinationStates(ctx)
	_, _ = s.DestinationSetPaused(ctx, "billing", true)
	_, _ = s.DestinationRecordFailure(ctx, store.BreakerFailureParams{Destination: "billing", Threshold: 3, Window: time.Minute, CoolDown: time.Hour})
	_, _ = s.DestinationRecordSuccess(ctx, "billing")
	_, _ = s.DestinationReserve(ctx, store.RateReserveParams{Destination: "billing", Interval: 20 * time.Millisecond, Burst: 5, MaxWait: 100 * time.Millisecond})
	// A database without the table of the replay generations (store.TrackTables).
	s.SetMissingTables([]string{store.ReplayGenerationTable})
	_, _ = s.OutboxReplay(ctx, store.OutboxReplayParams{IDs: []string{claim.ID}, Topics: []string{"a"}, CreatedFrom: &from, CreatedTo: &to})
	_, _ = s.OutboxReplayBatch(ctx, outSel, claim.ID, 10)
	return f.statements(), s.stmt
}

// insertParamsFor returns insert parameters that select the variant set.
func insertParamsFor(set insertColumns) store.OutboxInsertParams {
	p := store.OutboxInsertParams{Topic: "t", Key: "k", Payload: json.RawMessage(`{"a":1}`)}
	if set&insertID != 0 {
		p.ID = "3F2B1C1E-8D4A-4C1B-9A53-2D0F6F1E7A10"
	}
	if set&insertHeaders != 0 {
		p.Headers = json.RawMessage(`{"h":"v"}`)
	}
	if set&insertMaxAttempts != 0 {
		p.MaxAttempts = 3
	}
	if set&insertScheduledAt != 0 {
		p.Delay = 90*time.Second + 250*time.Millisecond
	}
	return p
}

func TestEveryStatementIsSentWithMatchingParameters(t *testing.T) {
	t.Parallel()
	for _, names := range []store.Names{store.DefaultNames(), renamedNames()} {
		sent, st := exerciseStore(t, names)
		seen := map[string]bool{}
		for _, e := range sent {
			seen[e.query] = true
			assert.NoError(t, checkVariables(e.query, len(e.args)), "statement:\n%s\nargs: %#v", e.query, e.args)
		}
		for name, text := range allStatements(st) {
			assert.True(t, seen[text], "statement %s was never sent", name)
		}
	}
}

func TestParameterTypes(t *testing.T) {
	t.Parallel()
	sent, st := exerciseStore(t, store.DefaultNames())
	argsOf := func(query string) [][]any {
		var out [][]any
		for _, e := range sent {
			if e.query == query {
				out = append(out, e.args)
			}
		}
		return out
	}
	tests := []struct {
		name  string
		query string
		want  []any
	}{
		{"outbox claim: limit, lease in ms", st.outboxClaim, []any{int64(10), int32(60000)}},
		{"relay claim: limit, lease in ms", st.inboxRelayClaim, []any{int64(10), int32(60000)}},
		{"relay renew: id, token, lease in ms", st.inboxRelayRenew, []any{
			"3f2b1c1e-8d4a-4c1b-9a53-2d0f6f1e7a10", "9b7e5d2c-1a3f-4e8b-b6c4-0f1e2d3c4b5a", int32(60000)}},
		{"relay dead: id, token, last error", st.inboxRelayDead, []any{
			"3f2b1c1e-8d4a-4c1b-9a53-2d0f6f1e7a10", "9b7e5d2c-1a3f-4e8b-b6c4-0f1e2d3c4b5a", "boom"}},
		{"delete finished: limit, negated age in s and ms", st.outboxDeleteFinished, []any{int64(100), int32(-129600), int32(0)}},
		{"delete excess: limit, state, keep", st.outboxDeleteExcess, []any{int64(100), "dead", int64(10)}},
		{"insert with every column: canonical id, delay in s and ms", st.outboxInsert[insertVariants-1], []any{
			"t", "k", nil, `{"a":1}`, "3f2b1c1e-8d4a-4c1b-9a53-2d0f6f1e7a10", `{"h":"v"}`, int32(3), int32(90), int32(250)}},
		{"inbox insert defaults", st.inboxInsert, []any{
			"s", "k", nil, nil, "{}", "{}", nil, "push", "pending", nil}},
		{"check schema: quoted tables, plain columns", st.checkSchema, []any{"[outbox]", "sequence", "[inbox]", "headers"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := argsOf(tt.query)
			require.NotEmpty(t, got)
			assert.Equal(t, tt.want, got[0])
		})
	}
}

func TestOutboxInsertArgsPickTheVariant(t *testing.T) {
	t.Parallel()
	for set := insertColumns(0); set < insertVariants; set++ {
		got, args, err := outboxInsertArgs(insertParamsFor(set))
		require.NoError(t, err)
		assert.Equal(t, set, got)
		assert.NoError(t, checkVariables(outboxInsertSQL(set), len(args)), "variant %d", set)
	}
}

func TestOutboxInsertArgsRefuseBadValues(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		params  store.OutboxInsertParams
		wantErr bool
	}{
		{"plain", store.OutboxInsertParams{Topic: "t", Payload: json.RawMessage(`{}`)}, false},
		{"id not a UUID", store.OutboxInsertParams{ID: "nope", Topic: "t"}, true},
		{"id in braces", store.OutboxInsertParams{ID: "{3f2b1c1e-8d4a-4c1b-9a53-2d0f6f1e7a10}", Topic: "t"}, true},
		{"delay beyond INT seconds", store.OutboxInsertParams{Topic: "t", Delay: time.Duration(1<<31) * time.Second}, true},
		{"delay of 100 days", store.OutboxInsertParams{Topic: "t", Delay: 100 * 24 * time.Hour}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, _, err := outboxInsertArgs(tt.params)
			if tt.wantErr {
				assert.Error(t, err)
			} else {
				assert.NoError(t, err)
			}
		})
	}
}

func TestFenceBatchDocuments(t *testing.T) {
	t.Parallel()
	const (
		id1 = "3f2b1c1e-8d4a-4c1b-9a53-2d0f6f1e7a10"
		tk1 = "9b7e5d2c-1a3f-4e8b-b6c4-0f1e2d3c4b5a"
		id2 = "11111111-2222-3333-4444-555555555555"
		tk2 = "66666666-7777-8888-9999-aaaaaaaaaaaa"
	)
	upper := store.Claim{ID: strings.ToUpper(id1), Token: strings.ToUpper(tk1)}
	second := store.Claim{ID: id2, Token: tk2}
	badID := store.Claim{ID: "not-a-uuid", Token: tk2}
	noToken := store.Claim{ID: id2, Token: ""}

	claimsBatch, err := newFenceBatch([]store.Claim{upper, badID, noToken, second, {ID: id1, Token: tk2}}, nil)
	require.NoError(t, err)
	retries, err := retryBatch([]store.OutboxRetryParams{
		{Claim: upper, Delay: 1500 * time.Millisecond, LastError: `status 500: "quoted" <b>`},
		{Claim: second, Delay: -time.Second, LastError: ""},
		{Claim: badID, Delay: time.Second},
	})
	require.NoError(t, err)
	deads, err := deadBatch([]store.OutboxDeadParams{{Claim: second, LastError: "no route"}})
	require.NoError(t, err)

	tests := []struct {
		name       string
		batch      fenceBatch
		wantDoc    []map[string]any
		wantClaims []store.Claim
	}{
		{
			name:  "claims: canonical lower case, invalid left out, first of a repeated id kept",
			batch: claimsBatch,
			wantDoc: []map[string]any{
				{"id": id1, "token": tk1},
				{"id": id2, "token": tk2},
			},
			wantClaims: []store.Claim{{ID: id1, Token: tk1}, {ID: id2, Token: tk2}},
		},
		{
			name:  "retries carry delay_ms and last_error; a negative delay is 0",
			batch: retries,
			wantDoc: []map[string]any{
				{"id": id1, "token": tk1, "delay_ms": float64(1500), "last_error": `status 500: "quoted" <b>`},
				{"id": id2, "token": tk2, "delay_ms": float64(0), "last_error": ""},
			},
			wantClaims: []store.Claim{{ID: id1, Token: tk1}, {ID: id2, Token: tk2}},
		},
		{
			name:       "deads carry last_error and no delay",
			batch:      deads,
			wantDoc:    []map[string]any{{"id": id2, "token": tk2, "last_error": "no route"}},
			wantClaims: []store.Claim{{ID: id2, Token: tk2}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var got []map[string]any
			require.NoError(t, json.Unmarshal([]byte(tt.batch.doc), &got))
			assert.Equal(t, tt.wantDoc, got)
			assert.Equal(t, tt.wantClaims, tt.batch.claims)
		})
	}

	empty, err := newFenceBatch([]store.Claim{badID, noToken}, nil)
	require.NoError(t, err)
	assert.Empty(t, empty.claims, "a batch of invalid claims is empty and sends no statement")
}

func TestReplayArgs(t *testing.T) {
	t.Parallel()
	from := time.Date(2026, 9, 24, 10, 0, 0, 0, time.FixedZone("CEST", 2*3600))
	tests := []struct {
		name    string
		params  store.OutboxReplayParams
		want    []any
		wantErr bool
	}{
		{name: "no filter", params: store.OutboxReplayParams{IDs: []string{}, Topics: nil}, wantErr: true},
		{
			name:   "ids are canonical",
			params: store.OutboxReplayParams{IDs: []string{"3F2B1C1E-8D4A-4C1B-9A53-2D0F6F1E7A10"}},
			want:   []any{`["3f2b1c1e-8d4a-4c1b-9a53-2d0f6f1e7a10"]`, nil, nil, nil},
		},
		{
			name:   "ids that are not UUIDs keep the filter and match nothing",
			params: store.OutboxReplayParams{IDs: []string{"nope"}},
			want:   []any{`[]`, nil, nil, nil},
		},
		{
			name:   "topics and times in UTC",
			params: store.OutboxReplayParams{Topics: []string{"order.created", `we"ird`}, CreatedFrom: &from, CreatedTo: &from},
			want:   []any{nil, `["order.created","we\"ird"]`, from.UTC(), from.UTC()},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := replayArgs(tt.params)
			if tt.wantErr {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
			if tt.params.CreatedFrom != nil {
				assert.Equal(t, time.UTC, got[2].(time.Time).Location())
			}
		})
	}
}

func TestArgsRefuseBadParameters(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		err     func() error
		wantErr bool
	}{
		{"claim", func() error { _, err := claimArgs(1, time.Second); return err }, false},
		{"claim limit 0", func() error { _, err := claimArgs(0, time.Second); return err }, true},
		{"claim lease 0", func() error { _, err := claimArgs(1, 0); return err }, true},
		{"claim lease beyond INT ms", func() error { _, err := claimArgs(1, 25*24*time.Hour); return err }, true},
		{"delete finished", func() error {
			_, err := deleteFinishedArgs(store.DeleteFinishedParams{MaxAge: time.Hour, Limit: 1})
			return err
		}, false},
		{"delete finished negative age", func() error {
			_, err := deleteFinishedArgs(store.DeleteFinishedParams{MaxAge: -time.Hour, Limit: 1})
			return err
		}, true},
		{"delete finished limit 0", func() error { _, err := deleteFinishedArgs(store.DeleteFinishedParams{MaxAge: time.Hour}); return err }, true},
		{"delete excess pending", func() error {
			_, err := deleteExcessArgs(store.DeleteExcessParams{State: store.OutboxPending, Keep: 1, Limit: 1})
			return err
		}, true},
		{"delete excess negative keep", func() error {
			_, err := deleteExcessArgs(store.DeleteExcessParams{State: store.OutboxSent, Keep: -1, Limit: 1})
			return err
		}, true},
		{"delete excess sent", func() error {
			_, err := deleteExcessArgs(store.DeleteExcessParams{State: store.OutboxSent, Keep: 0, Limit: 1})
			return err
		}, false},
		{"inbox insert state processing", func() error {
			_, err := inboxInsertArgs(store.InboxInsertParams{State: store.InboxProcessing})
			return err
		}, true},
		{"inbox insert consumption other", func() error {
			_, err := inboxInsertArgs(store.InboxInsertParams{Consumption: "poll"})
			return err
		}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if tt.wantErr {
				assert.Error(t, tt.err())
			} else {
				assert.NoError(t, tt.err())
			}
		})
	}
}

func TestInboxInsertArgs(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		params store.InboxInsertParams
		want   []any
	}{
		{
			name: "pull row with every field",
			params: store.InboxInsertParams{
				Source: "orders", IdempotencyKey: "e-1", AggregateID: "o-1", EventType: "order.created",
				Payload: json.RawMessage(`{"a":1}`), Headers: json.RawMessage(`{"x":"y"}`),
				CorrelationID: "c-1", Consumption: store.ConsumptionPull, LastError: "ignored",
			},
			want: []any{"orders", "e-1", "o-1", "order.created", `{"a":1}`, `{"x":"y"}`, "c-1", "pull", "pending", nil},
		},
		{
			name: "dead row keeps its error",
			params: store.InboxInsertParams{
				Source: "amqp", IdempotencyKey: "sha256:ab", Payload: json.RawMessage(`{"raw":""}`),
				State: store.InboxDead, LastError: "body is not JSON",
			},
			want: []any{"amqp", "sha256:ab", nil, nil, `{"raw":""}`, "{}", nil, "push", "dead", "body is not JSON"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := inboxInsertArgs(tt.params)
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestSchemaError(t *testing.T) {
	t.Parallel()
	custom := store.DefaultNames()
	custom.OutboxTable, custom.InboxTable = "qb_outbox", "qb_inbox"
	tests := []struct {
		name                             string
		outbox, sequence, inbox, headers bool
		wantNil                          bool
		want                             []string
		wantNot                          []string
	}{
		{name: "complete", outbox: true, sequence: true, inbox: true, headers: true, wantNil: true},
		{
			name: "both columns missing", outbox: true, inbox: true,
			want: []string{
				"table [qb_inbox] has no column [headers]",
				"table [qb_outbox] has no column [sequence]",
				// spec/15-use-custom-tables.md, SQL Server, with the real names.
				"ALTER TABLE [qb_inbox] ADD [headers] NVARCHAR(MAX) NOT NULL DEFAULT '{}';",
				"ALTER TABLE [qb_outbox] ADD [sequence] BIGINT IDENTITY(1,1) NOT NULL; CREATE INDEX ix_qb_outbox_key_sequence ON [qb_outbox] ([key], [sequence]);",
			},
		},
		{
			name: "headers missing", outbox: true, sequence: true, inbox: true,
			want:    []string{"table [qb_inbox] has no column [headers]", "ALTER TABLE [qb_inbox] ADD [headers]"},
			wantNot: []string{"[sequence]"},
		},
		{
			name: "tables missing", sequence: false,
			want: []string{"outbox table [qb_outbox] does not exist", "inbox table [qb_inbox] does not exist"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := schemaError(custom, tt.outbox, tt.sequence, tt.inbox, tt.headers)
			if tt.wantNil {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			for _, w := range tt.want {
				assert.Contains(t, err.Error(), w)
			}
			for _, w := range tt.wantNot {
				assert.NotContains(t, err.Error(), w)
			}
		})
	}

	renamed := renamedNames()
	err := schemaError(renamed, true, false, true, false)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "ALTER TABLE [t_inbox] ADD [y_headers] NVARCHAR(MAX) NOT NULL DEFAULT '{}';")
	assert.Contains(t, err.Error(), "ALTER TABLE [t_outbox] ADD [x_sequence] BIGINT IDENTITY(1,1) NOT NULL; CREATE INDEX ix_t_outbox_key_sequence ON [t_outbox] ([x_key], [x_sequence]);")
}

func TestQuote(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, in, want string }{
		{"plain", "outbox", "[outbox]"},
		{"reserved word", "key", "[key]"},
		{"closing bracket", "a]b", "[a]]b]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tt.want, quote(tt.in))
			assert.NoError(t, checkBalanced(quote(tt.in)))
		})
	}
	assert.Equal(t, "N'it''s'", unicodeLiteral("it's"))
}

func TestNew(t *testing.T) {
	t.Parallel()
	db := sql.OpenDB(&fakeDB{answer: func(string, []any) fakeAnswer { return fakeAnswer{} }})
	t.Cleanup(func() { _ = db.Close() })
	bad := store.DefaultNames()
	bad.Outbox.Key = "key]; DROP TABLE outbox; --"
	tests := []struct {
		name    string
		db      *sql.DB
		names   store.Names
		wantErr bool
	}{
		{"default names", db, store.DefaultNames(), false},
		{"renamed", db, renamedNames(), false},
		{"nil db", nil, store.DefaultNames(), true},
		{"name that is not an identifier", db, bad, true},
		{"empty names", db, store.Names{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s, err := New(tt.db, tt.names)
			if tt.wantErr {
				assert.Error(t, err)
				assert.Nil(t, s)
				return
			}
			require.NoError(t, err)
			assert.NotNil(t, s)
		})
	}
}

func TestDurations(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name          string
		d             time.Duration
		wantS, wantMS int32
		wantErr       bool
	}{
		{"zero", 0, 0, 0, false},
		{"sub-second", 250 * time.Millisecond, 0, 250, false},
		{"negative", -1500 * time.Millisecond, -1, -500, false},
		{"thirty days", 30 * 24 * time.Hour, 2592000, 0, false},
		{"beyond INT seconds", time.Duration(1<<31) * time.Second, 0, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s, ms, err := splitDuration(tt.d)
			if tt.wantErr {
				assert.Error(t, err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.wantS, s)
			assert.Equal(t, tt.wantMS, ms)
		})
	}
	ms, err := durationMS(5 * time.Minute)
	require.NoError(t, err)
	assert.Equal(t, int32(300000), ms)
	_, err = durationMS(25 * 24 * time.Hour)
	assert.Error(t, err)
}
