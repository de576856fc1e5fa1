package outboxbench

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
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

// stmtTracer is a pgx query tracer that sums time and rows per statement kind.
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

type traceKey struct{}

type traceStart struct {
	kind  string
	start time.Time
}

func newStmtTracer() *stmtTracer { return &stmtTracer{kinds: map[string]*stmtAcc{}} }

// kindOf names a statement of the postgres store by the text that only it holds.
func kindOf(sql string) string {
	switch {
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

// TraceQueryStart implements pgx.QueryTracer.
func (t *stmtTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	return context.WithValue(ctx, traceKey{}, traceStart{kind: kindOf(data.SQL), start: time.Now()})
}

// TraceQueryEnd implements pgx.QueryTracer.
func (t *stmtTracer) TraceQueryEnd(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryEndData) {
	st, ok := ctx.Value(traceKey{}).(traceStart)
	if !ok {
		return
	}
	d := time.Since(st.start)
	t.mu.Lock()
	defer t.mu.Unlock()
	a := t.kinds[st.kind]
	if a == nil {
		a = &stmtAcc{}
		t.kinds[st.kind] = a
	}
	a.count++
	a.rows += data.CommandTag.RowsAffected()
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
