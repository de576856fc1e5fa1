package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"
)

// printTable writes each comparison's medians per system, then QueueBox's ratios to the best
// peer and every system's fraction of the ceiling.
func printTable(w io.Writer, rep *Report) {
	p := func(format string, args ...any) { _, _ = fmt.Fprintf(w, format, args...) }
	m := rep.Machine
	p("\nSide by side: QueueBox, River, Watermill and the ceiling - %s, %d cores, %s, PostgreSQL %s, payload %d bytes, %d rounds\n",
		rep.Date, m.Cores, m.GoVersion, rep.Postgres.Version, rep.PayloadSize, rep.Options.Rounds)
	p("load average at start %.2f %.2f %.2f, at end %.2f %.2f %.2f\n",
		m.LoadAvgStart[0], m.LoadAvgStart[1], m.LoadAvgStart[2], m.LoadAvgEnd[0], m.LoadAvgEnd[1], m.LoadAvgEnd[2])
	if len(rep.Exploration) > 0 {
		p("\ntuned candidates (QueueBox):")
		for _, r := range rep.Exploration {
			p(" %s %s %.0f/s;", keysLabel(r.Keys), r.Label, r.RowsPerSecond)
		}
		p("\n")
	}
	for _, c := range rep.Comparisons {
		p("\n%-50s %8s %-23s %-17s %6s %6s %-14s %4s %5s  %s\n", fmt.Sprintf("%d rows, %s", c.Rows, keysLabel(c.Keys)),
			"median", "rows/s of each round", "load1 of each", "/ceil", "/peer", "us/row p/pg/r", "dup", "order", "per-key order")
		for _, s := range c.Systems {
			order := "-"
			if s.OrderChecked {
				order = strconv.Itoa(s.OrderViolations)
			}
			u := s.CPU
			p("%-50s %8.0f %-23s %-17s %6s %6s %-14s %4d %5s  %s\n", s.Label, s.Median, joinFloats(s.Rates, 0), joinFloats(s.Loads, 1),
				fraction(s.OfCeiling), fraction(s.ToBestPeer), fmt.Sprintf("%.0f/%.0f/%.0f", u.ProcessUsRow, u.PostgresUsRow, u.ReceiverUsRow),
				s.Duplicates, order, s.Order)
		}
	}
	p("\n%-30s %9s %7s %11s  %-44s %s\n", "QueueBox / best peer (median)", "defaults", "tuned", "tuned lock",
		"best peer (median rows/s)", "ceiling (median rows/s)")
	for _, c := range rep.Comparisons {
		p("%-30s %9s %7s %11s  %-44s %s\n", fmt.Sprintf("%d rows, %s", c.Rows, keysLabel(c.Keys)),
			times(c.RatioDefaults), times(c.RatioTuned), times(c.RatioTunedLock),
			fmt.Sprintf("%s, %.0f", c.BestPeer, c.BestPeerRate), fmt.Sprintf("%s, %.0f", c.Ceiling, c.CeilingRate))
	}
	if len(rep.Problems) > 0 {
		p("\nPROBLEMS:\n")
		for _, pr := range rep.Problems {
			p("  %s\n", pr)
		}
	}
	p("total %.0f s\n", rep.Seconds)
}

// joinFloats writes vs with the given decimals, separated by slashes.
func joinFloats(vs []float64, decimals int) string {
	ss := make([]string, len(vs))
	for i, v := range vs {
		ss[i] = strconv.FormatFloat(v, 'f', decimals, 64)
	}
	return strings.Join(ss, "/")
}

// fraction writes a ratio, or "-" when there is none.
func fraction(v float64) string {
	if v <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", v)
}

// times writes a ratio with an x ("1.20x"), or "-" when there is none (a variant that did not
// run).
func times(v float64) string {
	if v <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.2fx", v)
}
