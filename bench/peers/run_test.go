package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/alternayte/queuebox/bench/benchcmd"
	"github.com/alternayte/queuebox/bench/outboxbench"
)

// TestMain lets the test binary be the receiver process: the bench starts its own binary
// again with -sink.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "-"+outboxbench.SinkFlag {
		os.Exit(run(context.Background(), os.Args[1:]))
	}
	os.Exit(m.Run())
}

// TestRunEverySystem runs the whole bench on a few hundred messages against the real
// PostgreSQL server (QUEUEBOX_TEST_DATABASE_URL or the local default): every system, both
// Watermill schemas and two ceilings, two interleaved rounds, no keys and keys. Every run
// must deliver every message, the ordered systems every key in order (QueueBox in the claim
// mode lock too), and the report must hold a median, a ratio and a fraction of the ceiling per
// system.
func TestRunEverySystem(t *testing.T) {
	if testing.Short() {
		t.Skip("needs PostgreSQL")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	tuned, err := outboxbench.ParseSettings("50x16")
	if err != nil {
		t.Fatal(err)
	}
	const rows, keys = 600, 20
	out := filepath.Join(t.TempDir(), "peers.json")
	var table bytes.Buffer
	rep, err := Run(ctx, Options{
		ServerURL: benchcmd.ServerURL(), Rows: []int{rows}, Keys: keys, Rounds: 2,
		Systems: []string{SystemQueueBox, SystemRiver, SystemWatermill, SystemCeiling},
		Tuned:   []outboxbench.Settings{tuned}, PoolSize: 4, TunedPoolSize: 6, Lock: true,
		River:            RiverSettings{PoolSize: 4, MaxWorkers: 16, FetchCooldown: time.Millisecond, FetchPollInterval: 5 * time.Millisecond},
		Watermill:        WatermillSettings{Topics: 4, BatchSize: 1000, PollInterval: 10 * time.Millisecond},
		WatermillSchemas: []string{watermillOffsets, watermillQueue},
		Ceilings:         []int{4, 16}, Payload: "small",
		RunTimeout: time.Minute, Out: out, Stdout: &table,
	})
	if err != nil {
		t.Fatalf("Run: %v\n%s", err, table.String())
	}
	if len(rep.Comparisons) != 2 {
		t.Fatalf("%d comparisons, want no keys and %d keys", len(rep.Comparisons), keys)
	}
	for _, c := range rep.Comparisons {
		if len(c.Runs) != 2*8 || len(c.Systems) != 8 {
			t.Fatalf("%d keys: %d runs of %d systems, want 16 of 8", c.Keys, len(c.Runs), len(c.Systems))
		}
		for _, r := range c.Runs {
			d := r.Delivery
			if d.Distinct != rows || d.Missing != 0 || d.Unknown != 0 || r.RowsPerSecond <= 0 || len(r.Problems) > 0 {
				t.Errorf("%s, round %d: %+v, %.0f rows/s, problems %q", runName(r), r.Round, d, r.RowsPerSecond, r.Problems)
			}
			ordered := r.System == SystemQueueBox || r.System == SystemWatermill
			if c.Keys > 0 && ordered && (!d.OrderChecked || d.OrderViolations != 0) {
				t.Errorf("%s: a key arrived out of order: %+v", runName(r), d)
			}
		}
		for _, s := range c.Systems {
			if s.Median <= 0 || len(s.Rates) != 2 || len(s.Loads) != 2 || s.OfCeiling <= 0 || s.Order == "" {
				t.Errorf("%d keys, %s: %+v", c.Keys, s.Label, s)
			}
		}
		if c.CeilingRate <= 0 || !strings.HasPrefix(c.Ceiling, "ceiling") || c.BestPeerRate <= 0 || c.RatioDefaults <= 0 || c.RatioTuned <= 0 ||
			c.RatioTunedLock <= 0 {
			t.Errorf("%d keys: ceiling %q %.0f, best peer %q %.0f, ratios %.2f %.2f %.2f", c.Keys, c.Ceiling, c.CeilingRate,
				c.BestPeer, c.BestPeerRate, c.RatioDefaults, c.RatioTuned, c.RatioTunedLock)
		}
	}
	var saved Report
	if data, err := os.ReadFile(out); err != nil || json.Unmarshal(data, &saved) != nil || len(saved.Comparisons) != 2 {
		t.Errorf("the JSON report at %s does not read back: %v", out, err)
	}
	for _, want := range []string{"Watermill offsets (4 topics, batch 1000)", "Watermill queue (4 topics, batch 1000)",
		"ceiling (16 requests)", "QueueBox tuned (50x16, pool 6)", "QueueBox tuned, claim mode lock (50x16, pool 6)", "no per-key order"} {
		if !strings.Contains(table.String(), want) {
			t.Errorf("the table lacks %q:\n%s", want, table.String())
		}
	}
}

// TestWatermillRouter runs Watermill with a message.Router handler per topic instead of the
// subscriptions' channels: every message must arrive, every key in order.
func TestWatermillRouter(t *testing.T) {
	if testing.Short() {
		t.Skip("needs PostgreSQL")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const rows, keys = 300, 10
	var table bytes.Buffer
	rep, err := Run(ctx, Options{
		ServerURL: benchcmd.ServerURL(), Rows: []int{rows}, Keys: keys, Rounds: 1, Systems: []string{SystemWatermill},
		Tuned:            []outboxbench.Settings{outboxbench.DefaultSettings()},
		Watermill:        WatermillSettings{Topics: 3, BatchSize: 100, PollInterval: 10 * time.Millisecond, Router: true},
		WatermillSchemas: []string{watermillQueue}, Payload: "large", PeersGoDefaultGC: true,
		RunTimeout: time.Minute, Stdout: &table,
	})
	if err != nil {
		t.Fatalf("Run: %v\n%s", err, table.String())
	}
	if len(rep.Comparisons) != 2 || rep.PayloadSize < 250 {
		t.Fatalf("%d comparisons, payload %d bytes; want 2 and the large payload", len(rep.Comparisons), rep.PayloadSize)
	}
	for _, c := range rep.Comparisons {
		for _, r := range c.Runs {
			if d := r.Delivery; d.Distinct != rows || d.OrderViolations != 0 || len(r.Problems) > 0 {
				t.Errorf("%s: %+v, problems %q", runName(r), d, r.Problems)
			}
		}
	}
}
