package postgres

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/alternayte/queuebox/shared/store"
)

// PoolTracer reports the events of a pgx pool to a store.PoolObserver: the acquire time
// (pgxpool.AcquireTracer), the time a caller holds a connection (pgxpool.ReleaseTracer), the
// time to open a physical connection (pgx.ConnectTracer) and the acquires that time out.
// pgxpool picks these interfaces up from ConnConfig.Tracer, so a PoolTracer is also a
// pgx.QueryTracer, one that does nothing.
//
// One PoolTracer serves one pool. Its methods are safe for concurrent use.
type PoolTracer struct {
	obs store.PoolObserver

	mu   sync.Mutex
	held map[*pgx.Conn]time.Time // acquired connections and when their caller got them
}

// The interfaces through which pgx and pgxpool call a PoolTracer.
var (
	_ pgx.QueryTracer       = (*PoolTracer)(nil)
	_ pgx.ConnectTracer     = (*PoolTracer)(nil)
	_ pgxpool.AcquireTracer = (*PoolTracer)(nil)
	_ pgxpool.ReleaseTracer = (*PoolTracer)(nil)
)

// NewPoolTracer returns the tracer that reports to obs. Set it as ConnConfig.Tracer of the
// pool configuration.
func NewPoolTracer(obs store.PoolObserver) *PoolTracer {
	return &PoolTracer{obs: obs, held: map[*pgx.Conn]time.Time{}}
}

// PoolStats returns the snapshot function of pool: the acquired and idle connections of
// pool.Stat, and MinIdleConns and MaxConns of its configuration.
func PoolStats(pool *pgxpool.Pool) func() store.PoolStats { return poolStats(pool) }

type acquireStartKey struct{}

type connectStartKey struct{}

// TraceAcquireStart implements pgxpool.AcquireTracer: the acquire waits from now.
func (t *PoolTracer) TraceAcquireStart(ctx context.Context, _ *pgxpool.Pool, _ pgxpool.TraceAcquireStartData) context.Context {
	t.obs.AcquireStarted()
	return context.WithValue(ctx, acquireStartKey{}, time.Now())
}

// TraceAcquireEnd implements pgxpool.AcquireTracer. It reports the acquire time of a
// connection that the caller got, and an acquire that ran out of time as a timeout.
func (t *PoolTracer) TraceAcquireEnd(ctx context.Context, _ *pgxpool.Pool, data pgxpool.TraceAcquireEndData) {
	now := time.Now()
	var wait time.Duration
	if start, ok := ctx.Value(acquireStartKey{}).(time.Time); ok {
		wait = now.Sub(start)
	}
	if data.Err != nil {
		t.obs.AcquireEnded(wait, data.Err, errors.Is(data.Err, context.DeadlineExceeded) || pgconn.Timeout(data.Err))
		return
	}
	t.obs.AcquireEnded(wait, nil, false)
	if data.Conn != nil {
		t.mu.Lock()
		t.held[data.Conn] = now
		t.mu.Unlock()
	}
}

// TraceRelease implements pgxpool.ReleaseTracer: it reports how long the caller held the
// connection. A connection that the caller hijacks is never released and keeps its entry.
func (t *PoolTracer) TraceRelease(_ *pgxpool.Pool, data pgxpool.TraceReleaseData) {
	t.mu.Lock()
	since, ok := t.held[data.Conn]
	delete(t.held, data.Conn)
	t.mu.Unlock()
	if ok {
		t.obs.Released(time.Since(since))
	}
}

// TraceConnectStart implements pgx.ConnectTracer: a physical connection opens from now.
func (t *PoolTracer) TraceConnectStart(ctx context.Context, _ pgx.TraceConnectStartData) context.Context {
	return context.WithValue(ctx, connectStartKey{}, time.Now())
}

// TraceConnectEnd implements pgx.ConnectTracer: it reports the creation time of a
// connection that opened.
func (t *PoolTracer) TraceConnectEnd(ctx context.Context, data pgx.TraceConnectEndData) {
	if data.Err != nil {
		return
	}
	if start, ok := ctx.Value(connectStartKey{}).(time.Time); ok {
		t.obs.Connected(time.Since(start))
	}
}

// TraceQueryStart implements pgx.QueryTracer; it does nothing.
func (t *PoolTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	return ctx
}

// TraceQueryEnd implements pgx.QueryTracer; it does nothing.
func (t *PoolTracer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
