package admin_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"
)

// seedFinished seeds the rows of TestReplay in their states.
func seedFinished(t *testing.T, e *env) map[string]string {
	t.Helper()
	ids := seed(t, e, map[string]string{
		"deadInvoice": "invoice.paid", "sentInvoice": "invoice.sent", "pendingInvoice": "invoice.paid",
		"sentOrder": "order.created", "deadOrderOld": "order.created", "processingOrder": "order.created",
	})
	setState(t, e, ids["deadInvoice"], "dead", time.Hour)
	setState(t, e, ids["sentInvoice"], "sent", time.Hour)
	setState(t, e, ids["pendingInvoice"], "pending", time.Hour)
	setState(t, e, ids["sentOrder"], "sent", time.Hour)
	setState(t, e, ids["deadOrderOld"], "dead", 48*time.Hour)
	setState(t, e, ids["processingOrder"], "processing", time.Hour)
	return ids
}

func states(t *testing.T, e *env) map[string]int {
	t.Helper()
	rows, err := e.pool.Query(context.Background(), `SELECT state, count(*) FROM outbox GROUP BY state`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var s string
		var n int
		if err := rows.Scan(&s, &n); err != nil {
			t.Fatal(err)
		}
		out[s] = n
	}
	return out
}

func TestSafeReplayWithStatesDeadMovesOnlyDeadRows(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	ids := seedFinished(t, e)
	code, body := e.post(t, "/admin/replay", `{"topic":"order.created","states":["dead"]}`, true)
	if code != 200 || body != `{"moved":1,"batches":1}` {
		t.Fatalf("%d %s", code, body)
	}
	if r := readRow(t, e, ids["deadOrderOld"]); r.State != "pending" || r.Attempt != 0 || r.LastError != nil {
		t.Errorf("the dead row after the replay: %+v", r)
	}
	if r := readRow(t, e, ids["sentOrder"]); r.State != "sent" {
		t.Errorf("a sent row moved with states [dead]: %+v", r)
	}
	// states alone is a filter: every dead row moves, nothing else.
	code, body = e.post(t, "/admin/replay", `{"states":["dead"]}`, true)
	if code != 200 || body != `{"moved":1,"batches":1}` {
		t.Fatalf("states alone: %d %s", code, body)
	}
	if got := states(t, e); got["dead"] != 0 || got["sent"] != 2 || got["processing"] != 1 || got["pending"] != 3 {
		t.Errorf("states after the replays: %v", got)
	}
}

func TestSafeReplayDryRunCountsExactlyAndChangesNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	ids := seedFinished(t, e)
	before := states(t, e)
	code, body := e.post(t, "/admin/replay", `{"topic":"order.created","dryRun":true}`, true)
	if code != 200 {
		t.Fatalf("%d %s", code, body)
	}
	var got struct {
		Moved  int64    `json:"moved"`
		DryRun bool     `json:"dryRun"`
		Count  int64    `json:"count"`
		Sample []string `json:"sample"`
	}
	if err := json.Unmarshal([]byte(body), &got); err != nil {
		t.Fatal(err)
	}
	want := []string{ids["sentOrder"], ids["deadOrderOld"]}
	slices.Sort(want)
	slices.Sort(got.Sample)
	if !got.DryRun || got.Moved != 0 || got.Count != 2 || !slices.Equal(got.Sample, want) {
		t.Errorf("dry run = %+v, want count 2 and sample %v", got, want)
	}
	if after := states(t, e); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("a dry run changed the states: %v -> %v", before, after)
	}
	// The limit caps the count as it caps the move.
	code, body = e.post(t, "/admin/replay", `{"topic":"order.created","dryRun":true,"limit":1}`, true)
	if code != 200 || !json.Valid([]byte(body)) {
		t.Fatalf("%d %s", code, body)
	}
	if err := json.Unmarshal([]byte(body), &got); err != nil || got.Count != 1 || len(got.Sample) != 1 {
		t.Errorf("dry run with limit 1 = %s", body)
	}
}

// TestABigReplayMovesInShortBatches moves 60 000 of 100 000 dead rows with batchSize 5 000 and
// a rate cap of 200 000 rows a second (so the run waits between batches): 12 batches, each its own transaction (the moved rows carry 12 distinct xmin transaction ids,
// none more than 5 000 rows), and the other 40 000 stay dead.
func TestABigReplayMovesInShortBatches(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	ctx := context.Background()
	if _, err := e.pool.Exec(ctx, `INSERT INTO outbox (topic, payload, state, attempt, last_error)
		SELECT 'order.created', jsonb_build_object('n', g), 'dead', 5, 'HTTP 503' FROM generate_series(1, 100000) g`); err != nil {
		t.Fatal(err)
	}
	code, body := e.post(t, "/admin/replay", `{"states":["dead"],"limit":60000,"batchSize":5000,"rowsPerSecond":200000}`, true)
	if code != 200 || body != `{"moved":60000,"batches":12}` {
		t.Fatalf("%d %s", code, body)
	}
	if got := states(t, e); got["pending"] != 60000 || got["dead"] != 40000 {
		t.Errorf("states after the replay: %v", got)
	}
	var txs, largest int
	if err := e.pool.QueryRow(ctx, `SELECT count(*), max(n) FROM (SELECT xmin::text, count(*) AS n FROM outbox WHERE state = 'pending' GROUP BY 1) x`).Scan(&txs, &largest); err != nil {
		t.Fatal(err)
	}
	if txs != 12 || largest > 5000 {
		t.Errorf("the moved rows came from %d transactions, the largest of %d rows; want 12 of at most 5000", txs, largest)
	}
}

