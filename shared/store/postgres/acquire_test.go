package postgres

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/alternayte/queuebox/shared/metrics"
	"github.com/alternayte/queuebox/shared/metrics/metricstest"
	"github.com/alternayte/queuebox/shared/store"
	"github.com/alternayte/queuebox/shared/store/postgres/dbtest"
)

// poolCall is one store call per way the store takes a connection: Query, Exec, QueryRow and
// Begin of the bounded pool.
type poolCall struct {
	name string
	call func(ctx context.Context, s store.Store) error
}

var poolCalls = []poolCall{
	{name: "Query (OutboxStats)", call: func(ctx context.Context, s store.Store) error {
		_, err := s.OutboxStats(ctx)
		return err
	}},
	{name: "Exec (OutboxReclaim)", call: func(ctx context.Context, s store.Store) error {
		_, err := s.OutboxReclaim(ctx)
		return err
	}},
	{name: "QueryRow (InboxStats)", call: func(ctx context.Context, s store.Store) error {
		_, err := s.InboxStats(ctx)
		return err
	}},
	{name: "Begin (InboxRelayClaim)", call: func(ctx context.Context, s store.Store) error {
		_, err := s.InboxRelayClaim(ctx, store.InboxRelayClaimParams{Limit: 10, Lease: time.Minute})
		return err
	}},
	{name: "Ping", call: func(ctx context.Context, s store.Store) error { return s.Ping(ctx) }},
}

// openPool1 opens the driver of a migrated database with a pool of one connection, whose
// statements wait at most wait for it, observed by a PoolTracer of a fresh registry.
func openPool1(t *testing.T, wait time.Duration) (*store.Driver, *metrics.Registry) {
	t.Helper()
	_, dbURL := dbtest.Migrated(t)
	reg := metrics.New("test")
	tracer := metrics.NewPoolTracer(reg, metrics.PoolName)
	drv, err := Open(context.Background(), store.OpenConfig{
		ConnString: dbURL, PoolSize: 1, AcquireTimeout: wait, StartupTimeout: 30 * time.Second,
		WaitForDatabase: waitFor, Names: store.DefaultNames(), Tracer: tracer,
	})
	require.NoError(t, err)
	t.Cleanup(drv.Close)
	tracer.AttachStats(drv.PoolStats)
	return drv, reg
}

func TestStoreCallsGiveTheOnlyConnectionBack(t *testing.T) {
	t.Parallel()
	// No bound: a call that kept its connection would leave the next one waiting until ctx ends.
	drv, _ := openPool1(t, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for round := 1; round <= 2; round++ {
		for _, pc := range poolCalls {
			require.NoError(t, pc.call(ctx, drv.Store), "round %d: %s", round, pc.name)
		}
	}
	assert.Equal(t, int64(0), drv.PoolStats().Active, "no connection is held after the calls")
}

func TestStoreCallFailsAfterConnectionTimeoutWhileThePoolIsHeld(t *testing.T) {
	t.Parallel()
	// The bound is generous: once the session ends, each call must get the connection within
	// it, and pgxpool pings a connection that was idle for a second before it hands it out,
	// inside the bound; a short bound would turn a slow ping on a busy machine into a
	// timeout. The calls that must time out wait at once, so the test waits the bound once.
	const wait = 3 * time.Second
	drv, reg := openPool1(t, wait)
	ctx := context.Background()

	// A migration session holds the only connection of the pool.
	session, err := drv.Migration.Open(ctx, 0)
	require.NoError(t, err)
	scrape := metricstest.Get(t, reg.Handler())
	active, _ := scrape.Value("hikaricp_connections_active", map[string]string{"pool": metrics.PoolName})
	require.Equal(t, 1.0, active, "the session holds the connection")

	errs := make([]error, len(poolCalls))
	var wg sync.WaitGroup
	for i, pc := range poolCalls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = pc.call(ctx, drv.Store)
		}()
	}
	wg.Wait()
	for i, pc := range poolCalls {
		err := errs[i]
		require.Error(t, err, pc.name)
		assert.True(t, errors.Is(err, store.ErrPoolTimeout), "%s: %v", pc.name, err)
		assert.False(t, errors.Is(err, context.DeadlineExceeded), "%s: the caller's context did not end", pc.name)
		assert.Contains(t, err.Error(), "timed out after 3000 ms waiting for a database connection from the pool (database.connectionTimeoutMs)", pc.name)
	}
	timeouts, ok := metricstest.Get(t, reg.Handler()).Value("hikaricp_connections_timeout_total", map[string]string{"pool": metrics.PoolName})
	require.True(t, ok, "the scrape has hikaricp_connections_timeout_total{pool=%q}", metrics.PoolName)
	assert.Equal(t, float64(len(poolCalls)), timeouts, "one timeout per call")

	session.Close(ctx)
	for _, pc := range poolCalls {
		assert.NoError(t, pc.call(ctx, drv.Store), "%s once the connection is back", pc.name)
	}
}

func TestStoreCallEndedByTheCallerIsNotAPoolTimeout(t *testing.T) {
	t.Parallel()
	drv, reg := openPool1(t, time.Hour)
	session, err := drv.Migration.Open(context.Background(), 0)
	require.NoError(t, err)
	defer session.Close(context.Background())

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = drv.Store.OutboxStats(ctx)
	require.ErrorIs(t, err, context.Canceled)
	assert.False(t, errors.Is(err, store.ErrPoolTimeout), "the caller's cancel is the error: %v", err)
	timeouts, _ := metricstest.Get(t, reg.Handler()).Value("hikaricp_connections_timeout_total", map[string]string{"pool": metrics.PoolName})
	assert.Zero(t, timeouts)
}
