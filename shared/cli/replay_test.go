package cli

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

func TestParseReplayArgs(t *testing.T) {
	t.Parallel()
	ok := []struct {
		args  []string
		check func(r *replayArgs) bool
	}{
		{[]string{"replay"}, func(r *replayArgs) bool {
			return r.table == "outbox" && len(r.states) == 1 && r.states[0] == "dead" && !r.dryRun
		}},
		{[]string{"replay", "--states", "sent,dead", "--topic", "a", "--topic", "b,c", "--limit", "5", "--batch-size", "2", "--rows-per-second", "10", "--dry-run", "--json"},
			func(r *replayArgs) bool {
				return strings.Join(r.states, ",") == "sent,dead" && strings.Join(r.topics, ",") == "a,b,c" &&
					r.opts.Limit == 5 && r.opts.BatchSize == 2 && r.opts.RowsPerSecond == 10 && r.dryRun && r.json
			}},
		{[]string{"replay", "--table", "inbox", "--source", "stripe", "--consumption", "pull", "--states", "processed",
			"--created-after", "2026-12-01T00:00:00Z", "--created-before", "2026-12-02T00:00:00+01:00"},
			func(r *replayArgs) bool {
				return r.table == "inbox" && r.sources[0] == "stripe" && r.consumption == "pull" && r.states[0] == "processed" &&
					r.from != nil && r.to != nil && r.to.UTC().Hour() == 23
			}},
	}
	for _, tt := range ok {
		got, err := parseArgs(tt.args)
		if err != nil || got.name != "replay" || got.replay == nil || !tt.check(got.replay) {
			t.Errorf("%v: parseArgs = %+v, %v", tt.args, got.replay, err)
		}
	}
	for _, tt := range []struct {
		args    []string
		wantErr string
	}{
		{[]string{"replay", "--table", "sent"}, `Invalid replay: --table must be outbox or inbox, not "sent"`},
		{[]string{"replay", "--table", "inbox", "--topic", "a"}, "Invalid replay: --topic does not apply to the inbox table"},
		{[]string{"replay", "--source", "s"}, "Invalid replay: --source does not apply to the outbox table"},
		{[]string{"replay", "--states", "pending"}, `Invalid replay: --states may hold only sent,dead on the outbox table, not "pending"`},
		{[]string{"replay", "--table", "inbox", "--states", "sent"}, `Invalid replay: --states may hold only processed,dead on the inbox table, not "sent"`},
		{[]string{"replay", "--id", "nope"}, `Invalid replay: --id "nope" is not a UUID`},
		{[]string{"replay", "--limit", "0"}, "Invalid replay: --limit must be above 0"},
		{[]string{"replay", "--batch-size", "10001"}, "Invalid replay: --batch-size must be between 1 and 10000"},
		{[]string{"replay", "--rows-per-second", "-1"}, "Invalid replay: --rows-per-second must be above 0 and at most 1000000"},
		{[]string{"replay", "--table", "inbox", "--consumption", "both"}, `Invalid replay: --consumption must be push or pull, not "both"`},
		{[]string{"replay", "--created-after", "yesterday"}, `Invalid replay: invalid value "yesterday" for flag -created-after: "yesterday" is not an RFC 3339 instant`},
		{[]string{"replay", "--everything"}, "Invalid replay: flag provided but not defined: -everything"},
		{[]string{"replay", "now"}, "Unknown arguments: now"},
	} {
		_, err := parseArgs(tt.args)
		if err == nil || err.Error() != tt.wantErr {
			t.Errorf("%v: error = %v, want %q", tt.args, err, tt.wantErr)
		}
	}
}

