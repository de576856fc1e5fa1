package storetest

import (
	"slices"
	"testing"
	"time"

	"github.com/alternayte/queuebox/shared/store"
)

// replayFixture builds one row in each state: pending (waiting for a retry), processing,
// sentA (topic a), deadB (topic b, attempt 1), oldB (topic b, sent, created two hours ago).
type replayFixture struct {
	pending, processing, sentA, deadB, oldB string
}

func newReplayFixture(t *testing.T, e *env) replayFixture {
	t.Helper()
	ids := e.insert(t,
		store.OutboxInsertParams{Topic: "a", Payload: payloadN(1)},
		store.OutboxInsertParams{Topic: "a", Payload: payloadN(2)},
		store.OutboxInsertParams{Topic: "a", Payload: payloadN(3)},
		store.OutboxInsertParams{Topic: "b", Payload: payloadN(4)},
		store.OutboxInsertParams{Topic: "b", Payload: payloadN(5)},
	)
	f := replayFixture{pending: ids[0], processing: ids[1], sentA: ids[2], deadB: ids[3], oldB: ids[4]}
	msgs := e.claim(t, 10)
	by := map[string]store.OutboxMessage{}
	for _, m := range msgs {
		by[m.ID] = m
	}
	if _, err := e.s.OutboxRetry(e.ctx, []store.OutboxRetryParams{
		{Claim: by[f.pending].Claim(), Delay: time.Hour, LastError: "later"},
		{Claim: by[f.deadB].Claim(), LastError: "first"},
	}); err != nil {
		t.Fatalf("retrying: %v", err)
	}
	e.markSent(t, by[f.sentA].Claim(), by[f.oldB].Claim())
	dead := claimOne(t, e, f.deadB)
	if _, err := e.s.OutboxMarkDead(e.ctx, []store.OutboxDeadParams{{Claim: dead.Claim(), LastError: "poison"}}); err != nil {
		t.Fatalf("marking dead: %v", err)
	}
	e.changeOutbox(t, f.oldB, Change{Age: 2 * time.Hour})
	return f
}

