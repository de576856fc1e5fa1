package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alternayte/queuebox/shared/store"
)

func inboxTests() []testCase {
	return []testCase{
		{name: "InboxInsertStoresColumns", custom: true, run: testInboxInsertStoresColumns},
		{name: "InboxDuplicateStormStoresOneRow", custom: true, heavy: true, run: testInboxDuplicateStormStoresOneRow},
		{name: "InboxInsertBatchStoresColumns", custom: true, run: testInboxInsertBatchStoresColumns},
		{name: "InboxInsertBatchInBatchDuplicates", custom: true, run: testInboxInsertBatchInBatchDuplicates},
		{name: "InboxInsertBatchExistingDuplicates", custom: true, run: testInboxInsertBatchExistingDuplicates},
		{name: "InboxInsertBatchIsAllOrNothing", custom: true, run: testInboxInsertBatchIsAllOrNothing},
		{name: "InboxInsertBatchConcurrentOverlappingKeys", custom: true, heavy: true, run: testInboxInsertBatchConcurrentOverlappingKeys},
		{name: "InboxRelayOnePerAggregateUnderConcurrency", run: testInboxRelayOnePerAggregateUnderConcurrency},
		{name: "InboxRelayNullAggregatesAreUnordered", custom: true, run: testInboxRelayNullAggregatesAreUnordered},
		{name: "InboxRelayNeverTouchesPullRows", run: testInboxRelayNeverTouchesPullRows},
		{name: "InboxRelayLostLeaseWritesNoOutboxRow", custom: true, run: testInboxRelayLostLeaseWritesNoOutboxRow},
		{name: "InboxRelayClaimDeadAndRenew", run: testInboxRelayClaimDeadAndRenew},
		{name: "InboxRelayForwardBatchFencesEachRow", custom: true, run: testInboxRelayForwardBatchFencesEachRow},
		{name: "InboxRelayForwardBatchIsAllOrNothing", run: testInboxRelayForwardBatchIsAllOrNothing},
		{name: "InboxRelayForwardBatchOfRowsWithIDs", custom: true, run: testInboxRelayForwardBatchOfRowsWithIDs},
		{name: "InboxRelayForwardBatchTakesUpperCaseClaimIDs", run: testInboxRelayForwardBatchTakesUpperCaseClaimIDs},
		{name: "InboxStats", run: testInboxStats},
		{name: "InboxDeleteFinished", run: testInboxDeleteFinished},
	}
}

