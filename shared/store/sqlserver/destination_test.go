package sqlserver

import (
	"context"
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/alternayte/queuebox/shared/store"
)

// destinationStatements are the statements of queuebox_destination_state, by name.
func destinationStatements() map[string]string {
	return map[string]string{
		"states":         destinationStatesSQL,
		"set paused":     destinationSetPausedSQL,
		"record failure": destinationRecordFailureSQL,
		"record success": destinationRecordSuccessSQL,
		"reserve":        destinationReserveSQL,
	}
}

func TestDestinationStatementsReadTheClockOnceAndMergeWithHoldlock(t *testing.T) {
	t.Parallel()
	for name, text := range destinationStatements() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			require.NoError(t, checkBalanced(text))
			upper := strings.ToUpper(text)
			assert.Equal(t, 1, strings.Count(upper, "SYSUTCDATETIME()"), "the clock is read once, into @qb_now:\n%s", text)
			assert.True(t, strings.HasPrefix(text, "DECLARE @qb_now DATETIME2 = SYSUTCDATETIME();\n"))
			for _, clock := range []string{"GETDATE", "GETUTCDATE", "CURRENT_TIMESTAMP", "SYSDATETIME()", "SYSDATETIMEOFFSET"} {
				assert.NotContains(t, upper, clock)
			}
			if name == "states" {
				assert.Contains(t, text, "FROM queuebox_destination_state AS s\nORDER BY s.destination;")
				return
			}
			assert.Contains(t, text, "MERGE queuebox_destination_state WITH (HOLDLOCK) AS d\nUSING (SELECT @p1 AS destination) AS src\n    ON d.destination = src.destination\n")
			assert.Contains(t, text, "WHEN MATCHED THEN UPDATE SET")
			assert.Contains(t, text, "WHEN NOT MATCHED THEN INSERT (destination, ")
			assert.True(t, strings.HasSuffix(text, ";"), "a MERGE must end with a semicolon")
			// A microsecond count is added in seconds and a rest, each cast to INT.
			for _, m := range regexp.MustCompile(`DATEADD\((\w+), ([^,]+),`).FindAllStringSubmatch(text, -1) {
				if m[1] == "microsecond" {
					assert.Regexp(t, `^-?CAST\(@p\d % 1000000 AS INT\)$`, m[2])
				} else {
					assert.Equal(t, "second", m[1])
					assert.Regexp(t, `^-?CAST\(@p\d / 1000000 AS INT\)$`, m[2])
				}
			}
		})
	}
}

func TestDestinationStatementClauses(t *testing.T) {
	t.Parallel()
	st := mustStatements(t, renamedNames())
	for _, w := range []string{
		"SET o.[x_state] = N'pending',",
		"o.[x_scheduled_at] = DATEADD(millisecond, batch.batch_delay_ms, SYSUTCDATETIME()),",
		"o.[x_claim_token] = NULL,", "o.[x_lease_expires_at] = NULL,", "o.[x_updated_at] = SYSUTCDATETIME()",
		"batch_delay_ms INT '$.delay_ms'", "AND o.[x_claim_token] = batch.batch_token",
		"WHERE o.[x_state] = N'processing'", "AND o.[x_lease_expires_at] > SYSUTCDATETIME();",
	} {
		assert.Contains(t, st.outboxDefer, w)
	}
	assert.NotContains(t, st.outboxDefer, "[x_attempt]", "a deferral costs no attempt")
	assert.NotContains(t, st.outboxDefer, "[x_last_error]", "a deferral keeps the last error")

	for _, w := range []string{
		"paused_at = CASE WHEN @p2 = 1 THEN COALESCE(CASE WHEN d.paused = 1 THEN d.paused_at END, @qb_now) END,",
		"VALUES (src.destination, @p2, CASE WHEN @p2 = 1 THEN @qb_now END, @qb_now)",
		"OUTPUT inserted.destination, inserted.paused, inserted.paused_at, inserted.open_until,",
	} {
		assert.Contains(t, destinationSetPausedSQL, w)
	}
	for _, w := range []string{
		"DECLARE @qb_open_until DATETIME2 = DATEADD(microsecond, CAST(@p4 % 1000000 AS INT), DATEADD(second, CAST(@p4 / 1000000 AS INT), @qb_now));",
		"DECLARE @qb_window_floor DATETIME2 = DATEADD(microsecond, -CAST(@p3 % 1000000 AS INT), DATEADD(second, -CAST(@p3 / 1000000 AS INT), @qb_now));",
		"WHEN d.open_until > @qb_now THEN d.failures",
		"WHEN d.failures + 1 >= @p2 THEN @qb_open_until",
	} {
		assert.Contains(t, destinationRecordFailureSQL, w)
	}
	for _, w := range []string{
		"WHEN DATEDIFF_BIG(microsecond, @qb_now, d.rate_tat) <= @p3 + @p4 THEN DATEADD(microsecond, CAST(@p2 % 1000000 AS INT), DATEADD(second, CAST(@p2 / 1000000 AS INT), d.rate_tat))",
		"ELSE d.rate_tat END",
		"CASE WHEN deleted.rate_tat IS NULL OR deleted.rate_tat <= @qb_now THEN CAST(0 AS BIGINT)",
	} {
		assert.Contains(t, destinationReserveSQL, w)
	}
}

