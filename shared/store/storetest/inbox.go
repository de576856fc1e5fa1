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

func schemaTests() []testCase {
	return []testCase{
		{name: "PingAndCheckSchema", custom: true, run: testPingAndCheckSchema},
		{name: "CheckSchemaNamesMissingColumns", run: testCheckSchemaNamesMissingColumns},
	}
}

func testPingAndCheckSchema(t *testing.T, e *env) {
	if err := e.s.Ping(e.ctx); err != nil {
		t.Fatalf("pinging: %v", err)
	}
	if err := e.s.CheckSchema(e.ctx); err != nil {
		t.Fatalf("checking a complete schema: %v", err)
	}
}

func testCheckSchemaNamesMissingColumns(t *testing.T, e *env) {
	s, _ := e.open(t, SchemaCustomIncomplete)
	err := s.CheckSchema(e.ctx)
	if err == nil {
		t.Fatal("checking a schema without inbox headers and outbox sequence: got no error")
	}
	msg := err.Error()
	for _, want := range []string{"qb_inbox", "headers", "qb_outbox", "sequence", "ALTER TABLE"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q does not contain %q", msg, want)
		}
	}
	if strings.Count(msg, "ALTER TABLE") < 2 {
		t.Errorf("error %q carries fewer than two ALTER TABLE statements", msg)
	}
}