func testInboxInsertStoresColumns(t *testing.T, e *env) {
	full := e.inboxInsert(t, store.InboxInsertParams{
		Source: "stripe", IdempotencyKey: "evt_1", AggregateID: "cus_1", EventType: "invoice.paid",
		Payload: json.RawMessage(`{"id":"evt_1"}`), Headers: json.RawMessage(`{"X-Request-Id":"r1"}`),
		CorrelationID: "corr-1",
	})
	if full.Duplicate || full.ID == "" {
		t.Fatalf("first insert: %+v, want a new row", full)
	}
	minimal := e.inboxInsert(t, store.InboxInsertParams{Source: "stripe", IdempotencyKey: "evt_2", Payload: json.RawMessage(`{}`)})
	pull := e.inboxInsert(t, store.InboxInsertParams{Source: "orders", IdempotencyKey: "evt_1", Consumption: store.ConsumptionPull})
	dead := e.inboxInsert(t, store.InboxInsertParams{Source: "queue", IdempotencyKey: "sha256:ab", Payload: json.RawMessage(`{"raw":""}`),
		State: store.InboxDead, LastError: "body is not JSON"})
	for _, r := range []store.InboxInsertResult{minimal, pull, dead} {
		if r.Duplicate || r.ID == "" {
			t.Fatalf("insert: %+v, want a new row", r)
		}
	}

	dup := e.inboxInsert(t, store.InboxInsertParams{Source: "stripe", IdempotencyKey: "evt_1", Payload: json.RawMessage(`{"id":"changed"}`)})
	if !dup.Duplicate || dup.ID != "" {
		t.Fatalf("repeat of stripe/evt_1: %+v, want a duplicate without id", dup)
	}

	rows := e.inboxRows(t)
	if len(rows) != 4 {
		t.Fatalf("got %d rows, want 4", len(rows))
	}
	f := e.inboxRow(t, full.ID)
	if f.Source != "stripe" || f.IdempotencyKey != "evt_1" || strOrNil(f.AggregateID) != "cus_1" ||
		strOrNil(f.EventType) != "invoice.paid" || strOrNil(f.CorrelationID) != "corr-1" ||
		f.Consumption != store.ConsumptionPush || f.State != store.InboxPending || f.Attempt != 0 || f.Token != "" {
		t.Fatalf("full row: %+v", f)
	}
	if !jsonEqual(t, f.Payload, []byte(`{"id":"evt_1"}`)) || !jsonEqual(t, f.Headers, []byte(`{"X-Request-Id":"r1"}`)) {
		t.Fatalf("full row: payload %s headers %s; a duplicate must not change the stored row", f.Payload, f.Headers)
	}
	m := e.inboxRow(t, minimal.ID)
	if m.AggregateID != nil || m.EventType != nil || m.CorrelationID != nil || !jsonEqual(t, m.Headers, []byte(`{}`)) || m.LastError != nil {
		t.Fatalf("minimal row: %+v, want null aggregate, event type, correlation id and error, headers {}", m)
	}
	if p := e.inboxRow(t, pull.ID); p.Consumption != store.ConsumptionPull || p.State != store.InboxPending {
		t.Fatalf("pull row: consumption %s state %s", p.Consumption, p.State)
	}
	if d := e.inboxRow(t, dead.ID); d.State != store.InboxDead || strOrNil(d.LastError) != "body is not JSON" {
		t.Fatalf("dead row: state %s last error %s", d.State, strOrNil(d.LastError))
	}
}

// testInboxDuplicateStormStoresOneRow sends the same five messages from 50 goroutines at
// once: each must be stored once, reported new once and duplicate 49 times.
func testInboxDuplicateStormStoresOneRow(t *testing.T, e *env) {
	const senders, keys = 50, 5
	start := make(chan struct{})
	var mu sync.Mutex
	newIDs := map[string][]string{}
	dups := map[string]int{}
	var wg sync.WaitGroup
	for w := 0; w < senders; w++ {
		wg.Go(func() {
			<-start
			for k := 0; k < keys; k++ {
				key := fmt.Sprintf("evt-%d", (k+w)%keys) // each sender walks the keys from its own offset
				res, err := e.s.InboxInsert(e.ctx, store.InboxInsertParams{
					Source: "storm", IdempotencyKey: key, AggregateID: "a", Payload: payloadN(w),
				})
				if err != nil {
					t.Errorf("inserting %s: %v", key, err)
					return
				}
				mu.Lock()
				if res.Duplicate {
					dups[key]++
				} else {
					newIDs[key] = append(newIDs[key], res.ID)
				}
				mu.Unlock()
			}
		})
	}
	close(start)
	wg.Wait()
	if t.Failed() {
		return
	}
	rows := e.inboxRows(t)
	if len(rows) != keys {
		t.Fatalf("stored %d rows, want %d", len(rows), keys)
	}
	for _, r := range rows {
		if got := newIDs[r.IdempotencyKey]; len(got) != 1 || got[0] != r.ID || dups[r.IdempotencyKey] != senders-1 {
			t.Errorf("key %s: new ids %v, duplicates %d; want [%s] and %d", r.IdempotencyKey, got, dups[r.IdempotencyKey], r.ID, senders-1)
		}
	}
}

