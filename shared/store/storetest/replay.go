package storetest

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/alternayte/queuebox/shared/store"
)

// replayTests are the cases of store.ReplayStore (docs/replay.md): the selection, its pages,
// and the batches that move finished rows back to pending.
func replayTests() []testCase {
	return []testCase{
		{name: "ReplayOutboxStatesNarrowTheSelection", custom: true, run: testReplayOutboxStates},
		{name: "ReplayOutboxBatchesWalkTheSelectionOnce", run: testReplayOutboxBatches},
		{name: "ReplayOutboxFilters", run: testReplayOutboxFilters},
		{name: "ReplayOutboxScanPages", custom: true, run: testReplayOutboxScanPages},
		{name: "ReplayInboxStatesAndConsumption", custom: true, run: testReplayInboxStates},
		{name: "ReplayInboxBatchesAndScan", run: testReplayInboxBatches},
	}
}

// replayStore returns the store under test as a store.ReplayStore; every dialect has one.
func (e *env) replayStore(t *testing.T) store.ReplayStore {
	t.Helper()
	rs, ok := e.s.(store.ReplayStore)
	if !ok {
		t.Fatalf("the store %T is not a store.ReplayStore", e.s)
	}
	return rs
}

// finishedOutbox inserts rows of topic with no key and returns the ids of n sent, n dead and
// n pending rows. The dead rows' last_error is "poison". The pending rows are scheduled an
// hour ahead, so that no claim of the test takes them.
func (e *env) finishedOutbox(t *testing.T, topic string, n int) (sent, dead, pending []string) {
	t.Helper()
	row := func(i int, delay time.Duration) store.OutboxInsertParams {
		return store.OutboxInsertParams{Topic: topic, Payload: json.RawMessage(fmt.Sprintf(`{"n":%d}`, i)), Headers: json.RawMessage(`{"h":"v"}`), Delay: delay}
	}
	var rows []store.OutboxInsertParams
	for i := 0; i < 2*n; i++ {
		rows = append(rows, row(i, 0))
	}
	ids := e.insert(t, rows...)
	msgs := e.claim(t, 10*n)
	if !sameSet(msgIDs(msgs), ids) {
		t.Fatalf("claimed %v, want the new rows %v", msgIDs(msgs), ids)
	}
	var deads []store.OutboxDeadParams
	var sends []store.Claim
	for i, m := range msgs {
		if i%2 == 0 {
			sends = append(sends, m.Claim())
			sent = append(sent, m.ID)
		} else {
			deads = append(deads, store.OutboxDeadParams{Claim: m.Claim(), LastError: "poison"})
			dead = append(dead, m.ID)
		}
	}
	e.markSent(t, sends...)
	if got, err := e.s.OutboxMarkDead(e.ctx, deads); err != nil || len(got) != n {
		t.Fatalf("marking dead: %v, %v; want %d rows", got, err, n)
	}
	rows = rows[:0]
	for i := 0; i < n; i++ {
		rows = append(rows, row(2*n+i, time.Hour))
	}
	pending = e.insert(t, rows...)
	return sent, dead, pending
}

// outboxStates returns the state of every outbox row by id.
func (e *env) outboxStates(t *testing.T) map[string]OutboxRow {
	t.Helper()
	m := map[string]OutboxRow{}
	for _, r := range e.outboxRows(t) {
		m[r.ID] = r
	}
	return m
}

// checkReplayed fails unless every id is a pending outbox row as a replay leaves it.
func (e *env) checkReplayed(t *testing.T, rows map[string]OutboxRow, ids []string) {
	t.Helper()
	for _, id := range ids {
		r := rows[id]
		if r.State != store.OutboxPending || r.Attempt != 0 || r.LastError != nil || r.Token != "" || r.LeaseExpiresAt != nil || r.ClaimedAt != nil {
			t.Fatalf("replayed row %s: state %s attempt %d last_error %s token %q lease %v claimed %v; want pending, 0 and no claim",
				id, r.State, r.Attempt, strOrNil(r.LastError), r.Token, r.LeaseExpiresAt, r.ClaimedAt)
		}
	}
}

