package sqlserver

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/alternayte/queuebox/shared/metrics"
	"github.com/alternayte/queuebox/shared/metrics/metricstest"
	"github.com/alternayte/queuebox/shared/store"
	"github.com/alternayte/queuebox/shared/store/sqlpool"
)

// poolCalls are store calls that take their connection in each way the SQL Server store
// does: a single row (QueryRowContext), rows (QueryContext), an exec, a claim transaction, a
// relay transaction, the ping and the schema check.
var poolCalls = []struct {
	name string
	call func(ctx context.Context, s *Store) error
}{
	{"OutboxInsert", func(ctx context.Context, s *Store) error {
		_, err := s.OutboxInsert(ctx, store.OutboxInsertParams{Topic: "t", Payload: json.RawMessage(`{}`)})
		return err
	}},
	{"OutboxStats", func(ctx context.Context, s *Store) error { _, err := s.OutboxStats(ctx); return err }},
	{"OutboxReclaim", func(ctx context.Context, s *Store) error { _, err := s.OutboxReclaim(ctx); return err }},
	{"OutboxClaim", func(ctx context.Context, s *Store) error {
		_, err := s.OutboxClaim(ctx, store.OutboxClaimParams{Limit: 1, Lease: time.Minute})
		return err
	}},
	{"InboxRelayForward", func(ctx context.Context, s *Store) error {
		_, err := s.InboxRelayForward(ctx, store.InboxForwardParams{
			Claim:  store.Claim{ID: "0b0a7d1c-2a4e-4d0b-9b1e-0c7f6f6d2a11", Token: "5d3c1f0e-8b7a-4c2d-9e1f-0a1b2c3d4e5f"},
			Outbox: store.OutboxInsertParams{Topic: "t", Payload: json.RawMessage(`{}`)},
		})
		return err
	}},
	{"InboxStats", func(ctx context.Context, s *Store) error { _, err := s.InboxStats(ctx); return err }},
	{"Ping", func(ctx context.Context, s *Store) error { return s.Ping(ctx) }},
	{"CheckSchema", func(ctx context.Context, s *Store) error { return s.CheckSchema(ctx) }},
}

// newPooledFakeStore returns a store with default names on a fake database behind a
// sqlpool.Pool of one connection, observed by a PoolTracer of a fresh registry.
func newPooledFakeStore(t *testing.T, wait time.Duration) (*Store, *sqlpool.Pool, *fakeDB, *metrics.Registry) {
	t.Helper()
	f := &fakeDB{answer: func(string, []any) fakeAnswer { return fakeAnswer{} }}
	reg := metrics.New("test")
	tracer := metrics.NewPoolTracer(reg, metrics.PoolName)
	pool, err := sqlpool.New(f, sqlpool.Config{MaxOpen: 1, AcquireTimeout: wait, Observer: tracer})
	require.NoError(t, err)
	tracer.AttachStats(pool.Stats)
	s, err := NewWithPool(pool, store.DefaultNames())
	require.NoError(t, err)
	t.Cleanup(s.Close)
	return s, pool, f, reg
}

func TestStoreCallsGiveTheOnlyConnectionBack(t *testing.T) {
	t.Parallel()
	// No bound: a call that kept the connection would leave the next one waiting until ctx
	// ends. The fake answers no rows, so some calls fail; none may keep the connection.
	s, pool, f, _ := newPooledFakeStore(t, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for round := 1; round <= 2; round++ {
		for _, pc := range poolCalls {
			err := pc.call(ctx, s)
			require.False(t, errors.Is(err, context.DeadlineExceeded), "round %d: %s waited for the connection: %v", round, pc.name, err)
		}
	}
	require.NoError(t, ctx.Err())
	assert.NotEmpty(t, f.statements(), "the calls ran on the fake")
	deadline := time.Now().Add(10 * time.Second)
	for pool.Stats().Active != 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	assert.Zero(t, pool.Stats().Active, "no connection is held after the calls")
}

func TestStoreCallFailsAfterConnectionTimeoutWhileThePoolIsHeld(t *testing.T) {
	t.Parallel()
	s, pool, f, reg := newPooledFakeStore(t, 100*time.Millisecond)
	ctx := context.Background()
	held, err := pool.BeginTx(ctx, nil)
	require.NoError(t, err)
	defer func() { _ = held.Rollback() }()

	for i, pc := range poolCalls {
		err := pc.call(ctx, s)
		require.Error(t, err, pc.name)
		assert.True(t, errors.Is(err, store.ErrPoolTimeout), "%s: %v", pc.name, err)
		assert.Contains(t, err.Error(), "timed out after 100 ms waiting for a database connection from the pool (database.connectionTimeoutMs)", pc.name)
		timeouts, ok := metricstest.Get(t, reg.Handler()).Value("hikaricp_connections_timeout_total", map[string]string{"pool": metrics.PoolName})
		require.True(t, ok)
		assert.Equal(t, float64(i+1), timeouts, "after %s", pc.name)
	}
	assert.Empty(t, f.statements(), "no statement ran without a connection")
	assert.Equal(t, []string{"begin"}, f.kinds(), "only the holder's transaction began")
}
