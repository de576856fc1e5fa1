package main

import (
	"fmt"
	"io"
	"strconv"
)

// printTable writes the runs of each comparison, then QueueBox's ratios to the best peer.
func printTable(w io.Writer, rep *Report) {
	p := func(format string, args ...any) { _, _ = fmt.Fprintf(w, format, args...) }
	m := rep.Machine
	p("\nSide by side: QueueBox, River and Watermill - %s, %d cores, %s, PostgreSQL %s, payload %d bytes\n",
		rep.Date, m.Cores, m.GoVersion, rep.Postgres.Version, rep.PayloadSize)
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
		p("\n%-30s %8s %7s %7s %6s %5s %-27s %-14s %5s %5s %7s\n", fmt.Sprintf("%d rows, %s", c.Rows, keysLabel(c.Keys)),
			"rows/s", "ratio", "seconds", "prep s", "load1", "cpu proc/pg/rcv/other s", "us/row p/pg/r", "dup", "order", "autovac")
		for _, r := range c.Runs {
			ratio := "-"
			if c.BestPeerRate > 0 {
				ratio = fmt.Sprintf("%.2fx", r.RowsPerSecond/c.BestPeerRate)
			}
			order := "-"
			if r.Delivery.OrderChecked {
				order = strconv.Itoa(r.Delivery.OrderViolations)
			}
			u := r.CPU
			p("%-30s %8.0f %7s %7.2f %6.1f %5.2f %-27s %-14s %5d %5s %7d\n", r.Label, r.RowsPerSecond, ratio, r.Seconds, r.PrepareSeconds, r.Load1,
				fmt.Sprintf("%.1f/%.1f/%.1f/%.1f (%.0f%%)", u.Process, u.Postgres, u.Receiver, u.Other, u.MachineBusyPct),
				fmt.Sprintf("%.0f/%.0f/%.0f", u.ProcessUsRow, u.PostgresUsRow, u.ReceiverUsRow), r.Delivery.Duplicates, order, r.Tables.Autovacuums)
		}
	}
	p("\n%-30s %9s %7s  %s\n", "QueueBox / best peer", "defaults", "tuned", "best peer")
	for _, c := range rep.Comparisons {
		if c.BestPeerRate <= 0 {
			continue
		}
		p("%-30s %8.2fx %6.2fx  %s, %.0f rows/s\n", fmt.Sprintf("%d rows, %s", c.Rows, keysLabel(c.Keys)),
			c.RatioDefaults, c.RatioTuned, c.BestPeer, c.BestPeerRate)
	}
	if len(rep.Problems) > 0 {
		p("\nPROBLEMS:\n")
		for _, pr := range rep.Problems {
			p("  %s\n", pr)
		}
	}
	p("total %.0f s\n", rep.Seconds)
}