func testOutboxReplayFilters(t *testing.T, e *env) {
	oneHourAgo := func(e *env, t *testing.T) *time.Time { return ptr(e.now(t).Add(-time.Hour)) }
	tests := []struct {
		name   string
		params func(t *testing.T, e *env, f replayFixture) store.OutboxReplayParams
		moved  func(f replayFixture) []string
	}{
		{
			name: "ids select only sent and dead rows",
			params: func(_ *testing.T, _ *env, f replayFixture) store.OutboxReplayParams {
				return store.OutboxReplayParams{IDs: []string{f.sentA, f.pending, f.processing}}
			},
			moved: func(f replayFixture) []string { return []string{f.sentA} },
		},
		{
			name: "topics",
			params: func(_ *testing.T, _ *env, _ replayFixture) store.OutboxReplayParams {
				return store.OutboxReplayParams{Topics: []string{"b"}}
			},
			moved: func(f replayFixture) []string { return []string{f.deadB, f.oldB} },
		},
		{
			name: "topics and ids combine with AND",
			params: func(_ *testing.T, _ *env, f replayFixture) store.OutboxReplayParams {
				return store.OutboxReplayParams{Topics: []string{"a", "b"}, IDs: []string{f.deadB, f.pending}}
			},
			moved: func(f replayFixture) []string { return []string{f.deadB} },
		},
		{
			name: "created from is exclusive",
			params: func(t *testing.T, e *env, f replayFixture) store.OutboxReplayParams {
				at := e.outboxRow(t, f.sentA).CreatedAt
				return store.OutboxReplayParams{IDs: []string{f.sentA}, CreatedFrom: &at}
			},
			moved: func(replayFixture) []string { return nil },
		},
		{
			name: "a window around the creation time",
			params: func(t *testing.T, e *env, f replayFixture) store.OutboxReplayParams {
				at := e.outboxRow(t, f.sentA).CreatedAt
				return store.OutboxReplayParams{IDs: []string{f.sentA}, CreatedFrom: ptr(at.Add(-time.Microsecond)), CreatedTo: ptr(at.Add(time.Microsecond))}
			},
			moved: func(f replayFixture) []string { return []string{f.sentA} },
		},
		{
			name: "created to is exclusive",
			params: func(t *testing.T, e *env, f replayFixture) store.OutboxReplayParams {
				at := e.outboxRow(t, f.sentA).CreatedAt
				return store.OutboxReplayParams{Topics: []string{"a"}, CreatedTo: &at}
			},
			moved: func(replayFixture) []string { return nil },
		},
		{
			name: "created from",
			params: func(t *testing.T, e *env, _ replayFixture) store.OutboxReplayParams {
				return store.OutboxReplayParams{CreatedFrom: oneHourAgo(e, t)}
			},
			moved: func(f replayFixture) []string { return []string{f.sentA, f.deadB} },
		},
		{
			name: "created to",
			params: func(t *testing.T, e *env, _ replayFixture) store.OutboxReplayParams {
				return store.OutboxReplayParams{CreatedTo: oneHourAgo(e, t)}
			},
			moved: func(f replayFixture) []string { return []string{f.oldB} },
		},
		{
			name: "window and topic",
			params: func(t *testing.T, e *env, _ replayFixture) store.OutboxReplayParams {
				now := e.now(t)
				return store.OutboxReplayParams{Topics: []string{"a"}, CreatedFrom: ptr(now.Add(-time.Hour)), CreatedTo: ptr(now.Add(time.Hour))}
			},
			moved: func(f replayFixture) []string { return []string{f.sentA} },
		},
		{
			name: "an id that is not a UUID moves nothing",
			params: func(_ *testing.T, _ *env, _ replayFixture) store.OutboxReplayParams {
				return store.OutboxReplayParams{IDs: []string{"not-a-uuid"}}
			},
			moved: func(replayFixture) []string { return nil },
		},
		{
			name: "an unknown id moves nothing",
			params: func(_ *testing.T, _ *env, _ replayFixture) store.OutboxReplayParams {
				return store.OutboxReplayParams{IDs: []string{"6f1d3c1e-0000-4000-8000-000000000000"}}
			},
			moved: func(replayFixture) []string { return nil },
		},
	}
	// The first case runs on the env of the test; the others open their own databases.
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ce := e
			if i > 0 {
				t.Parallel()
				s, h := e.open(t, e.schema)
				ce = &env{s: s, h: h, ctx: e.ctx, schema: e.schema, open: e.open}
			}
			f := newReplayFixture(t, ce)
			params := tc.params(t, ce, f)
			before := map[string]OutboxRow{}
			for _, r := range ce.outboxRows(t) {
				before[r.ID] = r
			}
			t0 := ce.now(t)
			n, err := ce.s.OutboxReplay(ce.ctx, params)
			if err != nil {
				t.Fatalf("replaying: %v", err)
			}
			t1 := ce.now(t)
			want := tc.moved(f)
			if n != int64(len(want)) {
				t.Fatalf("replay moved %d rows, want %d", n, len(want))
			}
			for _, r := range ce.outboxRows(t) {
				if !slices.Contains(want, r.ID) {
					if !sameOutboxRow(r, before[r.ID]) {
						t.Errorf("row %s changed although not selected:\n got %+v\nwant %+v", r.ID, r, before[r.ID])
					}
					continue
				}
				if r.State != store.OutboxPending || r.Attempt != 0 || r.LastError != nil || r.Token != "" ||
					r.ClaimedAt != nil || r.LeaseExpiresAt != nil || !within(r.ScheduledAt, t0, t1, time.Millisecond) ||
					r.Sequence != before[r.ID].Sequence || !jsonEqual(t, r.Payload, before[r.ID].Payload) {
					t.Errorf("replayed row %s: %+v; want pending, attempt 0, no error, no claim, scheduled now, same sequence and payload", r.ID, r)
				}
			}
		})
	}
}

func testOutboxReplayRefusesNoFilter(t *testing.T, e *env) {
	f := newReplayFixture(t, e)
	for _, p := range []store.OutboxReplayParams{{}, {IDs: []string{}, Topics: []string{}}} {
		if n, err := e.s.OutboxReplay(e.ctx, p); err == nil {
			t.Fatalf("replay without a filter %+v: moved %d rows and returned no error", p, n)
		}
	}
	if r := e.outboxRow(t, f.deadB); r.State != store.OutboxDead {
		t.Fatalf("dead row is %s after refused replays", r.State)
	}
}
