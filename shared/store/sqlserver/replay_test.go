package sqlserver

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/alternayte/queuebox/shared/store"
)

// The replay statements run against a SQL Server only in the integration suite
// (storetest's Replay cases, when QUEUEBOX_TEST_SQLSERVER_URL is set). These tests prove the
// Go side on the fake driver: the arguments, one statement per batch without a transaction
// around it, the answers and the errors.

func TestReplaySelectionArguments(t *testing.T) {
	t.Parallel()
	from := time.Date(2026, 9, 24, 10, 0, 0, 0, time.FixedZone("CEST", 2*3600))
	to := from.Add(time.Hour)
	ctx := context.Background()
	s, f := newFakeStore(t, func(string, []any) fakeAnswer {
		return fakeAnswer{columns: []string{"n"}, rows: [][]any{{int64(7)}}}
	})

	n, err := s.OutboxSelectionCount(ctx, store.OutboxSelection{})
	require.NoError(t, err)
	assert.Equal(t, int64(7), n)
	_, err = s.OutboxSelectionCount(ctx, store.OutboxSelection{
		States: []string{store.OutboxDead}, IDs: []string{strings.ToUpper(idA), "nope"}, Topics: []string{`we"ird`},
		CreatedFrom: &from, CreatedTo: &to,
	})
	require.NoError(t, err)
	_, err = s.InboxSelectionCount(ctx, store.InboxSelection{})
	require.NoError(t, err)
	_, err = s.InboxSelectionCount(ctx, store.InboxSelection{Sources: []string{"stripe"}, Consumption: store.ConsumptionPull, IDs: []string{"nope"}})
	require.NoError(t, err)

	sent := f.statements()
	require.Len(t, sent, 4)
	assert.Equal(t, []any{`["sent","dead"]`, nil, nil, nil, nil, nil}, sent[0].args, "the outbox default is sent and dead, no filter")
	assert.Equal(t, []any{`["dead"]`, `["` + idA + `"]`, `["we\"ird"]`, from.UTC(), to.UTC(), nil}, sent[1].args,
		"ids canonical, a non-UUID id dropped, names as JSON, times in UTC")
	assert.Equal(t, time.UTC, sent[1].args[3].(time.Time).Location())
	assert.Equal(t, []any{`["dead"]`, nil, nil, nil, nil, nil, nil}, sent[2].args, "the inbox default is dead rows of both consumptions")
	assert.Equal(t, []any{`["dead"]`, `[]`, `["stripe"]`, nil, nil, nil, "pull"}, sent[3].args,
		"ids that are all invalid keep the filter and match nothing")
	assert.Equal(t, []string{"query", "query", "query", "query"}, f.kinds(), "a count is one statement without a transaction")
}

func TestReplayScanPages(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	created := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	s, f := newFakeStore(t, func(query string, _ []any) fakeAnswer {
		if strings.Contains(query, "[source]") {
			return fakeAnswer{rows: [][]any{
				{idB, "stripe", "pull", "evt_1", "dead", int64(4), "handler failed", created, created.Add(time.Minute), nil, nil},
			}}
		}
		return fakeAnswer{rows: [][]any{
			{idA, "orders", "k1", "dead", int64(3), "HTTP 503", created, created.Add(time.Second), `{"n":1}`, `{"h":"v"}`},
			{idB, "orders", "", "sent", int64(1), "", created, created, nil, nil},
		}}
	})

	rows, err := s.OutboxSelectionScan(ctx, store.OutboxSelection{}, store.ScanParams{After: strings.ToUpper(idA), Limit: 2, Bodies: true})
	require.NoError(t, err)
	require.Len(t, rows, 2)
	assert.Equal(t, store.FinishedRow{
		ID: idA, Topic: "orders", Key: "k1", State: "dead", Attempt: 3, LastError: "HTTP 503",
		CreatedAt: created, UpdatedAt: created.Add(time.Second), Payload: []byte(`{"n":1}`), Headers: []byte(`{"h":"v"}`),
	}, rows[0])
	assert.Nil(t, rows[1].Payload, "a null body is no body")

	in, err := s.InboxSelectionScan(ctx, store.InboxSelection{}, store.ScanParams{After: "not-a-uuid", Limit: 5})
	require.NoError(t, err)
	assert.Equal(t, []store.FinishedRow{{
		ID: idB, Source: "stripe", Consumption: "pull", Key: "evt_1", State: "dead", Attempt: 4, LastError: "handler failed",
		CreatedAt: created, UpdatedAt: created.Add(time.Minute),
	}}, in)

	sent := f.statements()
	require.Len(t, sent, 2)
	assert.Equal(t, []any{`["sent","dead"]`, nil, nil, nil, nil, idA, int64(2), int64(1)}, sent[0].args, "the cursor canonical, page size, bodies")
	assert.Equal(t, []any{`["dead"]`, nil, nil, nil, nil, "ffffffff-ffff-ffff-ffff-ffffffffffff", nil, int64(5), int64(0)}, sent[1].args,
		"a cursor that is not a UUID starts after every row")

	_, err = s.OutboxSelectionScan(ctx, store.OutboxSelection{}, store.ScanParams{})
	assert.ErrorContains(t, err, "page size must be above 0")
	_, err = s.InboxSelectionScan(ctx, store.InboxSelection{}, store.ScanParams{Limit: -1})
	assert.ErrorContains(t, err, "page size must be above 0")
	assert.Len(t, f.statements(), 2, "a bad page size sends nothing")
}

