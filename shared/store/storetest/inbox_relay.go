package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alternayte/queuebox/shared/store"
)

// forwardParams builds the outbox row of a relayed inbox message.
func forwardParams(m store.InboxMessage) store.InboxForwardParams {
	headers, _ := json.Marshal(map[string]string{"x-inbox-id": m.ID, "x-source": m.Source})
	return store.InboxForwardParams{
		Claim: m.Claim(),
		Outbox: store.OutboxInsertParams{
			Topic: "relay." + m.Source, Key: m.AggregateID, Payload: m.Payload, Headers: headers, MaxAttempts: 10,
		},
	}
}

// inboxIDOf reads the x-inbox-id header of an outbox row.
func inboxIDOf(t *testing.T, r OutboxRow) string {
	t.Helper()
	var h map[string]string
	if err := json.Unmarshal(r.Headers, &h); err != nil {
		t.Fatalf("decoding headers %s of outbox row %s: %v", r.Headers, r.ID, err)
	}
	return h["x-inbox-id"]
}

// testInboxRelayOnePerAggregateUnderConcurrency runs 4 relay claimers over push rows of 50
// aggregates from 3 sources. No two rows of one aggregate may be in flight at once, each
// aggregate is forwarded in created_at order, every push row reaches the outbox exactly once,
// and pull rows are never touched.
func testInboxRelayOnePerAggregateUnderConcurrency(t *testing.T, e *env) {
	const (
		aggregated = 1800
		unordered  = 100
		pulls      = 100
		aggregates = 50
		inserters  = 6
		relays     = 4
	)
	sources := []string{"s0", "s1", "s2"}
	total := aggregated + unordered + pulls
	var wg sync.WaitGroup
	for w := 0; w < inserters; w++ {
		wg.Go(func() {
			for n := w; n < total; n += inserters {
				p := store.InboxInsertParams{
					Source: sources[n%len(sources)], IdempotencyKey: fmt.Sprintf("evt-%d", n),
					AggregateID: fmt.Sprintf("agg-%02d", n%aggregates), Payload: payloadN(n),
				}
				switch {
				case n >= aggregated+unordered:
					p.Consumption = store.ConsumptionPull
				case n >= aggregated:
					p.AggregateID = ""
				}
				if _, err := e.s.InboxInsert(e.ctx, p); err != nil {
					t.Errorf("inserting: %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	pushes := aggregated + unordered

	var (
		mu        sync.Mutex
		inFlight  = map[string]string{}   // aggregate → inbox id in flight
		order     = map[string][]string{} // aggregate → inbox ids in claim order
		forwarded atomic.Int64
	)
	for w := 0; w < relays; w++ {
		wg.Go(func() {
			for forwarded.Load() < int64(pushes) {
				if e.ctx.Err() != nil {
					t.Errorf("deadline: %d of %d rows forwarded", forwarded.Load(), pushes)
					return
				}
				msgs, err := e.s.InboxRelayClaim(e.ctx, store.InboxRelayClaimParams{Limit: 10, Lease: lease})
				if err != nil {
					t.Errorf("claiming: %v", err)
					return
				}
				if len(msgs) == 0 {
					time.Sleep(time.Millisecond) // the poll interval of an idle relay
					continue
				}
				mu.Lock()
				for _, m := range msgs {
					if m.Consumption != store.ConsumptionPush {
						t.Errorf("relay claimed %s row %s", m.Consumption, m.ID)
					}
					if m.AggregateID == "" {
						continue
					}
					if other, busy := inFlight[m.AggregateID]; busy {
						t.Errorf("aggregate %s: row %s claimed while row %s is in flight", m.AggregateID, m.ID, other)
					}
					inFlight[m.AggregateID] = m.ID
					order[m.AggregateID] = append(order[m.AggregateID], m.ID)
				}
				mu.Unlock()
				for _, m := range msgs {
					// Out of the in-flight map before the forward starts: the map's window lies
					// inside the database's processing window.
					mu.Lock()
					delete(inFlight, m.AggregateID)
					mu.Unlock()
					ok, err := e.s.InboxRelayForward(e.ctx, forwardParams(m))
					if err != nil || !ok {
						t.Errorf("forwarding %s: %v, %v; want true", m.ID, ok, err)
						return
					}
					forwarded.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}

	want := map[string][]string{}
	pushIDs := map[string]bool{}
	for _, r := range e.inboxRows(t) {
		if r.Consumption == store.ConsumptionPull {
			if r.State != store.InboxPending || r.Token != "" || r.ClaimedAt != nil {
				t.Fatalf("pull row %s: state %s token %q claimed_at %v; the relay must never touch it", r.ID, r.State, r.Token, r.ClaimedAt)
			}
			continue
		}
		pushIDs[r.ID] = true
		if r.State != store.InboxProcessed || r.ProcessedAt == nil || r.Token != "" || r.LeaseExpiresAt != nil {
			t.Fatalf("push row %s: state %s processed_at %v token %q; want processed, no claim", r.ID, r.State, r.ProcessedAt, r.Token)
		}
		if r.AggregateID != nil {
			want[*r.AggregateID] = append(want[*r.AggregateID], r.ID)
		}
	}
	if len(want) != aggregates {
		t.Fatalf("got %d aggregates, want %d", len(want), aggregates)
	}
	outboxOrder := map[string][]string{}
	seen := map[string]int{}
	for _, r := range e.outboxRows(t) {
		id := inboxIDOf(t, r)
		seen[id]++
		if r.Key != nil && *r.Key != "" {
			outboxOrder[*r.Key] = append(outboxOrder[*r.Key], id)
		}
	}
	if len(seen) != pushes {
		t.Fatalf("outbox holds rows of %d inbox rows, want %d", len(seen), pushes)
	}
	for id, n := range seen {
		if n != 1 || !pushIDs[id] {
			t.Fatalf("inbox row %s reached the outbox %d times (push row: %v), want once", id, n, pushIDs[id])
		}
	}
	for agg, ids := range want {
		if !slices.Equal(order[agg], ids) {
			t.Errorf("aggregate %s: forwarded in order %v, want created_at order %v", agg, order[agg], ids)
		}
		if !slices.Equal(outboxOrder[agg], ids) {
			t.Errorf("aggregate %s: outbox sequence order %v, want %v", agg, outboxOrder[agg], ids)
		}
	}
}

func testInboxRelayNullAggregatesAreUnordered(t *testing.T, e *env) {
	var ids []string
	ins := func(key, agg string) string {
		r := e.inboxInsert(t, store.InboxInsertParams{Source: "s", IdempotencyKey: key, AggregateID: agg})
		ids = append(ids, r.ID)
		return r.ID
	}
	n1 := ins("n1", "")
	x1 := ins("x1", "x")
	n2 := ins("n2", "")
	x2 := ins("x2", "x")
	n3 := ins("n3", "")
	y1 := ins("y1", "y")
	msgs := e.relayClaim(t, 10)
	if want := []string{n1, x1, n2, n3, y1}; !slices.Equal(inboxMsgIDs(msgs), want) {
		t.Fatalf("claim: got %v, want every row without aggregate and the head of each aggregate, in created_at order %v", inboxMsgIDs(msgs), want)
	}
	if got := e.relayClaim(t, 10); len(got) != 0 {
		t.Fatalf("second claim: got %v, want nothing while %s is in flight", inboxMsgIDs(got), x1)
	}
	if ok, err := e.s.InboxRelayForward(e.ctx, forwardParams(msgs[1])); err != nil || !ok {
		t.Fatalf("forwarding %s: %v, %v", x1, ok, err)
	}
	if got := e.relayClaim(t, 10); !slices.Equal(inboxMsgIDs(got), []string{x2}) {
		t.Fatalf("claim after forwarding %s: got %v, want [%s]", x1, inboxMsgIDs(got), x2)
	}
}

func testInboxRelayNeverTouchesPullRows(t *testing.T, e *env) {
	pullP := e.inboxInsert(t, store.InboxInsertParams{Source: "orders", IdempotencyKey: "p1", AggregateID: "p", Consumption: store.ConsumptionPull}).ID
	e.inboxInsert(t, store.InboxInsertParams{Source: "orders", IdempotencyKey: "p2", Consumption: store.ConsumptionPull})
	pullQ := e.inboxInsert(t, store.InboxInsertParams{Source: "orders", IdempotencyKey: "q1", AggregateID: "q", Consumption: store.ConsumptionPull}).ID
	if got := e.relayClaim(t, 10); len(got) != 0 {
		t.Fatalf("claim with pull rows only: got %v, want nothing", inboxMsgIDs(got))
	}
	// A pull worker crashed while it held q1: its lease passed. The relay reclaim leaves it
	// to the pull claim, and a pull row of an aggregate does not hold back push rows of that
	// aggregate (the relay reserves aggregates among push rows only).
	e.changeInbox(t, pullQ, Change{ExpiredClaim: true})
	pulled := e.inboxRow(t, pullQ)
	pushP := e.inboxInsert(t, store.InboxInsertParams{Source: "stripe", IdempotencyKey: "p1", AggregateID: "p"}).ID
	pushQ := e.inboxInsert(t, store.InboxInsertParams{Source: "stripe", IdempotencyKey: "q1", AggregateID: "q"}).ID
	if n, err := e.s.InboxRelayReclaim(e.ctx); err != nil || n != 0 {
		t.Fatalf("relay reclaim: got %d, %v; want 0 (pull rows are not the relay's)", n, err)
	}
	if got := e.inboxRow(t, pullQ); got.State != store.InboxProcessing || got.Token != pulled.Token {
		t.Fatalf("pull row after relay reclaim: state %s token %s, want it untouched", got.State, got.Token)
	}
	if got := e.relayClaim(t, 10); !slices.Equal(inboxMsgIDs(got), []string{pushP, pushQ}) {
		t.Fatalf("claim: got %v, want the push rows [%s %s]", inboxMsgIDs(got), pushP, pushQ)
	}
	if got := e.inboxRow(t, pullP); got.State != store.InboxPending || got.Token != "" {
		t.Fatalf("pull row: state %s token %q, want pending and unclaimed", got.State, got.Token)
	}
}

// testInboxRelayLostLeaseWritesNoOutboxRow: relay worker A claims a row and stalls; its lease
// passes, the reclaim returns the row and worker B claims it. A's forward must write nothing,
// and after B's forward the outbox holds exactly one row for the inbox row.
func testInboxRelayLostLeaseWritesNoOutboxRow(t *testing.T, e *env) {
	id := e.inboxInsert(t, store.InboxInsertParams{Source: "stripe", IdempotencyKey: "evt_1", AggregateID: "cus_1"}).ID
	a := e.relayClaim(t, 10)
	if !slices.Equal(inboxMsgIDs(a), []string{id}) {
		t.Fatalf("A's claim: got %v, want [%s]", inboxMsgIDs(a), id)
	}
	e.changeInbox(t, id, Change{ExpireLease: true})
	// Lease passed but not yet reclaimed: the fence already refuses A.
	if ok, err := e.s.InboxRelayForward(e.ctx, forwardParams(a[0])); err != nil || ok {
		t.Fatalf("A's forward after its lease passed: %v, %v; want false", ok, err)
	}
	if n, err := e.s.InboxRelayReclaim(e.ctx); err != nil || n != 1 {
		t.Fatalf("reclaiming: got %d, %v; want 1", n, err)
	}
	if r := e.inboxRow(t, id); r.State != store.InboxPending || r.Token != "" || r.LeaseExpiresAt != nil {
		t.Fatalf("reclaimed row: state %s token %q lease %v", r.State, r.Token, r.LeaseExpiresAt)
	}
	b := e.relayClaim(t, 10)
	if !slices.Equal(inboxMsgIDs(b), []string{id}) || b[0].ClaimToken == a[0].ClaimToken {
		t.Fatalf("B's claim: got %v with token %s (A had %s); want the row with a new token", inboxMsgIDs(b), b[0].ClaimToken, a[0].ClaimToken)
	}
	if ok, err := e.s.InboxRelayForward(e.ctx, forwardParams(a[0])); err != nil || ok {
		t.Fatalf("A's forward with its stale token: %v, %v; want false", ok, err)
	}
	if ok, err := e.s.InboxRelayRenew(e.ctx, a[0].Claim(), time.Hour); err != nil || ok {
		t.Fatalf("A's renew with its stale token: %v, %v; want false", ok, err)
	}
	if ok, err := e.s.InboxRelayDead(e.ctx, a[0].Claim(), "stale"); err != nil || ok {
		t.Fatalf("A's dead letter with its stale token: %v, %v; want false", ok, err)
	}
	if rows := e.outboxRows(t); len(rows) != 0 {
		t.Fatalf("outbox holds %d rows after A's lost forwards, want 0", len(rows))
	}
	if ok, err := e.s.InboxRelayForward(e.ctx, forwardParams(b[0])); err != nil || !ok {
		t.Fatalf("B's forward: %v, %v; want true", ok, err)
	}
	rows := e.outboxRows(t)
	if len(rows) != 1 || inboxIDOf(t, rows[0]) != id || strOrNil(rows[0].Key) != "cus_1" || rows[0].MaxAttempts != 10 {
		t.Fatalf("outbox after B's forward: %+v, want exactly one row for inbox row %s with key cus_1", rows, id)
	}
	if r := e.inboxRow(t, id); r.State != store.InboxProcessed || r.ProcessedAt == nil || r.Token != "" || r.LeaseExpiresAt != nil {
		t.Fatalf("inbox row after B's forward: %+v, want processed", r)
	}
	if ok, err := e.s.InboxRelayForward(e.ctx, forwardParams(b[0])); err != nil || ok {
		t.Fatalf("B's second forward: %v, %v; want false", ok, err)
	}
	if rows := e.outboxRows(t); len(rows) != 1 {
		t.Fatalf("outbox holds %d rows after a repeated forward, want 1", len(rows))
	}
}

// batchForwarder returns the store as a store.InboxBatchForwarder, or skips the test when
// it forwards row by row.
func batchForwarder(t *testing.T, e *env) store.InboxBatchForwarder {
	t.Helper()
	bf, ok := e.s.(store.InboxBatchForwarder)
	if !ok {
		t.Skip("the store forwards relay rows one by one (it is no store.InboxBatchForwarder)")
	}
	return bf
}

// claimPushRows stores n push rows of source stripe, each of its own aggregate, and claims them
// all for the relay.
func claimPushRows(t *testing.T, e *env, n int) []store.InboxMessage {
	t.Helper()
	for i := range n {
		e.inboxInsert(t, store.InboxInsertParams{Source: "stripe", IdempotencyKey: fmt.Sprintf("evt_%d", i), AggregateID: fmt.Sprintf("cus_%d", i)})
	}
	claimed := e.relayClaim(t, 10)
	if len(claimed) != n {
		t.Fatalf("claimed %d rows, want %d", len(claimed), n)
	}
	return claimed
}

// testInboxRelayForwardBatchFencesEachRow: a batch of three claims of which one lost its
// lease forwards the other two, in one call: their rows are processed and have exactly one
// outbox row each, in the order given; the lost one writes nothing and stays as it was.
func testInboxRelayForwardBatchFencesEachRow(t *testing.T, e *env) {
	bf := batchForwarder(t, e)
	claimed := claimPushRows(t, e, 3)
	e.changeInbox(t, claimed[1].ID, Change{ExpireLease: true})
	params := []store.InboxForwardParams{forwardParams(claimed[0]), forwardParams(claimed[1]), forwardParams(claimed[2])}
	got, err := bf.InboxRelayForwardBatch(e.ctx, params)
	if err != nil || !slices.Equal(got, []bool{true, false, true}) {
		t.Fatalf("forwarding the batch: %v, %v; want [true false true]", got, err)
	}
	rows := e.outboxRows(t)
	if len(rows) != 2 || inboxIDOf(t, rows[0]) != claimed[0].ID || inboxIDOf(t, rows[1]) != claimed[2].ID || rows[0].MaxAttempts != 10 {
		t.Fatalf("outbox after the batch: %+v, want the rows of %s and %s in that order", rows, claimed[0].ID, claimed[2].ID)
	}
	for _, i := range []int{0, 2} {
		if r := e.inboxRow(t, claimed[i].ID); r.State != store.InboxProcessed || r.ProcessedAt == nil || r.Token != "" {
			t.Fatalf("inbox row %d after the batch: %+v, want processed", i, r)
		}
	}
	if r := e.inboxRow(t, claimed[1].ID); r.State != store.InboxProcessing || r.Token != claimed[1].ClaimToken {
		t.Fatalf("the lost row after the batch: %+v, want it still processing with its token", r)
	}
	// Forwarding the same batch again finds every fence gone.
	got, err = bf.InboxRelayForwardBatch(e.ctx, params)
	if err != nil || !slices.Equal(got, []bool{false, false, false}) {
		t.Fatalf("forwarding the batch again: %v, %v; want all false", got, err)
	}
	if rows := e.outboxRows(t); len(rows) != 2 {
		t.Fatalf("outbox holds %d rows after a repeated batch, want 2", len(rows))
	}
}

// testInboxRelayForwardBatchOfRowsWithIDs: outbox rows that carry their own ids and no
// max_attempts (which a store may forward another way than the relay's rows) are fenced and
// written as the relay's: the row of the lost claim is not written, the others are, in order,
// with their ids and the column's default max_attempts.
func testInboxRelayForwardBatchOfRowsWithIDs(t *testing.T, e *env) {
	bf := batchForwarder(t, e)
	claimed := claimPushRows(t, e, 3)
	e.changeInbox(t, claimed[2].ID, Change{ExpireLease: true})
	ids := []string{"00000000-0000-4000-8000-00000000000a", "00000000-0000-4000-8000-00000000000b", "00000000-0000-4000-8000-00000000000c"}
	params := make([]store.InboxForwardParams, len(claimed))
	for i, m := range claimed {
		params[i] = forwardParams(m)
		params[i].Outbox.ID, params[i].Outbox.MaxAttempts = ids[i], 0
	}
	got, err := bf.InboxRelayForwardBatch(e.ctx, params)
	if err != nil || !slices.Equal(got, []bool{true, true, false}) {
		t.Fatalf("forwarding the batch: %v, %v; want [true true false]", got, err)
	}
	rows := e.outboxRows(t)
	if len(rows) != 2 || rows[0].ID != ids[0] || rows[1].ID != ids[1] || inboxIDOf(t, rows[1]) != claimed[1].ID {
		t.Fatalf("outbox after the batch: %+v, want the rows %s and %s in that order", rows, ids[0], ids[1])
	}
	if rows[0].MaxAttempts != 5 {
		t.Fatalf("max_attempts of a row that sets none: %d, want the column default 5", rows[0].MaxAttempts)
	}
	if r := e.inboxRow(t, claimed[2].ID); r.State != store.InboxProcessing || r.Token != claimed[2].ClaimToken {
		t.Fatalf("the lost row after the batch: %+v, want it still processing with its token", r)
	}
}

// testInboxRelayForwardBatchTakesUpperCaseClaimIDs: a claim id in upper case is the same
// claim. Each batch, of the relay's rows and of rows with their own ids (which a store may
// forward another way), reports both rows forwarded and writes an outbox row for each row
// that it marked processed.
func testInboxRelayForwardBatchTakesUpperCaseClaimIDs(t *testing.T, e *env) {
	bf := batchForwarder(t, e)
	claimed := claimPushRows(t, e, 4)
	params := make([]store.InboxForwardParams, len(claimed))
	for i, m := range claimed {
		params[i] = forwardParams(m)
		params[i].Claim.ID = strings.ToUpper(m.ID)
	}
	params[2].Outbox.ID, params[3].Outbox.ID = "00000000-0000-4000-8000-00000000000a", "00000000-0000-4000-8000-00000000000b"
	for _, batch := range [][]store.InboxForwardParams{params[:2], params[2:]} {
		got, err := bf.InboxRelayForwardBatch(e.ctx, batch)
		if err != nil || !slices.Equal(got, []bool{true, true}) {
			t.Fatalf("forwarding a batch with upper-case claim ids: %v, %v; want [true true]", got, err)
		}
	}
	rows := e.outboxRows(t)
	if len(rows) != 4 {
		t.Fatalf("%d outbox rows after the batches, want 4 (one per processed inbox row)", len(rows))
	}
	for i, r := range rows {
		if inboxIDOf(t, r) != claimed[i].ID {
			t.Fatalf("outbox row %d is of inbox row %s, want %s", i, inboxIDOf(t, r), claimed[i].ID)
		}
	}
}

// testInboxRelayForwardBatchIsAllOrNothing: an outbox row that the database refuses (a topic
// longer than its column) fails the whole batch with store.ErrInvalidValue, and nothing of it
// is written: no outbox row, every inbox row still processing.
func testInboxRelayForwardBatchIsAllOrNothing(t *testing.T, e *env) {
	bf := batchForwarder(t, e)
	claimed := claimPushRows(t, e, 2)
	bad := forwardParams(claimed[1])
	bad.Outbox.Topic = strings.Repeat("t", 300)
	_, err := bf.InboxRelayForwardBatch(e.ctx, []store.InboxForwardParams{forwardParams(claimed[0]), bad})
	if !errors.Is(err, store.ErrInvalidValue) {
		t.Fatalf("forwarding a batch with a refused row: %v, want store.ErrInvalidValue", err)
	}
	if rows := e.outboxRows(t); len(rows) != 0 {
		t.Fatalf("outbox holds %d rows after a failed batch, want 0", len(rows))
	}
	for _, m := range claimed {
		if r := e.inboxRow(t, m.ID); r.State != store.InboxProcessing || r.Token != m.ClaimToken {
			t.Fatalf("inbox row after a failed batch: %+v, want it still processing with its token", r)
		}
	}
}

func testInboxRelayClaimDeadAndRenew(t *testing.T, e *env) {
	id := e.inboxInsert(t, store.InboxInsertParams{
		Source: "stripe", IdempotencyKey: "evt_1", AggregateID: "cus_1", EventType: "invoice.paid",
		Payload: json.RawMessage(`{"id":"evt_1"}`), Headers: json.RawMessage(`{"X-A":"b"}`), CorrelationID: "corr-1",
	}).ID
	other := e.inboxInsert(t, store.InboxInsertParams{Source: "stripe", IdempotencyKey: "evt_2", AggregateID: "cus_2"}).ID
	t0 := e.now(t)
	msgs := e.relayClaim(t, 1)
	t1 := e.now(t)
	if !slices.Equal(inboxMsgIDs(msgs), []string{id}) {
		t.Fatalf("claim with limit 1: got %v, want [%s]", inboxMsgIDs(msgs), id)
	}
	m, r := msgs[0], e.inboxRow(t, id)
	if m.Source != "stripe" || m.IdempotencyKey != "evt_1" || m.AggregateID != "cus_1" || m.EventType != "invoice.paid" ||
		m.CorrelationID != "corr-1" || m.Consumption != store.ConsumptionPush || m.Attempt != 0 ||
		!m.CreatedAt.Equal(r.CreatedAt) || m.ClaimToken == "" || m.ClaimToken != r.Token || r.State != store.InboxProcessing ||
		r.LeaseExpiresAt == nil || !m.LeaseExpiresAt.Equal(*r.LeaseExpiresAt) || r.ClaimedAt == nil {
		t.Fatalf("claimed message %+v does not match its row %+v", m, r)
	}
	if !jsonEqual(t, m.Payload, []byte(`{"id":"evt_1"}`)) || !jsonEqual(t, m.Headers, []byte(`{"X-A":"b"}`)) {
		t.Fatalf("claimed message: payload %s headers %s", m.Payload, m.Headers)
	}
	if d := r.LeaseExpiresAt.Sub(*r.ClaimedAt) - lease; d < -5*time.Millisecond || d > 5*time.Millisecond {
		t.Fatalf("lease_expires_at - claimed_at = %s, want %s", r.LeaseExpiresAt.Sub(*r.ClaimedAt), lease)
	}
	if !within(*r.ClaimedAt, t0, t1, time.Millisecond) {
		t.Fatalf("claimed_at %s outside the database clock window [%s, %s]", r.ClaimedAt, t0, t1)
	}

	t2 := e.now(t)
	if ok, err := e.s.InboxRelayRenew(e.ctx, m.Claim(), time.Hour); err != nil || !ok {
		t.Fatalf("renewing: %v, %v; want true", ok, err)
	}
	t3 := e.now(t)
	if r := e.inboxRow(t, id); !within(*r.LeaseExpiresAt, t2.Add(time.Hour), t3.Add(time.Hour), time.Millisecond) {
		t.Fatalf("renewed lease %s, want database clock + 1h in [%s, %s]", r.LeaseExpiresAt, t2.Add(time.Hour), t3.Add(time.Hour))
	}
	if ok, err := e.s.InboxRelayDead(e.ctx, store.Claim{ID: id, Token: "not-a-uuid"}, "x"); err != nil || ok {
		t.Fatalf("dead letter with an invalid token: %v, %v; want false", ok, err)
	}
	if ok, err := e.s.InboxRelayDead(e.ctx, m.Claim(), "topic template rendered empty"); err != nil || !ok {
		t.Fatalf("dead letter: %v, %v; want true", ok, err)
	}
	if r := e.inboxRow(t, id); r.State != store.InboxDead || strOrNil(r.LastError) != "topic template rendered empty" || r.Token != "" || r.LeaseExpiresAt != nil {
		t.Fatalf("dead row: %+v", r)
	}
	if ok, err := e.s.InboxRelayRenew(e.ctx, m.Claim(), time.Hour); err != nil || ok {
		t.Fatalf("renewing a dead row: %v, %v; want false", ok, err)
	}
	// A dead row releases nothing it never held, and the next row is claimable.
	if got := e.relayClaim(t, 10); !slices.Equal(inboxMsgIDs(got), []string{other}) {
		t.Fatalf("claim after the dead letter: got %v, want [%s]", inboxMsgIDs(got), other)
	}
}
