package sqlpool_test

import (
	"context"
	"database/sql"
	"errors"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/alternayte/queuebox/shared/metrics"
	"github.com/alternayte/queuebox/shared/metrics/metricstest"
	"github.com/alternayte/queuebox/shared/store"
	"github.com/alternayte/queuebox/shared/store/postgres/dbtest"
	"github.com/alternayte/queuebox/shared/store/sqlpool"
)

// The tests run the pool on PostgreSQL through pgx's database/sql driver: the database/sql
// code path of SQL Server with go-mssqldb, on the database that runs here.

// openPool opens a pool on the test server whose events go to a PoolTracer named
// metrics.PoolName of a fresh registry, with the gauges attached.
func openPool(t *testing.T, cfg sqlpool.Config) (*sqlpool.Pool, *metrics.Registry) {
	t.Helper()
	reg := metrics.New("test")
	tracer := metrics.NewPoolTracer(reg, metrics.PoolName)
	cfg.Observer = tracer
	p, err := sqlpool.Open(dbtest.SQLDriverName, dbtest.ServerURL(), cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Close() })
	tracer.AttachStats(p.Stats)
	return p, reg
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

// poolOp is one way a statement takes a connection of the pool.
type poolOp struct {
	name string
	run  func(ctx context.Context, p *sqlpool.Pool) error
}

var poolOps = []poolOp{
	{name: "ExecContext", run: func(ctx context.Context, p *sqlpool.Pool) error {
		_, err := p.ExecContext(ctx, "SELECT 1")
		return err
	}},
	{name: "QueryContext read to the end", run: func(ctx context.Context, p *sqlpool.Pool) error {
		rows, err := p.QueryContext(ctx, "SELECT g FROM generate_series(1, 3) g")
		if err != nil {
			return err
		}
		n := 0
		for rows.Next() {
			n++
		}
		if n != 3 {
			return errors.New("the query did not return its 3 rows")
		}
		return rows.Err()
	}},
	{name: "QueryContext closed early", run: func(ctx context.Context, p *sqlpool.Pool) error {
		rows, err := p.QueryContext(ctx, "SELECT g FROM generate_series(1, 3) g")
		if err != nil {
			return err
		}
		rows.Next()
		return rows.Close()
	}},
	{name: "QueryRowContext", run: func(ctx context.Context, p *sqlpool.Pool) error {
		var v int
		return p.QueryRowContext(ctx, "SELECT 7").Scan(&v)
	}},
	{name: "BeginTx and Commit", run: func(ctx context.Context, p *sqlpool.Pool) error {
		tx, err := p.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, "SELECT 1"); err != nil {
			_ = tx.Rollback()
			return err
		}
		return tx.Commit()
	}},
	{name: "BeginTx and Rollback", run: func(ctx context.Context, p *sqlpool.Pool) error {
		tx, err := p.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		return tx.Rollback()
	}},
	{name: "PingContext", run: func(ctx context.Context, p *sqlpool.Pool) error { return p.PingContext(ctx) }},
}

func TestStatementsGiveTheOnlyConnectionBack(t *testing.T) {
	t.Parallel()
	// No bound: a statement that kept the connection would leave the next one waiting
	// until ctx ends.
	p, _ := openPool(t, sqlpool.Config{MaxOpen: 1})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for round := 1; round <= 2; round++ {
		for _, op := range poolOps {
			require.NoError(t, op.run(ctx, p), "round %d: %s", round, op.name)
		}
	}
	waitUntil(t, "the last connection back in the pool", func() bool { return p.Stats().Active == 0 })
	assert.Equal(t, int64(1), p.Stats().Idle)
}

func TestQueryRowContextScansAsSQLRow(t *testing.T) {
	t.Parallel()
	p, _ := openPool(t, sqlpool.Config{MaxOpen: 1, AcquireTimeout: time.Minute})
	ctx := context.Background()
	var v int
	require.NoError(t, p.QueryRowContext(ctx, "SELECT 42").Scan(&v))
	assert.Equal(t, 42, v)
	row := p.QueryRowContext(ctx, "SELECT 43")
	require.NoError(t, row.Scan(&v))
	assert.EqualError(t, row.Scan(&v), "sqlpool: Row.Scan called twice; the connection went back after the first")
	err := p.QueryRowContext(ctx, "SELECT 1 WHERE false").Scan(&v)
	assert.ErrorIs(t, err, sql.ErrNoRows)
	err = p.QueryRowContext(ctx, "SELECT 1/0").Scan(&v)
	assert.ErrorContains(t, err, "division by zero")
	waitUntil(t, "the connection back in the pool", func() bool { return p.Stats().Active == 0 })
}

