package storetest

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alternayte/queuebox/shared/store"
)

// The claim mode lock (store.OutboxLocker): a store that offers it runs these tests; the
// others skip them, saying so.

func lockTests() []testCase {
	return []testCase{
		{name: "OutboxLockClaimHoldsRowsPending", custom: true, run: testOutboxLockClaimHoldsRowsPending},
		{name: "OutboxLockReleaseLeavesRowsAsTheyWere", run: testOutboxLockReleaseLeavesRowsAsTheyWere},
		{name: "OutboxLockFailedFinishWritesNothing", run: testOutboxLockFailedFinishWritesNothing},
		{name: "OutboxLockKeyOrderUnderConcurrency", run: testOutboxLockKeyOrderUnderConcurrency},
		{name: "OutboxLockWindowPassesHeldRows", custom: true, run: testOutboxLockWindowPassesHeldRows},
		{name: "OutboxLockKeyOrderUnderConcurrencyWindowed", run: windowed(testOutboxLockKeyOrderUnderConcurrency)},
	}
}

// locker returns the store's claim mode lock, or skips the test.
func (e *env) locker(t *testing.T) store.OutboxLocker {
	t.Helper()
	l, ok := e.s.(store.OutboxLocker)
	if !ok {
		t.Skip("this dialect offers no claim mode lock (store.OutboxLocker)")
	}
	return l
}

// lockClaim lock-claims up to limit rows with the test's window.
func (e *env) lockClaim(t *testing.T, l store.OutboxLocker, limit int) (store.OutboxLock, []store.OutboxMessage) {
	t.Helper()
	lk, msgs, err := l.OutboxLockClaim(e.ctx, store.OutboxClaimParams{Limit: limit, Lease: lease, Window: e.window})
	if err != nil {
		t.Fatalf("lock-claiming: %v", err)
	}
	if (lk == nil) != (len(msgs) == 0) {
		t.Fatalf("lock-claiming: lock %v with %d rows; want a lock exactly when rows came", lk, len(msgs))
	}
	return lk, msgs
}

