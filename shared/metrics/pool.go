package metrics

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/alternayte/queuebox/shared/store"
)

// PoolName is the value of the pool label that the local process gives its one database
// pool. The original names its HikariCP pool itself; this implementation uses "queuebox".
const PoolName = "queuebox"

// PoolStats is one snapshot of a connection pool, taken at each scrape.
type PoolStats struct {
	// Total is the connections in the pool, both idle and active.
	Total int64
	// Active is the connections that a caller holds.
	Active int64
	// Idle is the connections that are free.
	Idle int64
	// Pending is the callers that wait for a connection.
	Pending int64
	// Min is the minimum idle connection count of the pool configuration.
	Min int64
	// Max is the maximum pool size of the pool configuration.
	Max int64
}

// poolFamilies holds the hikaricp_connections_* families of a registry. They are created on
// the first pool, so a process without a pool shows none of them.
type poolFamilies struct {
	timeouts *prometheus.CounterVec
	acquire  *timer
	creation *timer
	usage    *timer
	gauges   *poolCollector
}

func (r *Registry) poolFamilies() *poolFamilies {
	r.poolOnce.Do(func() {
		f := promFactory{r.reg}
		r.pool = &poolFamilies{
			timeouts: f.counterVec("hikaricp_connections_timeout_total", "The connection requests that timed out.", "pool"),
			acquire:  f.timer("hikaricp_connections_acquire_seconds", "The time to acquire a connection from the pool.", "pool"),
			creation: f.timer("hikaricp_connections_creation_seconds", "The time to create a physical connection.", "pool"),
			usage:    f.timer("hikaricp_connections_usage_seconds", "The time a caller held a connection.", "pool"),
			gauges:   newPoolCollector(),
		}
		r.reg.MustRegister(r.pool.gauges)
	})
	return r.pool
}

// RegisterPool registers the gauges hikaricp_connections, _active, _idle, _pending, _min and
// _max of the pool named pool. Each scrape calls stats once. Registering a name again
// replaces its stats function.
func (r *Registry) RegisterPool(pool string, stats func() PoolStats) {
	r.poolFamilies().gauges.set(pool, stats)
}

// poolCollector reports the gauges of every registered pool from a snapshot per scrape.
type poolCollector struct {
	total, active, idle, pending, min, max *prometheus.Desc

	mu    sync.Mutex
	pools map[string]func() PoolStats
}

func newPoolCollector() *poolCollector {
	desc := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, []string{"pool"}, nil)
	}
	return &poolCollector{
		total:   desc("hikaricp_connections", "The connections in the pool, both idle and active."),
		active:  desc("hikaricp_connections_active", "The connections that a caller holds."),
		idle:    desc("hikaricp_connections_idle", "The connections that are free."),
		pending: desc("hikaricp_connections_pending", "The callers that wait for a connection."),
		min:     desc("hikaricp_connections_min", "The minimum idle connection count of the pool configuration."),
		max:     desc("hikaricp_connections_max", "The maximum pool size of the pool configuration."),
		pools:   map[string]func() PoolStats{},
	}
}

func (c *poolCollector) set(pool string, stats func() PoolStats) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.pools[pool] = stats
}

// Describe implements prometheus.Collector.
func (c *poolCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.total, c.active, c.idle, c.pending, c.min, c.max} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *poolCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	pools := make(map[string]func() PoolStats, len(c.pools))
	for name, stats := range c.pools {
		pools[name] = stats
	}
	c.mu.Unlock()
	for name, stats := range pools {
		s := stats()
		for _, g := range []struct {
			desc  *prometheus.Desc
			value int64
		}{
			{c.total, s.Total}, {c.active, s.Active}, {c.idle, s.Idle},
			{c.pending, s.Pending}, {c.min, s.Min}, {c.max, s.Max},
		} {
			ch <- prometheus.MustNewConstMetric(g.desc, prometheus.GaugeValue, float64(g.value), name)
		}
	}
}

// PoolTracer measures a pgx pool for the hikaricp_connections_* families: the acquire time
// and the acquires in progress (pgxpool.AcquireTracer), the time a caller holds a connection
// (pgxpool.ReleaseTracer), the time to open a physical connection (pgx.ConnectTracer) and
// the acquires that time out. pgxpool picks these interfaces up from ConnConfig.Tracer, so
// a PoolTracer is also a pgx.QueryTracer, one that does nothing.
//
// One PoolTracer serves one pool. Its methods are safe for concurrent use.
type PoolTracer struct {
	pool     string
	reg      *Registry
	families *poolFamilies
	pending  atomic.Int64

	mu   sync.Mutex
	held map[*pgx.Conn]time.Time // acquired connections and when their caller got them
}

// The interfaces through which pgx and pgxpool call a PoolTracer.
var (
	_ pgx.QueryTracer       = (*PoolTracer)(nil)
	_ pgx.ConnectTracer     = (*PoolTracer)(nil)
	_ pgxpool.AcquireTracer = (*PoolTracer)(nil)
	_ pgxpool.ReleaseTracer = (*PoolTracer)(nil)
	_ prometheus.Collector  = (*poolCollector)(nil)
)

