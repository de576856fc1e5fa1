package main

import (
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/alternayte/queuebox/bench/machine"
	"github.com/alternayte/queuebox/bench/outboxbench"
)

func TestParseArgsDefaults(t *testing.T) {
	opts, sink, err := parseArgs(nil, io.Discard)
	if err != nil || sink {
		t.Fatalf("parseArgs(nil) = sink %v, err %v", sink, err)
	}
	if got := opts.Rows; len(got) != 1 || got[0] != 100000 {
		t.Errorf("Rows = %v, want [100000]", got)
	}
	if opts.Keys != 1000 || opts.PoolSize != 10 || opts.TunedPoolSize != 24 || opts.Rounds != 3 || opts.ExploreRows != 0 || !opts.Lock {
		t.Errorf("Keys %d, PoolSize %d, TunedPoolSize %d, Rounds %d, ExploreRows %d, Lock %v; want 1000, 10, 24, 3, 0, true",
			opts.Keys, opts.PoolSize, opts.TunedPoolSize, opts.Rounds, opts.ExploreRows, opts.Lock)
	}
	if got := strings.Join(opts.Systems, ","); got != "queuebox,river,watermill,ceiling" {
		t.Errorf("Systems = %s", got)
	}
	if len(opts.Tuned) != 1 || opts.Tuned[0].BatchSize != 500 || opts.Tuned[0].Concurrency != 128 || opts.Tuned[0].Lock() {
		t.Errorf("Tuned = %+v, want 500x128", opts.Tuned)
	}
	if opts.River != (RiverSettings{PoolSize: 24, MaxWorkers: 128, FetchCooldown: time.Millisecond, FetchPollInterval: 5 * time.Millisecond}) {
		t.Errorf("River = %+v", opts.River)
	}
	if opts.Watermill.Topics != 32 || opts.Watermill.BatchSize != 1000 || strings.Join(opts.WatermillSchemas, ",") != "offsets,queue" {
		t.Errorf("Watermill = %+v, schemas %v", opts.Watermill, opts.WatermillSchemas)
	}
	if len(opts.Ceilings) != 2 || opts.Ceilings[0] != 64 || opts.Ceilings[1] != 128 || opts.Payload != "small" {
		t.Errorf("Ceilings = %v, Payload %q; want [64 128], small", opts.Ceilings, opts.Payload)
	}
}

