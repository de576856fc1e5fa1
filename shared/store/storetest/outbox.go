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
	const rows, keys, perTx, workers = 2000, 50, 8, 8
	for i := 0; i < rows; i += perTx {
		batch := make([]store.OutboxInsertParams, perTx)
		for j := range batch {
			n := i + j
			// Pairs of consecutive rows share a key, so a key has two rows in one transaction
			// with the same created_at: only sequence orders them.
			batch[j] = store.OutboxInsertParams{Topic: "t", Key: fmt.Sprintf("k%02d", (n/2)%keys), Payload: payloadN(n)}
		}
		e.insert(t, batch...)
	}

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

// fencedWrites are the four writes that finish or extend a claim, each reporting whether it
// changed the row.
var fencedWrites = []struct {
	name  string
	write func(e *env, c store.Claim) (bool, error)
}{
	{"Renew", func(e *env, c store.Claim) (bool, error) {
		got, err := e.s.OutboxRenew(e.ctx, store.OutboxRenewParams{Claims: []store.Claim{c}, Lease: time.Hour})
		return len(got) == 1, err
	}},
	{"MarkSent", func(e *env, c store.Claim) (bool, error) {
		got, err := e.s.OutboxMarkSent(e.ctx, []store.Claim{c})
		return len(got) == 1, err
	}},
	{"Retry", func(e *env, c store.Claim) (bool, error) {
		got, err := e.s.OutboxRetry(e.ctx, []store.OutboxRetryParams{{Claim: c, Delay: time.Minute, LastError: "stale"}})
		return len(got) == 1, err
	}},
	{"MarkDead", func(e *env, c store.Claim) (bool, error) {
		got, err := e.s.OutboxMarkDead(e.ctx, []store.OutboxDeadParams{{Claim: c, LastError: "stale"}})
		return len(got) == 1, err
	}},
}

// testOutboxStaleTokenChangesNothing: worker A claims, its lease expires, the reclaim returns
// the row and worker B claims it again. Every fenced write of A then changes nothing; the same
// write of B succeeds.
func testOutboxStaleTokenChangesNothing(t *testing.T, e *env) {
	for _, w := range fencedWrites {
		t.Run(w.name, func(t *testing.T) {
			id := e.insert(t, store.OutboxInsertParams{Topic: "fence." + w.name, Key: "fence-" + w.name, Payload: payloadN(1)})[0]
			a := claimOne(t, e, id)
			e.changeOutbox(t, id, Change{ExpireLease: true})
			if n, err := e.s.OutboxReclaim(e.ctx); err != nil || n != 1 {
				t.Fatalf("reclaiming: got %d, %v; want 1", n, err)
			}
			// The row is pending with a null token: A's write changes nothing.
			pending := e.outboxRow(t, id)
			if ok, err := w.write(e, a.Claim()); err != nil || ok {
				t.Fatalf("%s with A's token on the reclaimed row: changed %v, %v; want no change", w.name, ok, err)
			}
			if got := e.outboxRow(t, id); !sameOutboxRow(got, pending) {
				t.Fatalf("%s with A's token changed the pending row:\n got %+v\nwant %+v", w.name, got, pending)
			}
			b := claimOne(t, e, id)
			if b.ClaimToken == a.ClaimToken {
				t.Fatalf("B's claim reused A's token %s", a.ClaimToken)
			}
			owned := e.outboxRow(t, id)
			if ok, err := w.write(e, a.Claim()); err != nil || ok {
				t.Fatalf("%s with A's stale token: changed %v, %v; want no change", w.name, ok, err)
			}
			if got := e.outboxRow(t, id); !sameOutboxRow(got, owned) {
				t.Fatalf("%s with A's stale token changed B's row:\n got %+v\nwant %+v", w.name, got, owned)
			}
			if ok, err := w.write(e, b.Claim()); err != nil || !ok {
				t.Fatalf("%s with B's token: changed %v, %v; want a change", w.name, ok, err)
			}
		})
	}
}