func (e *env) inboxInsertBatch(t *testing.T, params ...store.InboxInsertParams) []store.InboxInsertResult {
	t.Helper()
	res, err := e.s.InboxInsertBatch(e.ctx, params)
	if err != nil {
		t.Fatalf("inserting inbox batch: %v", err)
	}
	if len(res) != len(params) {
		t.Fatalf("inserting inbox batch: %d results for %d messages", len(res), len(params))
	}
	return res
}

// testInboxInsertBatchStoresColumns writes every kind of row of testInboxInsertStoresColumns
// in one batch: the columns are those of InboxInsert.
func testInboxInsertBatchStoresColumns(t *testing.T, e *env) {
	if res, err := e.s.InboxInsertBatch(e.ctx, nil); err != nil || len(res) != 0 {
		t.Fatalf("empty batch: %v, %v; want no results and no error", res, err)
	}
	res := e.inboxInsertBatch(t,
		store.InboxInsertParams{
			Source: "stripe", IdempotencyKey: "evt_1", AggregateID: "cus_1", EventType: "invoice.paid",
			Payload: json.RawMessage(`{"id":"evt_1"}`), Headers: json.RawMessage(`{"X-Request-Id":"r1"}`),
			CorrelationID: "corr-1",
		},
		store.InboxInsertParams{Source: "stripe", IdempotencyKey: "evt_2", Payload: json.RawMessage(`{}`)},
		store.InboxInsertParams{Source: "orders", IdempotencyKey: "evt_1", Payload: json.RawMessage(`{"n":1}`), Consumption: store.ConsumptionPull},
		store.InboxInsertParams{Source: "queue", IdempotencyKey: "sha256:ab", Payload: json.RawMessage(`{"raw":""}`),
			State: store.InboxDead, LastError: "body is not JSON"},
	)
	for i, r := range res {
		if r.Duplicate || r.ID == "" {
			t.Fatalf("message %d: %+v, want a new row", i, r)
		}
	}
	if rows := e.inboxRows(t); len(rows) != 4 {
		t.Fatalf("got %d rows, want 4", len(rows))
	}
	f := e.inboxRow(t, res[0].ID)
	if f.Source != "stripe" || f.IdempotencyKey != "evt_1" || strOrNil(f.AggregateID) != "cus_1" ||
		strOrNil(f.EventType) != "invoice.paid" || strOrNil(f.CorrelationID) != "corr-1" ||
		f.Consumption != store.ConsumptionPush || f.State != store.InboxPending || f.Attempt != 0 || f.Token != "" {
		t.Fatalf("full row: %+v", f)
	}
	if !jsonEqual(t, f.Payload, []byte(`{"id":"evt_1"}`)) || !jsonEqual(t, f.Headers, []byte(`{"X-Request-Id":"r1"}`)) {
		t.Fatalf("full row: payload %s headers %s", f.Payload, f.Headers)
	}
	m := e.inboxRow(t, res[1].ID)
	if m.IdempotencyKey != "evt_2" || m.AggregateID != nil || m.EventType != nil || m.CorrelationID != nil ||
		!jsonEqual(t, m.Headers, []byte(`{}`)) || m.LastError != nil {
		t.Fatalf("minimal row: %+v, want null aggregate, event type, correlation id and error, headers {}", m)
	}
	if p := e.inboxRow(t, res[2].ID); p.Source != "orders" || p.Consumption != store.ConsumptionPull || p.State != store.InboxPending {
		t.Fatalf("pull row: source %s consumption %s state %s", p.Source, p.Consumption, p.State)
	}
	if d := e.inboxRow(t, res[3].ID); d.State != store.InboxDead || strOrNil(d.LastError) != "body is not JSON" {
		t.Fatalf("dead row: state %s last error %s", d.State, strOrNil(d.LastError))
	}
}