func TestDestinationParameterTypes(t *testing.T) {
	t.Parallel()
	sent, st := exerciseStore(t, store.DefaultNames())
	argsOf := func(query string) []any {
		for _, e := range sent {
			if e.query == query {
				return e.args
			}
		}
		t.Fatalf("not sent:\n%s", query)
		return nil
	}
	assert.Equal(t, []any{`[{"id":"3f2b1c1e-8d4a-4c1b-9a53-2d0f6f1e7a10","token":"9b7e5d2c-1a3f-4e8b-b6c4-0f1e2d3c4b5a","delay_ms":5000}]`}, argsOf(st.outboxDefer))
	assert.Empty(t, argsOf(destinationStatesSQL))
	assert.Equal(t, []any{"billing", true}, argsOf(destinationSetPausedSQL))
	assert.Equal(t, []any{"billing", int32(3), int64(60_000_000), int64(3_600_000_000)}, argsOf(destinationRecordFailureSQL),
		"threshold, window and cool-down in µs")
	assert.Equal(t, []any{"billing"}, argsOf(destinationRecordSuccessSQL))
	assert.Equal(t, []any{"billing", int64(20_000), int64(80_000), int64(100_000)}, argsOf(destinationReserveSQL),
		"interval, tolerance (burst - 1 intervals) and max wait in µs")
}

func TestDestinationStatesScan(t *testing.T) {
	t.Parallel()
	pausedAt := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	openUntil := pausedAt.Add(time.Hour)
	s, _ := newFakeStore(t, func(string, []any) fakeAnswer {
		return fakeAnswer{rows: [][]any{
			{"archive", false, nil, nil, int64(0), false, int64(2), pausedAt},
			{"billing", true, pausedAt, openUntil, int64(1_500_000), false, int64(0), pausedAt},
			{"crm", false, nil, pausedAt, int64(0), true, int64(0), pausedAt},
		}}
	})
	got, err := s.DestinationStates(context.Background())
	require.NoError(t, err)
	require.Len(t, got, 3)
	assert.Equal(t, store.DestinationState{Destination: "archive", Failures: 2, UpdatedAt: pausedAt}, got[0])
	assert.Equal(t, store.DestinationState{Destination: "billing", Paused: true, PausedAt: pausedAt, OpenUntil: openUntil,
		OpenRemaining: 1500 * time.Millisecond, UpdatedAt: pausedAt}, got[1])
	assert.True(t, got[1].Open())
	assert.True(t, got[2].HalfOpen)
	assert.False(t, got[2].Open())
}

