package metrics

import (
	"sync"
	"sync/atomic"
	"time"

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
		f := r.factory()
		r.pool = &poolFamilies{
			timeouts: f.counterVec("hikaricp_connections_timeout_total", "The connection requests that timed out.", "pool"),
			acquire:  f.timer("hikaricp_connections_acquire_seconds", "The time to acquire a connection from the pool.", "pool"),
			creation: f.timer("hikaricp_connections_creation_seconds", "The time to create a physical connection.", "pool"),
			usage:    f.timer("hikaricp_connections_usage_seconds", "The time a caller held a connection.", "pool"),
			gauges:   newPoolCollector(f),
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

// newPoolCollector returns the collector of the pool gauges, which f describes.
func newPoolCollector(f promFactory) *poolCollector {
	desc := func(name, help string) *prometheus.Desc {
		f.describe("gauge", name, help, []string{"pool"})
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

// PoolTracer measures a connection pool for the hikaricp_connections_* families: the acquire
// time and the acquires in progress, the time a caller holds a connection, the time to open a
// physical connection and the acquires that time out. It is the store.PoolObserver that the
// dialect driver reports to (store.OpenConfig.Tracer; on PostgreSQL through
// postgres.PoolTracer, on SQL Server through shared/store/sqlpool). An acquire that
// database.connectionTimeoutMs ended (store.ErrPoolTimeout) counts in
// hikaricp_connections_timeout_total, as does one that the caller's deadline ended.
//
// One PoolTracer serves one pool. Its methods are safe for concurrent use.
type PoolTracer struct {
	pool     string
	reg      *Registry
	families *poolFamilies
	pending  atomic.Int64
}

var (
	_ store.PoolObserver   = (*PoolTracer)(nil)
	_ prometheus.Collector = (*poolCollector)(nil)
)

// NewPoolTracer returns the tracer of the pool named pool. It registers the counter and the
// timers of the pool with a zero value, so they appear in the scrape before the first
// measurement. Pass it to the driver as the observer of the pool, then call AttachStats with
// the pool's statistics to register its gauges.
func NewPoolTracer(r *Registry, pool string) *PoolTracer {
	f := r.poolFamilies()
	f.timeouts.WithLabelValues(pool)
	for _, t := range []*timer{f.acquire, f.creation, f.usage} {
		t.summary.WithLabelValues(pool)
		t.maxes.WithLabelValues(pool)
	}
	return &PoolTracer{pool: pool, reg: r, families: f}
}

// AttachStats registers the gauges of the pool whose snapshot stats returns (a dialect
// driver's store.Driver.PoolStats), whose driver reports to t, in the registry of t. The
// gauges call stats at each scrape; the pending gauge is the acquires in progress that t
// counts.
func (t *PoolTracer) AttachStats(stats func() store.PoolStats) {
	t.reg.RegisterPool(t.pool, func() PoolStats {
		s := stats()
		return PoolStats{
			Total: s.Active + s.Idle, Active: s.Active, Idle: s.Idle,
			Pending: t.pending.Load(), Min: s.MinIdle, Max: s.Max,
		}
	})
}

// AcquireStarted implements store.PoolObserver: one more acquire in progress.
func (t *PoolTracer) AcquireStarted() { t.pending.Add(1) }

// AcquireEnded implements store.PoolObserver. It observes the acquire time of a connection
// that the caller got, and counts an acquire that ran out of time as a timeout.
func (t *PoolTracer) AcquireEnded(wait time.Duration, err error, timedOut bool) {
	t.pending.Add(-1)
	if err != nil {
		if timedOut {
			t.families.timeouts.WithLabelValues(t.pool).Inc()
		}
		return
	}
	t.families.acquire.observe(wait, t.pool)
}

// Released implements store.PoolObserver: it observes how long the caller held the
// connection.
func (t *PoolTracer) Released(held time.Duration) { t.families.usage.observe(held, t.pool) }

// Connected implements store.PoolObserver: it observes the creation time of a connection.
func (t *PoolTracer) Connected(took time.Duration) { t.families.creation.observe(took, t.pool) }