// TestReplayCommand runs `queuebox replay` against the real database: 25 dead and 3 sent
// outbox rows routed to billing, 2 pending rows, 4 dead inbox rows of two sources.
func TestReplayCommand(t *testing.T) {
	t.Parallel()
	env := destinationsEnv(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, pgURL(env))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `
		INSERT INTO outbox (topic, payload, state, attempt, last_error)
		SELECT 'order.created', jsonb_build_object('n', g), 'dead', 5, 'HTTP 503' FROM generate_series(1, 25) g;
		INSERT INTO outbox (topic, payload, state) SELECT 'order.created', '{}', 'sent' FROM generate_series(1, 3);
		INSERT INTO outbox (topic, payload, state) SELECT 'order.created', '{}', 'pending' FROM generate_series(1, 2);
		INSERT INTO inbox (source, idempotency_key, payload, state, last_error, processed_at)
		SELECT CASE WHEN g <= 3 THEN 'stripe' ELSE 'github' END, 'k' || g, '{}', 'dead', 'body is not JSON', now()
		FROM generate_series(1, 4) g`); err != nil {
		t.Fatal(err)
	}
	count := func(table, state string) int {
		t.Helper()
		var n int
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM `+table+` WHERE state = $1`, state).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	answer := func(r result) replayCommandJSON {
		t.Helper()
		var a replayCommandJSON
		if r.code != ExitOK || json.Unmarshal([]byte(r.stdout), &a) != nil {
			t.Fatalf("exit %d, stdout %s, stderr %s", r.code, r.stdout, r.stderr)
		}
		return a
	}

	if a := answer(run(t, ctx, env, "replay", "--dry-run", "--json")); !a.DryRun || a.Count != 25 || len(a.Sample) != 10 || a.Moved != 0 {
		t.Fatalf("dry run of the dead rows: %+v", a)
	}
	if a := answer(run(t, ctx, env, "replay", "--states", "sent", "--dry-run", "--json")); a.Count != 3 || len(a.Sample) != 3 {
		t.Fatalf("dry run of the sent rows: %+v", a)
	}
	if a := answer(run(t, ctx, env, "replay", "--destination", "billing", "--limit", "20", "--dry-run", "--json")); a.Count != 20 {
		t.Fatalf("dry run with a limit: %+v, want the count capped at 20", a)
	}
	r := run(t, ctx, env, "replay", "--destination", "billing", "--dry-run")
	if r.code != ExitOK || !strings.HasPrefix(r.stdout, "Dry run: 25 dead outbox rows would move back to pending; nothing changed.\n") ||
		strings.Count(r.stdout, "\n") != 11 {
		t.Fatalf("dry run table: exit %d\n%s", r.code, r.stdout)
	}
	if count("outbox", "dead") != 25 || count("outbox", "sent") != 3 || count("outbox", "pending") != 2 {
		t.Fatal("a dry run changed rows")
	}

	if a := answer(run(t, ctx, env, "replay", "--destination", "archive", "--json")); a.Moved != 0 || a.Count != 0 {
		t.Fatalf("a destination that no topic routes to moved rows: %+v", a)
	}

	r = run(t, ctx, env, "replay", "--destination", "billing", "--limit", "20", "--batch-size", "7")
	if r.code != ExitOK || r.stdout != "Moved 20 outbox rows back to pending in 3 batches.\n" {
		t.Fatalf("replay: exit %d, stdout %q, stderr %s", r.code, r.stdout, r.stderr)
	}
	for _, line := range []string{"Replaying 20 dead outbox rows in batches of 7...", "batch 1: 7 of 20 rows moved", "batch 2: 14 of 20 rows moved", "batch 3: 20 of 20 rows moved"} {
		if !strings.Contains(r.stderr, line) {
			t.Errorf("the progress lacks %q:\n%s", line, r.stderr)
		}
	}
	if d, s, p := count("outbox", "dead"), count("outbox", "sent"), count("outbox", "pending"); d != 5 || s != 3 || p != 22 {
		t.Fatalf("after the replay: dead %d sent %d pending %d; want 5, 3 and 22", d, s, p)
	}

	if a := answer(run(t, ctx, env, "replay", "--table", "inbox", "--source", "stripe", "--json")); a.Moved != 3 || a.Batches != 1 {
		t.Fatalf("inbox replay of stripe: %+v", a)
	}
	var pending, reopened int
	if err := conn.QueryRow(ctx, `SELECT count(*) FILTER (WHERE state = 'pending' AND source = 'stripe'),
		count(*) FILTER (WHERE state = 'pending' AND processed_at IS NULL AND last_error IS NULL)
		FROM inbox`).Scan(&pending, &reopened); err != nil || pending != 3 || reopened != 3 || count("inbox", "dead") != 1 {
		t.Fatalf("inbox after the replay: %d pending of stripe, %d cleared, %d dead, %v", pending, reopened, count("inbox", "dead"), err)
	}
}
