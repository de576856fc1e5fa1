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
	if got := opts.Rows; len(got) != 2 || got[0] != 20000 || got[1] != 100000 {
		t.Errorf("Rows = %v, want [20000 100000]", got)
	}
	if opts.Keys != 1000 || opts.PoolSize != 10 {
		t.Errorf("Keys %d, PoolSize %d, want 1000 and 10", opts.Keys, opts.PoolSize)
	}
	if got := strings.Join(opts.Systems, ","); got != "queuebox,river,watermill" {
		t.Errorf("Systems = %s", got)
	}
	if len(opts.Tuned) != 3 || opts.Tuned[0].BatchSize != 200 || opts.Tuned[0].Concurrency != 16 {
		t.Errorf("Tuned = %+v, want 200x16, 500x16, 500x64", opts.Tuned)
	}
	if opts.River != (RiverSettings{MaxWorkers: 64, FetchCooldown: time.Millisecond, FetchPollInterval: 5 * time.Millisecond}) {
		t.Errorf("River = %+v", opts.River)
	}
	if opts.Watermill.Topics != 64 || opts.Watermill.BatchSize != 100 {
		t.Errorf("Watermill = %+v", opts.Watermill)
	}
}

func TestParseArgsValues(t *testing.T) {
	opts, _, err := parseArgs([]string{"-rows", "2000, 5000", "-systems", "river,queuebox", "-tuned", "500x32", "-keys", "0"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if len(opts.Rows) != 2 || opts.Rows[1] != 5000 || strings.Join(opts.Systems, ",") != "river,queuebox" ||
		len(opts.Tuned) != 1 || opts.Tuned[0].Concurrency != 32 || opts.Keys != 0 {
		t.Errorf("opts = %+v", opts)
	}
	if _, sink, err := parseArgs([]string{"-sink"}, io.Discard); err != nil || !sink {
		t.Errorf("-sink: sink %v, err %v", sink, err)
	}
}

func TestParseArgsRejects(t *testing.T) {
	for _, args := range [][]string{
		{"-rows", "0"}, {"-rows", "x"}, {"-systems", "kafka"}, {"-tuned", "500"}, {"-river-fetch-cooldown", "0s"},
		{"-river-fetch-poll", "500us"}, {"-watermill-topics", "0"}, {"-keys", "-1"}, {"extra"},
	} {
		if _, _, err := parseArgs(args, io.Discard); err == nil {
			t.Errorf("parseArgs(%q) accepted", args)
		}
	}
}

func TestComputeRatios(t *testing.T) {
	c := Comparison{Runs: []RunResult{
		{Label: "QueueBox defaults", Variant: variantDefaults, RowsPerSecond: 6000},
		{Label: "QueueBox tuned", Variant: variantTuned, RowsPerSecond: 9000},
		{Label: "River", Variant: variantPeer, RowsPerSecond: 4000},
		{Label: "Watermill", Variant: variantPeer, RowsPerSecond: 5000},
	}}
	c.computeRatios()
	if c.BestPeer != "Watermill" || c.BestPeerRate != 5000 || c.RatioDefaults != 1.2 || c.RatioTuned != 1.8 {
		t.Errorf("got best %q %.0f, ratios %.2f %.2f; want Watermill 5000, 1.20 1.80", c.BestPeer, c.BestPeerRate, c.RatioDefaults, c.RatioTuned)
	}
	c.Runs = c.Runs[:2]
	c.computeRatios()
	if c.BestPeer != "" || c.RatioDefaults != 0 || c.RatioTuned != 0 {
		t.Errorf("without peers: best %q, ratios %.2f %.2f; want none", c.BestPeer, c.RatioDefaults, c.RatioTuned)
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
	if p := d.problems(true); len(p) != 3 {
		t.Errorf("ordered problems = %q, want missing, unknown and order", p)
	}
	if p := d.problems(false); len(p) != 2 {
		t.Errorf("unordered problems = %q, want missing and unknown", p)
	}
	ok := checkDelivery(peerExpected(2, 0), []outboxbench.Arrival{{ID: "msg-1"}, {ID: "msg-0"}}, outboxbench.SinkStats{Requests: 2}, false)
	if ok.Missing != 0 || ok.OrderViolations != 0 || len(ok.problems(true)) != 0 {
		t.Errorf("no keys, all arrived: %+v, problems %q", ok, ok.problems(true))
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
	if p := payload(42, "k42"); json.Unmarshal(p, &v) != nil || v["orderId"] != 42.0 || len(p) < 250 || len(p) > 350 {
		t.Errorf("payload is %d bytes, %s", len(p), p)
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
		{Label: "QueueBox defaults (100x8)", Variant: variantDefaults, RowsPerSecond: 6000, Delivery: Delivery{OrderChecked: true}},
		{Label: "River (64 workers)", Variant: variantPeer, RowsPerSecond: 5000, Delivery: Delivery{OrderChecked: true, OrderViolations: 3}},
	}}
	c.computeRatios()
	var buf bytes.Buffer
	printTable(&buf, &Report{Comparisons: []Comparison{c}, Problems: []string{"lost one"}})
	out := buf.String()
	for _, want := range []string{"20000 rows, 1000 keys", "QueueBox defaults (100x8)", "1.20x", "River (64 workers), 5000 rows/s", "PROBLEMS", "lost one"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
}