// testInboxInsertBatchInBatchDuplicates sends a batch that repeats keys: the first message of
// each key is stored and new, every later one is a duplicate, and the same key of another
// source is a different message.
func testInboxInsertBatchInBatchDuplicates(t *testing.T, e *env) {
	res := e.inboxInsertBatch(t,
		store.InboxInsertParams{Source: "s", IdempotencyKey: "b", Payload: payloadN(1)},
		store.InboxInsertParams{Source: "s", IdempotencyKey: "a", Payload: payloadN(2)},
		store.InboxInsertParams{Source: "s", IdempotencyKey: "b", Payload: payloadN(3)},
		store.InboxInsertParams{Source: "other", IdempotencyKey: "b", Payload: payloadN(4)},
		store.InboxInsertParams{Source: "s", IdempotencyKey: "a", Payload: payloadN(5)},
		store.InboxInsertParams{Source: "s", IdempotencyKey: "b", Payload: payloadN(6)},
	)
	wantNew := []bool{true, true, false, true, false, false}
	for i, r := range res {
		if r.Duplicate == wantNew[i] || (r.ID != "") != wantNew[i] {
			t.Errorf("message %d: %+v, want new %v", i, r, wantNew[i])
		}
	}
	if t.Failed() {
		return
	}
	rows := e.inboxRows(t)
	if len(rows) != 3 {
		t.Fatalf("stored %d rows, want 3", len(rows))
	}
	for i, n := range map[int]int{0: 1, 1: 2, 3: 4} {
		if r := e.inboxRow(t, res[i].ID); !jsonEqual(t, r.Payload, payloadN(n)) {
			t.Errorf("message %d: stored payload %s, want the first of its key %s", i, r.Payload, payloadN(n))
		}
	}
}

// testInboxInsertBatchExistingDuplicates sends a batch whose keys are partly stored: those are
// duplicates and their rows do not change.
func testInboxInsertBatchExistingDuplicates(t *testing.T, e *env) {
	old := e.inboxInsert(t, store.InboxInsertParams{Source: "s", IdempotencyKey: "k1", Payload: json.RawMessage(`{"v":"old"}`)})
	res := e.inboxInsertBatch(t,
		store.InboxInsertParams{Source: "s", IdempotencyKey: "k2", Payload: json.RawMessage(`{"v":"new"}`)},
		store.InboxInsertParams{Source: "s", IdempotencyKey: "k1", Payload: json.RawMessage(`{"v":"changed"}`)},
		store.InboxInsertParams{Source: "s", IdempotencyKey: "k3", Payload: json.RawMessage(`{"v":"new"}`)},
	)
	if res[0].Duplicate || res[0].ID == "" || !res[1].Duplicate || res[1].ID != "" || res[2].Duplicate || res[2].ID == "" {
		t.Fatalf("results %+v, want new, duplicate, new", res)
	}
	if rows := e.inboxRows(t); len(rows) != 3 {
		t.Fatalf("stored %d rows, want 3", len(rows))
	}
	if r := e.inboxRow(t, old.ID); !jsonEqual(t, r.Payload, []byte(`{"v":"old"}`)) {
		t.Fatalf("stored row of k1 has payload %s; a duplicate must not change it", r.Payload)
	}
	again := e.inboxInsertBatch(t,
		store.InboxInsertParams{Source: "s", IdempotencyKey: "k3", Payload: payloadN(1)},
		store.InboxInsertParams{Source: "s", IdempotencyKey: "k2", Payload: payloadN(1)},
	)
	for i, r := range again {
		if !r.Duplicate || r.ID != "" {
			t.Errorf("repeat %d: %+v, want a duplicate", i, r)
		}
	}
}

