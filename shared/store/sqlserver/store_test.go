package sqlserver

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	mssql "github.com/microsoft/go-mssqldb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/alternayte/queuebox/shared/store"
)

const (
	idA    = "3f2b1c1e-8d4a-4c1b-9a53-2d0f6f1e7a10"
	idB    = "9b7e5d2c-1a3f-4e8b-b6c4-0f1e2d3c4b5a"
	idC    = "11111111-2222-3333-4444-555555555555"
	tokenA = "aaaaaaaa-0000-4000-8000-000000000001"
	tokenB = "bbbbbbbb-0000-4000-8000-000000000002"
	tokenC = "cccccccc-0000-4000-8000-000000000003"
)

func TestTranslate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name         string
		err          error
		wantConflict bool
		wantLock     bool
	}{
		{"2627 followed by 3621", sqlError(2627, 3621), true, false},
		{"2601 alone", sqlError(2601), true, false},
		{"51000 from THROW", sqlError(51000), false, true},
		{"wrapped 2627", errorsJoin(sqlError(2627)), true, false},
		{"deadlock", sqlError(1205), false, false},
		{"text that mentions 2627", errors.New("mssql: duplicate key (2627)"), false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := translate(tt.err)
			assert.Equal(t, tt.wantConflict, errors.Is(got, store.ErrConflict))
			assert.Equal(t, tt.wantLock, errors.Is(got, ErrClaimLockTimeout))
			// mssql.Error holds a slice, so errors.Is cannot compare it; As finds it.
			var sqlErr mssql.Error
			assert.Equal(t, errors.As(tt.err, &sqlErr), errors.As(got, &sqlErr), "the driver error stays in the chain")
		})
	}
	assert.NoError(t, translate(nil))
}

func errorsJoin(err error) error { return errors.Join(errors.New("context"), err) }