func TestSafeReplayRefusals(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	tests := []struct{ name, path, body, want string }{
		{"a state that never moves", "/admin/replay", `{"topic":"x","states":["pending"]}`, `{"error":"Invalid request: states may hold only [sent dead], not \"pending\""}`},
		{"no state", "/admin/replay", `{"topic":"x","states":[]}`, `{"error":"Invalid request: states must name at least one of [sent dead]"}`},
		{"limit 0", "/admin/replay", `{"topic":"x","limit":0}`, `{"error":"Invalid request: limit must be above 0"}`},
		{"batch too big", "/admin/replay", `{"topic":"x","batchSize":20000}`, `{"error":"Invalid request: batchSize must be between 1 and 10000"}`},
		{"negative rate", "/admin/replay", `{"topic":"x","rowsPerSecond":-1}`, `{"error":"Invalid request: rowsPerSecond must be above 0 and at most 1000000"}`},
		{"wrong type", "/admin/replay", `{"topic":"x","limit":"all"}`, `{"error":"Invalid request: field limit must be an integer"}`},
		{"inbox: no filter", "/admin/inbox/replay", `{}`, `{"error":"A replay needs at least one filter."}`},
		{"inbox: a state that never moves", "/admin/inbox/replay", `{"states":["sent"]}`, `{"error":"Invalid request: states may hold only [processed dead], not \"sent\""}`},
		{"inbox: consumption", "/admin/inbox/replay", `{"consumption":"both"}`, `{"error":"Invalid request: consumption must be push or pull"}`},
	}
	for _, tt := range tests {
		if code, body := e.post(t, tt.path, tt.body, true); code != 400 || body != tt.want {
			t.Errorf("%s: %d %s; want 400 %s", tt.name, code, body, tt.want)
		}
	}
	if code, body := e.post(t, "/admin/inbox/replay", `{"sources":["a"]}`, false); code != 401 {
		t.Errorf("inbox replay without credentials: %d %s", code, body)
	}
}

// TestInboxReplayReopensDeadAndProcessedRows re-relays dead push rows (the default state) of one
// source, and re-opens processed pull rows, leaving every other row as it was.
func TestInboxReplayReopensDeadAndProcessedRows(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	ctx := context.Background()
	insert := func(key, source, consumption, state string) string {
		var id string
		if err := e.pool.QueryRow(ctx, `INSERT INTO inbox (source, idempotency_key, payload, consumption, state, attempt, last_error, processed_at)
			VALUES ($1, $2, '{}', $3, $4::text, 2, 'boom', CASE WHEN $4::text IN ('processed', 'dead') THEN now() END) RETURNING id::text`,
			source, key, consumption, state).Scan(&id); err != nil {
			t.Fatal(err)
		}
		return id
	}
	deadPush := insert("1", "stripe", "push", "dead")
	deadOther := insert("2", "github", "push", "dead")
	processedPush := insert("3", "stripe", "push", "processed")
	processedPull := insert("4", "orders", "pull", "processed")
	pending := insert("5", "stripe", "push", "pending")
	state := func(id string) (s string, attempt int, lastError *string) {
		if err := e.pool.QueryRow(ctx, `SELECT state, attempt, last_error FROM inbox WHERE id = $1`, id).Scan(&s, &attempt, &lastError); err != nil {
			t.Fatal(err)
		}
		return
	}
	code, body := e.post(t, "/admin/inbox/replay", `{"sources":["stripe"]}`, true)
	if code != 200 || body != `{"moved":1,"batches":1}` {
		t.Fatalf("%d %s", code, body)
	}
	if s, a, le := state(deadPush); s != "pending" || a != 0 || le != nil {
		t.Errorf("the dead stripe row: %s %d %v", s, a, le)
	}
	for name, id := range map[string]string{"github dead": deadOther, "stripe processed": processedPush, "pull processed": processedPull} {
		if s, _, _ := state(id); s == "pending" {
			t.Errorf("%s moved without being selected", name)
		}
	}
	code, body = e.post(t, "/admin/inbox/replay", `{"states":["processed"],"consumption":"pull","dryRun":true}`, true)
	if code != 200 || body != fmt.Sprintf(`{"moved":0,"dryRun":true,"count":1,"sample":[%q]}`, processedPull) {
		t.Fatalf("dry run: %d %s", code, body)
	}
	code, body = e.post(t, "/admin/inbox/replay", `{"states":["processed"],"consumption":"pull"}`, true)
	if code != 200 || body != `{"moved":1,"batches":1}` {
		t.Fatalf("%d %s", code, body)
	}
	if s, _, _ := state(processedPull); s != "pending" {
		t.Errorf("the processed pull row was not re-opened: %s", s)
	}
	if s, _, _ := state(processedPush); s != "processed" {
		t.Errorf("a processed push row moved: %s", s)
	}
	if s, _, _ := state(pending); s != "pending" {
		t.Errorf("the pending row changed: %s", s)
	}
}
