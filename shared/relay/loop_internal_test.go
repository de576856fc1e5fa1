package relay

import (
	"testing"
	"time"
)

// TestClaimAheadKeepsTheRunWithinOneForwardOfClaimUntil checks when the loop claims the next
// batch during a forward: always without a ClaimUntil, and with one only while the time left
// before it exceeds the last forward's.
func TestClaimAheadKeepsTheRunWithinOneForwardOfClaimUntil(t *testing.T) {
	now := time.Now()
	for _, c := range []struct {
		name        string
		claimUntil  time.Time
		lastForward time.Duration
		want        bool
	}{
		{"no ClaimUntil", time.Time{}, time.Hour, true},
		{"an hour left, forwards of a second", now.Add(time.Hour), time.Second, true},
		{"an hour left, no forward yet", now.Add(time.Hour), 0, true},
		{"a second left, forwards of an hour", now.Add(time.Second), time.Hour, false},
		{"ClaimUntil passed", now.Add(-time.Second), 0, false},
	} {
		if got := claimAhead(c.claimUntil, c.lastForward); got != c.want {
			t.Errorf("%s: claimAhead = %v, want %v", c.name, got, c.want)
		}
	}
}