func testReplayOutboxStates(t *testing.T, e *env) {
	rs := e.replayStore(t)
	sent, dead, pending := e.finishedOutbox(t, "orders", 3)

	count := func(sel store.OutboxSelection) int64 {
		t.Helper()
		n, err := rs.OutboxSelectionCount(e.ctx, sel)
		if err != nil {
			t.Fatalf("counting %+v: %v", sel, err)
		}
		return n
	}
	if n := count(store.OutboxSelection{}); n != 6 {
		t.Fatalf("count of the default selection: %d, want 6 (sent and dead)", n)
	}
	if n := count(store.OutboxSelection{States: []string{store.OutboxDead}}); n != 3 {
		t.Fatalf("count of dead rows: %d, want 3", n)
	}
	if n := count(store.OutboxSelection{States: []string{store.OutboxPending}}); n != 3 {
		t.Fatalf("count of pending rows: %d, want 3", n)
	}

	// A batch moves only sent and dead rows whatever States says.
	res, err := rs.OutboxReplayBatch(e.ctx, store.OutboxSelection{States: []string{store.OutboxPending}}, "", 100)
	if err != nil || res.Moved != 0 || res.Last != "" {
		t.Fatalf("replay of pending rows: %+v, %v; want nothing moved", res, err)
	}
	before := e.outboxStates(t)
	res, err = rs.OutboxReplayBatch(e.ctx, store.OutboxSelection{States: []string{store.OutboxDead}}, "", 100)
	if err != nil || res.Moved != 3 || !slices.Contains(dead, res.Last) {
		t.Fatalf("replay of dead rows: %+v, %v; want 3 moved, the last one of %v", res, err, dead)
	}
	after := e.outboxStates(t)
	e.checkReplayed(t, after, dead)
	for _, id := range sent {
		if r := after[id]; r.State != store.OutboxSent || !r.UpdatedAt.Equal(before[id].UpdatedAt) {
			t.Fatalf("sent row %s changed by a replay of dead rows: %s, updated %v (was %v)", id, r.State, r.UpdatedAt, before[id].UpdatedAt)
		}
	}
	for _, id := range pending {
		if r := after[id]; r.State != store.OutboxPending || !r.ScheduledAt.Equal(before[id].ScheduledAt) {
			t.Fatalf("pending row %s changed: %s, scheduled %v (was %v)", id, r.State, r.ScheduledAt, before[id].ScheduledAt)
		}
	}
	if n := count(store.OutboxSelection{States: []string{store.OutboxDead}}); n != 0 {
		t.Fatalf("dead rows after the replay: %d, want 0", n)
	}

	// The default selection then moves the sent rows.
	res, err = rs.OutboxReplayBatch(e.ctx, store.OutboxSelection{}, "", 100)
	if err != nil || res.Moved != 3 {
		t.Fatalf("replay of the default selection: %+v, %v; want the 3 sent rows", res, err)
	}
	e.checkReplayed(t, e.outboxStates(t), sent)
}

func testReplayOutboxBatches(t *testing.T, e *env) {
	rs := e.replayStore(t)
	_, dead, _ := e.finishedOutbox(t, "orders", 5)
	sel := store.OutboxSelection{States: []string{store.OutboxDead}}

	var moved [][]string
	var counts []int64
	cursor := ""
	for i := 0; i < 10; i++ {
		res, err := rs.OutboxReplayBatch(e.ctx, sel, cursor, 2)
		if err != nil {
			t.Fatalf("batch %d: %v", i, err)
		}
		counts = append(counts, res.Moved)
		if res.Moved == 0 {
			if res.Last != "" {
				t.Fatalf("an empty batch answered last %q", res.Last)
			}
			break
		}
		// The rows of this batch: dead rows that are pending now and were not moved before.
		var batch []string
		rows := e.outboxStates(t)
		for _, id := range dead {
			if rows[id].State == store.OutboxPending && !slices.ContainsFunc(moved, func(b []string) bool { return slices.Contains(b, id) }) {
				batch = append(batch, id)
			}
		}
		if int64(len(batch)) != res.Moved || !slices.Contains(batch, res.Last) {
			t.Fatalf("batch %d moved %v, answered %d moved and last %q", i, batch, res.Moved, res.Last)
		}
		moved = append(moved, batch)
		cursor = res.Last
		// A row of an earlier batch that dies again is not moved again by the same walk.
		if i == 0 {
			again := e.claim(t, 10)
			if !sameSet(msgIDs(again), batch) {
				t.Fatalf("claiming the replayed rows: %v, want the 2 of the first batch", msgIDs(again))
			}
			var deads []store.OutboxDeadParams
			for _, m := range again {
				deads = append(deads, store.OutboxDeadParams{Claim: m.Claim(), LastError: "poison again"})
			}
			if _, err := e.s.OutboxMarkDead(e.ctx, deads); err != nil {
				t.Fatalf("marking dead again: %v", err)
			}
		}
	}
	if !slices.Equal(counts, []int64{2, 2, 1, 0}) {
		t.Fatalf("batches moved %v, want [2 2 1 0]", counts)
	}
	if n, err := rs.OutboxSelectionCount(e.ctx, sel); err != nil || n != 2 {
		t.Fatalf("dead rows after the walk: %d, %v; want the 2 that died again", n, err)
	}
	if _, err := rs.OutboxReplayBatch(e.ctx, sel, "", 0); err == nil {
		t.Fatal("a batch of size 0 was accepted")
	}
}

