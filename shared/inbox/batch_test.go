package inbox_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/alternayte/queuebox/shared/inbox"
	"github.com/alternayte/queuebox/shared/store"
	"github.com/alternayte/queuebox/shared/store/postgres/dbtest"
)

// gateStore is the real store with a gate: the single insert of the key gateKey waits until
// the test opens the gate, so that a test can queue requests behind the only writer and
// release them as one batch. Every batch write is recorded, and may wait on batchGate.
type gateStore struct {
	store.InboxStore
	gateKey string
	entered chan struct{} // closed when the gated insert arrives
	gate    chan struct{} // closed by the test to let it through

	// batchEntered, when set, receives each batch when its write starts; batchGate, when
	// set, is waited on before the batch is written.
	batchEntered chan []string
	batchGate    chan struct{}

	mu      sync.Mutex
	batches [][]string // the idempotency keys of every batch, in order
}

func newGateStore(inner store.InboxStore, gateKey string) *gateStore {
	return &gateStore{InboxStore: inner, gateKey: gateKey, entered: make(chan struct{}), gate: make(chan struct{})}
}

func (g *gateStore) InboxInsert(ctx context.Context, p store.InboxInsertParams) (store.InboxInsertResult, error) {
	if p.IdempotencyKey == g.gateKey {
		close(g.entered)
		<-g.gate
	}
	return g.InboxStore.InboxInsert(ctx, p)
}

func (g *gateStore) InboxInsertBatch(ctx context.Context, ps []store.InboxInsertParams) ([]store.InboxInsertResult, error) {
	keys := make([]string, len(ps))
	for i, p := range ps {
		keys[i] = p.IdempotencyKey
	}
	g.mu.Lock()
	g.batches = append(g.batches, keys)
	g.mu.Unlock()
	if slices.Contains(keys, "panic") {
		panic("a bug in the store")
	}
	if g.batchEntered != nil {
		g.batchEntered <- keys
	}
	if g.batchGate != nil {
		<-g.batchGate
	}
	return g.InboxStore.InboxInsertBatch(ctx, ps)
}

func (g *gateStore) recorded() [][]string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([][]string(nil), g.batches...)
}

// waitFor polls cond until it holds, failing the test after a deadline.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// gatedEnv is a handler with one writer on a gateStore, and a first request (key "gate") that
// holds the writer until release.
type gatedEnv struct {
	*env
	gs        *gateStore
	gateReply chan response
}

func newGatedEnv(t *testing.T, src inbox.Source) *gatedEnv {
	t.Helper()
	var gs *gateStore
	e := newEnv(t, []inbox.Source{src}, func(o *inbox.Options) {
		gs = newGateStore(o.Store, "gate")
		o.Store = gs
		o.Writers = 1
	})
	g := &gatedEnv{env: e, gs: gs, gateReply: make(chan response, 1)}
	go func() { g.gateReply <- e.post(t, "/inbox"+src.Path, `{"id":"gate"}`, nil) }()
	select {
	case <-gs.entered:
	case <-time.After(30 * time.Second):
		t.Fatal("the gated request did not reach the store")
	}
	return g
}

// postAll posts the bodies at once and returns the answers in body order, once every row is
// queued behind the gate and the gate is released.
func (g *gatedEnv) postAll(t *testing.T, path string, bodies []string) []response {
	t.Helper()
	out := make([]response, len(bodies))
	var wg sync.WaitGroup
	for i, b := range bodies {
		wg.Go(func() { out[i] = g.post(t, path, b, nil) })
	}
	waitFor(t, fmt.Sprintf("%d queued rows", len(bodies)), func() bool { return g.handler.QueuedRows() == len(bodies) })
	close(g.gs.gate)
	wg.Wait()
	return out
}

