package postgres

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/alternayte/queuebox/shared/store"
)

func TestInlineLimitsWritesTheLimitsAndRenumbersTheLease(t *testing.T) {
	for name, sql := range map[string]string{"claim": outboxClaimSQL, "windowed claim": outboxClaimWindowSQL} {
		got := inlineLimits(sql, 7, 23)
		require.NotContains(t, got, "$2", name)
		require.NotContains(t, got, "$3", name)
		require.Contains(t, got, "LIMIT 7", name)
		require.Equal(t, 1, strings.Count(got, "$1::bigint"), "%s: the lease is the only parameter", name)
		if name == "windowed claim" {
			require.Contains(t, got, "LIMIT 23", name)
			require.Contains(t, got, "h.n < 23", name)
		}
	}
}

// TestInlineLimitsOfTheLockClaims: the lock claims keep the lease as $1, and the windowed one
// the rows to pass over, its $4, as $2; no limit is left a parameter, and the windowed claim's
// qb_free has no limit of its own.
func TestInlineLimitsOfTheLockClaims(t *testing.T) {
	st, err := buildLockStatements(store.DefaultNames())
	require.NoError(t, err)
	plain := inlineLimits(st.claim, 7, 0)
	require.NotContains(t, plain, "$2")
	require.Contains(t, plain, "LIMIT 7")
	require.Equal(t, 1, strings.Count(plain, "$1::bigint"), "the lease is the only parameter")
	windowed := inlineLimits(st.claimWindow, 7, 23)
	require.NotContains(t, windowed, "$3")
	require.NotContains(t, windowed, "$4")
	require.Equal(t, 1, strings.Count(windowed, "$1::bigint"), "the lease")
	require.Equal(t, 2, strings.Count(windowed, "unnest($2::uuid[])"), "the rows to pass over, in the window and the candidates")
	require.Contains(t, windowed, "LIMIT 23")
	require.NotContains(t, windowed, "LIMIT 7\n),\nqb_gate", "qb_free keeps every free row")
}

func TestLimitTextsAreBounded(t *testing.T) {
	var l limitTexts
	for i := range maxLimitTexts {
		_, ok := l.text(outboxClaimSQL, i+1, 0)
		require.True(t, ok, "pair %d", i+1)
	}
	first, ok := l.text(outboxClaimSQL, 1, 0)
	require.True(t, ok, "a pair already written stays available")
	require.Contains(t, first, "LIMIT 1\n")
	_, ok = l.text(outboxClaimSQL, maxLimitTexts+1, 0)
	require.False(t, ok, "a pair beyond the bound runs with parameters")
}

// TestOutboxClaimWithManyLimits claims with more distinct limits than the store writes into
// texts: the claims past the bound run the statement with parameters and take as many rows.
func TestOutboxClaimWithManyLimits(t *testing.T) {
	ps := storeWith(t, `
INSERT INTO outbox (topic, payload)
SELECT 'limits', '{"n":1}' FROM generate_series(1, 2000) AS g`)
	ctx := context.Background()
	total := 0
	for _, windowed := range []bool{false, true} {
		for limit := 1; limit <= maxLimitTexts+8; limit++ {
			params := store.OutboxClaimParams{Limit: limit, Lease: time.Minute}
			if windowed {
				params.Window = 2 * limit
			}
			msgs, err := ps.OutboxClaim(ctx, params)
			require.NoError(t, err, "limit %d, windowed %t", limit, windowed)
			require.Len(t, msgs, limit, "limit %d, windowed %t", limit, windowed)
			total += len(msgs)
		}
	}
	require.Len(t, ps.claimTexts.texts, maxLimitTexts)
	require.Len(t, ps.windowTexts.texts, maxLimitTexts)
	var processing int
	require.NoError(t, ps.pool.pool.QueryRow(ctx, `SELECT count(*) FROM outbox WHERE state = 'processing'`).Scan(&processing))
	require.Equal(t, total, processing)
}