func testReplayOutboxFilters(t *testing.T, e *env) {
	rs := e.replayStore(t)
	_, deadA, _ := e.finishedOutbox(t, "a", 3)
	_, deadB, _ := e.finishedOutbox(t, "b", 2)
	e.changeOutbox(t, deadA[0], Change{Age: 3 * time.Hour})
	e.changeOutbox(t, deadA[1], Change{Age: time.Hour})
	now := e.now(t)
	from, to := now.Add(-2*time.Hour), now.Add(-30*time.Minute)
	dead := []string{store.OutboxDead}

	cases := []struct {
		name string
		sel  store.OutboxSelection
		want []string
	}{
		{"topic", store.OutboxSelection{States: dead, Topics: []string{"b"}}, deadB},
		{"ids", store.OutboxSelection{States: dead, IDs: []string{deadA[2], deadB[0], "not-a-uuid"}}, []string{deadA[2], deadB[0]}},
		{"ids that are not uuids select nothing", store.OutboxSelection{States: dead, IDs: []string{"not-a-uuid"}}, nil},
		{"created between", store.OutboxSelection{States: dead, CreatedFrom: &from, CreatedTo: &to}, []string{deadA[1]}},
		{"created before", store.OutboxSelection{States: dead, Topics: []string{"a"}, CreatedTo: &to}, deadA[:2]},
	}
	for _, c := range cases {
		n, err := rs.OutboxSelectionCount(e.ctx, c.sel)
		if err != nil || n != int64(len(c.want)) {
			t.Fatalf("%s: count %d, %v; want %d", c.name, n, err, len(c.want))
		}
		page, err := rs.OutboxSelectionScan(e.ctx, c.sel, store.ScanParams{Limit: 100})
		if err != nil {
			t.Fatalf("%s: scan: %v", c.name, err)
		}
		var got []string
		for _, r := range page {
			got = append(got, r.ID)
		}
		if !sameSet(got, c.want) {
			t.Fatalf("%s: scan %v, want %v", c.name, got, c.want)
		}
	}
	// A replay of one topic leaves the other's dead rows.
	if res, err := rs.OutboxReplayBatch(e.ctx, store.OutboxSelection{States: dead, Topics: []string{"b"}}, "", 100); err != nil || res.Moved != 2 {
		t.Fatalf("replay of topic b: %+v, %v; want 2", res, err)
	}
	rows := e.outboxStates(t)
	e.checkReplayed(t, rows, deadB)
	for _, id := range deadA {
		if rows[id].State != store.OutboxDead {
			t.Fatalf("row %s of topic a is %s, want dead", id, rows[id].State)
		}
	}
}

