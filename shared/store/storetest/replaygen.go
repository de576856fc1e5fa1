package storetest

import (
	"maps"
	"testing"
	"time"

	"github.com/alternayte/queuebox/shared/store"
)

// replayGenerationTests are the behaviours of store.ReplayGenerationStore and of the replay
// statements that raise the generation (queuebox_replay_generation, V3 of the QueueBox track).
// They also run on SchemaCustom: the owner of a custom schema applies QueueBox's own tables
// as they are.
func replayGenerationTests() []testCase {
	return []testCase{
		{name: "ReplayRaisesTheGeneration", custom: true, run: testReplayRaisesTheGeneration},
	}
}

func (e *env) generations(t *testing.T, ids ...string) map[string]int64 {
	t.Helper()
	gs, ok := e.s.(store.ReplayGenerationStore)
	if !ok {
		t.Fatalf("the store %T is not a store.ReplayGenerationStore", e.s)
	}
	got, err := gs.OutboxReplayGenerations(e.ctx, ids)
	if err != nil {
		t.Fatalf("reading the replay generations: %v", err)
	}
	return got
}

// sendOne claims the row id and marks it sent.
func (e *env) sendOne(t *testing.T, id string) {
	t.Helper()
	m := claimOne(t, e, id)
	if got, err := e.s.OutboxMarkSent(e.ctx, []store.Claim{m.Claim()}); err != nil || len(got) != 1 {
		t.Fatalf("marking %s sent: got %v, %v", id, got, err)
	}
}

// testReplayRaisesTheGeneration: a row never replayed has no generation; each replay raises
// it by one, by either replay statement (the admin replay and the batched, safe replay); a
// retry, a reclaim or a second claim does not; a row that no replay moved keeps none.
func testReplayRaisesTheGeneration(t *testing.T, e *env) {
	ids := e.insert(t, store.OutboxInsertParams{Topic: "gen", Payload: payloadN(1)},
		store.OutboxInsertParams{Topic: "other", Payload: payloadN(2)})
	a, b := ids[0], ids[1]
	want := func(w map[string]int64) {
		t.Helper()
		if got := e.generations(t, a, b, "not-a-uuid"); !maps.Equal(got, w) {
			t.Fatalf("generations: got %v, want %v", got, w)
		}
	}
	// Both rows delivered once (b stays pending, scheduled ahead, after its first claim).
	msgs := e.claim(t, 10)
	if len(msgs) != 2 {
		t.Fatalf("claimed %d rows, want 2", len(msgs))
	}
	var sends []store.Claim
	for _, m := range msgs {
		if m.ID == a {
			sends = append(sends, m.Claim())
		} else if _, err := e.s.OutboxRetry(e.ctx, []store.OutboxRetryParams{{Claim: m.Claim(), Delay: time.Hour, LastError: "HTTP 503"}}); err != nil {
			t.Fatalf("retrying %s: %v", m.ID, err)
		}
	}
	if got, err := e.s.OutboxMarkSent(e.ctx, sends); err != nil || len(got) != 1 {
		t.Fatalf("marking %s sent: got %v, %v", a, got, err)
	}
	want(map[string]int64{})

	if n, err := e.s.OutboxReplay(e.ctx, store.OutboxReplayParams{IDs: []string{a}}); err != nil || n != 1 {
		t.Fatalf("replaying %s: got %d, %v", a, n, err)
	}
	want(map[string]int64{a: 1})

	e.sendOne(t, a)
	res, err := e.replayStore(t).OutboxReplayBatch(e.ctx, store.OutboxSelection{Topics: []string{"gen"}}, "", 10)
	if err != nil || res.Moved != 1 {
		t.Fatalf("replaying the topic in a batch: got %+v, %v", res, err)
	}
	want(map[string]int64{a: 2})

	// A replay that moves nothing (the row is pending) raises nothing.
	if n, err := e.s.OutboxReplay(e.ctx, store.OutboxReplayParams{IDs: []string{a}}); err != nil || n != 0 {
		t.Fatalf("replaying a pending row: got %d, %v", n, err)
	}
	// Nor do the retries of one delivery.
	m := claimOne(t, e, a)
	if _, err := e.s.OutboxRetry(e.ctx, []store.OutboxRetryParams{{Claim: m.Claim(), Delay: 0, LastError: "HTTP 503"}}); err != nil {
		t.Fatalf("retrying %s: %v", a, err)
	}
	e.sendOne(t, a)
	want(map[string]int64{a: 2})
}
