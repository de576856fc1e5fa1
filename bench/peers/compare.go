package main

import (
	"github.com/alternayte/queuebox/bench/machine"
)

// Variants of the runs.
const (
	variantDefaults = "defaults"
	variantTuned    = "tuned"
	// variantTunedLock is the tuned settings in the claim mode lock (outbox.claimMode).
	variantTunedLock = "tuned lock"
	variantPeer      = "peer"
	variantCeiling   = "ceiling"
)

// Comparison is every system over one size and key mode, each run Rounds times interleaved,
// with the medians and QueueBox's ratios to the best peer.
type Comparison struct {
	Rows int `json:"rows"`
	Keys int `json:"keys"`
	// Runs are every run in the order they ran.
	Runs []RunResult `json:"runs"`
	// Systems are the medians per system, in the order of the first round.
	Systems []SystemSummary `json:"systems"`
	// BestPeer is the peer with the highest median; CeilingRate the higher of the ceilings'
	// medians.
	BestPeer     string  `json:"bestPeer,omitempty"`
	BestPeerRate float64 `json:"bestPeerRowsPerSecond,omitempty"`
	Ceiling      string  `json:"ceiling,omitempty"`
	CeilingRate  float64 `json:"ceilingRowsPerSecond,omitempty"`
	// RatioDefaults, RatioTuned and RatioTunedLock are the medians over the rounds of
	// QueueBox's rate ÷ the best peer's rate of the same round; RoundRatios are those of each
	// round. RatioTunedLock is 0 when the tuned settings did not run in the claim mode lock.
	RatioDefaults  float64      `json:"ratioDefaultsToBestPeer,omitempty"`
	RatioTuned     float64      `json:"ratioTunedToBestPeer,omitempty"`
	RatioTunedLock float64      `json:"ratioTunedLockToBestPeer,omitempty"`
	RoundRatios    []RoundRatio `json:"roundRatios,omitempty"`
}

// RoundRatio is QueueBox's ratios to the best peer of one round.
type RoundRatio struct {
	Round     int     `json:"round"`
	BestPeer  string  `json:"bestPeer"`
	Defaults  float64 `json:"defaults,omitempty"`
	Tuned     float64 `json:"tuned,omitempty"`
	TunedLock float64 `json:"tunedLock,omitempty"`
}

// SystemSummary is one system's runs of a comparison.
type SystemSummary struct {
	Label   string `json:"label"`
	System  string `json:"system"`
	Variant string `json:"variant"`
	Order   string `json:"perKeyOrder"`
	// Median is the median rows/s of Rates, the rates of the rounds in order, and Loads the
	// 1-minute load average at the start of each.
	Median float64   `json:"medianRowsPerSecond"`
	Rates  []float64 `json:"rowsPerSecond"`
	Loads  []float64 `json:"loadAvg1"`
	// OfCeiling is Median ÷ the comparison's CeilingRate; ToBestPeer Median ÷ BestPeerRate.
	OfCeiling  float64 `json:"ofCeiling,omitempty"`
	ToBestPeer float64 `json:"toBestPeer,omitempty"`
	// Duplicates and OrderViolations are summed over the runs.
	Duplicates      int  `json:"duplicates"`
	OrderChecked    bool `json:"orderChecked"`
	OrderViolations int  `json:"orderViolations"`
	// CPU is the CPU use of the run whose rate is the median.
	CPU CPUUse `json:"cpuOfMedianRun"`
}

// summarize fills Systems, the best peer, the ceiling and the ratios from Runs.
func (c *Comparison) summarize() {
	c.Systems, c.RoundRatios = nil, nil
	c.BestPeer, c.BestPeerRate, c.Ceiling, c.CeilingRate = "", 0, "", 0
	c.RatioDefaults, c.RatioTuned, c.RatioTunedLock = 0, 0, 0
	index := map[string]int{}
	for _, r := range c.Runs {
		i, ok := index[r.Label]
		if !ok {
			i = len(c.Systems)
			index[r.Label] = i
			c.Systems = append(c.Systems, SystemSummary{Label: r.Label, System: r.System, Variant: r.Variant, Order: r.Order})
		}
		s := &c.Systems[i]
		s.Rates = append(s.Rates, r.RowsPerSecond)
		s.Loads = append(s.Loads, r.Load1)
		s.Duplicates += r.Delivery.Duplicates
		s.OrderChecked = s.OrderChecked || r.Delivery.OrderChecked
		s.OrderViolations += r.Delivery.OrderViolations
	}
	for i := range c.Systems {
		s := &c.Systems[i]
		s.Median = machine.Round(machine.Median(s.Rates), 0)
		s.CPU = c.medianRun(s.Label, s.Median).CPU
		switch {
		case s.Variant == variantPeer && s.Median > c.BestPeerRate:
			c.BestPeer, c.BestPeerRate = s.Label, s.Median
		case s.Variant == variantCeiling && s.Median > c.CeilingRate:
			c.Ceiling, c.CeilingRate = s.Label, s.Median
		}
	}
	for i := range c.Systems {
		s := &c.Systems[i]
		if c.CeilingRate > 0 {
			s.OfCeiling = machine.Round(s.Median/c.CeilingRate, 2)
		}
		if c.BestPeerRate > 0 {
			s.ToBestPeer = machine.Round(s.Median/c.BestPeerRate, 2)
		}
	}
	c.roundRatios()
}

// medianRun is the run of label whose rate is closest to rate.
func (c *Comparison) medianRun(label string, rate float64) RunResult {
	var best RunResult
	bestDiff := -1.0
	for _, r := range c.Runs {
		if d := abs(r.RowsPerSecond - rate); r.Label == label && (bestDiff < 0 || d < bestDiff) {
			best, bestDiff = r, d
		}
	}
	return best
}

func abs(v float64) float64 {
	if v < 0 {
		return -v
	}
	return v
}

// roundRatios divides QueueBox's rate of each round (each variant: defaults, tuned, tuned lock) by the best peer's rate of that round and
// takes the medians over the rounds.
func (c *Comparison) roundRatios() {
	rounds := map[int]*RoundRatio{}
	best := map[int]float64{}
	var order []int
	for _, r := range c.Runs {
		if _, ok := rounds[r.Round]; !ok {
			rounds[r.Round] = &RoundRatio{Round: r.Round}
			order = append(order, r.Round)
		}
		if r.Variant == variantPeer && r.RowsPerSecond > best[r.Round] {
			best[r.Round], rounds[r.Round].BestPeer = r.RowsPerSecond, r.Label
		}
	}
	var defaults, tuned, tunedLock []float64
	for _, r := range c.Runs {
		b := best[r.Round]
		if b <= 0 {
			continue
		}
		ratio := machine.Round(r.RowsPerSecond/b, 2)
		switch r.Variant {
		case variantDefaults:
			rounds[r.Round].Defaults = ratio
			defaults = append(defaults, ratio)
		case variantTuned:
			rounds[r.Round].Tuned = ratio
			tuned = append(tuned, ratio)
		case variantTunedLock:
			rounds[r.Round].TunedLock = ratio
			tunedLock = append(tunedLock, ratio)
		}
	}
	if len(defaults)+len(tuned)+len(tunedLock) == 0 {
		return
	}
	for _, n := range order {
		c.RoundRatios = append(c.RoundRatios, *rounds[n])
	}
	c.RatioDefaults = machine.Round(machine.Median(defaults), 2)
	c.RatioTuned = machine.Round(machine.Median(tuned), 2)
	c.RatioTunedLock = machine.Round(machine.Median(tunedLock), 2)
}
