package lambdafn_test

import (
	"context"
	"encoding/json"
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
	"github.com/alternayte/queuebox/shared/retention"
	"github.com/alternayte/queuebox/shared/service"
	"github.com/alternayte/queuebox/shared/store/postgres/dbtest"
)

// retentionFunction is a retention function built as functions/retention/main.go builds it,
// on a private migrated database: outbox AGE 7d and inbox AGE 30d, 100 rows per statement.
type retentionFunction struct {
	pool    *pgxpool.Pool
	logs    *syncBuffer
	handler lambda.Handler
}

func newRetentionFunction(t *testing.T, extra map[string]string) *retentionFunction {
	t.Helper()
	pool, dbURL := dbtest.Migrated(t)
	env := map[string]string{
		"QUEUEBOX_DATABASE_URL":               dbURL,
		"QUEUEBOX_DATABASE_USERNAME":          "postgres",
		"QUEUEBOX_DATABASE_PASSWORD":          "unused-with-trust-auth",
		"QUEUEBOX_DATABASE_MIGRATE":           "false",
		"QUEUEBOX_RETENTION_ENABLED":          "true",
		"QUEUEBOX_RETENTION_OUTBOX_POLICY":    "AGE",
		"QUEUEBOX_RETENTION_OUTBOX_MAXAGE":    "7d",
		"QUEUEBOX_RETENTION_OUTBOX_BATCHSIZE": "100",
		"QUEUEBOX_RETENTION_INBOX_POLICY":     "AGE",
		"QUEUEBOX_RETENTION_INBOX_MAXAGE":     "30d",
		"QUEUEBOX_RETENTION_INBOX_BATCHSIZE":  "100",
		lambdafn.MarginVariable:               "500",
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
	cleaner, err := retention.New(retention.Options{
		Store: rt.DB.Store, Config: service.RetentionConfig(rt.Config), Metrics: rt.RetentionMetrics(), Logger: rt.Log,
	})
	require.NoError(t, err, "retention.New")
	return &retentionFunction{
		pool: pool, logs: logs,
		// The handler goes through aws-lambda-go's own decoding and encoding, as under Start.
		handler: lambda.NewHandler(lambdafn.RetentionHandler(cleaner, rt.Settings, rt.Log)),
	}
}

// rows inserts n rows into table ("outbox" or "inbox") in state, with updated_at and
// created_at made age old.
func (f *retentionFunction) rows(t *testing.T, table string, n int, state, age string) {
	t.Helper()
	switch table {
	case "outbox":
		dbtest.Exec(t, f.pool, `
			INSERT INTO outbox (topic, payload) SELECT 'order.created', '{}'::jsonb FROM generate_series(1, $1)`, n)
		dbtest.Exec(t, f.pool, `
			UPDATE outbox SET state = $1::text, updated_at = now() - $2::interval, created_at = now() - $2::interval
			WHERE state = 'pending' AND created_at > now() - interval '1 minute'`, state, age)
	case "inbox":
		dbtest.Exec(t, f.pool, `
			INSERT INTO inbox (source, idempotency_key, payload, state, created_at)
			SELECT 'stripe', gen_random_uuid()::text, '{}'::jsonb, $2::text, now() - $3::interval
			FROM generate_series(1, $1)`, n, state, age)
	default:
		t.Fatalf("no table %s", table)
	}
}

// states counts the rows of table per state.
func (f *retentionFunction) states(t *testing.T, table string) map[string]int {
	t.Helper()
	rows, err := f.pool.Query(context.Background(), `SELECT state, count(*) FROM `+table+` GROUP BY state`)
	require.NoError(t, err)
	out := map[string]int{}
	for rows.Next() {
		var s string
		var n int
		require.NoError(t, rows.Scan(&s, &n))
		out[s] = n
	}
	require.NoError(t, rows.Err())
	return out
}

// tableResult is one entry of the handler's response.
type tableResult struct {
	Table      string `json:"table"`
	Policy     string `json:"policy"`
	Deleted    int64  `json:"deleted"`
	Statements int    `json:"statements"`
	Complete   bool   `json:"complete"`
	Error      string `json:"error"`
}

func (f *retentionFunction) invoke(t *testing.T, ctx context.Context) ([]tableResult, error) {
	t.Helper()
	resp, err := f.handler.Invoke(ctx, scheduledEvent(t))
	if err != nil {
		return nil, err
	}
	var body struct {
		Tables []tableResult `json:"tables"`
	}
	require.NoError(t, json.Unmarshal(resp, &body), "response %s", resp)
	return body.Tables, nil
}

func TestRetentionDeletesDueRowsInOneInvocation(t *testing.T) {
	t.Parallel()
	f := newRetentionFunction(t, nil)
	f.rows(t, "outbox", 230, "sent", "10 days")
	f.rows(t, "outbox", 20, "dead", "10 days")
	f.rows(t, "outbox", 4, "processing", "10 days")
	f.rows(t, "outbox", 3, "sent", "1 day")
	f.rows(t, "outbox", 2, "pending", "10 days")
	f.rows(t, "inbox", 3, "processed", "40 days")
	f.rows(t, "inbox", 1, "dead", "40 days")
	f.rows(t, "inbox", 2, "pending", "40 days")
	f.rows(t, "inbox", 2, "processed", "20 days")
	require.Equal(t, map[string]int{"sent": 233, "dead": 20, "processing": 4, "pending": 2}, f.states(t, "outbox"))

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	got, err := f.invoke(t, ctx)
	require.NoError(t, err)

	assert.Equal(t, []tableResult{
		{Table: "outbox", Policy: "AGE", Deleted: 250, Statements: 3, Complete: true},
		{Table: "inbox", Policy: "AGE", Deleted: 4, Statements: 1, Complete: true},
	}, got)
	assert.Equal(t, map[string]int{"sent": 3, "processing": 4, "pending": 2}, f.states(t, "outbox"))
	assert.Equal(t, map[string]int{"processed": 2, "pending": 2}, f.states(t, "inbox"))
	logged := f.logs.lines(t, "retention invocation finished")
	require.Len(t, logged, 1)
	assert.Equal(t, 254.0, logged[0]["deleted"])
	assert.Equal(t, true, logged[0]["complete"])

	// A warm container: the next invocation finds nothing.
	got, err = f.invoke(t, ctx)
	require.NoError(t, err)
	assert.Equal(t, []tableResult{
		{Table: "outbox", Policy: "AGE", Deleted: 0, Statements: 1, Complete: true},
		{Table: "inbox", Policy: "AGE", Deleted: 0, Statements: 1, Complete: true},
	}, got)
}

func TestRetentionInvocationFailsWhenATableFails(t *testing.T) {
	t.Parallel()
	f := newRetentionFunction(t, nil)
	f.rows(t, "outbox", 5, "sent", "10 days")
	dbtest.Exec(t, f.pool, `ALTER TABLE inbox RENAME TO inbox_elsewhere`)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := f.invoke(t, ctx)

	require.Error(t, err)
	assert.Contains(t, err.Error(), "the inbox cleanup failed")
	assert.Empty(t, f.states(t, "outbox"), "the outbox ran before the inbox failed")
	failed := f.logs.lines(t, "retention cleanup failed")
	require.Len(t, failed, 1)
	assert.Equal(t, "inbox", failed[0]["table"])
	assert.Contains(t, failed[0]["error"], "does not exist")
}

func TestRetentionCleansNothingWhenTheDeadlineIsWithinTheMargin(t *testing.T) {
	t.Parallel()
	f := newRetentionFunction(t, map[string]string{lambdafn.MarginVariable: "5000"})
	f.rows(t, "outbox", 5, "sent", "10 days")

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	got, err := f.invoke(t, ctx)

	require.NoError(t, err)
	assert.Empty(t, got)
	assert.Equal(t, map[string]int{"sent": 5}, f.states(t, "outbox"))
	assert.Len(t, f.logs.lines(t, "the invocation deadline is closer than the margin; cleaning nothing"), 1)
}

func TestRetentionFunctionWithRetentionOffDeletesNothing(t *testing.T) {
	t.Parallel()
	f := newRetentionFunction(t, map[string]string{"QUEUEBOX_RETENTION_ENABLED": "false"})
	f.rows(t, "outbox", 5, "sent", "10 days")

	got, err := f.invoke(t, context.Background())

	require.NoError(t, err)
	assert.Empty(t, got)
	assert.Equal(t, map[string]int{"sent": 5}, f.states(t, "outbox"))
}