func TestConcurrentRequestsShareOneBatch(t *testing.T) {
	t.Parallel()
	g := newGatedEnv(t, inbox.Source{Name: "orders", Path: "/orders", IdempotencyKeyPath: "$.id"})
	answers := g.postAll(t, "/inbox/orders", []string{
		`{"id":"a","v":1}`, `{"id":"b","v":1}`, `{"id":"a","v":2}`, `{"id":"c","v":1}`, `{"id":"a","v":3}`,
	})
	assert.Equal(t, http.StatusAccepted, (<-g.gateReply).status)

	batches := g.gs.recorded()
	require.Len(t, batches, 1, "the five queued rows are one batch")
	assert.ElementsMatch(t, []string{"a", "b", "a", "c", "a"}, batches[0])
	ids := map[string]string{}
	count := map[int]int{}
	for i, a := range answers {
		count[a.status]++
		if a.status == http.StatusAccepted {
			var body struct{ MessageID string }
			require.NoError(t, json.Unmarshal([]byte(a.body), &body), a.body)
			key := []string{"a", "b", "a", "c", "a"}[i]
			assert.Empty(t, ids[key], "key %s got two 202", key)
			ids[key] = body.MessageID
		} else {
			assertJSONAnswer(t, a, http.StatusOK, `{"status":"duplicate"}`)
		}
	}
	assert.Equal(t, map[int]int{http.StatusAccepted: 3, http.StatusOK: 2}, count, "one 202 per key of the batch")
	rows := g.rows(t, "orders")
	require.Len(t, rows, 4)
	for _, r := range rows {
		if r.Key != "gate" {
			assert.Equal(t, ids[r.Key], r.ID, "the 202 of key %s names its row", r.Key)
		}
	}
	assert.Equal(t, 4, g.metrics.get("message:new"))
	assert.Equal(t, 2, g.metrics.get("message:duplicate"))
	assert.EqualValues(t, 4, g.waker.n.Load(), "every stored push row wakes the relay, no duplicate does")
	waitFor(t, "the writers to end", g.handler.WritersIdle)
}

func TestFailedBatchAnswers500ToEveryRequest(t *testing.T) {
	t.Parallel()
	g := newGatedEnv(t, inbox.Source{Name: "s", Path: "/s", IdempotencyKeyPath: "$.id"})
	bodies := []string{`{"id":"x1"}`, `{"id":"x2"}`, `{"id":"x3"}`, `{"id":"x4"}`}
	out := make([]response, len(bodies))
	var wg sync.WaitGroup
	for i, b := range bodies {
		wg.Go(func() { out[i] = g.post(t, "/inbox/s", b, nil) })
	}
	waitFor(t, "4 queued rows", func() bool { return g.handler.QueuedRows() == len(bodies) })
	dbtest.Exec(t, g.pool, `DROP TABLE inbox`)
	close(g.gs.gate)
	wg.Wait()

	assertJSONAnswer(t, <-g.gateReply, http.StatusInternalServerError, `{"error":"Storage failed"}`)
	for _, r := range out {
		assertJSONAnswer(t, r, http.StatusInternalServerError, `{"error":"Storage failed"}`)
	}
	assert.Len(t, g.gs.recorded(), 1, "the four rows were one batch")
	assert.Equal(t, 5, g.metrics.get("rejection:storage_failed"))
	assert.EqualValues(t, 0, g.waker.n.Load())
	waitFor(t, "the writers to end", g.handler.WritersIdle)
}

func TestRefusedValueInABatchFailsOnlyItsRequest(t *testing.T) {
	t.Parallel()
	g := newGatedEnv(t, inbox.Source{Name: "s", Path: "/s", IdempotencyKeyPath: "$.id", Consumption: "pull"})
	answers := g.postAll(t, "/inbox/s", []string{`{"id":"ok-1"}`, `{"id":"nul","v":"a\u0000b"}`, `{"id":"ok-2"}`})
	assert.Equal(t, http.StatusAccepted, answers[0].status, answers[0].body)
	assertJSONAnswer(t, answers[1], http.StatusBadRequest, `{"error":"Invalid JSON"}`)
	assert.Equal(t, http.StatusAccepted, answers[2].status, answers[2].body)
	<-g.gateReply
	keys := []string{}
	for _, r := range g.rows(t, "s") {
		keys = append(keys, r.Key)
	}
	assert.ElementsMatch(t, []string{"gate", "ok-1", "ok-2"}, keys)
}

