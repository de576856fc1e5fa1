package storetest

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/alternayte/queuebox/shared/store"
)

func testOutboxFinishedTopics(t *testing.T, e *env) {
	ids := e.insert(t,
		store.OutboxInsertParams{Topic: "sent.topic", Payload: payloadN(1)},
		store.OutboxInsertParams{Topic: "dead.topic", Payload: payloadN(2)},
		store.OutboxInsertParams{Topic: "sent.topic", Payload: payloadN(3)},
		store.OutboxInsertParams{Topic: "pending.topic", Payload: payloadN(4), Delay: time.Hour},
	)
	for _, m := range e.claim(t, 10) {
		if m.ID == ids[1] {
			if _, err := e.s.OutboxMarkDead(e.ctx, []store.OutboxDeadParams{{Claim: m.Claim(), LastError: "x"}}); err != nil {
				t.Fatal(err)
			}
			continue
		}
		e.markSent(t, m.Claim())
	}
	topics, err := e.s.OutboxFinishedTopics(e.ctx)
	if err != nil {
		t.Fatalf("listing topics: %v", err)
	}
	if !slices.Equal(topics, []string{"dead.topic", "sent.topic"}) {
		t.Fatalf("topics = %v, want the distinct topics of sent and dead rows", topics)
	}
}

func testOutboxStats(t *testing.T, e *env) {
	st, err := e.s.OutboxStats(e.ctx)
	if err != nil {
		t.Fatalf("reading stats: %v", err)
	}
	if st.Pending != 0 || st.OldestPendingAge != 0 || len(st.PendingByTopic) != 0 {
		t.Fatalf("stats of an empty outbox: %+v, want zero", st)
	}
	ids := e.insert(t,
		store.OutboxInsertParams{Topic: "a", Payload: payloadN(1)},
		store.OutboxInsertParams{Topic: "a", Payload: payloadN(2)},
		store.OutboxInsertParams{Topic: "a", Payload: payloadN(3)},
		store.OutboxInsertParams{Topic: "b", Payload: payloadN(4)},
		store.OutboxInsertParams{Topic: "b", Payload: payloadN(5)},
		store.OutboxInsertParams{Topic: "c", Payload: payloadN(6)},
	)
	if first := e.claim(t, 1); !slices.Equal(msgIDs(first), ids[:1]) {
		t.Fatalf("claim: got %v, want [%s]", msgIDs(first), ids[0])
	} // a processing row is not pending
	msgs := e.claim(t, 10)
	for _, m := range msgs {
		switch m.Topic {
		case "c":
			e.markSent(t, m.Claim()) // a sent row is not pending
		default:
			if _, err := e.s.OutboxRetry(e.ctx, []store.OutboxRetryParams{{Claim: m.Claim(), Delay: time.Hour}}); err != nil {
				t.Fatalf("retrying: %v", err)
			}
		}
	}
	e.changeOutbox(t, ids[2], Change{Age: time.Hour})
	e.changeOutbox(t, ids[0], Change{Age: 3 * time.Hour}) // processing: does not count
	st, err = e.s.OutboxStats(e.ctx)
	if err != nil {
		t.Fatalf("reading stats: %v", err)
	}
	if st.Pending != 4 || st.PendingByTopic["a"] != 2 || st.PendingByTopic["b"] != 2 || len(st.PendingByTopic) != 2 {
		t.Fatalf("stats: %+v, want 4 pending: a 2, b 2", st)
	}
	if st.OldestPendingAge < time.Hour || st.OldestPendingAge > time.Hour+time.Minute {
		t.Fatalf("oldest pending age %s, want about 1h", st.OldestPendingAge)
	}
}

// finishedFixture makes rows in every state: the sent and dead ones named by the prefix
// "old" are two hours old, the others new.
func finishedFixture(t *testing.T, e *env, oldSent, oldDead int) (old, kept []string) {
	t.Helper()
	var batch []store.OutboxInsertParams
	total := oldSent + oldDead + 4
	for i := 0; i < total; i++ {
		batch = append(batch, store.OutboxInsertParams{Topic: "t", Payload: payloadN(i)})
	}
	ids := e.insert(t, batch...)
	msgs := e.claim(t, total)
	if len(msgs) != total {
		t.Fatalf("claim: got %d rows, want %d", len(msgs), total)
	}
	var sent []store.Claim
	var dead []store.OutboxDeadParams
	for i, m := range msgs {
		switch {
		case i < oldSent:
			sent = append(sent, m.Claim())
			old = append(old, m.ID)
		case i < oldSent+oldDead:
			dead = append(dead, store.OutboxDeadParams{Claim: m.Claim()})
			old = append(old, m.ID)
		case i == total-4: // new sent
			sent = append(sent, m.Claim())
			kept = append(kept, m.ID)
		case i == total-3: // new dead
			dead = append(dead, store.OutboxDeadParams{Claim: m.Claim()})
			kept = append(kept, m.ID)
		case i == total-2: // old pending
			if _, err := e.s.OutboxRetry(e.ctx, []store.OutboxRetryParams{{Claim: m.Claim(), Delay: time.Hour}}); err != nil {
				t.Fatalf("retrying: %v", err)
			}
			kept = append(kept, m.ID)
		default: // old processing
			kept = append(kept, m.ID)
		}
	}
	e.markSent(t, sent...)
	if _, err := e.s.OutboxMarkDead(e.ctx, dead); err != nil {
		t.Fatalf("marking dead: %v", err)
	}
	for _, id := range append(slices.Clone(old), ids[total-2], ids[total-1]) {
		e.changeOutbox(t, id, Change{Age: 2 * time.Hour})
	}
	return old, kept
}