// testInboxInsertBatchIsAllOrNothing sends a batch with one value that the database refuses:
// the whole batch fails with ErrInvalidValue and nothing of it is stored.
func testInboxInsertBatchIsAllOrNothing(t *testing.T, e *env) {
	_, err := e.s.InboxInsertBatch(e.ctx, []store.InboxInsertParams{
		{Source: "s", IdempotencyKey: "a", Payload: payloadN(1)},
		{Source: "s", IdempotencyKey: "b", AggregateID: strings.Repeat("x", 300), Payload: payloadN(2)},
		{Source: "s", IdempotencyKey: "c", Payload: payloadN(3)},
	})
	if !errors.Is(err, store.ErrInvalidValue) {
		t.Fatalf("error %v, want store.ErrInvalidValue", err)
	}
	if rows := e.inboxRows(t); len(rows) != 0 {
		t.Fatalf("stored %d rows of a failed batch, want none", len(rows))
	}
	// The same keys without the refused value are new: the failed batch left nothing behind.
	res := e.inboxInsertBatch(t,
		store.InboxInsertParams{Source: "s", IdempotencyKey: "a", Payload: payloadN(1)},
		store.InboxInsertParams{Source: "s", IdempotencyKey: "c", Payload: payloadN(3)},
	)
	if res[0].Duplicate || res[1].Duplicate {
		t.Fatalf("results %+v after a failed batch, want two new rows", res)
	}
}

// testInboxInsertBatchConcurrentOverlappingKeys runs 50 batches at once, each of 10 keys out of
// 20 in its own order (with a repeat inside the batch): each key is stored once and reported
// new exactly once, with the id of its row.
func testInboxInsertBatchConcurrentOverlappingKeys(t *testing.T, e *env) {
	const batches, keys, perBatch = 50, 20, 10
	start := make(chan struct{})
	var mu sync.Mutex
	newIDs := map[string][]string{}
	results := map[string]int{}
	var wg sync.WaitGroup
	for b := 0; b < batches; b++ {
		wg.Go(func() {
			params := make([]store.InboxInsertParams, 0, perBatch+1)
			for j := 0; j < perBatch; j++ {
				// Even batches walk the keys upwards from their own offset, odd batches
				// downwards, so that batches meet the keys in both orders.
				k := (b + j) % keys
				if b%2 == 1 {
					k = (keys + b - j) % keys
				}
				params = append(params, store.InboxInsertParams{
					Source: "overlap", IdempotencyKey: fmt.Sprintf("k%02d", k), AggregateID: "a", Payload: payloadN(b),
				})
			}
			params = append(params, params[0]) // a repeat inside the batch
			<-start
			res, err := e.s.InboxInsertBatch(e.ctx, params)
			if err != nil {
				t.Errorf("batch %d: %v", b, err)
				return
			}
			if len(res) != len(params) {
				t.Errorf("batch %d: %d results for %d messages", b, len(res), len(params))
				return
			}
			if !res[len(res)-1].Duplicate {
				t.Errorf("batch %d: the repeat of its first key was not a duplicate: %+v", b, res[len(res)-1])
			}
			mu.Lock()
			defer mu.Unlock()
			for i, r := range res {
				key := params[i].IdempotencyKey
				results[key]++
				if !r.Duplicate {
					newIDs[key] = append(newIDs[key], r.ID)
				}
			}
		})
	}
	close(start)
	wg.Wait()
	if t.Failed() {
		return
	}
	rows := e.inboxRows(t)
	if len(rows) != len(newIDs) {
		t.Fatalf("stored %d rows for %d keys reported new", len(rows), len(newIDs))
	}
	seen := map[string]bool{}
	for _, r := range rows {
		if seen[r.IdempotencyKey] {
			t.Errorf("key %s is stored twice", r.IdempotencyKey)
		}
		seen[r.IdempotencyKey] = true
		if got := newIDs[r.IdempotencyKey]; len(got) != 1 || got[0] != r.ID {
			t.Errorf("key %s: new ids %v, want exactly [%s] (%d results)", r.IdempotencyKey, got, r.ID, results[r.IdempotencyKey])
		}
	}
}