// claimOne claims and expects exactly the row id.
func claimOne(t *testing.T, e *env, id string) store.OutboxMessage {
	t.Helper()
	msgs := e.claim(t, 10)
	if !slices.Equal(msgIDs(msgs), []string{id}) {
		t.Fatalf("claim: got %v, want [%s]", msgIDs(msgs), id)
	}
	return msgs[0]
}

func sameOutboxRow(a, b OutboxRow) bool {
	eqT := func(x, y *time.Time) bool { return (x == nil) == (y == nil) && (x == nil || x.Equal(*y)) }
	eqS := func(x, y *string) bool { return (x == nil) == (y == nil) && (x == nil || *x == *y) }
	return a.ID == b.ID && a.State == b.State && a.Attempt == b.Attempt && a.Token == b.Token &&
		eqS(a.LastError, b.LastError) && eqS(a.Key, b.Key) && eqT(a.LeaseExpiresAt, b.LeaseExpiresAt) &&
		eqT(a.ClaimedAt, b.ClaimedAt) && a.ScheduledAt.Equal(b.ScheduledAt) && a.UpdatedAt.Equal(b.UpdatedAt) &&
		a.Sequence == b.Sequence
}

func testOutboxExpiredLeaseFailsTheFence(t *testing.T, e *env) {
	for _, w := range fencedWrites {
		id := e.insert(t, store.OutboxInsertParams{Topic: "t", Key: "expired-" + w.name, Payload: payloadN(1)})[0]
		m := claimOne(t, e, id)
		e.changeOutbox(t, id, Change{ExpireLease: true})
		before := e.outboxRow(t, id)
		if ok, err := w.write(e, m.Claim()); err != nil || ok {
			t.Fatalf("%s after the lease passed (not yet reclaimed): changed %v, %v; want no change", w.name, ok, err)
		}
		if got := e.outboxRow(t, id); !sameOutboxRow(got, before) {
			t.Fatalf("%s after the lease passed changed the row:\n got %+v\nwant %+v", w.name, got, before)
		}
		// Finish it through the reclaim so that the next iteration claims only its own row.
		if _, err := e.s.OutboxReclaim(e.ctx); err != nil {
			t.Fatalf("reclaiming: %v", err)
		}
		m = claimOne(t, e, id)
		e.markSent(t, m.Claim())
	}
}

func testOutboxReclaimKeepsAttemptAndIssuesNewToken(t *testing.T, e *env) {
	ids := e.insert(t,
		store.OutboxInsertParams{Topic: "t", Payload: payloadN(1)},
		store.OutboxInsertParams{Topic: "t", Payload: payloadN(2)},
	)
	msgs := e.claim(t, 10)
	if len(msgs) != 2 {
		t.Fatalf("claim: got %d rows, want 2", len(msgs))
	}
	// Give the first row attempt 1.
	if got, err := e.s.OutboxRetry(e.ctx, []store.OutboxRetryParams{{Claim: msgs[0].Claim(), LastError: "x"}}); err != nil || len(got) != 1 {
		t.Fatalf("retrying: %v, %v", got, err)
	}
	first := claimOne(t, e, ids[0])
	e.changeOutbox(t, ids[0], Change{ExpireLease: true})
	if got := e.claim(t, 10); len(got) != 0 {
		t.Fatalf("claim with an expired processing row: got %v, want nothing (the claim never takes processing rows)", msgIDs(got))
	}
	if n, err := e.s.OutboxReclaim(e.ctx); err != nil || n != 1 {
		t.Fatalf("reclaiming: got %d, %v; want 1", n, err)
	}
	r := e.outboxRow(t, ids[0])
	if r.State != store.OutboxPending || r.Attempt != 1 || r.Token != "" || r.LeaseExpiresAt != nil {
		t.Fatalf("reclaimed row: state %s attempt %d token %q lease %v; want pending, 1, null, null", r.State, r.Attempt, r.Token, r.LeaseExpiresAt)
	}
	if other := e.outboxRow(t, ids[1]); other.State != store.OutboxProcessing || other.Token != msgs[1].ClaimToken {
		t.Fatalf("live row: state %s token %s; the reclaim must not touch a live lease", other.State, other.Token)
	}
	again := claimOne(t, e, ids[0])
	if again.ClaimToken == first.ClaimToken || again.Attempt != 1 {
		t.Fatalf("claim after reclaim: token %s (was %s) attempt %d; want a new token and attempt 1", again.ClaimToken, first.ClaimToken, again.Attempt)
	}
	if n, err := e.s.OutboxReclaim(e.ctx); err != nil || n != 0 {
		t.Fatalf("second reclaim: got %d, %v; want 0", n, err)
	}
}