func TestStatementFailsAfterTheBoundWhileTheOnlyConnectionIsHeld(t *testing.T) {
	t.Parallel()
	// The bound is generous: after the held transaction ends, each statement must get the
	// connection within it, and pgx's database/sql driver pings a connection that was idle for
	// a second before it hands it out, inside the bound. A short bound would turn a slow ping
	// on a busy machine into a timeout. The statements that must time out wait at once, so
	// the test waits the bound once.
	const bound = 3 * time.Second
	p, reg := openPool(t, sqlpool.Config{MaxOpen: 1, AcquireTimeout: bound})
	ctx := context.Background()
	pool := map[string]string{"pool": metrics.PoolName}

	held, err := p.BeginTx(ctx, nil)
	require.NoError(t, err)
	errs := make([]error, len(poolOps))
	var wg sync.WaitGroup
	for i, op := range poolOps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = op.run(ctx, p)
		}()
	}
	wg.Wait()
	for i, op := range poolOps {
		err := errs[i]
		require.Error(t, err, op.name)
		assert.True(t, errors.Is(err, store.ErrPoolTimeout), "%s: %v", op.name, err)
		assert.False(t, errors.Is(err, context.DeadlineExceeded), "%s: the caller's context did not end", op.name)
		assert.EqualError(t, err, "store: timed out after 3000 ms waiting for a database connection from the pool (database.connectionTimeoutMs)", op.name)
	}
	timeouts, ok := metricstest.Get(t, reg.Handler()).Value("hikaricp_connections_timeout_total", pool)
	require.True(t, ok, "the scrape has hikaricp_connections_timeout_total")
	assert.Equal(t, float64(len(poolOps)), timeouts, "one timeout per statement")

	require.NoError(t, held.Rollback())
	for _, op := range poolOps {
		waitUntil(t, "the connection back in the pool", func() bool { return p.Stats().Active == 0 })
		assert.NoError(t, op.run(ctx, p), "%s once the connection is back", op.name)
	}
	timeouts, _ = metricstest.Get(t, reg.Handler()).Value("hikaricp_connections_timeout_total", pool)
	assert.Equal(t, float64(len(poolOps)), timeouts, "the statements that got the connection are no timeouts")
}

func TestCallerCancelIsNotAPoolTimeout(t *testing.T) {
	t.Parallel()
	p, reg := openPool(t, sqlpool.Config{MaxOpen: 1, AcquireTimeout: time.Hour})
	held, err := p.BeginTx(context.Background(), nil)
	require.NoError(t, err)
	defer func() { _ = held.Rollback() }()

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = p.ExecContext(ctx, "SELECT 1")
	require.ErrorIs(t, err, context.Canceled)
	assert.False(t, errors.Is(err, store.ErrPoolTimeout), "%v", err)
	timeouts, _ := metricstest.Get(t, reg.Handler()).Value("hikaricp_connections_timeout_total", map[string]string{"pool": metrics.PoolName})
	assert.Zero(t, timeouts)
}

func TestOpenRefusesAPoolOfNoConnection(t *testing.T) {
	t.Parallel()
	_, err := sqlpool.Open(dbtest.SQLDriverName, dbtest.ServerURL(), sqlpool.Config{MaxOpen: 0})
	assert.EqualError(t, err, "opening the pgx pool: the pool size 0 is not above 0 (database.poolSize, QUEUEBOX_DATABASE_POOLSIZE)")
	_, err = sqlpool.Open("no-such-driver", "x", sqlpool.Config{MaxOpen: 1})
	assert.ErrorContains(t, err, "opening the no-such-driver pool: ")
}