// TestRequestThatGoesAwayDoesNotBreakTheBatch cancels one request while it is queued and
// another while its batch is being written: each gets its own error at once, and the batch
// stores every row that was in it when the write began.
func TestRequestThatGoesAwayDoesNotBreakTheBatch(t *testing.T) {
	t.Parallel()
	var gs *gateStore
	e := newEnv(t, []inbox.Source{{Name: "s", Path: "/s", IdempotencyKeyPath: "$.id"}}, func(o *inbox.Options) {
		gs = newGateStore(o.Store, "gate")
		gs.batchEntered = make(chan []string, 1)
		gs.batchGate = make(chan struct{})
		o.Store = gs
		o.Writers = 1
	})
	serve := func(ctx context.Context, key string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodPost, "/inbox/s", strings.NewReader(`{"id":"`+key+`"}`)).WithContext(ctx)
		rec := httptest.NewRecorder()
		e.handler.ServeHTTP(rec, req)
		return rec
	}
	gateDone := make(chan *httptest.ResponseRecorder, 1)
	go func() { gateDone <- serve(context.Background(), "gate") }()
	<-gs.entered

	ctxs := map[string]context.CancelFunc{}
	answers := map[string]chan *httptest.ResponseRecorder{}
	for _, key := range []string{"stays", "leaves-queued", "leaves-writing"} {
		ctx, cancel := context.WithCancel(context.Background())
		t.Cleanup(cancel)
		ctxs[key] = cancel
		answers[key] = make(chan *httptest.ResponseRecorder, 1)
		go func() { answers[key] <- serve(ctx, key) }()
		waitFor(t, key+" queued", func() bool { return e.handler.QueuedRows() == len(answers) })
	}
	// A request that goes away while queued is answered at once and left out of the batch.
	ctxs["leaves-queued"]()
	assertJSONAnswer(t, recorded(<-answers["leaves-queued"]), http.StatusInternalServerError, `{"error":"Storage failed"}`)

	close(gs.gate)
	require.Equal(t, http.StatusAccepted, (<-gateDone).Code)
	batch := <-gs.batchEntered
	assert.ElementsMatch(t, []string{"stays", "leaves-writing"}, batch)
	// A request that goes away while its batch is written does not cancel the write.
	ctxs["leaves-writing"]()
	assertJSONAnswer(t, recorded(<-answers["leaves-writing"]), http.StatusInternalServerError, `{"error":"Storage failed"}`)
	close(gs.batchGate)
	assert.Equal(t, http.StatusAccepted, (<-answers["stays"]).Code)

	keys := []string{}
	for _, r := range e.rows(t, "s") {
		keys = append(keys, r.Key)
	}
	assert.ElementsMatch(t, []string{"gate", "stays", "leaves-writing"}, keys,
		"the batch stored both of its rows; the request that left while queued stored nothing")
	waitFor(t, "the writers to end", e.handler.WritersIdle)
}

// recorded turns a recorder into a response.
func recorded(rec *httptest.ResponseRecorder) response {
	return response{status: rec.Code, body: rec.Body.String(), headers: rec.Header()}
}

func TestManyConcurrentRequestsStoreEachKeyOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t, []inbox.Source{{Name: "s", Path: "/s", IdempotencyKeyPath: "$.id"}}, func(o *inbox.Options) { o.MaxBatch = 7 })
	const keys, copies = 40, 3
	type answer struct {
		key string
		res response
	}
	out := make(chan answer, keys*copies)
	var wg sync.WaitGroup
	for c := range copies {
		for k := range keys {
			wg.Go(func() {
				key := fmt.Sprintf("k%d", (k+c*7)%keys)
				out <- answer{key, e.post(t, "/inbox/s", `{"id":"`+key+`"}`, nil)}
			})
		}
	}
	wg.Wait()
	close(out)
	ids := map[string][]string{}
	for a := range out {
		switch a.res.status {
		case http.StatusAccepted:
			var body struct{ MessageID string }
			require.NoError(t, json.Unmarshal([]byte(a.res.body), &body))
			ids[a.key] = append(ids[a.key], body.MessageID)
		case http.StatusOK:
		default:
			t.Errorf("key %s: %d %s", a.key, a.res.status, a.res.body)
		}
	}
	rows := e.rows(t, "s")
	require.Len(t, rows, keys)
	for _, r := range rows {
		assert.Equal(t, []string{r.ID}, ids[r.Key], "key %s: exactly one 202, naming its row", r.Key)
	}
	assert.Equal(t, keys, e.metrics.get("message:new"))
	assert.Equal(t, keys*(copies-1), e.metrics.get("message:duplicate"))
	waitFor(t, "the writers to end", e.handler.WritersIdle)
}

// TestStorePanicFailsOnlyItsBatch makes the store panic on a batch: each request of the batch
// gets 500, and the next request is stored, because the writer's place was handed on.
func TestStorePanicFailsOnlyItsBatch(t *testing.T) {
	t.Parallel()
	g := newGatedEnv(t, inbox.Source{Name: "s", Path: "/s", IdempotencyKeyPath: "$.id"})
	answers := g.postAll(t, "/inbox/s", []string{`{"id":"panic"}`, `{"id":"other"}`})
	for _, a := range answers {
		assertJSONAnswer(t, a, http.StatusInternalServerError, `{"error":"Storage failed"}`)
	}
	assert.Equal(t, http.StatusAccepted, (<-g.gateReply).status)
	waitFor(t, "the writers to end", g.handler.WritersIdle)
	assert.Equal(t, http.StatusAccepted, g.post(t, "/inbox/s", `{"id":"after"}`, nil).status)
	keys := []string{}
	for _, r := range g.rows(t, "s") {
		keys = append(keys, r.Key)
	}
	assert.ElementsMatch(t, []string{"gate", "after"}, keys)
}
