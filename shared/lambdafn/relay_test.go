package lambdafn_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/alternayte/queuebox/shared/config"
	"github.com/alternayte/queuebox/shared/lambdafn"
	"github.com/alternayte/queuebox/shared/service"
	"github.com/alternayte/queuebox/shared/store"
	"github.com/alternayte/queuebox/shared/store/postgres/dbtest"
)

// relayFunction is a relay function built as functions/relay/main.go builds it, on a private
// migrated database with one push HTTP source, orders.
type relayFunction struct {
	rt      *lambdafn.Runtime
	pool    *pgxpool.Pool
	logs    *syncBuffer
	handler lambda.Handler
}

func newRelayFunction(t *testing.T, extra map[string]string) *relayFunction {
	t.Helper()
	pool, dbURL := dbtest.Migrated(t)
	env := map[string]string{
		"QUEUEBOX_DATABASE_URL":                      dbURL,
		"QUEUEBOX_DATABASE_USERNAME":                 "postgres",
		"QUEUEBOX_DATABASE_PASSWORD":                 "unused-with-trust-auth",
		"QUEUEBOX_DATABASE_MIGRATE":                  "false",
		"QUEUEBOX_INBOX_RELAY_POLLINTERVALMS":        "50",
		"QUEUEBOX_SOURCES_ORDERS_TYPE":               "http",
		"QUEUEBOX_SOURCES_ORDERS_PATH":               "/orders",
		"QUEUEBOX_SOURCES_ORDERS_IDEMPOTENCYKEYPATH": "$.id",
		"QUEUEBOX_SOURCES_ORDERS_EVENTTYPEPATH":      "$.type",
		"QUEUEBOX_SOURCES_ORDERS_TOPIC":              "orders.{{ eventType }}",
	}
	maps.Copy(env, extra)
	logs := &syncBuffer{}
	var out io.Writer = logs
	if testing.Verbose() {
		out = io.MultiWriter(logs, os.Stderr)
	}
	rt, err := lambdafn.Init(context.Background(), lambdafn.Options{
		Load:      config.LoadOptions{Env: env, ReadFile: noFile},
		LogOutput: out,
	})
	require.NoError(t, err, "Init")
	t.Cleanup(rt.Close)
	app, err := rt.Build(context.Background(), service.AppOptions{Relay: service.Always})
	require.NoError(t, err, "Build")
	r := app.Relay
	return &relayFunction{
		rt: rt, pool: pool, logs: logs,
		handler: lambda.NewHandler(lambdafn.RelayHandler(r, rt.Settings, rt.Log)),
	}
}

// store writes n pending push rows of the orders source, one aggregate each.
func (f *relayFunction) store(t *testing.T, n int, prefix string) []string {
	t.Helper()
	ids := make([]string, n)
	for i := range ids {
		res, err := f.rt.DB.Store.InboxInsert(context.Background(), store.InboxInsertParams{
			Source: "orders", IdempotencyKey: fmt.Sprintf("%s-%d", prefix, i),
			AggregateID: fmt.Sprintf("%s-agg-%d", prefix, i), EventType: "created",
			Payload:     json.RawMessage(fmt.Sprintf(`{"id":"%s-%d"}`, prefix, i)),
			Consumption: store.ConsumptionPush,
		})
		require.NoError(t, err, "storing an inbox row")
		require.False(t, res.Duplicate)
		ids[i] = res.ID
	}
	return ids
}

func (f *relayFunction) invoke(t *testing.T, ctx context.Context) (map[string]int, time.Time) {
	t.Helper()
	resp, err := f.handler.Invoke(ctx, scheduledEvent(t))
	returned := time.Now()
	require.NoError(t, err, "Invoke")
	var sum map[string]int
	require.NoError(t, json.Unmarshal(resp, &sum), "response %s is not a summary", resp)
	return sum, returned
}

func (f *relayFunction) inboxState(t *testing.T, id string) string {
	t.Helper()
	var state string
	require.NoError(t, f.pool.QueryRow(context.Background(), `SELECT state FROM inbox WHERE id = $1`, id).Scan(&state))
	return state
}