// TestPoolFamiliesInTheScrape reads the hikaricp_* families of spec/28 for a database/sql
// pool from GET /metrics: the names, the types, the pool label and values that follow the
// pool while connections are held and callers wait.
func TestPoolFamiliesInTheScrape(t *testing.T) {
	t.Parallel()
	p, reg := openPool(t, sqlpool.Config{MaxOpen: 2, AcquireTimeout: time.Minute})
	ctx := context.Background()
	pool := map[string]string{"pool": metrics.PoolName}
	value := func(s metricstest.Scrape, name string) float64 {
		t.Helper()
		v, ok := s.Value(name, pool)
		require.True(t, ok, "the scrape lacks %s{pool=%q}", name, metrics.PoolName)
		return v
	}

	first, err := p.BeginTx(ctx, nil)
	require.NoError(t, err)
	s := metricstest.Get(t, reg.Handler())
	want := map[string]dto.MetricType{
		"hikaricp_connections":                      dto.MetricType_GAUGE,
		"hikaricp_connections_active":               dto.MetricType_GAUGE,
		"hikaricp_connections_idle":                 dto.MetricType_GAUGE,
		"hikaricp_connections_pending":              dto.MetricType_GAUGE,
		"hikaricp_connections_min":                  dto.MetricType_GAUGE,
		"hikaricp_connections_max":                  dto.MetricType_GAUGE,
		"hikaricp_connections_timeout_total":        dto.MetricType_COUNTER,
		"hikaricp_connections_acquire_seconds":      dto.MetricType_SUMMARY,
		"hikaricp_connections_acquire_seconds_max":  dto.MetricType_GAUGE,
		"hikaricp_connections_creation_seconds":     dto.MetricType_SUMMARY,
		"hikaricp_connections_creation_seconds_max": dto.MetricType_GAUGE,
		"hikaricp_connections_usage_seconds":        dto.MetricType_SUMMARY,
		"hikaricp_connections_usage_seconds_max":    dto.MetricType_GAUGE,
	}
	for name, typ := range want {
		got, ok := s.Type(name)
		require.True(t, ok, "the scrape lacks %s", name)
		assert.Equal(t, typ, got, name)
		value(s, name)
	}
	assert.Equal(t, map[string]float64{
		"hikaricp_connections": 1, "hikaricp_connections_active": 1, "hikaricp_connections_idle": 0,
		"hikaricp_connections_pending": 0, "hikaricp_connections_min": 0, "hikaricp_connections_max": 2,
		"hikaricp_connections_timeout_total": 0, "hikaricp_connections_acquire_seconds": 1,
		"hikaricp_connections_creation_seconds": 1, "hikaricp_connections_usage_seconds": 0,
	}, map[string]float64{
		"hikaricp_connections": value(s, "hikaricp_connections"), "hikaricp_connections_active": value(s, "hikaricp_connections_active"),
		"hikaricp_connections_idle": value(s, "hikaricp_connections_idle"), "hikaricp_connections_pending": value(s, "hikaricp_connections_pending"),
		"hikaricp_connections_min": value(s, "hikaricp_connections_min"), "hikaricp_connections_max": value(s, "hikaricp_connections_max"),
		"hikaricp_connections_timeout_total": value(s, "hikaricp_connections_timeout_total"), "hikaricp_connections_acquire_seconds": value(s, "hikaricp_connections_acquire_seconds"),
		"hikaricp_connections_creation_seconds": value(s, "hikaricp_connections_creation_seconds"), "hikaricp_connections_usage_seconds": value(s, "hikaricp_connections_usage_seconds"),
	}, "one transaction holds the one connection that the pool opened")

	// Both connections held: a third caller waits and shows as pending.
	second, err := p.BeginTx(ctx, nil)
	require.NoError(t, err)
	waited := make(chan error, 1)
	go func() {
		_, err := p.ExecContext(ctx, "SELECT 1")
		waited <- err
	}()
	waitUntil(t, "one pending caller in the scrape", func() bool {
		return value(metricstest.Get(t, reg.Handler()), "hikaricp_connections_pending") == 1
	})
	s = metricstest.Get(t, reg.Handler())
	assert.Equal(t, 2.0, value(s, "hikaricp_connections_active"))
	assert.Equal(t, 2.0, value(s, "hikaricp_connections"))

	require.NoError(t, first.Rollback())
	require.NoError(t, <-waited)
	require.NoError(t, second.Rollback())
	waitUntil(t, "every connection idle in the scrape", func() bool {
		s := metricstest.Get(t, reg.Handler())
		return value(s, "hikaricp_connections_active") == 0 && value(s, "hikaricp_connections_usage_seconds") == 3
	})
	s = metricstest.Get(t, reg.Handler())
	assert.Equal(t, 0.0, value(s, "hikaricp_connections_pending"))
	assert.Equal(t, 2.0, value(s, "hikaricp_connections_idle"))
	assert.Equal(t, 2.0, value(s, "hikaricp_connections"))
	assert.Equal(t, 3.0, value(s, "hikaricp_connections_acquire_seconds"), "three acquires got a connection")
	assert.Equal(t, 2.0, value(s, "hikaricp_connections_creation_seconds"), "the pool opened two connections")
	assert.Positive(t, value(s, "hikaricp_connections_usage_seconds_max"))
}
