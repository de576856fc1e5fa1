package main

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// report is the whole run: one table per scenario.
type report struct {
	opts           options
	started, ended time.Time
	load0, load1   string
	results        []*result
}

func (r *report) failed() bool {
	for _, res := range r.results {
		if len(res.failures) > 0 {
			return true
		}
	}
	return false
}

func (r *report) markdown() string {
	var b strings.Builder
	mode := "full"
	if r.opts.short {
		mode = "short (-short)"
	}
	fmt.Fprintf(&b, "\n## Chaos run of %s UTC (%s mode, %s)\n\n", r.started.Format("2006-01-02 15:04"), mode, r.ended.Sub(r.started).Round(time.Second))
	fmt.Fprintf(&b, "Machine: %s. Load average (1/5/15 min) at the start %s, at the end %s.\n", machine(), r.load0, r.load1)
	fmt.Fprintf(&b, "Settings: %d rows over %d keys per scenario, %d kills, %d replicas, %d pull workers, %d PostgreSQL restarts, %d partitions, outbox.claimMode %s.\n",
		r.opts.rows, r.opts.keys, r.opts.kills, r.opts.replicas, r.opts.workers, r.opts.restarts, r.opts.partitions, r.opts.claimMode)
	for _, res := range r.results {
		fmt.Fprintf(&b, "\n### %s: %s\n\n", res.name, res.title)
		b.WriteString("| figure | value |\n| --- | --- |\n")
		row := func(k, v string) { fmt.Fprintf(&b, "| %s | %s |\n", k, strings.ReplaceAll(v, "|", "\\|")) }
		if res.judged {
			v := res.v
			row("rows", fmt.Sprint(v.rows))
			row("rows lost (must be 0)", fmt.Sprint(v.lost))
			row("order violations (must be 0): early / late", fmt.Sprintf("%d (%d / %d)", v.premature+v.late, v.premature, v.late))
			row("rows delivered (acknowledged at least once)", fmt.Sprint(v.delivered))
			row("duplicates (acknowledgements beyond the first)", fmt.Sprint(v.duplicates))
			row("requests at the receiver", fmt.Sprintf("%d (%s)", v.requests, outcomes(v.outcomes)))
			row("rows dead", deadText(v))
			row("rows not drained at the end", fmt.Sprint(v.notDrained))
		}
		for _, f := range res.figures {
			row(f[0], f[1])
		}
		row("time to drain after the chaos", res.drain.Round(time.Millisecond).String())
		row("scenario time", res.total.Round(time.Millisecond).String())
		if len(res.failures) == 0 {
			row("verdict", "PASS")
		} else {
			row("verdict", "FAIL: "+strings.Join(res.failures, " / "))
		}
		for _, n := range res.notes {
			row("note", n)
		}
	}
	b.WriteString("\n")
	if r.failed() {
		b.WriteString("RESULT: FAIL\n")
	} else {
		b.WriteString("RESULT: PASS (no row lost, no order violation)\n")
	}
	return b.String()
}

func outcomes(m map[string]int) string {
	var parts []string
	for _, k := range []string{outcomeOK, outcomeFail, outcomeStall, outcomeGone} {
		if m[k] > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", map[string]string{outcomeOK: "200", outcomeFail: "500", outcomeStall: "stalled", outcomeGone: "abandoned by the sender"}[k], m[k]))
		}
	}
	return strings.Join(parts, ", ")
}

func deadText(v verdict) string {
	if v.dead == 0 {
		return "0"
	}
	var keys []string
	for k, n := range v.deadKeys {
		keys = append(keys, fmt.Sprintf("%s %d", k, n))
	}
	sort.Strings(keys)
	var why []string
	for k, n := range v.deadWhy {
		why = append(why, fmt.Sprintf("%d x \"%s\"", n, k))
	}
	sort.Strings(why)
	return fmt.Sprintf("%d (keys: %s; last_error: %s)", v.dead, strings.Join(keys, ", "), strings.Join(why, ", "))
}
