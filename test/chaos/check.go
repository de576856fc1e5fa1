package main

import (
	"fmt"
	"sort"
	"strings"
)

// row is one message as the database holds it at the end of a scenario: an outbox row (or,
// for the pull scenario, an inbox row), identified by the X-Message-Id that its deliveries
// carry.
type row struct {
	msgID     string
	key       string
	seq       int
	sequence  int64 // the outbox sequence column; 0 for inbox rows
	state     string
	attempt   int
	lastError string
}

// verdict is what the record of the receiver and the database say about one scenario.
type verdict struct {
	rows          int
	delivered     int // rows acknowledged at least once
	lost          int // rows neither acknowledged nor dead (including rows not drained)
	lostSamples   []string
	premature     int // a row delivered while an earlier row of its key was neither acknowledged nor dead
	late          int // an earlier row of a key delivered after a later row of the key
	orderSamples  []string
	duplicates    int // acknowledgements beyond the first of a row
	requests      int
	outcomes      map[string]int
	unknown       int // deliveries whose X-Message-Id names no row
	dead          int
	deadWhy       map[string]int
	deadKeys      map[string]int
	notDrained    int
	sequenceOrder int // rows of a key whose outbox sequence order differs from the payload order
}

// judge compares the receiver's record with the rows. The order rule (spec/05-ordering.md):
// the rows of one key are delivered in insert order, one in flight at a time; a row is taken
// only when no earlier row of its key is pending or processing, so a delivery of row N+1
// comes after row N was acknowledged (or went dead), and no delivery of row N comes after a
// delivery of row N+1. Redeliveries of the row in flight are allowed (at least once).
func judge(rows []row, arrivals []arrival, terminal map[string]bool) verdict {
	v := verdict{rows: len(rows), requests: len(arrivals), outcomes: map[string]int{}, deadWhy: map[string]int{}, deadKeys: map[string]int{}}
	type keyState struct {
		rows       []row
		acked      []bool
		maxArrived int
		frontier   int // every row before it is acknowledged or dead
	}
	keys := map[string]*keyState{}
	for _, r := range rows {
		ks := keys[r.key]
		if ks == nil {
			ks = &keyState{maxArrived: -1}
			keys[r.key] = ks
		}
		ks.rows = append(ks.rows, r)
	}
	pos := map[string]int{}
	for _, ks := range keys {
		sort.Slice(ks.rows, func(i, j int) bool { return ks.rows[i].seq < ks.rows[j].seq })
		ks.acked = make([]bool, len(ks.rows))
		for i, r := range ks.rows {
			pos[r.msgID] = i
			if i > 0 && r.sequence != 0 && r.sequence < ks.rows[i-1].sequence {
				v.sequenceOrder++
			}
		}
	}
	dead := func(r row) bool { return r.state == "dead" }
	ackCount := map[string]int{}
	for _, a := range arrivals {
		v.outcomes[a.outcome]++
		p, ok := pos[a.msgID]
		ks := keys[a.key]
		if !ok || ks == nil || ks.rows[p].key != a.key || ks.rows[p].seq != a.seq {
			v.unknown++
			continue
		}
		for q := ks.frontier; q < p; q++ {
			if !ks.acked[q] && !dead(ks.rows[q]) {
				v.premature++
				v.orderSamples = appendSample(v.orderSamples, fmt.Sprintf("key %s: row %d delivered (arrival %d) before row %d was acknowledged", a.key, a.seq, a.idx, ks.rows[q].seq))
				break
			}
		}
		if ks.maxArrived > p {
			v.late++
			v.orderSamples = appendSample(v.orderSamples, fmt.Sprintf("key %s: row %d delivered again (arrival %d) after row %d", a.key, a.seq, a.idx, ks.rows[ks.maxArrived].seq))
		}
		ks.maxArrived = max(ks.maxArrived, p)
		if a.outcome == outcomeOK {
			ackCount[a.msgID]++
			ks.acked[p] = true
			for ks.frontier < len(ks.rows) && (ks.acked[ks.frontier] || dead(ks.rows[ks.frontier])) {
				ks.frontier++
			}
		}
	}
	for _, r := range rows {
		n := ackCount[r.msgID]
		if n > 0 {
			v.delivered++
			v.duplicates += n - 1
		}
		if !terminal[r.state] {
			v.notDrained++
		}
		switch {
		case dead(r):
			v.dead++
			v.deadWhy[reason(r.lastError)]++
			v.deadKeys[r.key]++
		case n == 0 || !terminal[r.state]:
			v.lost++
			v.lostSamples = appendSample(v.lostSamples, fmt.Sprintf("%s key %s row %d state %s acks %d", r.msgID, r.key, r.seq, r.state, n))
		}
	}
	return v
}

func appendSample(s []string, x string) []string {
	if len(s) < 5 {
		return append(s, x)
	}
	return s
}

// reason shortens a last_error to its kind, so dead rows group by cause.
func reason(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexAny(s, "\n"); i >= 0 {
		s = s[:i]
	}
	if len(s) > 90 {
		s = s[:90] + "..."
	}
	if s == "" {
		return "(no last_error)"
	}
	return s
}
