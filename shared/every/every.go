// Package every spaces out a periodic step that several goroutines may attempt: the reclaim
// of expired leases (at most once per claimTimeoutMs / 5) and the refresh of the pending
// gauges (at most once per pendingGaugeIntervalMs) of the outbox poller and the inbox relay.
package every

import (
	"sync"
	"time"
)

// Gate lets a step run at most once per interval. The zero Gate lets the first Take through.
// It is safe for concurrent use.
type Gate struct {
	mu   sync.Mutex
	last time.Time
}

// Take reports whether interval has passed since the last step that it let through; when it
// has, it records now as that step's time, so a concurrent Take returns false.
func (g *Gate) Take(interval time.Duration) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := time.Now()
	if !g.last.IsZero() && now.Sub(g.last) < interval {
		return false
	}
	g.last = now
	return true
}

// Forget lets the next Take through at once, for a step that failed and should be tried again
// without waiting for the interval.
func (g *Gate) Forget() {
	g.mu.Lock()
	g.last = time.Time{}
	g.mu.Unlock()
}
