package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alternayte/queuebox/shared/store"
)

func outboxTests() []testCase {
	return []testCase{
		{name: "OutboxInsertStoresColumns", custom: true, run: testOutboxInsertStoresColumns},
		{name: "OutboxClaimTakesDueRowsInOrder", custom: true, run: testOutboxClaimTakesDueRowsInOrder},
		{name: "OutboxClaimNeverTakesARowTwice", run: testOutboxClaimNeverTakesARowTwice},
		{name: "OutboxKeyOrderUnderConcurrency", run: testOutboxKeyOrderUnderConcurrency},
		{name: "OutboxRetryHoldsKeyDeadReleasesIt", custom: true, run: testOutboxRetryHoldsKeyDeadReleasesIt},
		{name: "OutboxEmptyAndNullKeysAreUnordered", custom: true, run: testOutboxEmptyAndNullKeysAreUnordered},
		{name: "OutboxStaleTokenChangesNothing", custom: true, run: testOutboxStaleTokenChangesNothing},
		{name: "OutboxExpiredLeaseFailsTheFence", run: testOutboxExpiredLeaseFailsTheFence},
		{name: "OutboxReclaimKeepsAttemptAndIssuesNewToken", run: testOutboxReclaimKeepsAttemptAndIssuesNewToken},
		{name: "OutboxLeaseUsesDatabaseClock", run: testOutboxLeaseUsesDatabaseClock},
		{name: "OutboxRetryAndDeadArithmetic", custom: true, run: testOutboxRetryAndDeadArithmetic},
		{name: "OutboxInvalidClaimDoesNotFailBatch", run: testOutboxInvalidClaimDoesNotFailBatch},
		{name: "OutboxReplayFilters", run: testOutboxReplayFilters},
		{name: "OutboxReplayRefusesNoFilter", run: testOutboxReplayRefusesNoFilter},
		{name: "OutboxStats", run: testOutboxStats},
		{name: "OutboxFinishedTopics", run: testOutboxFinishedTopics},
		{name: "OutboxDeleteFinished", run: testOutboxDeleteFinished},
		{name: "OutboxDeleteExcess", run: testOutboxDeleteExcess},
		{name: "OutboxRefusesBadParams", run: testOutboxRefusesBadParams},
		{name: "OutboxClaimPastHeldKeys", custom: true, run: testOutboxClaimPastHeldKeys},
		// The claims of these tests again with a Window (the claim after a short one): the
		// same rows qualify, whichever way the store finds them. In the two concurrent tests
		// every other worker claims with the window, against the others' claims without.
		{name: "OutboxClaimTakesDueRowsInOrderWindowed", custom: true, run: windowed(testOutboxClaimTakesDueRowsInOrder)},
		{name: "OutboxClaimNeverTakesARowTwiceWindowed", run: windowed(testOutboxClaimNeverTakesARowTwice)},
		{name: "OutboxKeyOrderUnderConcurrencyWindowed", run: windowed(testOutboxKeyOrderUnderConcurrency)},
		{name: "OutboxRetryHoldsKeyDeadReleasesItWindowed", custom: true, run: windowed(testOutboxRetryHoldsKeyDeadReleasesIt)},
		{name: "OutboxEmptyAndNullKeysAreUnorderedWindowed", custom: true, run: windowed(testOutboxEmptyAndNullKeysAreUnordered)},
		{name: "OutboxClaimPastHeldKeysWindowed", custom: true, run: windowed(testOutboxClaimPastHeldKeys)},
	}
}

// windowed runs a test with claims of Window 1, which a store raises to the claim's limit:
// the smallest window, so that the claims look past it as often as they can.
func windowed(run func(t *testing.T, e *env)) func(t *testing.T, e *env) {
	return func(t *testing.T, e *env) {
		e.window = 1
		run(t, e)
	}
}

// workerWindow is the Window of worker w's claims: every other worker claims with the test's
// window.
func (e *env) workerWindow(w int) int {
	if w%2 == 1 {
		return e.window
	}
	return 0
}