// testOutboxLockClaimHoldsRowsPending: a lock claim takes the rows a claim would (one row of a
// key), leaves them pending without a token, and neither another lock claim nor a lease claim
// takes them or the next row of their key; Finish writes each outcome as the fenced writes do
// and commits, and the key's next row then qualifies.
func testOutboxLockClaimHoldsRowsPending(t *testing.T, e *env) {
	l := e.locker(t)
	ids := e.insert(t,
		store.OutboxInsertParams{Topic: "t", Payload: payloadN(1)},
		store.OutboxInsertParams{Topic: "t", Payload: payloadN(2)},
		store.OutboxInsertParams{Topic: "t", Payload: payloadN(3)},
		store.OutboxInsertParams{Topic: "t", Key: "k", Payload: payloadN(4)},
		store.OutboxInsertParams{Topic: "t", Key: "k", Payload: payloadN(5)},
		store.OutboxInsertParams{Topic: "t", Payload: payloadN(6)},
	)
	before := e.outboxRows(t)
	lk, msgs := e.lockClaim(t, l, 10)
	if want := []string{ids[0], ids[1], ids[2], ids[3], ids[5]}; !slices.Equal(msgIDs(msgs), want) {
		t.Fatalf("lock claim: got %v, want %v", msgIDs(msgs), want)
	}
	for _, m := range msgs {
		if m.ClaimToken != "" || m.Attempt != 0 || !jsonEqual(t, m.Payload, e.outboxRow(t, m.ID).Payload) {
			t.Fatalf("lock-claimed row %+v: want no token, attempt 0 and the stored payload", m)
		}
	}
	for i, r := range e.outboxRows(t) {
		if !sameOutboxRow(r, before[i]) {
			t.Fatalf("the lock claim wrote row %s:\n got %+v\nwant %+v", r.ID, r, before[i])
		}
	}
	if other, rows := e.lockClaim(t, l, 10); other != nil {
		other.Release()
		t.Fatalf("a second lock claim took %v while the first holds its rows", msgIDs(rows))
	}
	if rows := e.claim(t, 10); len(rows) != 0 {
		t.Fatalf("a lease claim took %v while a lock claim holds the rows", msgIDs(rows))
	}

	got, err := lk.Finish(e.ctx, store.OutboxOutcomes{
		Sent:    []store.Claim{msgs[0].Claim(), msgs[3].Claim()},
		Retries: []store.OutboxRetryParams{{Claim: msgs[1].Claim(), Delay: time.Hour, LastError: "refused"}},
		Deads:   []store.OutboxDeadParams{{Claim: msgs[2].Claim(), LastError: "gone"}},
		Defers:  []store.OutboxDeferParams{{Claim: msgs[4].Claim(), Delay: time.Hour}},
	})
	if err != nil {
		t.Fatalf("finishing: %v", err)
	}
	if !sameSet(got.Sent, []string{ids[0], ids[3]}) || !slices.Equal(got.Retried, []string{ids[1]}) ||
		!slices.Equal(got.Dead, []string{ids[2]}) || !slices.Equal(got.Deferred, []string{ids[5]}) {
		t.Fatalf("finish changed %+v", got)
	}
	now := e.now(t)
	for _, c := range []struct {
		id, state string
		attempt   int
		lastError string
		later     bool
	}{
		{ids[0], store.OutboxSent, 0, "<null>", false},
		{ids[1], store.OutboxPending, 1, "refused", true},
		{ids[2], store.OutboxDead, 0, "gone", false},
		{ids[3], store.OutboxSent, 0, "<null>", false},
		{ids[5], store.OutboxPending, 0, "<null>", true},
	} {
		r := e.outboxRow(t, c.id)
		if r.State != c.state || r.Attempt != c.attempt || strOrNil(r.LastError) != c.lastError || r.Token != "" || r.LeaseExpiresAt != nil {
			t.Errorf("row %s: %s attempt %d last_error %q token %q lease %v; want %s attempt %d last_error %q, no token or lease",
				c.id, r.State, r.Attempt, strOrNil(r.LastError), r.Token, r.LeaseExpiresAt, c.state, c.attempt, c.lastError)
		}
		if later := r.ScheduledAt.After(now.Add(50 * time.Minute)); later != c.later {
			t.Errorf("row %s: scheduled_at %s, an hour later: %v, want %v", c.id, r.ScheduledAt, later, c.later)
		}
	}
	next, rows := e.lockClaim(t, l, 10)
	if !slices.Equal(msgIDs(rows), []string{ids[4]}) {
		t.Fatalf("after the finish, a lock claim took %v; want the key's next row %s", msgIDs(rows), ids[4])
	}
	next.Release()
}

// testOutboxLockReleaseLeavesRowsAsTheyWere: Release leaves every row as it was, and a claim
// takes them again.
func testOutboxLockReleaseLeavesRowsAsTheyWere(t *testing.T, e *env) {
	l := e.locker(t)
	ids := e.insert(t,
		store.OutboxInsertParams{Topic: "t", Key: "a", Payload: payloadN(1)},
		store.OutboxInsertParams{Topic: "t", Key: "b", Payload: payloadN(2)},
	)
	before := e.outboxRows(t)
	lk, msgs := e.lockClaim(t, l, 10)
	if !slices.Equal(msgIDs(msgs), ids) {
		t.Fatalf("lock claim: got %v, want %v", msgIDs(msgs), ids)
	}
	lk.Release()
	lk.Release() // a second call does nothing
	for i, r := range e.outboxRows(t) {
		if !sameOutboxRow(r, before[i]) {
			t.Fatalf("released row %s changed:\n got %+v\nwant %+v", r.ID, r, before[i])
		}
	}
	if _, err := lk.Finish(e.ctx, store.OutboxOutcomes{Sent: []store.Claim{msgs[0].Claim()}}); err == nil {
		t.Fatal("Finish after Release: no error")
	}
	if got := e.claim(t, 10); !slices.Equal(msgIDs(got), ids) {
		t.Fatalf("a claim after the release took %v, want %v", msgIDs(got), ids)
	}
}

