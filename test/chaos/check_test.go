package main

import "testing"

// The judge is what makes the suite able to fail: each case below is a record that breaks
// (or keeps) one rule, and the judge must count exactly that.
func TestJudge(t *testing.T) {
	rows := []row{
		{msgID: "a0", key: "a", seq: 0, state: "sent"},
		{msgID: "a1", key: "a", seq: 1, state: "sent"},
		{msgID: "a2", key: "a", seq: 2, state: "sent"},
		{msgID: "p0", key: "p", seq: 0, state: "dead", lastError: "HTTP 500"},
		{msgID: "p1", key: "p", seq: 1, state: "sent"},
	}
	arr := func(id, key string, seq int, outcome string) arrival {
		return arrival{msgID: id, key: key, seq: seq, outcome: outcome}
	}
	cases := []struct {
		name                                  string
		arrivals                              []arrival
		lost, early, late, dups, unknown, dlv int
	}{
		{"in order, dead row releases its key", []arrival{
			arr("a0", "a", 0, outcomeFail), arr("a0", "a", 0, outcomeOK), arr("a1", "a", 1, outcomeStall), arr("a1", "a", 1, outcomeOK),
			arr("a2", "a", 2, outcomeOK), arr("p0", "p", 0, outcomeFail), arr("p0", "p", 0, outcomeFail), arr("p1", "p", 1, outcomeOK),
		}, 0, 0, 0, 0, 0, 4},
		{"a row never acknowledged is lost", []arrival{
			arr("a0", "a", 0, outcomeOK), arr("a1", "a", 1, outcomeFail), arr("p1", "p", 1, outcomeOK),
		}, 2, 0, 0, 0, 0, 2},
		{"a row delivered before its predecessor was acknowledged", []arrival{
			arr("a0", "a", 0, outcomeStall), arr("a1", "a", 1, outcomeOK), arr("a0", "a", 0, outcomeOK), arr("a2", "a", 2, outcomeOK), arr("p1", "p", 1, outcomeOK),
		}, 0, 1, 1, 0, 0, 4},
		{"a redelivery after a later row, and duplicates", []arrival{
			arr("a0", "a", 0, outcomeOK), arr("a1", "a", 1, outcomeOK), arr("a0", "a", 0, outcomeOK), arr("a2", "a", 2, outcomeOK),
			arr("a2", "a", 2, outcomeOK), arr("p1", "p", 1, outcomeOK), arr("zz", "a", 9, outcomeOK),
		}, 0, 0, 1, 2, 1, 4},
		{"a dead row delivered after the next row of its key", []arrival{
			arr("a0", "a", 0, outcomeOK), arr("a1", "a", 1, outcomeOK), arr("a2", "a", 2, outcomeOK), arr("p1", "p", 1, outcomeOK), arr("p0", "p", 0, outcomeFail),
		}, 0, 0, 1, 0, 0, 4},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for i := range c.arrivals {
				c.arrivals[i].idx = i
			}
			v := judge(rows, c.arrivals, outboxTerminal)
			if v.lost != c.lost || v.premature != c.early || v.late != c.late || v.duplicates != c.dups || v.unknown != c.unknown || v.delivered != c.dlv {
				t.Fatalf("lost %d early %d late %d duplicates %d unknown %d delivered %d; want %d %d %d %d %d %d (%v)",
					v.lost, v.premature, v.late, v.duplicates, v.unknown, v.delivered, c.lost, c.early, c.late, c.dups, c.unknown, c.dlv, v.orderSamples)
			}
			if v.dead != 1 || v.deadKeys["p"] != 1 {
				t.Fatalf("dead %d %v, want 1 on key p", v.dead, v.deadKeys)
			}
		})
	}
}

// A row that is still pending at the end counts as lost even when it was acknowledged.
func TestJudgeNotDrained(t *testing.T) {
	rows := []row{{msgID: "a0", key: "a", seq: 0, state: "processing"}}
	v := judge(rows, []arrival{{msgID: "a0", key: "a", seq: 0, outcome: outcomeOK}}, outboxTerminal)
	if v.lost != 1 || v.notDrained != 1 {
		t.Fatalf("lost %d not drained %d, want 1 and 1", v.lost, v.notDrained)
	}
}
