package outboxbench

import (
	"strings"
	"sync"
	"time"
)

// StatementStats sums the statements of one kind that the poller ran, as the client saw them:
// from sending the statement to reading its last row, commit included (every statement of the
// poller is its own transaction).
type StatementStats struct {
	Count   int     `json:"count"`
	Rows    int64   `json:"rows"`
	TotalMs float64 `json:"totalMs"`
	MeanMs  float64 `json:"meanMs"`
	MaxMs   float64 `json:"maxMs"`
	// RowsPerStatement is Rows / Count.
	RowsPerStatement float64 `json:"rowsPerStatement"`
}

// stmtTracer sums time and rows per statement kind; its observe is the pgtool.QueryTimer of
// the poller pool.
type stmtTracer struct {
	mu    sync.Mutex
	kinds map[string]*stmtAcc
}

type stmtAcc struct {
	count int
	rows  int64
	total time.Duration
	max   time.Duration
}

func newStmtTracer() *stmtTracer { return &stmtTracer{kinds: map[string]*stmtAcc{}} }

// kindOf names a statement of the postgres store by the text that only it holds.
func kindOf(sql string) string {
	switch {
	case strings.Contains(sql, "set_config('enable_bitmapscan'"):
		return "claimSettings"
	case strings.Contains(sql, "qb_candidates"):
		return "claim"
	case strings.Contains(sql, "= 'sent'") && strings.HasPrefix(strings.TrimSpace(sql), "UPDATE"):
		return "markSent"
	case strings.Contains(sql, "= 'dead'") && strings.HasPrefix(strings.TrimSpace(sql), "UPDATE"):
		return "markDead"
	case strings.Contains(sql, "delay_us"):
		return "retry"
	case strings.Contains(sql, "unnest"):
		return "renew"
	case strings.Contains(sql, "GROUP BY"):
		return "stats"
	case strings.Contains(sql, "= 'pending'") && strings.HasPrefix(strings.TrimSpace(sql), "UPDATE"):
		return "reclaim"
	default:
		return "other"
	}
}

// observe adds one query that took d and affected rows to the sums of its kind. It is the
// pgtool.QueryTimer of the poller pool: pgtool measures d from the start of the query to its
// end, whether it failed or not.
func (t *stmtTracer) observe(sql string, d time.Duration, rows int64, _ error) {
	kind := kindOf(sql)
	t.mu.Lock()
	defer t.mu.Unlock()
	a := t.kinds[kind]
	if a == nil {
		a = &stmtAcc{}
		t.kinds[kind] = a
	}
	a.count++
	a.rows += rows
	a.total += d
	a.max = max(a.max, d)
}

func (t *stmtTracer) snapshot() map[string]StatementStats {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make(map[string]StatementStats, len(t.kinds))
	for k, a := range t.kinds {
		s := StatementStats{Count: a.count, Rows: a.rows, TotalMs: round(ms(a.total), 1),
			MeanMs: round(ms(a.total)/float64(a.count), 3), MaxMs: round(ms(a.max), 1)}
		if a.count > 0 {
			s.RowsPerStatement = round(float64(a.rows)/float64(a.count), 1)
		}
		out[k] = s
	}
	return out
}