func testReplayOutboxScanPages(t *testing.T, e *env) {
	rs := e.replayStore(t)
	sent, dead, _ := e.finishedOutbox(t, "orders", 3)
	var seen []string
	cursor := ""
	for i := 0; ; i++ {
		page, err := rs.OutboxSelectionScan(e.ctx, store.OutboxSelection{}, store.ScanParams{After: cursor, Limit: 4, Bodies: i == 0})
		if err != nil {
			t.Fatalf("page %d: %v", i, err)
		}
		if len(page) > 4 {
			t.Fatalf("page %d has %d rows, want at most 4", i, len(page))
		}
		if len(page) == 0 {
			break
		}
		for _, r := range page {
			if slices.Contains(seen, r.ID) {
				t.Fatalf("row %s on two pages", r.ID)
			}
			seen = append(seen, r.ID)
			if r.Topic != "orders" || (r.State == store.OutboxDead) != (r.LastError == "poison") {
				t.Fatalf("row %+v: want topic orders and last_error poison on dead rows only", r)
			}
			if i == 0 && (!jsonEqual(t, r.Headers, []byte(`{"h":"v"}`)) || len(r.Payload) == 0) {
				t.Fatalf("row %s of a page with bodies: payload %s headers %s", r.ID, r.Payload, r.Headers)
			}
			if i > 0 && (r.Payload != nil || r.Headers != nil) {
				t.Fatalf("row %s of a page without bodies has payload %s headers %s", r.ID, r.Payload, r.Headers)
			}
		}
		cursor = page[len(page)-1].ID
		if i > 5 {
			t.Fatal("the pages do not end")
		}
	}
	if !sameSet(seen, slices.Concat(sent, dead)) {
		t.Fatalf("the pages hold %v, want the sent and dead rows %v %v", seen, sent, dead)
	}
	if _, err := rs.OutboxSelectionScan(e.ctx, store.OutboxSelection{}, store.ScanParams{}); err == nil {
		t.Fatal("a page of size 0 was accepted")
	}
}

// finishedInbox inserts n processed push rows (relayed), n dead push rows, n dead pull rows
// and n pending pull rows of source s.
func (e *env) finishedInbox(t *testing.T, s string, n int) (processed, deadPush, deadPull, pendingPull []string) {
	t.Helper()
	for i := 0; i < n; i++ {
		processed = append(processed, e.inboxInsert(t, store.InboxInsertParams{Source: s, IdempotencyKey: fmt.Sprintf("ok-%d", i)}).ID)
	}
	msgs := e.relayClaim(t, 10*n)
	if !sameSet(inboxMsgIDs(msgs), processed) {
		t.Fatalf("relay claim: %v, want %v", inboxMsgIDs(msgs), processed)
	}
	for _, m := range msgs {
		if ok, err := e.s.InboxRelayForward(e.ctx, forwardParams(m)); err != nil || !ok {
			t.Fatalf("forwarding %s: %v, %v", m.ID, ok, err)
		}
	}
	for i := 0; i < n; i++ {
		deadPush = append(deadPush, e.inboxInsert(t, store.InboxInsertParams{Source: s, IdempotencyKey: fmt.Sprintf("dp-%d", i), State: store.InboxDead, LastError: "body is not JSON"}).ID)
		deadPull = append(deadPull, e.inboxInsert(t, store.InboxInsertParams{Source: s, IdempotencyKey: fmt.Sprintf("dl-%d", i), Consumption: store.ConsumptionPull, State: store.InboxDead, LastError: "handler failed"}).ID)
		pendingPull = append(pendingPull, e.inboxInsert(t, store.InboxInsertParams{Source: s, IdempotencyKey: fmt.Sprintf("pl-%d", i), Consumption: store.ConsumptionPull}).ID)
	}
	return processed, deadPush, deadPull, pendingPull
}

