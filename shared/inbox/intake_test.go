package inbox_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/alternayte/queuebox/shared/filter"
	"github.com/alternayte/queuebox/shared/inbox"
	"github.com/alternayte/queuebox/shared/store"
	"github.com/alternayte/queuebox/shared/store/postgres"
	"github.com/alternayte/queuebox/shared/store/postgres/dbtest"
)

// The intake tests cover what the broker source tests of shared/connect do not: the filter,
// the transform strategies, the length limit of a header key, a refused value within a batch,
// and the wake of push and pull sources, on a real PostgreSQL database.

// intakeEnv is one broker intake on a private database.
type intakeEnv struct {
	pool    *pgxpool.Pool
	intake  *inbox.Intake
	metrics *countingMetrics
	waker   *countingWaker
}

func newIntake(t *testing.T, src inbox.BrokerSource) *intakeEnv {
	t.Helper()
	pool, _ := dbtest.Migrated(t)
	st, err := postgres.New(pool, store.DefaultNames())
	require.NoError(t, err)
	e := &intakeEnv{pool: pool, metrics: &countingMetrics{}, waker: &countingWaker{}}
	if src.Name == "" {
		src.Name = "broker"
	}
	e.intake, err = inbox.NewIntake(src, st, inbox.IntakeOptions{
		Metrics: e.metrics, Waker: e.waker, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	return e
}

func (e *intakeEnv) store(t *testing.T, ds ...inbox.Delivery) []inbox.Outcome {
	t.Helper()
	out, err := e.intake.Store(context.Background(), ds)
	require.NoError(t, err)
	require.Len(t, out, len(ds))
	return out
}

func (e *intakeEnv) rows(t *testing.T) []row { return sourceRows(t, e.pool, e.intake.Name()) }

func (e *intakeEnv) row(t *testing.T, key string) row {
	t.Helper()
	for _, r := range e.rows(t) {
		if r.Key == key {
			return r
		}
	}
	t.Fatalf("no row with key %q", key)
	return row{}
}

func TestIntakeHeaderFilterDropsAndCounts(t *testing.T) {
	t.Parallel()
	e := newIntake(t, inbox.BrokerSource{Name: "filtered",
		Filter: filter.Config{Require: []filter.Rule{{Header: "X-Env", Equals: new("prod")}}}})
	out := e.store(t,
		inbox.Delivery{Body: []byte(`{"id":"dev-1"}`), Headers: map[string]string{"X-Env": "dev"}},
		inbox.Delivery{Body: []byte(`{"id":"none-1"}`)},
		inbox.Delivery{Body: []byte(`{"id":"prod-1"}`), Headers: map[string]string{"x-ENV": "prod"}},
	)
	assert.Equal(t, inbox.Filtered, out[0].Status)
	assert.Empty(t, out[0].ID)
	assert.Equal(t, inbox.Filtered, out[1].Status)
	assert.Equal(t, inbox.Stored, out[2].Status)
	assert.Equal(t, 2, e.metrics.get("filtered:filtered"), "queuebox_inbox_filtered_total counts each dropped message")
	rows := e.rows(t)
	require.Len(t, rows, 1, "a filtered message has no row")
	assert.Equal(t, "prod-1", rows[0].Key)
	assert.Equal(t, 1, e.metrics.get("message:new"))

	// A batch that the filter drops entirely writes nothing and wakes nothing.
	before := e.waker.n.Load()
	out = e.store(t, inbox.Delivery{Body: []byte(`{"id":"dev-2"}`), Headers: map[string]string{"X-Env": "dev"}})
	assert.Equal(t, inbox.Filtered, out[0].Status)
	assert.Len(t, e.rows(t), 1)
	assert.Equal(t, before, e.waker.n.Load())
}

func TestIntakeTransformStoresItsOutput(t *testing.T) {
	t.Parallel()
	tr := &fakeTransform{}
	e := newIntake(t, inbox.BrokerSource{Transform: tr})
	out := e.store(t, inbox.Delivery{Body: []byte(`{"id":"t-1"}`),
		Headers: map[string]string{"X-Event-Type": "order.created", "X-Tenant": "acme"}})
	require.Equal(t, inbox.Stored, out[0].Status)
	r := e.row(t, "t-1")
	assert.Equal(t, "pending", r.State)
	assert.Equal(t, "order.created", r.EventType)
	assert.JSONEq(t, `{"wrapped":{"id":"t-1"},"source":"broker","topic":"order.created","key":"t-1",
		"headers":{"X-Event-Type":"order.created","X-Tenant":"acme"}}`, r.Payload)
	tr.mu.Lock()
	in := tr.seen[0]
	tr.mu.Unlock()
	assert.Equal(t, "order.created", in.EventType)
	assert.False(t, in.Timestamp.IsZero())
	assert.NotEmpty(t, in.MessageID)
}

func TestIntakeFailedTransform(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		onError inbox.OnError
		state   string
		err     string
	}{
		{onError: "", state: "dead", err: "Transform failed: boom at $.total"},
		{onError: inbox.OnErrorFail, state: "dead", err: "Transform failed: boom at $.total"},
		{onError: inbox.OnErrorDead, state: "dead", err: "Transform failed: boom at $.total"},
		{onError: inbox.OnErrorSkip, state: "pending"},
	} {
		t.Run(string(tt.onError), func(t *testing.T) {
			t.Parallel()
			tr := &fakeTransform{}
			tr.fail.Store(true)
			e := newIntake(t, inbox.BrokerSource{Transform: tr, OnError: tt.onError})
			body := `{"id":"f-1","total":[1, 2]}`
			out := e.store(t, inbox.Delivery{Body: []byte(body)})
			r := e.row(t, "f-1")
			assert.Equal(t, tt.state, r.State)
			assert.Equal(t, tt.err, r.LastError)
			assert.JSONEq(t, body, r.Payload, "the original payload is stored")
			if tt.state == "dead" {
				assert.Equal(t, inbox.StoredDead, out[0].Status)
				assert.Equal(t, 1, e.metrics.get("rejection:transform_failed"))
				assert.Zero(t, e.metrics.get("message:new"))
				assert.Zero(t, e.waker.n.Load(), "a dead row wakes no relay")
			} else {
				assert.Equal(t, inbox.Stored, out[0].Status)
				assert.Zero(t, e.metrics.get("rejection:transform_failed"))
				assert.Equal(t, 1, e.metrics.get("message:new"))
			}
		})
	}
}

func TestIntakeOverlongHeaderKeyIsADeadRowUnderTheDigest(t *testing.T) {
	t.Parallel()
	e := newIntake(t, inbox.BrokerSource{})
	body := `{"id":"in-the-body"}`
	out := e.store(t, inbox.Delivery{Body: []byte(body),
		Headers: map[string]string{"X-Idempotency-Key": strings.Repeat("k", inbox.MaxKeyLength+1)}})
	assert.Equal(t, inbox.StoredDead, out[0].Status)
	assert.NotEmpty(t, out[0].ID)
	sum := sha256.Sum256([]byte(body))
	rows := e.rows(t)
	require.Len(t, rows, 1)
	assert.Equal(t, inbox.DigestPrefix+hex.EncodeToString(sum[:]), rows[0].Key)
	assert.Equal(t, "dead", rows[0].State)
	assert.Equal(t, "Idempotency key exceeds 255 characters", rows[0].LastError)
	assert.JSONEq(t, body, rows[0].Payload)
	assert.Equal(t, 1, e.metrics.get("rejection:extraction_failed"))

	// A key of exactly 255 characters is stored as it is.
	key := strings.Repeat("k", inbox.MaxKeyLength)
	out = e.store(t, inbox.Delivery{Body: []byte(body), Headers: map[string]string{"x-idempotency-key": key}})
	assert.Equal(t, inbox.Stored, out[0].Status)
	assert.Equal(t, "pending", e.row(t, key).State)
}

func TestIntakeRefusedValueInABatchIsADeadRawRow(t *testing.T) {
	t.Parallel()
	e := newIntake(t, inbox.BrokerSource{})
	out := e.store(t,
		inbox.Delivery{Body: []byte(`{"id":"good-1"}`)},
		inbox.Delivery{Body: []byte(`{"id":"bad","v":"a\u0000b"}`)},
		inbox.Delivery{Body: []byte(`{"id":"good-2"}`)},
	)
	assert.Equal(t, []inbox.Status{inbox.Stored, inbox.StoredDead, inbox.Stored},
		[]inbox.Status{out[0].Status, out[1].Status, out[2].Status})
	for _, key := range []string{"good-1", "good-2"} {
		r := e.row(t, key)
		assert.Equal(t, "pending", r.State, key)
		assert.JSONEq(t, `{"id":"`+key+`"}`, r.Payload)
	}
	bad := e.row(t, "bad")
	assert.Equal(t, "dead", bad.State)
	assert.Equal(t, "The database refused a value of the message", bad.LastError)
	assert.JSONEq(t, `{"raw":"{\"id\":\"bad\",\"v\":\"ab\"}"}`, bad.Payload)
	assert.Equal(t, 2, e.metrics.get("message:new"))
	assert.EqualValues(t, 1, e.waker.n.Load())
}

func TestIntakePullStoresPullAndDoesNotWake(t *testing.T) {
	t.Parallel()
	e := newIntake(t, inbox.BrokerSource{Consumption: store.ConsumptionPull})
	e.store(t, inbox.Delivery{Body: []byte(`{"id":"p-1"}`)}, inbox.Delivery{Body: []byte(`{"id":"p-2"}`)})
	rows := e.rows(t)
	require.Len(t, rows, 2)
	for _, r := range rows {
		assert.Equal(t, "pull", r.Consumption)
		assert.Equal(t, "pending", r.State)
	}
	assert.Zero(t, e.waker.n.Load())
}

func TestIntakePushWakesOncePerBatch(t *testing.T) {
	t.Parallel()
	e := newIntake(t, inbox.BrokerSource{})
	batch := []inbox.Delivery{{Body: []byte(`{"id":"w-1"}`)}, {Body: []byte(`{"id":"w-2"}`)}, {Body: []byte(`{"id":"w-3"}`)}}
	out := e.store(t, batch...)
	for _, o := range out {
		assert.Equal(t, inbox.Stored, o.Status)
	}
	assert.EqualValues(t, 1, e.waker.n.Load(), "one wake for a batch of three new rows")
	for _, r := range e.rows(t) {
		assert.Equal(t, "push", r.Consumption)
	}

	// The same batch again: three duplicates, no new row, no wake.
	out = e.store(t, batch...)
	for _, o := range out {
		assert.Equal(t, inbox.Duplicate, o.Status)
		assert.Empty(t, o.ID)
	}
	assert.EqualValues(t, 1, e.waker.n.Load())
	assert.Equal(t, 3, e.metrics.get("message:duplicate"))

	// One new row among duplicates wakes once more.
	e.store(t, append(batch, inbox.Delivery{Body: []byte(`{"id":"w-4"}`)})...)
	assert.EqualValues(t, 2, e.waker.n.Load())
	assert.Equal(t, 4, e.metrics.get("message:new"))
}

// A source reuses one Batch for window after window: each Write after Reset stores exactly
// the deliveries added since, with outcomes in their order, filtered ones included.
func TestIntakeBatchReusedAfterReset(t *testing.T) {
	t.Parallel()
	e := newIntake(t, inbox.BrokerSource{Name: "reused",
		Filter: filter.Config{Exclude: []filter.Rule{{Header: "x-skip", Exists: new(true)}}}})
	ctx := context.Background()
	b := e.intake.NewBatch(2)
	add := func(ds ...inbox.Delivery) {
		for i := range ds {
			b.Add(ctx, &ds[i])
		}
	}
	add(inbox.Delivery{Body: []byte(`{"id":"w1-a"}`)},
		inbox.Delivery{Body: []byte(`{"id":"w1-skip"}`), Headers: map[string]string{"x-skip": "1"}},
		inbox.Delivery{Body: []byte(`{"id":"w1-b"}`)})
	require.Equal(t, 3, b.Len())
	out, err := b.Write(ctx)
	require.NoError(t, err)
	require.Len(t, out, 3)
	assert.Equal(t, []inbox.Status{inbox.Stored, inbox.Filtered, inbox.Stored},
		[]inbox.Status{out[0].Status, out[1].Status, out[2].Status})

	b.Reset()
	require.Equal(t, 0, b.Len())
	add(inbox.Delivery{Body: []byte(`{"id":"w1-b"}`)}, inbox.Delivery{Body: []byte(`{"id":"w2-a"}`)})
	out, err = b.Write(ctx)
	require.NoError(t, err)
	require.Len(t, out, 2)
	assert.Equal(t, inbox.Duplicate, out[0].Status)
	assert.Empty(t, out[0].ID)
	assert.Equal(t, inbox.Stored, out[1].Status)
	assert.NotEmpty(t, out[1].ID)

	keys := map[string]bool{}
	for _, r := range e.rows(t) {
		keys[r.Key] = true
	}
	assert.Equal(t, map[string]bool{"w1-a": true, "w1-b": true, "w2-a": true}, keys)
}

// TestIntakeKeyLengthCountsAsTheColumnDoes: a broker source under KeyLengthCodePoints stores a
// header key of 128 emoji as a pending row; under the default UTF-16 rule the same key is
// over 255 characters, so the message is a dead row under the body's digest.
func TestIntakeKeyLengthCountsAsTheColumnDoes(t *testing.T) {
	t.Parallel()
	key := strings.Repeat("😀", 128)
	body := `{"n":1}`
	for _, tc := range []struct {
		rule  inbox.KeyLength
		state string
	}{{inbox.KeyLengthCodePoints, "pending"}, {inbox.KeyLengthUTF16, "dead"}} {
		pool, _ := dbtest.Migrated(t)
		st, err := postgres.New(pool, store.DefaultNames())
		require.NoError(t, err)
		in, err := inbox.NewIntake(inbox.BrokerSource{Name: "broker"}, st, inbox.IntakeOptions{
			Logger: slog.New(slog.DiscardHandler), KeyLength: tc.rule})
		require.NoError(t, err)
		_, err = in.Store(context.Background(), []inbox.Delivery{{Body: []byte(body), Headers: map[string]string{"x-idempotency-key": key}}})
		require.NoError(t, err)
		rows := sourceRows(t, pool, "broker")
		require.Len(t, rows, 1)
		assert.Equal(t, tc.state, rows[0].State, "rule %d", tc.rule)
		if tc.state == "pending" {
			assert.Equal(t, key, rows[0].Key)
		}
	}
}

// TestIntakeUndecodableBodyOverMaxBodyBytesIsNotStored: a delivery that its source refused as
// undecodable still obeys the source's maxBodyBytes: a larger body is not stored, the payload
// names its size, last_error names both causes, and it counts in both metrics.
func TestIntakeUndecodableBodyOverMaxBodyBytesIsNotStored(t *testing.T) {
	t.Parallel()
	e := newIntake(t, inbox.BrokerSource{MaxBodyBytes: 100})
	big := `{"id":"big","pad":"` + strings.Repeat("x", 500) + `"}`
	undecodable := &inbox.Refusal{Cause: inbox.RefusedUndecodable, Text: "The AMQP client cannot decode the message headers: too deep"}
	out := e.store(t,
		inbox.Delivery{Body: []byte(big), BrokerKey: "mid-big", Refused: undecodable},
		inbox.Delivery{Body: []byte(`{"id":"small"}`), Refused: undecodable},
	)
	assert.Equal(t, []inbox.Status{inbox.StoredDead, inbox.StoredDead}, []inbox.Status{out[0].Status, out[1].Status})
	r := e.row(t, "mid-big")
	assert.Equal(t, "dead", r.State)
	assert.JSONEq(t, `{"bodyBytes":`+strconv.Itoa(len(big))+`}`, r.Payload)
	assert.Contains(t, r.LastError, "cannot decode the message headers: too deep")
	assert.Contains(t, r.LastError, "exceeds the source's maxBodyBytes of 100")
	assert.Contains(t, r.LastError, strconv.Itoa(len(big)))
	small := e.row(t, "small")
	assert.JSONEq(t, `{"id":"small"}`, small.Payload)
	assert.Equal(t, undecodable.Text, small.LastError)
	assert.Equal(t, 2, e.metrics.get("undecodable:broker"))
	assert.Equal(t, 1, e.metrics.get("too_large:broker"))
}