// testOutboxClaimPastHeldKeys: three keys with 30 rows each come first, then rows with a null
// and with an empty key. A claim of 10 takes the first row of each key and then the rows
// without a key in sequence order: the 87 held rows ahead of them keep no row back.
func testOutboxClaimPastHeldKeys(t *testing.T, e *env) {
	var batch []store.OutboxInsertParams
	for _, k := range []string{"a", "b", "c"} {
		for i := range 30 {
			batch = append(batch, store.OutboxInsertParams{Topic: "t", Key: k, Payload: payloadN(i)})
		}
	}
	for i := range 10 {
		batch = append(batch, store.OutboxInsertParams{Topic: "t", Payload: payloadN(100 + i)})
	}
	ids := e.insert(t, batch...)
	for _, id := range ids[95:] {
		e.changeOutbox(t, id, Change{EmptyKey: true})
	}
	heads := []string{ids[0], ids[30], ids[60]}
	want := slices.Concat(heads, ids[90:97])
	first := e.claim(t, 10)
	if !slices.Equal(msgIDs(first), want) {
		t.Fatalf("claim of 10: got %v, want the heads of a, b and c and the first 7 rows without a key %v", msgIDs(first), want)
	}
	// With the heads in flight only the 3 rows without a key are left.
	if got := e.claim(t, 10); !slices.Equal(msgIDs(got), ids[97:]) {
		t.Fatalf("second claim: got %v, want the last rows without a key %v", msgIDs(got), ids[97:])
	}
	// a's and c's heads are sent and their second rows follow; b's head stays in flight.
	e.markSent(t, first[0].Claim(), first[2].Claim())
	if got := e.claim(t, 10); !slices.Equal(msgIDs(got), []string{ids[1], ids[61]}) {
		t.Fatalf("claim after a's and c's heads were sent: got %v, want [%s %s]", msgIDs(got), ids[1], ids[61])
	}
}

func testOutboxInsertStoresColumns(t *testing.T, e *env) {
	before := e.now(t)
	plain, err := e.s.OutboxInsert(e.ctx, store.OutboxInsertParams{Topic: "order.created", Payload: json.RawMessage(`{"a": 1}`)})
	if err != nil {
		t.Fatalf("inserting plain row: %v", err)
	}
	const fixedID = "0b6f1e9c-3d1e-4c55-9a53-2f0c7f1d0a11"
	full, err := e.s.OutboxInsert(e.ctx, store.OutboxInsertParams{
		ID: fixedID, Topic: "order.paid", Key: "order-42", AggregateType: "order",
		Payload: json.RawMessage(`[1,2]`), Headers: json.RawMessage(`{"X-Tenant":"acme"}`),
		MaxAttempts: 2, Delay: time.Hour,
	})
	if err != nil {
		t.Fatalf("inserting full row: %v", err)
	}
	after := e.now(t)
	if full != fixedID {
		t.Fatalf("id of full row: got %s, want %s", full, fixedID)
	}
	if _, err := e.s.OutboxInsert(e.ctx, store.OutboxInsertParams{ID: fixedID, Topic: "x", Payload: json.RawMessage(`{}`)}); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("inserting a second row with id %s: got %v, want store.ErrConflict", fixedID, err)
	}
	if _, err := e.s.OutboxInsert(e.ctx, store.OutboxInsertParams{ID: "not-a-uuid", Topic: "x", Payload: json.RawMessage(`{}`)}); err == nil {
		t.Fatal("inserting with id not-a-uuid: got no error")
	}

	p := e.outboxRow(t, plain)
	if p.Topic != "order.created" || p.Key != nil || p.AggregateType != nil || p.State != store.OutboxPending ||
		p.Attempt != 0 || p.MaxAttempts != 5 || p.Token != "" || p.LeaseExpiresAt != nil || p.LastError != nil {
		t.Fatalf("plain row: got %+v (key %s), want pending, null key and aggregate type, attempt 0, max attempts 5", p, strOrNil(p.Key))
	}
	if !jsonEqual(t, p.Payload, []byte(`{"a":1}`)) || !jsonEqual(t, p.Headers, []byte(`{}`)) {
		t.Fatalf("plain row: payload %s headers %s, want {\"a\":1} and {}", p.Payload, p.Headers)
	}
	if p.ScheduledAt.After(after) {
		t.Fatalf("plain row: scheduled_at %s is after the insert (%s)", p.ScheduledAt, after)
	}
	f := e.outboxRow(t, full)
	if strOrNil(f.Key) != "order-42" || strOrNil(f.AggregateType) != "order" || f.MaxAttempts != 2 {
		t.Fatalf("full row: key %s aggregate type %s max attempts %d", strOrNil(f.Key), strOrNil(f.AggregateType), f.MaxAttempts)
	}
	if !jsonEqual(t, f.Payload, []byte(`[1,2]`)) || !jsonEqual(t, f.Headers, []byte(`{"X-Tenant":"acme"}`)) {
		t.Fatalf("full row: payload %s headers %s", f.Payload, f.Headers)
	}
	if !within(f.ScheduledAt, before.Add(time.Hour), after.Add(time.Hour), time.Millisecond) {
		t.Fatalf("full row: scheduled_at %s, want database clock + 1h in [%s, %s]", f.ScheduledAt, before.Add(time.Hour), after.Add(time.Hour))
	}
	if f.Sequence <= p.Sequence {
		t.Fatalf("sequence: later row has %d, earlier row %d", f.Sequence, p.Sequence)
	}
	if msgs := e.claim(t, 10); !slices.Equal(msgIDs(msgs), []string{plain}) {
		t.Fatalf("claim: got %v, want only the due row %s", msgIDs(msgs), plain)
	}
}