func TestInboxInsertResults(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		answer  fakeAnswer
		want    store.InboxInsertResult
		wantErr bool
	}{
		{
			name:   "new row",
			answer: fakeAnswer{rows: [][]any{{wireGUID(t, idA)}}},
			want:   store.InboxInsertResult{ID: idA},
		},
		{name: "duplicate writes nothing", answer: fakeAnswer{}, want: store.InboxInsertResult{Duplicate: true}},
		{name: "racing duplicate 2627", answer: fakeAnswer{err: sqlError(2627, 3621)}, want: store.InboxInsertResult{Duplicate: true}},
		{name: "racing duplicate 2601", answer: fakeAnswer{err: sqlError(2601, 3621)}, want: store.InboxInsertResult{Duplicate: true}},
		{name: "other error", answer: fakeAnswer{err: sqlError(547)}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s, _ := newFakeStore(t, func(string, []any) fakeAnswer { return tt.answer })
			got, err := s.InboxInsert(context.Background(), store.InboxInsertParams{
				Source: "orders", IdempotencyKey: "e-1", Payload: json.RawMessage(`{}`),
			})
			if tt.wantErr {
				require.Error(t, err)
				assert.NotErrorIs(t, err, store.ErrConflict)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestOutboxInsertConflict(t *testing.T) {
	t.Parallel()
	s, _ := newFakeStore(t, func(string, []any) fakeAnswer { return fakeAnswer{err: sqlError(2627, 3621)} })
	_, err := s.OutboxInsert(context.Background(), store.OutboxInsertParams{ID: idA, Topic: "t", Payload: json.RawMessage(`{}`)})
	assert.ErrorIs(t, err, store.ErrConflict)
}

func TestOutboxInsertReturnsCanonicalID(t *testing.T) {
	t.Parallel()
	s, _ := newFakeStore(t, func(string, []any) fakeAnswer { return fakeAnswer{rows: [][]any{{wireGUID(t, idB)}}} })
	id, err := s.OutboxInsert(context.Background(), store.OutboxInsertParams{Topic: "t", Payload: json.RawMessage(`{}`)})
	require.NoError(t, err)
	assert.Equal(t, idB, id)
}

func outboxRow(t *testing.T, id, token string, scheduled time.Time, seq int64, key any) []any {
	return []any{
		wireGUID(t, id), "order.created", key, nil, `{"n":1}`, "", int64(0), int64(5),
		scheduled, scheduled.Add(-time.Second), seq, wireGUID(t, token), scheduled.Add(time.Minute),
	}
}

func TestOutboxClaim(t *testing.T) {
	t.Parallel()
	base := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	t.Run("commits and returns rows in scheduled_at, sequence order", func(t *testing.T) {
		t.Parallel()
		s, f := newFakeStore(t, func(string, []any) fakeAnswer {
			// OUTPUT returns rows in no particular order.
			return fakeAnswer{rows: [][]any{
				outboxRow(t, idC, tokenC, base.Add(time.Second), 1, nil),
				outboxRow(t, idB, tokenB, base, 7, "k2"),
				outboxRow(t, idA, tokenA, base, 3, "k1"),
			}}
		})
		msgs, err := s.OutboxClaim(context.Background(), store.OutboxClaimParams{Limit: 10, Lease: time.Minute})
		require.NoError(t, err)
		assert.Equal(t, []string{"begin", "query", "commit"}, f.kinds())
		require.Len(t, msgs, 3)
		assert.Equal(t, []string{idA, idB, idC}, []string{msgs[0].ID, msgs[1].ID, msgs[2].ID})
		assert.Equal(t, store.OutboxMessage{
			ID: idA, Topic: "order.created", Key: "k1", Payload: json.RawMessage(`{"n":1}`),
			Headers: json.RawMessage(`{}`), Attempt: 0, MaxAttempts: 5, ScheduledAt: base,
			CreatedAt: base.Add(-time.Second), Sequence: 3, ClaimToken: tokenA,
			LeaseExpiresAt: base.Add(time.Minute),
		}, msgs[0])
		assert.Equal(t, store.Claim{ID: idA, Token: tokenA}, msgs[0].Claim())
		assert.Empty(t, msgs[2].Key, "a null key is empty")
	})
	t.Run("a lock timeout rolls back and is ErrClaimLockTimeout", func(t *testing.T) {
		t.Parallel()
		s, f := newFakeStore(t, func(string, []any) fakeAnswer { return fakeAnswer{err: sqlError(51000)} })
		_, err := s.OutboxClaim(context.Background(), store.OutboxClaimParams{Limit: 10, Lease: time.Minute})
		assert.ErrorIs(t, err, ErrClaimLockTimeout)
		assert.Equal(t, []string{"begin", "query", "rollback"}, f.kinds())
	})
	t.Run("an invalid limit sends nothing", func(t *testing.T) {
		t.Parallel()
		s, f := newFakeStore(t, func(string, []any) fakeAnswer { return fakeAnswer{} })
		_, err := s.OutboxClaim(context.Background(), store.OutboxClaimParams{Limit: 0, Lease: time.Minute})
		assert.Error(t, err)
		assert.Empty(t, f.kinds())
	})
}

func TestInboxRelayClaimOrder(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	// SQL Server orders UNIQUEIDENTIFIER by its last six bytes first: ...0001 sorts after
	// ...0000 whatever the first bytes hold.
	const (
		low  = "ffffffff-ffff-ffff-ffff-000000000000"
		high = "00000000-0000-0000-0000-000000000001"
	)
	row := func(id string, created time.Time) []any {
		return []any{
			wireGUID(t, id), "orders", "e-" + id[:4], "agg", nil, `{}`, `{"x":"y"}`, nil, "push",
			int64(0), created, wireGUID(t, tokenA), created.Add(time.Minute),
		}
	}
	s, f := newFakeStore(t, func(string, []any) fakeAnswer {
		return fakeAnswer{rows: [][]any{row(idA, at.Add(time.Second)), row(high, at), row(low, at)}}
	})
	msgs, err := s.InboxRelayClaim(context.Background(), store.InboxRelayClaimParams{Limit: 10, Lease: time.Minute})
	require.NoError(t, err)
	assert.Equal(t, []string{"begin", "query", "commit"}, f.kinds())
	require.Len(t, msgs, 3)
	assert.Equal(t, []string{low, high, idA}, []string{msgs[0].ID, msgs[1].ID, msgs[2].ID})
	assert.Equal(t, "agg", msgs[0].AggregateID)
	assert.Empty(t, msgs[0].EventType)
	assert.JSONEq(t, `{"x":"y"}`, string(msgs[0].Headers))
}

func TestCompareUniqueIdentifiers(t *testing.T) {
	t.Parallel()
	// Pairs in SQL Server order (a < b), one per byte group, most significant group first.
	tests := []struct{ name, a, b string }{
		{"bytes 10-15 first", "ffffffff-ffff-ffff-ffff-000000000000", "00000000-0000-0000-0000-000000000001"},
		{"then bytes 8-9", "ffffffff-ffff-ffff-0000-000000000000", "00000000-0000-0000-0001-000000000000"},
		{"then bytes 6-7, low byte first", "ffffffff-ffff-ff00-0000-000000000000", "00000000-0000-0001-0000-000000000000"},
		{"then bytes 4-5, low byte first", "ffffffff-ff00-0000-0000-000000000000", "00000000-0001-0000-0000-000000000000"},
		{"then bytes 0-3, low byte first", "ff000000-0000-0000-0000-000000000000", "00000001-0000-0000-0000-000000000000"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, -1, compareUniqueIdentifiers(tt.a, tt.b))
			assert.Equal(t, 1, compareUniqueIdentifiers(tt.b, tt.a))
			assert.Equal(t, 0, compareUniqueIdentifiers(tt.a, tt.a))
		})
	}
}

func TestInboxRelayForward(t *testing.T) {
	t.Parallel()
	claim := store.Claim{ID: idA, Token: tokenA}
	outbox := store.OutboxInsertParams{Topic: "order.created", Key: "agg", Payload: json.RawMessage(`{}`), MaxAttempts: 7}
	tests := []struct {
		name       string
		fenced     int64
		insertErr  error
		want       bool
		wantErr    bool
		wantEvents []string
	}{
		{name: "fence holds", fenced: 1, want: true, wantEvents: []string{"begin", "exec", "query", "commit"}},
		{name: "lost claim writes no outbox row", fenced: 0, want: false, wantEvents: []string{"begin", "exec", "rollback"}},
		{name: "insert fails", fenced: 1, insertErr: sqlError(2627, 3621), wantErr: true, wantEvents: []string{"begin", "exec", "query", "rollback"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var s *Store
			s, f := newFakeStore(t, func(query string, _ []any) fakeAnswer {
				if strings.HasPrefix(query, "UPDATE [inbox]") {
					return fakeAnswer{rowsAffected: tt.fenced}
				}
				if tt.insertErr != nil {
					return fakeAnswer{err: tt.insertErr}
				}
				return fakeAnswer{rows: [][]any{{wireGUID(t, idB)}}}
			})
			got, err := s.InboxRelayForward(context.Background(), store.InboxForwardParams{Claim: claim, Outbox: outbox})
			if tt.wantErr {
				assert.Error(t, err)
			} else {
				require.NoError(t, err)
				assert.Equal(t, tt.want, got)
			}
			assert.Equal(t, tt.wantEvents, f.kinds())
			sent := f.statements()
			assert.Equal(t, s.stmt.inboxRelayProcessed, sent[0].query)
			assert.Equal(t, []any{idA, tokenA}, sent[0].args)
			if len(sent) > 1 {
				assert.Equal(t, s.stmt.outboxInsert[insertMaxAttempts], sent[1].query)
				assert.Equal(t, []any{"order.created", "agg", nil, "{}", int32(7)}, sent[1].args)
			}
		})
	}
}

func TestFencedWritesWithoutValidClaimsSendNothing(t *testing.T) {
	t.Parallel()
	s, f := newFakeStore(t, func(string, []any) fakeAnswer { return fakeAnswer{rowsAffected: 1} })
	ctx := context.Background()
	bad := store.Claim{ID: "x", Token: tokenA}
	noToken := store.Claim{ID: idA}

	ids, err := s.OutboxMarkSent(ctx, []store.Claim{bad, noToken})
	require.NoError(t, err)
	assert.Empty(t, ids)
	claims, err := s.OutboxRenew(ctx, store.OutboxRenewParams{Claims: []store.Claim{bad}, Lease: time.Minute})
	require.NoError(t, err)
	assert.Empty(t, claims)
	ok, err := s.InboxRelayDead(ctx, noToken, "e")
	require.NoError(t, err)
	assert.False(t, ok)
	ok, err = s.InboxRelayRenew(ctx, bad, time.Minute)
	require.NoError(t, err)
	assert.False(t, ok)
	ok, err = s.InboxRelayForward(ctx, store.InboxForwardParams{Claim: bad})
	require.NoError(t, err)
	assert.False(t, ok)
	assert.Empty(t, f.kinds())
}

func TestFencedWritesReturnChangedClaimsInBatchOrder(t *testing.T) {
	t.Parallel()
	s, f := newFakeStore(t, func(query string, _ []any) fakeAnswer {
		if strings.Contains(query, "OUTPUT inserted.[id], inserted.[claim_token]") {
			return fakeAnswer{rows: [][]any{{wireGUID(t, idC), wireGUID(t, tokenC)}, {wireGUID(t, idA), wireGUID(t, tokenA)}}}
		}
		// idB lost its fence.
		return fakeAnswer{rows: [][]any{{wireGUID(t, idC)}, {wireGUID(t, idA)}}}
	})
	ctx := context.Background()
	claims := []store.Claim{{ID: idA, Token: tokenA}, {ID: idB, Token: tokenB}, {ID: strings.ToUpper(idC), Token: tokenC}}

	ids, err := s.OutboxMarkSent(ctx, claims)
	require.NoError(t, err)
	assert.Equal(t, []string{idA, idC}, ids)

	renewed, err := s.OutboxRenew(ctx, store.OutboxRenewParams{Claims: claims, Lease: 2 * time.Minute})
	require.NoError(t, err)
	assert.Equal(t, []store.Claim{{ID: idA, Token: tokenA}, {ID: idC, Token: tokenC}}, renewed)

	retried, err := s.OutboxRetry(ctx, []store.OutboxRetryParams{
		{Claim: claims[0], Delay: time.Second, LastError: "500"},
		{Claim: claims[2], Delay: time.Second, LastError: "500"},
	})
	require.NoError(t, err)
	assert.Equal(t, []string{idA, idC}, retried)

	dead, err := s.OutboxMarkDead(ctx, []store.OutboxDeadParams{{Claim: claims[2], LastError: "x"}, {Claim: claims[0], LastError: "y"}})
	require.NoError(t, err)
	assert.Equal(t, []string{idC, idA}, dead)

	sent := f.statements()
	require.Len(t, sent, 4)
	assert.Equal(t, []any{`[{"id":"` + idA + `","token":"` + tokenA + `"},{"id":"` + idB + `","token":"` + tokenB + `"},{"id":"` + idC + `","token":"` + tokenC + `"}]`}, sent[0].args)
	assert.Equal(t, int32(120000), sent[1].args[1], "renew sends the lease in milliseconds")
}

func TestOutboxStats(t *testing.T) {
	t.Parallel()
	s, _ := newFakeStore(t, func(string, []any) fakeAnswer {
		return fakeAnswer{rows: [][]any{
			{"order.created", int64(3), int64(1500)},
			{"order.paid", int64(2), int64(-2)},
		}}
	})
	stats, err := s.OutboxStats(context.Background())
	require.NoError(t, err)
	assert.Equal(t, store.OutboxStats{
		Pending:          5,
		OldestPendingAge: 1500 * time.Millisecond,
		PendingByTopic:   map[string]int64{"order.created": 3, "order.paid": 2},
	}, stats)

	empty, _ := newFakeStore(t, func(string, []any) fakeAnswer { return fakeAnswer{} })
	stats, err = empty.OutboxStats(context.Background())
	require.NoError(t, err)
	assert.Equal(t, store.OutboxStats{PendingByTopic: map[string]int64{}}, stats)
}

func TestInboxStats(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		row  []any
		want store.InboxStats
	}{
		{"pending rows", []any{int64(4), int64(2500)}, store.InboxStats{Pending: 4, OldestPendingAge: 2500 * time.Millisecond}},
		{"no pending row", []any{int64(0), nil}, store.InboxStats{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s, _ := newFakeStore(t, func(string, []any) fakeAnswer { return fakeAnswer{rows: [][]any{tt.row}} })
			got, err := s.InboxStats(context.Background())
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestCheckSchema(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		row     []any
		wantErr string
	}{
		{"complete", []any{int64(1), int64(8), int64(2), int64(-1)}, ""},
		{"headers missing", []any{int64(1), int64(8), int64(2), nil}, "ALTER TABLE [inbox] ADD [headers] NVARCHAR(MAX) NOT NULL DEFAULT '{}';"},
		{"sequence missing", []any{int64(1), nil, int64(2), int64(-1)}, "ALTER TABLE [outbox] ADD [sequence] BIGINT IDENTITY(1,1) NOT NULL;"},
		{"outbox missing", []any{nil, nil, int64(2), int64(-1)}, "outbox table [outbox] does not exist"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s, _ := newFakeStore(t, func(string, []any) fakeAnswer { return fakeAnswer{rows: [][]any{tt.row}} })
			err := s.CheckSchema(context.Background())
			if tt.wantErr == "" {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.wantErr)
		})
	}
}

func TestOutboxReplayRefusesNoFilter(t *testing.T) {
	t.Parallel()
	s, f := newFakeStore(t, func(string, []any) fakeAnswer { return fakeAnswer{rows: [][]any{{int64(3)}}} })
	_, err := s.OutboxReplay(context.Background(), store.OutboxReplayParams{})
	assert.Error(t, err)
	assert.Empty(t, f.kinds())
	n, err := s.OutboxReplay(context.Background(), store.OutboxReplayParams{Topics: []string{"a"}})
	require.NoError(t, err)
	assert.Equal(t, int64(3), n)
	assert.Equal(t, []string{"begin", "query", "commit"}, f.kinds(), "the replay and the MERGE of its generations in one transaction")
}

func TestUUIDString(t *testing.T) {
	t.Parallel()
	var u mssql.UniqueIdentifier
	require.NoError(t, u.Scan(wireGUID(t, idA)))
	assert.Equal(t, idA, uuidString(u))
}

// deadlockFirst answers the first n statements with Msg 1205 and the rest with then.
func deadlockFirst(n int, then func(query string) fakeAnswer) func(string, []any) fakeAnswer {
	var mu sync.Mutex
	calls := 0
	return func(query string, _ []any) fakeAnswer {
		mu.Lock()
		calls++
		c := calls
		mu.Unlock()
		if c <= n {
			return fakeAnswer{err: sqlError(1205)}
		}
		return then(query)
	}
}

func TestDeadlockVictimsRunAgain(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	claim := store.Claim{ID: idA, Token: tokenA}
	tests := []struct {
		name       string
		deadlocks  int
		then       func(t *testing.T) func(query string) fakeAnswer
		call       func(s *Store) (any, error)
		want       any
		wantErr    bool
		wantEvents []string
	}{
		{
			name:      "fenced write",
			deadlocks: 1,
			then: func(t *testing.T) func(string) fakeAnswer {
				return func(string) fakeAnswer { return fakeAnswer{rows: [][]any{{wireGUID(t, idA)}}} }
			},
			call:       func(s *Store) (any, error) { return s.OutboxMarkSent(ctx, []store.Claim{claim}) },
			want:       []string{idA},
			wantEvents: []string{"query", "query"},
		},
		{
			name:      "claim transaction",
			deadlocks: 1,
			then: func(t *testing.T) func(string) fakeAnswer {
				return func(string) fakeAnswer { return fakeAnswer{} }
			},
			call: func(s *Store) (any, error) {
				return s.OutboxClaim(ctx, store.OutboxClaimParams{Limit: 1, Lease: time.Minute})
			},
			want:       []store.OutboxMessage(nil),
			wantEvents: []string{"begin", "query", "rollback", "begin", "query", "commit"},
		},
		{
			name:      "relay forward transaction",
			deadlocks: 1,
			then: func(t *testing.T) func(string) fakeAnswer {
				return func(query string) fakeAnswer {
					if strings.HasPrefix(query, "UPDATE") {
						return fakeAnswer{rowsAffected: 1}
					}
					return fakeAnswer{rows: [][]any{{wireGUID(t, idB)}}}
				}
			},
			call: func(s *Store) (any, error) {
				return s.InboxRelayForward(ctx, store.InboxForwardParams{Claim: claim, Outbox: store.OutboxInsertParams{Topic: "t", Payload: json.RawMessage(`{}`)}})
			},
			want:       true,
			wantEvents: []string{"begin", "exec", "rollback", "begin", "exec", "query", "commit"},
		},
		{
			name:      "inbox insert",
			deadlocks: 2,
			then: func(t *testing.T) func(string) fakeAnswer {
				return func(string) fakeAnswer { return fakeAnswer{} }
			},
			call: func(s *Store) (any, error) {
				return s.InboxInsert(ctx, store.InboxInsertParams{Source: "s", IdempotencyKey: "k", Payload: json.RawMessage(`{}`)})
			},
			want:       store.InboxInsertResult{Duplicate: true},
			wantEvents: []string{"query", "query", "query"},
		},
		{
			name:      "gives up after three attempts",
			deadlocks: 5,
			then: func(t *testing.T) func(string) fakeAnswer {
				return func(string) fakeAnswer { return fakeAnswer{rowsAffected: 1} }
			},
			call:       func(s *Store) (any, error) { return s.OutboxReclaim(ctx) },
			wantErr:    true,
			wantEvents: []string{"exec", "exec", "exec"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s, f := newFakeStore(t, deadlockFirst(tt.deadlocks, tt.then(t)))
			got, err := tt.call(s)
			if tt.wantErr {
				assert.Error(t, err)
			} else {
				require.NoError(t, err)
				assert.Equal(t, tt.want, got)
			}
			assert.Equal(t, tt.wantEvents, f.kinds())
		})
	}
}

// batchAnswer answers the inbox inserts of a batch by idempotency key (@p2): a key that
// starts with "new-" is inserted (idA for new-a, idB for new-b), "dup" writes nothing, "race"
// hits the unique constraint, and errs[key] fails.
func batchAnswer(t *testing.T, errs map[string]error) func(string, []any) fakeAnswer {
	return func(_ string, args []any) fakeAnswer {
		key, _ := args[1].(string)
		if err, ok := errs[key]; ok {
			return fakeAnswer{err: err}
		}
		switch key {
		case "new-a":
			return fakeAnswer{rows: [][]any{{wireGUID(t, idA)}}}
		case "new-b":
			return fakeAnswer{rows: [][]any{{wireGUID(t, idB)}}}
		case "race":
			return fakeAnswer{err: sqlError(2627, 3621)}
		}
		return fakeAnswer{}
	}
}

func batchParams(keys ...string) []store.InboxInsertParams {
	out := make([]store.InboxInsertParams, len(keys))
	for i, k := range keys {
		out[i] = store.InboxInsertParams{Source: "orders", IdempotencyKey: k, Payload: json.RawMessage(`{}`)}
	}
	return out
}

// sentKeys returns the idempotency key of every statement sent.
func sentKeys(f *fakeDB) []string {
	var out []string
	for _, e := range f.statements() {
		out = append(out, e.args[1].(string))
	}
	return out
}

func TestInboxInsertBatch(t *testing.T) {
	t.Parallel()
	s, f := newFakeStore(t, batchAnswer(t, nil))
	got, err := s.InboxInsertBatch(context.Background(), batchParams("race", "new-b", "dup", "new-b", "new-a"))
	require.NoError(t, err)
	assert.Equal(t, []store.InboxInsertResult{
		{Duplicate: true}, {ID: idB}, {Duplicate: true}, {Duplicate: true}, {ID: idA},
	}, got)
	assert.Equal(t, []string{"begin", "query", "query", "query", "query", "commit"}, f.kinds(),
		"one transaction; the repeat of new-b inside the batch is not sent")
	assert.Equal(t, []string{"dup", "new-a", "new-b", "race"}, sentKeys(f), "the inserts run in key order")
	for _, e := range f.statements() {
		assert.Equal(t, s.stmt.inboxInsert, e.query)
		assert.Len(t, e.args, 10)
	}
}

func TestInboxInsertBatchOfOneIsOneInsert(t *testing.T) {
	t.Parallel()
	s, f := newFakeStore(t, batchAnswer(t, nil))
	got, err := s.InboxInsertBatch(context.Background(), batchParams("new-a"))
	require.NoError(t, err)
	assert.Equal(t, []store.InboxInsertResult{{ID: idA}}, got)
	assert.Equal(t, []string{"query"}, f.kinds(), "no transaction around a single insert")

	none, err := s.InboxInsertBatch(context.Background(), nil)
	require.NoError(t, err)
	assert.Empty(t, none)
	assert.Equal(t, []string{"query"}, f.kinds(), "an empty batch sends nothing")
}

func TestInboxInsertBatchFailureRollsBackEverything(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		err     error
		wantIs  error
		notWant error
	}{
		{name: "foreign key", err: sqlError(547), notWant: store.ErrConflict},
		{name: "truncation", err: sqlError(2628, 3621), wantIs: store.ErrInvalidValue},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s, f := newFakeStore(t, batchAnswer(t, map[string]error{"new-b": tt.err}))
			got, err := s.InboxInsertBatch(context.Background(), batchParams("new-a", "new-b", "x"))
			require.Error(t, err)
			assert.Nil(t, got)
			if tt.wantIs != nil {
				assert.ErrorIs(t, err, tt.wantIs)
			}
			if tt.notWant != nil {
				assert.NotErrorIs(t, err, tt.notWant)
			}
			assert.Equal(t, []string{"begin", "query", "query", "rollback"}, f.kinds(),
				"the batch stops at the failed insert and rolls back; nothing is committed")
		})
	}
}

func TestInboxInsertBatchRefusesBadParameters(t *testing.T) {
	t.Parallel()
	s, f := newFakeStore(t, batchAnswer(t, nil))
	params := batchParams("a", "b")
	params[1].Consumption = "poll"
	_, err := s.InboxInsertBatch(context.Background(), params)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "message 1")
	assert.Empty(t, f.kinds(), "nothing is sent")
}

func TestInboxInsertBatchDeadlockVictimRunsAgain(t *testing.T) {
	t.Parallel()
	s, f := newFakeStore(t, deadlockFirst(1, func(string) fakeAnswer {
		return fakeAnswer{rows: [][]any{{wireGUID(t, idA)}}}
	}))
	got, err := s.InboxInsertBatch(context.Background(), batchParams("k1", "k2"))
	require.NoError(t, err)
	assert.Equal(t, []store.InboxInsertResult{{ID: idA}, {ID: idA}}, got)
	assert.Equal(t, []string{"begin", "query", "rollback", "begin", "query", "query", "commit"}, f.kinds())
}