func TestReplayBatchIsOneStatement(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	answers := []fakeAnswer{
		{rows: [][]any{{int64(2), idB}}},
		{rows: [][]any{{int64(0), nil}}},
		{err: sqlError(1205)}, // a deadlock victim runs again
		{rows: [][]any{{int64(1), idA}}},
	}
	calls := 0
	s, f := newFakeStore(t, func(string, []any) fakeAnswer {
		a := answers[calls]
		calls++
		return a
	})

	res, err := s.OutboxReplayBatch(ctx, store.OutboxSelection{States: []string{store.OutboxDead}}, "", 2)
	require.NoError(t, err)
	assert.Equal(t, store.ReplayBatchResult{Moved: 2, Last: idB}, res)
	res, err = s.OutboxReplayBatch(ctx, store.OutboxSelection{States: []string{store.OutboxDead}}, idB, 2)
	require.NoError(t, err)
	assert.Equal(t, store.ReplayBatchResult{}, res, "an empty batch has no last id")
	res, err = s.InboxReplayBatch(ctx, store.InboxSelection{}, "", 500)
	require.NoError(t, err)
	assert.Equal(t, store.ReplayBatchResult{Moved: 1, Last: idA}, res)

	assert.Equal(t, []string{"begin", "query", "commit", "begin", "query", "commit", "query", "query"}, f.kinds(),
		"an outbox batch is one statement with the MERGE of its replay generations in a transaction; an inbox batch "+
			"is one statement in its own implicit transaction; the deadlock victim ran again")
	sent := f.statements()
	st := s.stmt.replay
	assert.Equal(t, st.outboxBatch, sent[0].query)
	assert.Equal(t, []any{`["dead"]`, nil, nil, nil, nil, nil, int64(2)}, sent[0].args)
	assert.Equal(t, idB, sent[1].args[5], "the next batch starts after the last id")
	assert.Equal(t, st.inboxBatch, sent[3].query)
	assert.Equal(t, int64(500), sent[3].args[7])

	_, err = s.OutboxReplayBatch(ctx, store.OutboxSelection{}, "", 0)
	assert.ErrorContains(t, err, "batch size must be above 0")
	_, err = s.InboxReplayBatch(ctx, store.InboxSelection{}, "", 0)
	assert.ErrorContains(t, err, "batch size must be above 0")
	assert.Len(t, f.statements(), 4, "a bad batch size sends nothing")
}

func TestReplayBatchStatementsMoveOnlyFinishedRows(t *testing.T) {
	t.Parallel()
	st := mustStatements(t, store.DefaultNames()).replay
	for name, tt := range map[string]struct {
		text     string
		finished string
		cleared  []string
	}{
		"outbox": {st.outboxBatch, "[state] IN (N'sent', N'dead')",
			[]string{"[attempt] = 0", "[last_error] = NULL", "[claim_token] = NULL", "[lease_expires_at] = NULL", "[claimed_at] = NULL", "[scheduled_at] = SYSUTCDATETIME()"}},
		"inbox": {st.inboxBatch, "[state] IN (N'processed', N'dead')",
			[]string{"[attempt] = 0", "[last_error] = NULL", "[processed_at] = NULL", "[claim_token] = NULL", "[lease_expires_at] = NULL", "[scheduled_at] = SYSUTCDATETIME()"}},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			assert.Contains(t, tt.text, tt.finished, "whatever states the selection names, only finished rows move")
			assert.Contains(t, tt.text, "WITH (UPDLOCK, ROWLOCK)", "the picked rows are locked, so every picked row moves")
			assert.Contains(t, tt.text, "ORDER BY", "a batch takes the first rows in id order")
			assert.NotContains(t, strings.ToUpper(tt.text), "BEGIN TRAN", "a batch is one statement, never a long transaction")
			for _, c := range tt.cleared {
				assert.Contains(t, tt.text, c)
			}
		})
	}
}