func testOutboxDeleteFinished(t *testing.T, e *env) {
	old, kept := finishedFixture(t, e, 5, 3)
	var counts []int64
	for i := 0; i < 5; i++ {
		n, err := e.s.OutboxDeleteFinished(e.ctx, store.DeleteFinishedParams{MaxAge: time.Hour, Limit: 3})
		if err != nil {
			t.Fatalf("deleting: %v", err)
		}
		counts = append(counts, n)
		if n == 0 {
			break
		}
	}
	if !slices.Equal(counts, []int64{3, 3, 2, 0}) {
		t.Fatalf("batches deleted %v, want [3 3 2 0]", counts)
	}
	var left []string
	for _, r := range e.outboxRows(t) {
		left = append(left, r.ID)
	}
	if !sameSet(left, kept) {
		t.Fatalf("rows left %v, want %v (old pending and processing rows and new finished rows); deleted %v", left, kept, old)
	}
}

func testOutboxDeleteExcess(t *testing.T, e *env) {
	const sentRows, deadRows = 6, 4
	var batch []store.OutboxInsertParams
	for i := 0; i < sentRows+deadRows+2; i++ {
		batch = append(batch, store.OutboxInsertParams{Topic: "t", Payload: payloadN(i)})
	}
	ids := e.insert(t, batch...)
	msgs := e.claim(t, len(ids))
	var sent []store.Claim
	var dead []store.OutboxDeadParams
	for i, m := range msgs[:sentRows+deadRows] {
		if i < sentRows {
			sent = append(sent, m.Claim())
		} else {
			dead = append(dead, store.OutboxDeadParams{Claim: m.Claim()})
		}
	}
	e.markSent(t, sent...)
	if _, err := e.s.OutboxMarkDead(e.ctx, dead); err != nil {
		t.Fatalf("marking dead: %v", err)
	}
	pendingID := msgs[len(msgs)-1].ID
	if _, err := e.s.OutboxRetry(e.ctx, []store.OutboxRetryParams{{Claim: msgs[len(msgs)-1].Claim(), Delay: time.Hour}}); err != nil {
		t.Fatalf("retrying: %v", err)
	}
	// Row i was updated i minutes ago: the lower the index, the newer the row.
	for i, id := range ids {
		e.changeOutbox(t, id, Change{Age: time.Duration(i+1) * time.Minute})
	}

	deleteAll := func(state string, keep int64, limit int) []int64 {
		var counts []int64
		for i := 0; i < 10; i++ {
			n, err := e.s.OutboxDeleteExcess(e.ctx, store.DeleteExcessParams{State: state, Keep: keep, Limit: limit})
			if err != nil {
				t.Fatalf("deleting excess %s rows: %v", state, err)
			}
			counts = append(counts, n)
			if n == 0 {
				break
			}
		}
		return counts
	}
	if got := deleteAll(store.OutboxSent, 2, 3); !slices.Equal(got, []int64{3, 1, 0}) {
		t.Fatalf("excess sent batches %v, want [3 1 0]", got)
	}
	if got := deleteAll(store.OutboxDead, 1, 10); !slices.Equal(got, []int64{3, 0}) {
		t.Fatalf("excess dead batches %v, want [3 0]", got)
	}
	var left []string
	for _, r := range e.outboxRows(t) {
		left = append(left, r.ID)
	}
	want := []string{ids[0], ids[1], ids[sentRows], ids[sentRows+deadRows], pendingID}
	if !sameSet(left, want) {
		t.Fatalf("rows left %v, want the 2 newest sent, the newest dead, the processing and the pending row %v", left, want)
	}
	for _, state := range []string{store.OutboxPending, store.OutboxProcessing, "other"} {
		if _, err := e.s.OutboxDeleteExcess(e.ctx, store.DeleteExcessParams{State: state, Keep: 0, Limit: 10}); err == nil {
			t.Fatalf("deleting excess %s rows: got no error", state)
		}
	}
	if n := len(e.outboxRows(t)); n != len(want) {
		t.Fatalf("%d rows left after refused deletes, want %d", n, len(want))
	}
}

func testOutboxRefusesBadParams(t *testing.T, e *env) {
	tests := []struct {
		name string
		call func() error
	}{
		{"claim limit 0", func() error {
			_, err := e.s.OutboxClaim(e.ctx, store.OutboxClaimParams{Limit: 0, Lease: time.Minute})
			return err
		}},
		{"claim lease 0", func() error {
			_, err := e.s.OutboxClaim(e.ctx, store.OutboxClaimParams{Limit: 1})
			return err
		}},
		{"delete finished limit 0", func() error {
			_, err := e.s.OutboxDeleteFinished(e.ctx, store.DeleteFinishedParams{MaxAge: time.Hour})
			return err
		}},
		{"relay claim limit 0", func() error {
			_, err := e.s.InboxRelayClaim(e.ctx, store.InboxRelayClaimParams{Lease: time.Minute})
			return err
		}},
		{"inbox insert bad consumption", func() error {
			_, err := e.s.InboxInsert(e.ctx, store.InboxInsertParams{Source: "s", IdempotencyKey: "k", Payload: json.RawMessage(`{}`), Consumption: "poll"})
			return err
		}},
		{"inbox insert bad state", func() error {
			_, err := e.s.InboxInsert(e.ctx, store.InboxInsertParams{Source: "s", IdempotencyKey: "k", Payload: json.RawMessage(`{}`), State: store.InboxProcessed})
			return err
		}},
	}
	for _, tc := range tests {
		if err := tc.call(); err == nil {
			t.Errorf("%s: got no error", tc.name)
		}
	}
}
