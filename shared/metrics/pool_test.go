package metrics

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/alternayte/queuebox/shared/store/postgres"
	"github.com/alternayte/queuebox/shared/store/postgres/dbtest"
)

// sample returns the value of the family name for the label pool=pool: a gauge or counter
// value, or the sample count of a summary. ok is false when the scrape lacks it.
func sample(t *testing.T, r *Registry, name, pool string) (v float64, ok bool) {
	t.Helper()
	families, err := r.Prometheus().Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			if !hasLabel(m, "pool", pool) {
				continue
			}
			switch f.GetType() {
			case dto.MetricType_GAUGE:
				return m.GetGauge().GetValue(), true
			case dto.MetricType_COUNTER:
				return m.GetCounter().GetValue(), true
			case dto.MetricType_SUMMARY:
				return float64(m.GetSummary().GetSampleCount()), true
			}
		}
	}
	return 0, false
}

func hasLabel(m *dto.Metric, name, value string) bool {
	for _, l := range m.GetLabel() {
		if l.GetName() == name && l.GetValue() == value {
			return true
		}
	}
	return false
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// tracedPool opens a pool on the test server whose configuration carries a PoolTracer.
func tracedPool(t *testing.T, r *Registry, name string, maxConns, minIdle int32) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(dbtest.ServerURL())
	require.NoError(t, err)
	cfg.MaxConns, cfg.MinIdleConns = maxConns, minIdle
	tracer := NewPoolTracer(r, name)
	cfg.ConnConfig.Tracer = postgres.NewPoolTracer(tracer)
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	tracer.AttachStats(postgres.PoolStats(pool))
	return pool
}

func TestPoolFamiliesShowBeforeTheFirstMeasurement(t *testing.T) {
	t.Parallel()
	r := New("test")
	NewPoolTracer(r, "fresh")
	for _, name := range []string{
		"hikaricp_connections_timeout_total",
		"hikaricp_connections_acquire_seconds", "hikaricp_connections_acquire_seconds_max",
		"hikaricp_connections_creation_seconds", "hikaricp_connections_creation_seconds_max",
		"hikaricp_connections_usage_seconds", "hikaricp_connections_usage_seconds_max",
	} {
		v, ok := sample(t, r, name, "fresh")
		assert.True(t, ok, "the scrape lacks %s{pool=\"fresh\"}", name)
		assert.Zero(t, v, name)
	}
	_, ok := sample(t, r, "hikaricp_connections", "fresh")
	assert.False(t, ok, "gauges before Attach")
}

func TestPoolTracerMeasuresAcquireUseAndCreation(t *testing.T) {
	t.Parallel()
	r := New("test")
	pool := tracedPool(t, r, "main", 3, 1)
	ctx := context.Background()

	conn, err := pool.Acquire(ctx)
	require.NoError(t, err)
	_, err = conn.Exec(ctx, "SELECT pg_sleep(0.02)")
	require.NoError(t, err)

	gauges := map[string]float64{}
	for _, name := range []string{"hikaricp_connections_active", "hikaricp_connections_max", "hikaricp_connections_min", "hikaricp_connections_pending"} {
		v, ok := sample(t, r, name, "main")
		require.True(t, ok, "the scrape lacks %s", name)
		gauges[name] = v
	}
	assert.Equal(t, map[string]float64{
		"hikaricp_connections_active":  1,
		"hikaricp_connections_max":     3,
		"hikaricp_connections_min":     1,
		"hikaricp_connections_pending": 0,
	}, gauges)
	conn.Release()

	waitUntil(t, "the usage of the released connection", func() bool {
		v, _ := sample(t, r, "hikaricp_connections_usage_seconds", "main")
		return v == 1
	})
	usageMax, _ := sample(t, r, "hikaricp_connections_usage_seconds_max", "main")
	assert.GreaterOrEqual(t, usageMax, 0.02, "the usage covers the 20 ms query")
	acquired, _ := sample(t, r, "hikaricp_connections_acquire_seconds", "main")
	assert.Equal(t, 1.0, acquired)
	created, _ := sample(t, r, "hikaricp_connections_creation_seconds", "main")
	assert.GreaterOrEqual(t, created, 1.0)
	creationMax, _ := sample(t, r, "hikaricp_connections_creation_seconds_max", "main")
	assert.Positive(t, creationMax)

	total, _ := sample(t, r, "hikaricp_connections", "main")
	idle, _ := sample(t, r, "hikaricp_connections_idle", "main")
	active, _ := sample(t, r, "hikaricp_connections_active", "main")
	assert.Zero(t, active)
	assert.Equal(t, total, idle, "every connection is idle after the release")
	assert.GreaterOrEqual(t, idle, 1.0)
}

func TestPoolTracerCountsWaitersAndTimeouts(t *testing.T) {
	t.Parallel()
	r := New("test")
	pool := tracedPool(t, r, "tiny", 1, 0)
	ctx := context.Background()
	held, err := pool.Acquire(ctx)
	require.NoError(t, err)

	// A caller that waits for the only connection is pending until the holder releases it.
	got := make(chan error, 1)
	go func() {
		c, err := pool.Acquire(ctx)
		if err == nil {
			c.Release()
		}
		got <- err
	}()
	waitUntil(t, "one pending acquire", func() bool {
		v, _ := sample(t, r, "hikaricp_connections_pending", "tiny")
		return v == 1
	})
	held.Release()
	require.NoError(t, <-got)
	pending, _ := sample(t, r, "hikaricp_connections_pending", "tiny")
	assert.Zero(t, pending)

	held, err = pool.Acquire(ctx)
	require.NoError(t, err)
	defer held.Release()
	tests := []struct {
		name         string
		ctx          func() (context.Context, context.CancelFunc)
		wantErr      error
		wantTimeouts float64
	}{
		{
			name:         "a deadline is a timeout",
			ctx:          func() (context.Context, context.CancelFunc) { return context.WithTimeout(ctx, 30*time.Millisecond) },
			wantErr:      context.DeadlineExceeded,
			wantTimeouts: 1,
		},
		{
			name: "a cancel is not a timeout",
			ctx: func() (context.Context, context.CancelFunc) {
				c, cancel := context.WithCancel(ctx)
				cancel()
				return c, cancel
			},
			wantErr:      context.Canceled,
			wantTimeouts: 1,
		},
	}
	for _, tt := range tests {
		c, cancel := tt.ctx()
		_, err := pool.Acquire(c)
		cancel()
		require.True(t, errors.Is(err, tt.wantErr), "%s: error = %v", tt.name, err)
		timeouts, ok := sample(t, r, "hikaricp_connections_timeout_total", "tiny")
		require.True(t, ok)
		assert.Equal(t, tt.wantTimeouts, timeouts, tt.name)
	}
	acquired, _ := sample(t, r, "hikaricp_connections_acquire_seconds", "tiny")
	assert.Equal(t, 3.0, acquired, "only the acquires that got a connection are timed")
}