func TestDestinationReserveAnswers(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		aheadUS  int64
		reserved bool
		want     store.RateReservation
	}{
		{"an idle limit goes at once", 0, true, store.RateReservation{Reserved: true}},
		{"within the burst goes at once", 60_000, true, store.RateReservation{Reserved: true}},
		{"past the burst waits for its slot", 150_000, true, store.RateReservation{Reserved: true, Wait: 70 * time.Millisecond}},
		{"beyond the max wait is not taken", 500_000, false, store.RateReservation{Wait: 320 * time.Millisecond}},
		{"just beyond waits at least a millisecond", 180_001, false, store.RateReservation{Wait: time.Millisecond}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s, _ := newFakeStore(t, func(string, []any) fakeAnswer {
				return fakeAnswer{rows: [][]any{{tt.aheadUS, tt.reserved}}}
			})
			got, err := s.DestinationReserve(context.Background(), store.RateReserveParams{
				Destination: "billing", Interval: 20 * time.Millisecond, Burst: 5, MaxWait: 100 * time.Millisecond,
			})
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestAMissingDestinationStateTableIsErrNoDestinationState(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name    string
		err     error
		missing bool
	}{
		{"Msg 208", sqlError(208), true},
		{"Msg 208 after another", sqlError(8180, 208), true},
		{"another error", sqlError(2627, 3621), false},
	} {
		s, _ := newFakeStore(t, func(string, []any) fakeAnswer { return fakeAnswer{err: tt.err} })
		ctx := context.Background()
		_, e1 := s.DestinationStates(ctx)
		_, e2 := s.DestinationSetPaused(ctx, "billing", true)
		_, e3 := s.DestinationRecordFailure(ctx, store.BreakerFailureParams{Destination: "billing", Threshold: 1})
		_, e4 := s.DestinationRecordSuccess(ctx, "billing")
		_, e5 := s.DestinationReserve(ctx, store.RateReserveParams{Destination: "billing", Interval: time.Second, Burst: 1})
		for i, err := range []error{e1, e2, e3, e4, e5} {
			require.Error(t, err)
			assert.Equal(t, tt.missing, errors.Is(err, store.ErrNoDestinationState), "%s: method %d: %v", tt.name, i, err)
		}
	}
	_, err := newStoreWithError(t, sqlError(208)).DestinationSetPaused(context.Background(), "billing", true)
	assert.Contains(t, err.Error(), "setting the pause of destination billing: the table queuebox_destination_state does not exist: apply QueueBox's own migration V1__add_destination_state.sql")
}

func newStoreWithError(t *testing.T, err error) *Store {
	s, _ := newFakeStore(t, func(string, []any) fakeAnswer { return fakeAnswer{err: err} })
	return s
}

func TestDestinationDeadlockVictimsRunAgain(t *testing.T) {
	t.Parallel()
	calls := 0
	now := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	s, f := newFakeStore(t, func(string, []any) fakeAnswer {
		calls++
		if calls == 1 {
			return fakeAnswer{err: sqlError(1205)}
		}
		return fakeAnswer{rows: [][]any{{"billing", true, now, nil, int64(0), false, int64(0), now}}}
	})
	got, err := s.DestinationSetPaused(context.Background(), "billing", true)
	require.NoError(t, err)
	assert.True(t, got.Paused)
	assert.Len(t, f.statements(), 2)
}

func TestALongDeferralIsCappedAtIntMilliseconds(t *testing.T) {
	t.Parallel()
	s, f := newFakeStore(t, func(string, []any) fakeAnswer { return fakeAnswer{} })
	claim := store.Claim{ID: idA, Token: tokenA}
	_, err := s.OutboxDefer(context.Background(), []store.OutboxDeferParams{{Claim: claim, Delay: 90 * 24 * time.Hour}})
	require.NoError(t, err)
	sent := f.statements()
	require.Len(t, sent, 1)
	assert.Equal(t, `[{"id":"`+idA+`","token":"`+tokenA+`","delay_ms":2147483647}]`, sent[0].args[0])
}
