package sqlserver

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/alternayte/queuebox/shared/store"
)

// No SQL Server runs here: the statements of queuebox_revoked_session are checked by their
// text and their parameters on the fake database.

func TestRevokeSessionSweepsThenMergesWithHoldlock(t *testing.T) {
	t.Parallel()
	require.NoError(t, checkBalanced(revokeSessionSQL))
	assert.True(t, strings.HasPrefix(revokeSessionSQL, "DELETE TOP (1000) FROM queuebox_revoked_session\nWHERE expires_at < SYSUTCDATETIME();\n"))
	assert.Contains(t, revokeSessionSQL, "MERGE queuebox_revoked_session WITH (HOLDLOCK) AS r\nUSING (SELECT @p1 AS session_hash) AS src\n    ON r.session_hash = src.session_hash\n")
	assert.Contains(t, revokeSessionSQL, "WHEN NOT MATCHED THEN INSERT (session_hash, expires_at, revoked_at)\n    VALUES (src.session_hash, CAST(@p2 AS DATETIME2), SYSUTCDATETIME());")
	assert.NotContains(t, revokeSessionSQL, "WHEN MATCHED", "a second revocation keeps the first row")
	assert.True(t, strings.HasSuffix(revokeSessionSQL, ";"), "a MERGE must end with a semicolon")
	require.NoError(t, checkBalanced(sessionRevokedSQL))
	assert.Contains(t, sessionRevokedSQL, "FROM queuebox_revoked_session WHERE session_hash = @p1")

	var got []any
	s, f := newFakeStore(t, func(query string, args []any) fakeAnswer {
		if query == sessionRevokedSQL {
			return fakeAnswer{columns: []string{""}, rows: [][]any{{true}}}
		}
		got = args
		return fakeAnswer{rowsAffected: 1}
	})
	ctx := context.Background()
	key := strings.Repeat("ab", 32)
	expires := time.Date(2030, 1, 2, 3, 4, 5, 0, time.FixedZone("CET", 3600))
	require.NoError(t, s.RevokeSession(ctx, key, expires))
	assert.Equal(t, []any{key, expires.UTC()}, got, "the key and the expiry in UTC")
	revoked, err := s.SessionRevoked(ctx, key)
	require.NoError(t, err)
	assert.True(t, revoked)
	st := f.statements()
	require.Len(t, st, 2)
	assert.Equal(t, revokeSessionSQL, st[0].query)
	assert.Equal(t, sessionRevokedSQL, st[1].query)

	require.Error(t, s.RevokeSession(ctx, "", expires), "an empty key")
	assert.Len(t, f.statements(), 2, "a refused key sends nothing")
}

func TestRevokedSessionsMissingTable(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name    string
		err     error
		missing bool
	}{
		{"Msg 208", sqlError(208), true},
		{"another error", sqlError(2627), false},
	} {
		s, _ := newFakeStore(t, func(string, []any) fakeAnswer { return fakeAnswer{err: tt.err} })
		ctx := context.Background()
		e1 := s.RevokeSession(ctx, strings.Repeat("a", 64), time.Now())
		_, e2 := s.SessionRevoked(ctx, strings.Repeat("a", 64))
		for i, err := range []error{e1, e2} {
			require.Error(t, err)
			assert.Equal(t, tt.missing, errors.Is(err, store.ErrNoRevokedSessions), "%s: method %d: %v", tt.name, i, err)
		}
	}
}