func testOutboxClaimTakesDueRowsInOrder(t *testing.T, e *env) {
	ids := e.insert(t,
		store.OutboxInsertParams{Topic: "t.plain", Payload: payloadN(1)},
		store.OutboxInsertParams{Topic: "t.later", Payload: payloadN(2), Delay: time.Hour},
		store.OutboxInsertParams{Topic: "t.a1", Key: "a", AggregateType: "order", Payload: payloadN(3), Headers: json.RawMessage(`{"h":"v"}`), MaxAttempts: 7},
		store.OutboxInsertParams{Topic: "t.a2", Key: "a", Payload: payloadN(4)},
		store.OutboxInsertParams{Topic: "t.b1", Key: "b", Payload: payloadN(5)},
	)
	plain, later, a1, a2, b1 := ids[0], ids[1], ids[2], ids[3], ids[4]

	if got := e.claim(t, 2); !slices.Equal(msgIDs(got), []string{plain, a1}) {
		t.Fatalf("claim with limit 2: got %v, want [%s %s] (scheduled_at, sequence order)", msgIDs(got), plain, a1)
	} else {
		m := got[1]
		row := e.outboxRow(t, a1)
		if m.Topic != "t.a1" || m.Key != "a" || m.AggregateType != "order" || m.Attempt != 0 || m.MaxAttempts != 7 ||
			m.Sequence != row.Sequence || m.ClaimToken == "" || m.ClaimToken != row.Token ||
			row.LeaseExpiresAt == nil || !m.LeaseExpiresAt.Equal(*row.LeaseExpiresAt) || !m.CreatedAt.Equal(row.CreatedAt) ||
			!m.ScheduledAt.Equal(row.ScheduledAt) || row.State != store.OutboxProcessing {
			t.Fatalf("claimed message %+v does not match its row %+v", m, row)
		}
		if !jsonEqual(t, m.Payload, payloadN(3)) || !jsonEqual(t, m.Headers, []byte(`{"h":"v"}`)) {
			t.Fatalf("claimed message: payload %s headers %s", m.Payload, m.Headers)
		}
		if got[0].Key != "" || !jsonEqual(t, got[0].Headers, []byte(`{}`)) || got[0].AggregateType != "" {
			t.Fatalf("claimed plain message: key %q aggregate type %q headers %s, want empty, empty, {}", got[0].Key, got[0].AggregateType, got[0].Headers)
		}
	}
	if got := e.claim(t, 10); !slices.Equal(msgIDs(got), []string{b1}) {
		t.Fatalf("second claim: got %v, want [%s]: %s waits for %s in flight, %s is not due", msgIDs(got), b1, a2, a1, later)
	}
	if got := e.claim(t, 10); len(got) != 0 {
		t.Fatalf("third claim: got %v, want nothing (processing rows are never claimed)", msgIDs(got))
	}
}