func TestParseArgsValues(t *testing.T) {
	opts, _, err := parseArgs([]string{"-rows", "2000, 5000", "-systems", "river,queuebox", "-tuned", "500x32", "-keys", "0",
		"-watermill-router", "-peers-go-default-gc", "-watermill-schemas", "queue", "-ceiling", "8", "-payload", "large", "-lock=false"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if !opts.Watermill.Router || !opts.PeersGoDefaultGC || strings.Join(opts.WatermillSchemas, ",") != "queue" ||
		len(opts.Ceilings) != 1 || opts.Ceilings[0] != 8 || opts.Payload != "large" || opts.Lock {
		t.Errorf("opts = %+v", opts)
	}
	if len(opts.Rows) != 2 || opts.Rows[1] != 5000 || strings.Join(opts.Systems, ",") != "river,queuebox" ||
		len(opts.Tuned) != 1 || opts.Tuned[0].Concurrency != 32 || opts.Keys != 0 {
		t.Errorf("opts = %+v", opts)
	}
	opts, _, err = parseArgs([]string{"-tuned", "500x64:lock, 500x128:lease"}, io.Discard)
	if err != nil || len(opts.Tuned) != 2 || !opts.Tuned[0].Lock() || opts.Tuned[1].Lock() || opts.Tuned[1].Concurrency != 128 {
		t.Errorf("-tuned 500x64:lock,500x128:lease: %+v, %v", opts.Tuned, err)
	}
	if _, sink, err := parseArgs([]string{"-sink"}, io.Discard); err != nil || !sink {
		t.Errorf("-sink: sink %v, err %v", sink, err)
	}
}

func TestParseArgsRejects(t *testing.T) {
	for _, args := range [][]string{
		{"-rows", "0"}, {"-rows", "x"}, {"-systems", "kafka"}, {"-tuned", "500"}, {"-tuned", "500x128:fast"}, {"-river-fetch-cooldown", "0s"},
		{"-river-fetch-poll", "500us"}, {"-watermill-topics", "0"}, {"-keys", "-1"}, {"extra"},
		{"-watermill-schemas", "mysql"}, {"-ceiling", "0"}, {"-rounds", "0"}, {"-payload", "huge"}, {"-tuned-pool-size", "0"},
	} {
		if _, _, err := parseArgs(args, io.Discard); err == nil {
			t.Errorf("parseArgs(%q) accepted", args)
		}
	}
}

func TestSummarize(t *testing.T) {
	run := func(round int, label, variant string, rate float64) RunResult {
		return RunResult{Round: round, Label: label, Variant: variant, RowsPerSecond: rate, Load1: float64(round)}
	}
	c := Comparison{Runs: []RunResult{
		run(1, "ceiling 64", variantCeiling, 20000), run(1, "Watermill", variantPeer, 5000),
		run(1, "QueueBox defaults", variantDefaults, 6000), run(1, "River", variantPeer, 4000),
		run(1, "QueueBox tuned", variantTuned, 9000), run(1, "QueueBox tuned lock", variantTunedLock, 11000),
		run(1, "ceiling 128", variantCeiling, 18000),
		run(2, "ceiling 64", variantCeiling, 16000), run(2, "Watermill", variantPeer, 10000),
		run(2, "QueueBox defaults", variantDefaults, 8000), run(2, "River", variantPeer, 4000),
		run(2, "QueueBox tuned", variantTuned, 12000), run(2, "QueueBox tuned lock", variantTunedLock, 13000),
		run(2, "ceiling 128", variantCeiling, 21000),
		run(3, "ceiling 64", variantCeiling, 17000), run(3, "Watermill", variantPeer, 4000),
		run(3, "QueueBox defaults", variantDefaults, 5000), run(3, "River", variantPeer, 5000),
		run(3, "QueueBox tuned", variantTuned, 7500), run(3, "QueueBox tuned lock", variantTunedLock, 9000),
		run(3, "ceiling 128", variantCeiling, 19000),
	}}
	c.summarize()
	if len(c.Systems) != 7 || c.Systems[1].Label != "Watermill" || c.Systems[1].Median != 5000 {
		t.Fatalf("Systems = %+v, want 7 in order with Watermill's median 5000", c.Systems)
	}
	if s := c.Systems[5]; s.Label != "QueueBox tuned lock" || s.Median != 11000 || s.ToBestPeer != 2.2 {
		t.Errorf("QueueBox tuned lock: %+v, want the median 11000, 2.20 of the best peer", s)
	}
	if got := joinFloats(c.Systems[1].Loads, 0); got != "1/2/3" {
		t.Errorf("Watermill's loads = %s, want 1/2/3", got)
	}
	// Medians: ceiling 64 17000, ceiling 128 19000, QueueBox defaults 6000, tuned 9000.
	if c.Ceiling != "ceiling 128" || c.CeilingRate != 19000 || c.BestPeer != "Watermill" || c.BestPeerRate != 5000 {
		t.Errorf("ceiling %q %.0f, best peer %q %.0f; want ceiling 128 19000, Watermill 5000", c.Ceiling, c.CeilingRate, c.BestPeer, c.BestPeerRate)
	}
	if s := c.Systems[2]; s.OfCeiling != 0.32 || s.ToBestPeer != 1.2 {
		t.Errorf("QueueBox defaults: of ceiling %.2f, to best peer %.2f; want 0.32, 1.20", s.OfCeiling, s.ToBestPeer)
	}
	// Per round, defaults / best peer of the round: 6000/5000, 8000/10000, 5000/5000.
	// Tuned lock / best peer of the round: 11000/5000, 13000/10000, 9000/5000.
	if c.RatioDefaults != 1.0 || c.RatioTuned != 1.5 || c.RatioTunedLock != 1.8 || len(c.RoundRatios) != 3 ||
		c.RoundRatios[1].Defaults != 0.8 || c.RoundRatios[1].TunedLock != 1.3 {
		t.Errorf("ratios %.2f %.2f %.2f, rounds %+v; want 1.00 1.50 1.80 with round 2 at 0.80 and 1.30",
			c.RatioDefaults, c.RatioTuned, c.RatioTunedLock, c.RoundRatios)
	}
	withoutLock := Comparison{}
	for _, r := range c.Runs {
		if r.Variant != variantTunedLock {
			withoutLock.Runs = append(withoutLock.Runs, r)
		}
	}
	withoutLock.summarize()
	if withoutLock.RatioTuned != 1.5 || withoutLock.RatioTunedLock != 0 || withoutLock.RoundRatios[0].TunedLock != 0 {
		t.Errorf("without the lock variant: ratios %.2f %.2f, rounds %+v; want 1.50 and none", withoutLock.RatioTuned,
			withoutLock.RatioTunedLock, withoutLock.RoundRatios)
	}
	c.Runs = c.Runs[:3]
	c.Runs[1].Variant = variantCeiling
	c.summarize()
	if c.BestPeer != "" || c.RatioDefaults != 0 || c.RatioTuned != 0 || c.RatioTunedLock != 0 || c.RoundRatios != nil {
		t.Errorf("without peers: best %q, ratios %.2f %.2f %.2f %v; want none", c.BestPeer, c.RatioDefaults, c.RatioTuned,
			c.RatioTunedLock, c.RoundRatios)
	}
}

func TestReceiverClock(t *testing.T) {
	start := time.Unix(100, 0)
	arrivals := []outboxbench.Arrival{{ID: "a", At: time.Unix(101, 0).UnixNano()}, {ID: "b", At: time.Unix(103, 0).UnixNano()}}
	startup, seconds, rate := receiverClock(start, time.Unix(104, 0), arrivals, 1000)
	if startup != 1 || seconds != 2 || rate != 500 {
		t.Errorf("receiverClock = %v %v %v, want startup 1 s, 2 s, 500/s", startup, seconds, rate)
	}
	if _, seconds, _ := receiverClock(start, time.Unix(104, 0), nil, 0); seconds != 4 {
		t.Errorf("without arrivals the clock ran %v s, want the 4 s of delivery", seconds)
	}
}

func TestCheckDelivery(t *testing.T) {
	expected := peerExpected(6, 2) // keys k0: 0 2 4, k1: 1 3 5
	arrivals := []outboxbench.Arrival{
		{ID: "msg-0"}, {ID: "msg-1"}, {ID: "msg-4"}, {ID: "msg-2"}, {ID: "msg-3"}, {ID: "other"},
	}
	d := checkDelivery(expected, arrivals, outboxbench.SinkStats{Requests: 8, Distinct: 6, Duplicates: 2}, true)
	want := Delivery{Expected: 6, Distinct: 5, Missing: 1, Unknown: 1, Requests: 8, Duplicates: 2, OrderChecked: true, OrderViolations: 1}
	if d != want {
		t.Fatalf("checkDelivery = %+v, want %+v", d, want)
	}
	if p := d.problems(true, 1); len(p) != 3 {
		t.Errorf("ordered problems = %q, want missing, unknown and order", p)
	}
	if p := d.problems(false, 1); len(p) != 2 {
		t.Errorf("unordered problems = %q, want missing and unknown", p)
	}
	if p := d.problems(false, 0); len(p) != 3 || !strings.Contains(p[0], "duplicate") {
		t.Errorf("problems without a failed delivery = %q, want the duplicates too", p)
	}
	ok := checkDelivery(peerExpected(2, 0), []outboxbench.Arrival{{ID: "msg-1"}, {ID: "msg-0"}}, outboxbench.SinkStats{Requests: 2}, false)
	if ok.Missing != 0 || ok.OrderViolations != 0 || len(ok.problems(true, 0)) != 0 {
		t.Errorf("no keys, all arrived: %+v, problems %q", ok, ok.problems(true, 0))
	}
}

func TestMessagesAndTopics(t *testing.T) {
	for _, i := range []int{0, 7, 99999} {
		if got := messageIndex(messageID(i)); got != i {
			t.Errorf("messageIndex(messageID(%d)) = %d", i, got)
		}
	}
	if messageIndex("7") != -1 || messageIndex("msg-x") != -1 {
		t.Error("messageIndex accepted an id of no message")
	}
	if keyOf(1234, 1000) != "k234" || keyOf(5, 0) != "" {
		t.Errorf("keyOf = %q, %q", keyOf(1234, 1000), keyOf(5, 0))
	}
	for i := range 3000 {
		k := keyOf(i, 1000)
		if got, again := topicIndex(i, k, 64), topicIndex(i+1000, k, 64); got != again || got < 0 || got >= 64 {
			t.Fatalf("topicIndex of key %s: %d and %d", k, got, again)
		}
	}
	if topicIndex(65, "", 64) != 1 {
		t.Errorf("topicIndex without key = %d, want 65 %% 64", topicIndex(65, "", 64))
	}
	var v map[string]any
	if p := payload(42, "k42"); json.Unmarshal(p, &v) != nil || v["orderId"] != 42.0 || len(p) < 70 || len(p) > 100 {
		t.Errorf("payload is %d bytes, %s", len(p), p)
	}
	largePayload = true
	defer func() { largePayload = false }()
	if p := payload(42, "k42"); json.Unmarshal(p, &v) != nil || v["orderId"] != 42.0 || len(p) < 250 || len(p) > 350 {
		t.Errorf("large payload is %d bytes, %s", len(p), p)
	}
}

func TestCPUBetween(t *testing.T) {
	now := time.Now()
	a := cpuSample{Sample: machine.Sample{At: now, Busy: 10, Total: 20, Self: 1}, receiver: 2, backends: map[int]float64{1: 5}}
	b := cpuSample{Sample: machine.Sample{At: now.Add(2 * time.Second), Busy: 13, Total: 24, Self: 2}, receiver: 2.5, backends: map[int]float64{1: 5.5, 2: 0.5}}
	u := cpuBetween(a, b, 1000)
	want := CPUUse{WallSeconds: 2, MachineBusyPct: 75, Process: 1, Postgres: 1, Receiver: 0.5, Other: 0.5,
		ProcessUsRow: 1000, PostgresUsRow: 1000, ReceiverUsRow: 500}
	if u != want {
		t.Errorf("cpuBetween = %+v, want %+v", u, want)
	}
}

func TestPrintTable(t *testing.T) {
	c := Comparison{Rows: 20000, Keys: 1000, Runs: []RunResult{
		{Round: 1, Label: "ceiling (64 requests)", Variant: variantCeiling, RowsPerSecond: 10000, Load1: 2.5, Order: "none"},
		{Round: 1, Label: "QueueBox defaults (100x8, pool 10)", Variant: variantDefaults, RowsPerSecond: 6000, Delivery: Delivery{OrderChecked: true}},
		{Round: 1, Label: "River (64 workers, pool 10)", Variant: variantPeer, RowsPerSecond: 5000, Order: "no per-key order",
			Delivery: Delivery{OrderChecked: true, OrderViolations: 3}},
		{Round: 1, Label: "QueueBox tuned, claim mode lock (500x128, pool 24)", Variant: variantTunedLock, RowsPerSecond: 8000,
			Delivery: Delivery{OrderChecked: true}},
	}}
	c.summarize()
	var buf bytes.Buffer
	printTable(&buf, &Report{Comparisons: []Comparison{c}, Problems: []string{"lost one"}})
	out := buf.String()
	for _, want := range []string{"20000 rows, 1000 keys", "QueueBox defaults (100x8, pool 10)", "1.20x", "0.60",
		"River (64 workers, pool 10), 5000", "ceiling (64 requests), 10000", "no per-key order", "2.5", "PROBLEMS", "lost one",
		"QueueBox tuned, claim mode lock (500x128, pool 24)", "tuned lock", "1.60x"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	// The summary row: defaults 1.20x, no tuned run, tuned lock 1.60x.
	var row string
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "20000 rows, 1000 keys") && strings.Contains(line, "1.20x") {
			row = line
		}
	}
	if f := strings.Fields(row); len(f) < 7 || f[4] != "1.20x" || f[5] != "-" || f[6] != "1.60x" {
		t.Errorf("summary row %q, want defaults 1.20x, tuned -, tuned lock 1.60x", row)
	}
}

func TestQueueBoxVariants(t *testing.T) {
	tuned, err := outboxbench.ParseSettings("500x128")
	if err != nil {
		t.Fatal(err)
	}
	b := &bench{opts: Options{Systems: []string{SystemQueueBox}, PoolSize: 10, TunedPoolSize: 24, Lock: true}}
	fs := b.factories(tuned)
	if len(fs) != 3 {
		t.Fatalf("%d factories, want defaults, tuned and tuned lock", len(fs))
	}
	lock := fs[2]
	if lock.variant != variantTunedLock || lock.label != "QueueBox tuned, claim mode lock (500x128, pool 24)" || !lock.ordered ||
		!strings.Contains(lock.order, "as in the lease mode") {
		t.Errorf("tuned lock: variant %q, label %q, order %q, ordered %v", lock.variant, lock.label, lock.order, lock.ordered)
	}
	if q := lock.new().(*queueBox); !q.settings.Lock() || q.poolSize != 24 || q.settings.BatchSize != 500 {
		t.Errorf("tuned lock runs at %+v, pool %d", q.settings, q.poolSize)
	}
	if fs[1].label != "QueueBox tuned (500x128, pool 24)" || fs[1].new().(*queueBox).settings.Lock() {
		t.Errorf("tuned: label %q", fs[1].label)
	}
	if fs := b.factories(outboxbench.Settings{BatchSize: 500, Concurrency: 128, ClaimMode: "lock"}); len(fs) != 2 {
		t.Errorf("tuned already in the lock mode: %d factories, want 2", len(fs))
	}
	b.opts.Lock = false
	if fs := b.factories(tuned); len(fs) != 2 || fs[1].variant != variantTuned {
		t.Errorf("-lock=false: %d factories, want defaults and tuned", len(fs))
	}
}