func testOutboxLeaseUsesDatabaseClock(t *testing.T, e *env) {
	id := e.insert(t, store.OutboxInsertParams{Topic: "t", Payload: payloadN(1)})[0]
	const claimLease = 42 * time.Second
	t0 := e.now(t)
	msgs, err := e.s.OutboxClaim(e.ctx, store.OutboxClaimParams{Limit: 1, Lease: claimLease})
	if err != nil || len(msgs) != 1 {
		t.Fatalf("claiming: %v, %v", msgIDs(msgs), err)
	}
	t1 := e.now(t)
	r := e.outboxRow(t, id)
	if r.ClaimedAt == nil || r.LeaseExpiresAt == nil {
		t.Fatalf("claimed row: claimed_at %v lease %v, want both set", r.ClaimedAt, r.LeaseExpiresAt)
	}
	if d := r.LeaseExpiresAt.Sub(*r.ClaimedAt) - claimLease; d < -5*time.Millisecond || d > 5*time.Millisecond {
		t.Fatalf("lease_expires_at - claimed_at = %s, want %s", r.LeaseExpiresAt.Sub(*r.ClaimedAt), claimLease)
	}
	if !within(*r.ClaimedAt, t0, t1, time.Millisecond) {
		t.Fatalf("claimed_at %s is outside the database clock window [%s, %s]", r.ClaimedAt, t0, t1)
	}
	if !msgs[0].LeaseExpiresAt.Equal(*r.LeaseExpiresAt) {
		t.Fatalf("message lease %s, row lease %s", msgs[0].LeaseExpiresAt, r.LeaseExpiresAt)
	}

	const renewLease = 90 * time.Second
	t2 := e.now(t)
	renewed, err := e.s.OutboxRenew(e.ctx, store.OutboxRenewParams{Claims: []store.Claim{msgs[0].Claim()}, Lease: renewLease})
	if err != nil || len(renewed) != 1 || renewed[0] != msgs[0].Claim() {
		t.Fatalf("renewing: got %v, %v; want the claim back", renewed, err)
	}
	t3 := e.now(t)
	r = e.outboxRow(t, id)
	if !within(*r.LeaseExpiresAt, t2.Add(renewLease), t3.Add(renewLease), time.Millisecond) {
		t.Fatalf("renewed lease %s, want database clock + %s in [%s, %s]", r.LeaseExpiresAt, renewLease, t2.Add(renewLease), t3.Add(renewLease))
	}
}