func testReplayInboxStates(t *testing.T, e *env) {
	rs := e.replayStore(t)
	processed, deadPush, deadPull, pendingPull := e.finishedInbox(t, "stripe", 2)
	other := e.inboxInsert(t, store.InboxInsertParams{Source: "github", IdempotencyKey: "x", State: store.InboxDead, LastError: "y"}).ID

	count := func(sel store.InboxSelection) int64 {
		t.Helper()
		n, err := rs.InboxSelectionCount(e.ctx, sel)
		if err != nil {
			t.Fatalf("counting %+v: %v", sel, err)
		}
		return n
	}
	if n := count(store.InboxSelection{}); n != 5 {
		t.Fatalf("count of the default selection: %d, want the 5 dead rows", n)
	}
	if n := count(store.InboxSelection{States: []string{store.InboxProcessed}}); n != 2 {
		t.Fatalf("count of processed rows: %d, want 2", n)
	}
	if n := count(store.InboxSelection{Sources: []string{"stripe"}, Consumption: store.ConsumptionPull}); n != 2 {
		t.Fatalf("count of dead pull rows of stripe: %d, want 2", n)
	}

	// Pending rows never move.
	if res, err := rs.InboxReplayBatch(e.ctx, store.InboxSelection{States: []string{store.InboxPending}}, "", 100); err != nil || res.Moved != 0 {
		t.Fatalf("replay of pending rows: %+v, %v; want nothing", res, err)
	}
	// Re-open the dead pull rows of stripe only.
	res, err := rs.InboxReplayBatch(e.ctx, store.InboxSelection{Sources: []string{"stripe"}, Consumption: store.ConsumptionPull}, "", 100)
	if err != nil || res.Moved != 2 || !slices.Contains(deadPull, res.Last) {
		t.Fatalf("replay of the dead pull rows: %+v, %v; want 2 moved", res, err)
	}
	rows := map[string]InboxRow{}
	for _, r := range e.inboxRows(t) {
		rows[r.ID] = r
	}
	for _, id := range deadPull {
		r := rows[id]
		if r.State != store.InboxPending || r.Attempt != 0 || r.LastError != nil || r.ProcessedAt != nil || r.Token != "" || r.Consumption != store.ConsumptionPull {
			t.Fatalf("re-opened pull row %s: %+v, want pending with no error, no processed_at and no claim", id, r)
		}
	}
	for _, id := range append(slices.Clone(deadPush), other) {
		if rows[id].State != store.InboxDead {
			t.Fatalf("dead row %s is %s, want dead", id, rows[id].State)
		}
	}
	for _, id := range processed {
		if rows[id].State != store.InboxProcessed || rows[id].ProcessedAt == nil {
			t.Fatalf("processed row %s is %s", id, rows[id].State)
		}
	}
	for _, id := range pendingPull {
		if rows[id].State != store.InboxPending {
			t.Fatalf("pending row %s is %s", id, rows[id].State)
		}
	}

	// A processed push row replayed is relayed again.
	res, err = rs.InboxReplayBatch(e.ctx, store.InboxSelection{States: []string{store.InboxProcessed}, IDs: processed[:1]}, "", 100)
	if err != nil || res.Moved != 1 || res.Last != processed[0] {
		t.Fatalf("replay of one processed row: %+v, %v", res, err)
	}
	if got := e.relayClaim(t, 10); !slices.Equal(inboxMsgIDs(got), processed[:1]) {
		t.Fatalf("relay claim after the replay: %v, want %v", inboxMsgIDs(got), processed[:1])
	}
}

func testReplayInboxBatches(t *testing.T, e *env) {
	rs := e.replayStore(t)
	var dead []string
	for i := 0; i < 5; i++ {
		dead = append(dead, e.inboxInsert(t, store.InboxInsertParams{Source: "s", IdempotencyKey: fmt.Sprintf("d-%d", i), State: store.InboxDead, LastError: "boom",
			Headers: json.RawMessage(`{"X-Id":"1"}`)}).ID)
	}
	var seen []string
	cursor := ""
	for i := 0; i < 10; i++ {
		page, err := rs.InboxSelectionScan(e.ctx, store.InboxSelection{}, store.ScanParams{After: cursor, Limit: 2, Bodies: true})
		if err != nil {
			t.Fatalf("page %d: %v", i, err)
		}
		if len(page) == 0 {
			break
		}
		for _, r := range page {
			if r.Source != "s" || r.Consumption != store.ConsumptionPush || r.State != store.InboxDead || r.LastError != "boom" ||
				!jsonEqual(t, r.Headers, []byte(`{"X-Id":"1"}`)) || !jsonEqual(t, r.Payload, []byte(`{"n":1}`)) {
				t.Fatalf("row %+v", r)
			}
			seen = append(seen, r.ID)
		}
		cursor = page[len(page)-1].ID
	}
	if !sameSet(seen, dead) || len(seen) != len(dead) {
		t.Fatalf("pages %v, want each of %v once", seen, dead)
	}
	var counts []int64
	var lasts []string
	cursor = ""
	for i := 0; i < 10; i++ {
		res, err := rs.InboxReplayBatch(e.ctx, store.InboxSelection{}, cursor, 2)
		if err != nil {
			t.Fatalf("batch %d: %v", i, err)
		}
		counts = append(counts, res.Moved)
		if res.Moved == 0 {
			break
		}
		lasts = append(lasts, res.Last)
		cursor = res.Last
	}
	if !slices.Equal(counts, []int64{2, 2, 1, 0}) {
		t.Fatalf("batches moved %v, want [2 2 1 0]", counts)
	}
	for _, l := range lasts {
		if !slices.Contains(dead, l) {
			t.Fatalf("a batch's last id %q is not a selected row", l)
		}
	}
	for _, r := range e.inboxRows(t) {
		if r.State != store.InboxPending {
			t.Fatalf("row %s is %s after the replay, want pending", r.ID, r.State)
		}
	}
}