func testInboxStats(t *testing.T, e *env) {
	st, err := e.s.InboxStats(e.ctx)
	if err != nil || st.Pending != 0 || st.OldestPendingAge != 0 {
		t.Fatalf("stats of an empty inbox: %+v, %v; want zero", st, err)
	}
	a := e.inboxInsert(t, store.InboxInsertParams{Source: "s", IdempotencyKey: "a"}).ID
	e.inboxInsert(t, store.InboxInsertParams{Source: "s", IdempotencyKey: "b"})
	pull := e.inboxInsert(t, store.InboxInsertParams{Source: "s", IdempotencyKey: "c", Consumption: store.ConsumptionPull}).ID
	dead := e.inboxInsert(t, store.InboxInsertParams{Source: "s", IdempotencyKey: "d", State: store.InboxDead}).ID
	e.relayClaim(t, 1) // a is processing, not pending
	e.changeInbox(t, a, Change{Age: 5 * time.Hour})
	e.changeInbox(t, dead, Change{Age: 5 * time.Hour})
	e.changeInbox(t, pull, Change{Age: time.Hour})
	st, err = e.s.InboxStats(e.ctx)
	if err != nil {
		t.Fatalf("reading stats: %v", err)
	}
	if st.Pending != 2 || st.OldestPendingAge < time.Hour || st.OldestPendingAge > time.Hour+time.Minute {
		t.Fatalf("stats: %+v, want 2 pending (push and pull), the oldest about 1h old", st)
	}
}

func testInboxDeleteFinished(t *testing.T, e *env) {
	var old, kept []string
	for i := 0; i < 4; i++ {
		id := e.inboxInsert(t, store.InboxInsertParams{Source: "s", IdempotencyKey: fmt.Sprintf("done-%d", i)}).ID
		if i < 3 {
			old = append(old, id)
		} else {
			kept = append(kept, id) // processed but new
		}
	}
	for _, m := range e.relayClaim(t, 4) {
		if ok, err := e.s.InboxRelayForward(e.ctx, forwardParams(m)); err != nil || !ok {
			t.Fatalf("forwarding: %v, %v", ok, err)
		}
	}
	processing := e.inboxInsert(t, store.InboxInsertParams{Source: "s", IdempotencyKey: "busy"}).ID
	if got := e.relayClaim(t, 1); !slices.Equal(inboxMsgIDs(got), []string{processing}) {
		t.Fatalf("claim: got %v, want [%s]", inboxMsgIDs(got), processing)
	}
	pending := e.inboxInsert(t, store.InboxInsertParams{Source: "s", IdempotencyKey: "waiting", Consumption: store.ConsumptionPull}).ID
	kept = append(kept, processing, pending)
	for i := 0; i < 2; i++ {
		old = append(old, e.inboxInsert(t, store.InboxInsertParams{Source: "s", IdempotencyKey: fmt.Sprintf("dead-%d", i), State: store.InboxDead}).ID)
	}
	for _, id := range append(slices.Clone(old), processing, pending) {
		e.changeInbox(t, id, Change{Age: 2 * time.Hour})
	}

	var counts []int64
	for i := 0; i < 6; i++ {
		n, err := e.s.InboxDeleteFinished(e.ctx, store.DeleteFinishedParams{MaxAge: time.Hour, Limit: 2})
		if err != nil {
			t.Fatalf("deleting: %v", err)
		}
		counts = append(counts, n)
		if n == 0 {
			break
		}
	}
	if !slices.Equal(counts, []int64{2, 2, 1, 0}) {
		t.Fatalf("batches deleted %v, want [2 2 1 0]", counts)
	}
	var left []string
	for _, r := range e.inboxRows(t) {
		left = append(left, r.ID)
	}
	if !sameSet(left, kept) {
		t.Fatalf("rows left %v, want %v", left, kept)
	}
	if _, err := e.s.InboxDeleteFinished(e.ctx, store.DeleteFinishedParams{MaxAge: time.Hour}); err == nil {
		t.Fatal("deleting with limit 0: got no error")
	}
}