// testOutboxClaimNeverTakesARowTwice runs 8 claimers over 2 000 rows; every row must be
// claimed exactly once.
func testOutboxClaimNeverTakesARowTwice(t *testing.T, e *env) {
	const rows, perTx, workers = 2000, 50, 8
	var all []string
	for i := 0; i < rows; i += perTx {
		batch := make([]store.OutboxInsertParams, perTx)
		for j := range batch {
			batch[j] = store.OutboxInsertParams{Topic: "t", Payload: payloadN(i + j)}
			if (i+j)%3 == 0 {
				batch[j].Key = fmt.Sprintf("unique-%d", i+j) // one row per key: never blocked
			}
		}
		all = append(all, e.insert(t, batch...)...)
	}

	var mu sync.Mutex
	claimed := map[string]int{}
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Go(func() {
			for e.ctx.Err() == nil {
				msgs, err := e.s.OutboxClaim(e.ctx, store.OutboxClaimParams{Limit: 20, Lease: lease, Window: e.workerWindow(w)})
				if err != nil {
					t.Errorf("claiming: %v", err)
					return
				}
				if len(msgs) == 0 {
					return // every remaining row is claimed or locked by a claim that will take it
				}
				mu.Lock()
				for _, m := range msgs {
					claimed[m.ID]++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	for _, id := range all {
		if n := claimed[id]; n != 1 {
			t.Errorf("row %s claimed %d times, want 1", id, n)
		}
	}
	if len(claimed) != rows {
		t.Errorf("claimed %d distinct rows, want %d", len(claimed), rows)
	}
	for _, r := range e.outboxRows(t) {
		if r.State != store.OutboxProcessing {
			t.Fatalf("row %s is %s after the claims, want processing", r.ID, r.State)
		}
	}
}

// testOutboxKeyOrderUnderConcurrency runs 8 workers that loop claim → mark sent over 2 000
// rows on 50 keys. No two rows of one key may be in flight at once, and every key must be
// delivered in sequence order.
func testOutboxKeyOrderUnderConcurrency(t *testing.T, e *env) {
	const rows, keys, workers = 2000, 50, 8
	insertKeyPairs(t, e, rows, keys)

	var (
		mu       sync.Mutex
		inFlight = map[string]string{}  // key → id of the row in flight
		claimSeq = map[string][]int64{} // key → sequences in claim order
		sent     atomic.Int64
	)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Go(func() {
			for sent.Load() < rows {
				if e.ctx.Err() != nil {
					t.Errorf("deadline: %d of %d rows sent", sent.Load(), rows)
					return
				}
				msgs, err := e.s.OutboxClaim(e.ctx, store.OutboxClaimParams{Limit: 16, Lease: lease, Window: e.workerWindow(w)})
				if err != nil {
					t.Errorf("claiming: %v", err)
					return
				}
				if len(msgs) == 0 {
					// The poll interval of a worker that found nothing to do.
					time.Sleep(time.Millisecond)
					continue
				}
				claims := make([]store.Claim, len(msgs))
				mu.Lock()
				for i, m := range msgs {
					if other, busy := inFlight[m.Key]; busy {
						t.Errorf("key %s: row %s claimed while row %s is in flight", m.Key, m.ID, other)
					}
					inFlight[m.Key] = m.ID
					claimSeq[m.Key] = append(claimSeq[m.Key], m.Sequence)
					claims[i] = m.Claim()
				}
				// A row leaves the in-flight map before its mark sent starts, so the map's
				// window lies inside the database's processing window: an overlap seen here
				// is an overlap in the database.
				for _, m := range msgs {
					delete(inFlight, m.Key)
				}
				mu.Unlock()
				ids, err := e.s.OutboxMarkSent(e.ctx, claims)
				if err != nil {
					t.Errorf("marking sent: %v", err)
					return
				}
				if len(ids) != len(claims) {
					t.Errorf("mark sent changed %d of %d rows", len(ids), len(claims))
					return
				}
				sent.Add(int64(len(ids)))
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}

	checkSentInKeyOrder(t, e, keys, claimSeq)
}

// insertKeyPairs inserts rows rows over keys keys, 8 to a transaction. Pairs of consecutive
// rows share a key, so a key has two rows in one transaction with the same created_at: only
// sequence orders them.
func insertKeyPairs(t *testing.T, e *env, rows, keys int) {
	t.Helper()
	const perTx = 8
	for i := 0; i < rows; i += perTx {
		batch := make([]store.OutboxInsertParams, perTx)
		for j := range batch {
			n := i + j
			batch[j] = store.OutboxInsertParams{Topic: "t", Key: fmt.Sprintf("k%02d", (n/2)%keys), Payload: payloadN(n)}
		}
		e.insert(t, batch...)
	}
}

// checkSentInKeyOrder checks that every row is sent, that the rows of each of the keys keys were
// claimed in sequence order (claimSeq), and that the database marked them sent in that order.
func checkSentInKeyOrder(t *testing.T, e *env, keys int, claimSeq map[string][]int64) {
	t.Helper()
	wantSeq := map[string][]int64{}
	type stamp struct {
		seq     int64
		updated time.Time
	}
	sentAt := map[string][]stamp{}
	for _, r := range e.outboxRows(t) {
		if r.State != store.OutboxSent {
			t.Fatalf("row %s is %s, want sent", r.ID, r.State)
		}
		k := *r.Key
		wantSeq[k] = append(wantSeq[k], r.Sequence)
		sentAt[k] = append(sentAt[k], stamp{r.Sequence, r.UpdatedAt})
	}
	if len(wantSeq) != keys {
		t.Fatalf("got %d keys, want %d", len(wantSeq), keys)
	}
	for k, want := range wantSeq {
		if !slices.Equal(claimSeq[k], want) {
			t.Errorf("key %s: claimed in sequence order %v, want %v", k, claimSeq[k], want)
		}
		// The database's own record of the mark sent order: updated_at by sequence must rise.
		st := sentAt[k]
		for i := 1; i < len(st); i++ {
			if !st[i].updated.After(st[i-1].updated) {
				t.Errorf("key %s: row with sequence %d was marked sent at %s, not after row %d at %s",
					k, st[i].seq, st[i].updated, st[i-1].seq, st[i-1].updated)
			}
		}
	}
}

func testOutboxRetryHoldsKeyDeadReleasesIt(t *testing.T, e *env) {
	ids := e.insert(t,
		store.OutboxInsertParams{Topic: "t", Key: "a", Payload: payloadN(1)},
		store.OutboxInsertParams{Topic: "t", Key: "a", Payload: payloadN(2)},
		store.OutboxInsertParams{Topic: "t", Key: "b", Payload: payloadN(3)},
		store.OutboxInsertParams{Topic: "t", Key: "b", Payload: payloadN(4)},
	)
	a1, a2, b1, b2 := ids[0], ids[1], ids[2], ids[3]

	msgs := e.claim(t, 10)
	if !slices.Equal(msgIDs(msgs), []string{a1, b1}) {
		t.Fatalf("first claim: got %v, want the heads [%s %s]", msgIDs(msgs), a1, b1)
	}
	// a1 waits an hour for its retry; b1 is retried at once.
	if got, err := e.s.OutboxRetry(e.ctx, []store.OutboxRetryParams{
		{Claim: msgs[0].Claim(), Delay: time.Hour, LastError: "503"},
		{Claim: msgs[1].Claim(), LastError: "timeout"},
	}); err != nil || !sameSet(got, []string{a1, b1}) {
		t.Fatalf("retrying: got %v, %v", got, err)
	}
	msgs = e.claim(t, 10)
	if !slices.Equal(msgIDs(msgs), []string{b1}) {
		t.Fatalf("claim after retries: got %v, want only [%s]: a row that waits for a retry holds its key", msgIDs(msgs), b1)
	}
	if msgs[0].Attempt != 1 {
		t.Fatalf("retried row: attempt %d, want 1", msgs[0].Attempt)
	}
	// A dead row releases its key.
	if got, err := e.s.OutboxMarkDead(e.ctx, []store.OutboxDeadParams{{Claim: msgs[0].Claim(), LastError: "poison"}}); err != nil || !slices.Equal(got, []string{b1}) {
		t.Fatalf("marking dead: got %v, %v", got, err)
	}
	msgs = e.claim(t, 10)
	if !slices.Equal(msgIDs(msgs), []string{b2}) {
		t.Fatalf("claim after the dead row: got %v, want [%s]; %s must stay behind %s", msgIDs(msgs), b2, a2, a1)
	}
	// A sent row releases its key too.
	e.markSent(t, msgs[0].Claim())
	if msgs = e.claim(t, 10); len(msgs) != 0 {
		t.Fatalf("final claim: got %v, want nothing while %s waits for its retry", msgIDs(msgs), a1)
	}
}

func testOutboxEmptyAndNullKeysAreUnordered(t *testing.T, e *env) {
	var batch []store.OutboxInsertParams
	for i := 0; i < 6; i++ {
		batch = append(batch, store.OutboxInsertParams{Topic: "t", Payload: payloadN(i)})
	}
	ids := e.insert(t, batch...)
	for _, id := range ids[3:] {
		e.changeOutbox(t, id, Change{EmptyKey: true})
	}
	if r := e.outboxRow(t, ids[4]); r.Key == nil || *r.Key != "" {
		t.Fatalf("row %s: key %s, want the empty string", ids[4], strOrNil(r.Key))
	}
	if got := e.claim(t, 10); !slices.Equal(msgIDs(got), ids) {
		t.Fatalf("claim: got %v, want every null and empty key row in one batch %v", msgIDs(got), ids)
	}
}