// NewPoolTracer returns the tracer of the pool named pool. It registers the counter and the
// timers of the pool with a zero value, so they appear in the scrape before the first
// measurement. Set it as ConnConfig.Tracer of the pool configuration, then call Attach with
// the pool to register its gauges.
func NewPoolTracer(r *Registry, pool string) *PoolTracer {
	f := r.poolFamilies()
	f.timeouts.WithLabelValues(pool)
	for _, t := range []*timer{f.acquire, f.creation, f.usage} {
		t.summary.WithLabelValues(pool)
		t.maxes.WithLabelValues(pool)
	}
	return &PoolTracer{pool: pool, reg: r, families: f, held: map[*pgx.Conn]time.Time{}}
}

// Attach registers the gauges of p, whose configuration carries t as its tracer, in the
// registry of t. The gauges read p.Stat at each scrape; the pending gauge is the acquires in
// progress that t counts; min and max are MinIdleConns and MaxConns of the configuration.
func (t *PoolTracer) Attach(p *pgxpool.Pool) {
	cfg := p.Config()
	minIdle, maxConns := int64(cfg.MinIdleConns), int64(cfg.MaxConns)
	t.AttachStats(func() store.PoolStats {
		s := p.Stat()
		return store.PoolStats{
			Active: int64(s.AcquiredConns()), Idle: int64(s.IdleConns()),
			MinIdle: minIdle, Max: maxConns,
		}
	})
}

// AttachStats registers the gauges of the pool whose snapshot stats returns (a dialect
// driver's store.Driver.PoolStats), whose configuration carries t as its tracer, in the
// registry of t. The gauges call stats at each scrape; the pending gauge is the acquires in
// progress that t counts.
func (t *PoolTracer) AttachStats(stats func() store.PoolStats) {
	t.reg.RegisterPool(t.pool, func() PoolStats {
		s := stats()
		return PoolStats{
			Total: s.Active + s.Idle, Active: s.Active, Idle: s.Idle,
			Pending: t.pending.Load(), Min: s.MinIdle, Max: s.Max,
		}
	})
}

type acquireStartKey struct{}

type connectStartKey struct{}

// TraceAcquireStart implements pgxpool.AcquireTracer: the acquire waits from now.
func (t *PoolTracer) TraceAcquireStart(ctx context.Context, _ *pgxpool.Pool, _ pgxpool.TraceAcquireStartData) context.Context {
	t.pending.Add(1)
	return context.WithValue(ctx, acquireStartKey{}, time.Now())
}

// TraceAcquireEnd implements pgxpool.AcquireTracer. It observes the acquire time of a
// connection that the caller got, and counts an acquire that ran out of time as a timeout.
func (t *PoolTracer) TraceAcquireEnd(ctx context.Context, _ *pgxpool.Pool, data pgxpool.TraceAcquireEndData) {
	t.pending.Add(-1)
	now := time.Now()
	if data.Err != nil {
		if errors.Is(data.Err, context.DeadlineExceeded) || pgconn.Timeout(data.Err) {
			t.families.timeouts.WithLabelValues(t.pool).Inc()
		}
		return
	}
	if start, ok := ctx.Value(acquireStartKey{}).(time.Time); ok {
		t.families.acquire.observe(now.Sub(start), t.pool)
	}
	if data.Conn != nil {
		t.mu.Lock()
		t.held[data.Conn] = now
		t.mu.Unlock()
	}
}

// TraceRelease implements pgxpool.ReleaseTracer: it observes how long the caller held the
// connection. A connection that the caller hijacks is never released and keeps its entry.
func (t *PoolTracer) TraceRelease(_ *pgxpool.Pool, data pgxpool.TraceReleaseData) {
	t.mu.Lock()
	since, ok := t.held[data.Conn]
	delete(t.held, data.Conn)
	t.mu.Unlock()
	if ok {
		t.families.usage.observe(time.Since(since), t.pool)
	}
}

// TraceConnectStart implements pgx.ConnectTracer: a physical connection opens from now.
func (t *PoolTracer) TraceConnectStart(ctx context.Context, _ pgx.TraceConnectStartData) context.Context {
	return context.WithValue(ctx, connectStartKey{}, time.Now())
}

// TraceConnectEnd implements pgx.ConnectTracer: it observes the creation time of a
// connection that opened.
func (t *PoolTracer) TraceConnectEnd(ctx context.Context, data pgx.TraceConnectEndData) {
	if data.Err != nil {
		return
	}
	if start, ok := ctx.Value(connectStartKey{}).(time.Time); ok {
		t.families.creation.observe(time.Since(start), t.pool)
	}
}

// TraceQueryStart implements pgx.QueryTracer; it does nothing.
func (t *PoolTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	return ctx
}

// TraceQueryEnd implements pgx.QueryTracer; it does nothing.
func (t *PoolTracer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