// outboxRows returns the key and topic of every outbox row, by key.
func (f *relayFunction) outboxRows(t *testing.T) map[string]string {
	t.Helper()
	rows, err := f.pool.Query(context.Background(), `SELECT key, topic FROM outbox`)
	require.NoError(t, err)
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var key, topic string
		require.NoError(t, rows.Scan(&key, &topic))
		out[key] = topic
	}
	require.NoError(t, rows.Err())
	return out
}

// relaySummary is the response of an invocation with the given counts; the others are 0.
func relaySummary(claimed, forwarded int) map[string]int {
	return map[string]int{"claimed": claimed, "forwarded": forwarded, "dead": 0, "claimsLost": 0,
		"reclaimed": 0, "failed": 0, "abandoned": 0}
}

func TestRelayDrainForwardsAndReturns(t *testing.T) {
	t.Parallel()
	f := newRelayFunction(t, map[string]string{"LAMBDA_MARGIN_MS": "500"})
	ids := f.store(t, 3, "first")

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	deadline, _ := ctx.Deadline()
	claimUntil := deadline.Add(-500 * time.Millisecond)
	sum, returned := f.invoke(t, ctx)

	// Drain returns on the first empty claim, long before it would stop claiming.
	assert.True(t, returned.Before(claimUntil), "the drain returned %s after it stopped claiming", returned.Sub(claimUntil))
	assert.Equal(t, relaySummary(3, 3), sum)
	for _, id := range ids {
		assert.Equal(t, "processed", f.inboxState(t, id), "inbox row %s", id)
	}
	assert.Equal(t, map[string]string{
		"first-agg-0": "orders.created", "first-agg-1": "orders.created", "first-agg-2": "orders.created",
	}, f.outboxRows(t))
	logged := f.logs.lines(t, "relay invocation finished")
	if assert.Len(t, logged, 1) {
		assert.Equal(t, 3.0, logged[0]["forwarded"])
		assert.Equal(t, "drain", logged[0]["mode"])
	}

	// A warm container: the next invocation reuses the relay and the pool.
	more := f.store(t, 1, "later")
	ctx2, cancel2 := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel2()
	deadline2, _ := ctx2.Deadline()
	sum, returned = f.invoke(t, ctx2)
	assert.True(t, returned.Before(deadline2.Add(-500*time.Millisecond)), "the warm drain did not return at once")
	assert.Equal(t, relaySummary(1, 1), sum)
	assert.Equal(t, "processed", f.inboxState(t, more[0]))
	assert.Len(t, f.outboxRows(t), 4)
}

func TestRelayContinuousClaimsUntilTheMargin(t *testing.T) {
	t.Parallel()
	// A margin of seconds: the run's work is cut a quarter of it before the deadline, and a
	// loaded machine needs that second to return.
	f := newRelayFunction(t, map[string]string{"LAMBDA_MODE": "continuous", "LAMBDA_MARGIN_MS": "4000"})
	first := f.store(t, 1, "first")

	// Twenty seconds: the test inserts and waits for its rows while the handler claims (until
	// four seconds before the deadline), and a loaded machine may take seconds for them.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	deadline, _ := ctx.Deadline()
	claimUntil := deadline.Add(-4 * time.Second)
	type outcome struct {
		sum      map[string]int
		returned time.Time
	}
	done := make(chan outcome, 1)
	go func() {
		sum, returned := f.invoke(t, ctx)
		done <- outcome{sum, returned}
	}()

	// Once the first row is processed nothing is pending: a drain would return now.
	waitFor(t, claimUntil, "the first row to be forwarded", func() bool { return f.inboxState(t, first[0]) == "processed" })
	second := f.store(t, 1, "second")
	waitFor(t, claimUntil, "the second row to be forwarded", func() bool { return f.inboxState(t, second[0]) == "processed" })

	var got outcome
	select {
	case got = <-done:
	case <-time.After(time.Until(deadline) + 2*time.Second):
		t.Fatal("the handler did not return")
	}
	assert.False(t, got.returned.Before(claimUntil), "continuous mode returned %s before it stopped claiming", claimUntil.Sub(got.returned))
	assert.True(t, got.returned.Before(deadline), "the handler returned %s after the deadline", got.returned.Sub(deadline))
	assert.Equal(t, relaySummary(2, 2), got.sum)
}
