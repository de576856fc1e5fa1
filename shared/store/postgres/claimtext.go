package postgres

import (
	"regexp"
	"strconv"
	"sync"
)

// The claims (the outbox's two and the inbox relay's) are prepared statements, and PostgreSQL
// plans a prepared statement either for its parameters at each execution (a custom plan) or
// once for any parameters (a generic plan), whichever its plan cache judges cheaper after five
// custom plans. A LIMIT whose value is a parameter makes the generic plan look dear (the
// planner assumes a tenth of the rows that the scan finds), so the unwindowed outbox claim
// and the relay's claim were planned again at every execution: 0.3-0.5 ms per claim of 100
// rows in EXPLAIN ANALYZE on a quiet machine, against 0.03 ms for the generic plan, which is
// the same plan. In perf, planning fell from 3.5 % to 0.7 % of PostgreSQL's CPU during the
// 100 000-row side-by-side runs (bench/README.md).
//
// limitTexts writes the limits into the statement's text instead, one text per pair of values
// (at most maxLimitTexts pairs; a poller uses one or two). With no parameter that changes the
// plan, the plan cache can keep the generic plan after five executions, and on a quiet server
// it does (7 generic and 5 custom plans in 12 executions of each claim). It stays the cache's
// choice: it weighs costs that move with the table's size, and during the tests under load,
// with other databases being created and dropped, it once planned the relay's claim at each
// of 12 executions. A pair beyond the bound runs the statement with parameters, as before.
type limitTexts struct {
	mu    sync.Mutex
	texts map[[2]int]string
}

// maxLimitTexts bounds the texts of one statement, so that a caller whose limits vary widely
// cannot fill the pool's statement caches and the server's memory with prepared statements.
const maxLimitTexts = 32

// claimParams finds the parameters of a claim: $1 the limit, $2 the lease, $3 the window (if
// any) and $4 the rows that a lock claim's window passes over (if any).
var claimParams = regexp.MustCompile(`\$[1234]\b`)

// text returns sql with $1 written as limit, $3 as window and $2 renumbered $1, and whether it
// did; false when the bound of texts is reached.
func (l *limitTexts) text(sql string, limit, window int) (string, bool) {
	key := [2]int{limit, window}
	l.mu.Lock()
	defer l.mu.Unlock()
	if t, ok := l.texts[key]; ok {
		return t, true
	}
	if len(l.texts) >= maxLimitTexts {
		return "", false
	}
	if l.texts == nil {
		l.texts = make(map[[2]int]string)
	}
	t := inlineLimits(sql, limit, window)
	l.texts[key] = t
	return t, true
}

// inlineLimits writes limit for $1 and window for $3 into a claim statement and renumbers its
// lease parameter $2 as $1, the statement's only parameter then, or its first with the rows to
// pass over, $4, renumbered $2.
func inlineLimits(sql string, limit, window int) string {
	return claimParams.ReplaceAllStringFunc(sql, func(m string) string {
		switch m {
		case "$1":
			return strconv.Itoa(limit)
		case "$2":
			return "$1"
		case "$4":
			return "$2"
		}
		return strconv.Itoa(window)
	})
}

// claimPlanSQL sets the planner settings of an outbox claim, for its transaction alone
// (set_config with is_local true; boundedPool.QueryAfter sends it and the claim in one
// round trip). The claim must read the due rows in the order of idx_outbox_pending_scheduled
// and stop at its limit. Which plan reaches that is otherwise the statistics' choice, and
// they are wrong exactly when speed matters: rows bulk-inserted into a table never analysed
// (the planner's default selectivities put 17 due rows where 100 000 were) were read by a
// bitmap scan of every due row and sorted on disk, 180 ms for a claim of 500 that the
// ordered index scan does in under 1 ms, and every claim paid it again until autovacuum's
// analyse came. A generic plan cached while the table was small did the same. With bitmap
// and sequential scans priced out, the ordered index scan is the cheapest plan whatever the
// statistics say (TestTheClaimsPlanIgnoresStatistics). A sort is left allowed: the windowed
// claim sorts the few rows that it picked, and without a sort the planner could only reach
// their order by walking every due row. JIT is off as well: a scan that is turned off but
// has no alternative (an outbox table without the index, say) is priced past jit_above_cost,
// and compiling the plan then took 420 ms at every execution here; a claim of a few hundred
// rows never gains from it.
const claimPlanSQL = `SELECT set_config('enable_bitmapscan', 'off', true), set_config('enable_seqscan', 'off', true), set_config('jit', 'off', true)`

// relayClaimPlan is the planner settings of the inbox relay's claim, for its transaction
// alone: the select list of the relay lock's statement. The claim must read the pending rows
// in created_at order through idx_inbox_state_created, sort each run of rows with one
// created_at by id (an incremental sort), and stop at its limit, which is the plan that
// PostgreSQL chooses once it has analysed the inbox. With the statistics from before a burst
// of webhooks it read every pending push row through idx_inbox_consumption_pending and
// sorted them all on disk instead: 110-270 ms per claim of 100 on 100 000 pending rows,
// against 0.4 ms. Here a full sort is priced out too, since that is the plan to avoid, and
// JIT is off for the reason claimPlanSQL gives (the final sort of the claimed rows, which
// every plan needs, now carries the price of a disabled sort).
const relayClaimPlan = `set_config('enable_bitmapscan', 'off', true), set_config('enable_seqscan', 'off', true), ` +
	`set_config('enable_sort', 'off', true), set_config('jit', 'off', true)`