func testOutboxRetryAndDeadArithmetic(t *testing.T, e *env) {
	id := e.insert(t, store.OutboxInsertParams{Topic: "t", Payload: payloadN(1), MaxAttempts: 3})[0]
	m := claimOne(t, e, id)
	const delay = 10 * time.Minute
	t0 := e.now(t)
	if got, err := e.s.OutboxRetry(e.ctx, []store.OutboxRetryParams{{Claim: m.Claim(), Delay: delay, LastError: "HTTP 503"}}); err != nil || !slices.Equal(got, []string{id}) {
		t.Fatalf("retrying: got %v, %v", got, err)
	}
	t1 := e.now(t)
	r := e.outboxRow(t, id)
	if r.State != store.OutboxPending || r.Attempt != 1 || strOrNil(r.LastError) != "HTTP 503" || r.Token != "" || r.LeaseExpiresAt != nil {
		t.Fatalf("retried row: %+v (last error %s); want pending, attempt 1, the error, no token, no lease", r, strOrNil(r.LastError))
	}
	if !within(r.ScheduledAt, t0.Add(delay), t1.Add(delay), time.Millisecond) {
		t.Fatalf("retried row: scheduled_at %s, want database clock + %s in [%s, %s]", r.ScheduledAt, delay, t0.Add(delay), t1.Add(delay))
	}
	if got := e.claim(t, 10); len(got) != 0 {
		t.Fatalf("claim before the retry is due: got %v", msgIDs(got))
	}

	id2 := e.insert(t, store.OutboxInsertParams{Topic: "t", Payload: payloadN(2)})[0]
	m = claimOne(t, e, id2)
	if got, err := e.s.OutboxRetry(e.ctx, []store.OutboxRetryParams{{Claim: m.Claim(), LastError: "first"}}); err != nil || len(got) != 1 {
		t.Fatalf("retrying: got %v, %v", got, err)
	}
	m = claimOne(t, e, id2)
	if m.Attempt != 1 {
		t.Fatalf("claim after a retry: attempt %d, want 1", m.Attempt)
	}
	if got, err := e.s.OutboxMarkDead(e.ctx, []store.OutboxDeadParams{{Claim: m.Claim(), LastError: "no route\x00 for topic"}}); err != nil || !slices.Equal(got, []string{id2}) {
		t.Fatalf("marking dead: got %v, %v", got, err)
	}
	r = e.outboxRow(t, id2)
	if r.State != store.OutboxDead || r.Attempt != 1 || r.Token != "" || r.LeaseExpiresAt != nil || r.LastError == nil {
		t.Fatalf("dead row: %+v; want dead, attempt unchanged at 1, no token, no lease, an error", r)
	}
}

func testOutboxInvalidClaimDoesNotFailBatch(t *testing.T, e *env) {
	ids := e.insert(t,
		store.OutboxInsertParams{Topic: "t", Payload: payloadN(1)},
		store.OutboxInsertParams{Topic: "t", Payload: payloadN(2)},
	)
	msgs := e.claim(t, 10)
	if len(msgs) != 2 {
		t.Fatalf("claim: got %d rows, want 2", len(msgs))
	}
	bad := []store.Claim{
		{ID: msgs[0].ID, Token: "not-a-uuid"},
		{ID: "not-a-uuid", Token: msgs[0].ClaimToken},
		{ID: msgs[0].ID, Token: ""},
		{},
	}
	renewed, err := e.s.OutboxRenew(e.ctx, store.OutboxRenewParams{Claims: append(slices.Clone(bad), msgs[1].Claim()), Lease: time.Hour})
	if err != nil || len(renewed) != 1 || renewed[0].ID != ids[1] {
		t.Fatalf("renewing with invalid claims in the batch: got %v, %v; want only %s", renewed, err, ids[1])
	}
	got, err := e.s.OutboxMarkSent(e.ctx, append(slices.Clone(bad), msgs[1].Claim()))
	if err != nil || !slices.Equal(got, []string{ids[1]}) {
		t.Fatalf("marking sent with invalid claims in the batch: got %v, %v; want only %s", got, err, ids[1])
	}
	if r := e.outboxRow(t, ids[0]); r.State != store.OutboxProcessing {
		t.Fatalf("row %s: state %s, want processing", ids[0], r.State)
	}
	var retries []store.OutboxRetryParams
	var deads []store.OutboxDeadParams
	for _, c := range bad {
		retries = append(retries, store.OutboxRetryParams{Claim: c})
		deads = append(deads, store.OutboxDeadParams{Claim: c})
	}
	if got, err := e.s.OutboxRetry(e.ctx, retries); err != nil || len(got) != 0 {
		t.Fatalf("retrying invalid claims: got %v, %v; want nothing", got, err)
	}
	if got, err := e.s.OutboxMarkDead(e.ctx, append(deads, store.OutboxDeadParams{Claim: msgs[0].Claim()})); err != nil || !slices.Equal(got, []string{ids[0]}) {
		t.Fatalf("marking dead with invalid claims in the batch: got %v, %v; want only %s", got, err, ids[0])
	}
	for _, empty := range [][]store.Claim{nil, {}} {
		if got, err := e.s.OutboxMarkSent(e.ctx, empty); err != nil || len(got) != 0 {
			t.Fatalf("marking sent no claims: got %v, %v", got, err)
		}
	}
}

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