// testOutboxLockFailedFinishWritesNothing: a Finish that fails (its context is already done)
// writes no outcome, and the rows, unlocked, are claimed again as they were.
func testOutboxLockFailedFinishWritesNothing(t *testing.T, e *env) {
	l := e.locker(t)
	ids := e.insert(t, store.OutboxInsertParams{Topic: "t", Key: "a", Payload: payloadN(1)})
	before := e.outboxRows(t)
	lk, msgs := e.lockClaim(t, l, 10)
	done, cancel := context.WithCancel(e.ctx)
	cancel()
	if _, err := lk.Finish(done, store.OutboxOutcomes{Sent: []store.Claim{msgs[0].Claim()}}); err == nil {
		t.Fatal("Finish with a cancelled context: no error")
	}
	if r := e.outboxRows(t)[0]; !sameOutboxRow(r, before[0]) {
		t.Fatalf("a failed finish changed the row:\n got %+v\nwant %+v", r, before[0])
	}
	again, rows := e.lockClaim(t, l, 10)
	if !slices.Equal(msgIDs(rows), ids) {
		t.Fatalf("after a failed finish a lock claim took %v, want %v", msgIDs(rows), ids)
	}
	again.Release()
}

// testOutboxLockKeyOrderUnderConcurrency: eight workers lock-claim and finish 2 000 rows of 50
// keys; no row of a key is claimed while another row of that key is held, every row is sent
// once, and each key's rows were claimed and marked sent in sequence order.
func testOutboxLockKeyOrderUnderConcurrency(t *testing.T, e *env) {
	l := e.locker(t)
	const rows, keys, workers = 2000, 50, 8
	insertKeyPairs(t, e, rows, keys)
	var (
		mu       sync.Mutex
		inFlight = map[string]string{}  // key → id of the row held
		claimSeq = map[string][]int64{} // key → sequences in claim order
		sent     atomic.Int64
		wg       sync.WaitGroup
	)
	for w := range workers {
		wg.Go(func() {
			for sent.Load() < rows {
				if e.ctx.Err() != nil {
					t.Errorf("deadline: %d of %d rows sent", sent.Load(), rows)
					return
				}
				lk, msgs, err := l.OutboxLockClaim(e.ctx, store.OutboxClaimParams{Limit: 16, Lease: lease, Window: e.workerWindow(w)})
				if err != nil {
					t.Errorf("lock-claiming: %v", err)
					return
				}
				if len(msgs) == 0 {
					time.Sleep(time.Millisecond) // the poll interval of an idle worker
					continue
				}
				claims := make([]store.Claim, len(msgs))
				mu.Lock()
				for i, m := range msgs {
					if other, busy := inFlight[m.Key]; busy {
						t.Errorf("key %s: row %s claimed while row %s is held", m.Key, m.ID, other)
					}
					inFlight[m.Key] = m.ID
					claimSeq[m.Key] = append(claimSeq[m.Key], m.Sequence)
					claims[i] = m.Claim()
				}
				// A row leaves the map before its finish starts, inside the time the lock holds it.
				for _, m := range msgs {
					delete(inFlight, m.Key)
				}
				mu.Unlock()
				got, err := lk.Finish(e.ctx, store.OutboxOutcomes{Sent: claims})
				if err != nil {
					t.Errorf("finishing: %v", err)
					return
				}
				if len(got.Sent) != len(claims) {
					t.Errorf("finish sent %d of %d rows", len(got.Sent), len(claims))
					return
				}
				sent.Add(int64(len(got.Sent)))
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	checkSentInKeyOrder(t, e, keys, claimSeq)
}

// testOutboxLockWindowPassesHeldRows: the rows that a lock claim holds are still pending and
// come first in the next claim's window; a windowed lock claim whose window also spans them
// passes over them and takes the free rows behind them.
func testOutboxLockWindowPassesHeldRows(t *testing.T, e *env) {
	l := e.locker(t)
	var rows []store.OutboxInsertParams
	for i := range 8 {
		rows = append(rows, store.OutboxInsertParams{Topic: "t", Key: fmt.Sprintf("k%d", i), Payload: payloadN(i)})
	}
	ids := e.insert(t, rows...)
	held, first := e.lockClaim(t, l, 4)
	defer held.Release()
	if !slices.Equal(msgIDs(first), ids[:4]) {
		t.Fatalf("first lock claim: got %v, want %v", msgIDs(first), ids[:4])
	}
	lk, next, err := l.OutboxLockClaim(e.ctx, store.OutboxClaimParams{Limit: 4, Lease: lease, Window: 8})
	if err != nil {
		t.Fatalf("windowed lock claim: %v", err)
	}
	if lk != nil {
		defer lk.Release()
	}
	if !slices.Equal(msgIDs(next), ids[4:]) {
		t.Fatalf("windowed lock claim past 4 held rows: got %v, want %v", msgIDs(next), ids[4:])
	}
}
