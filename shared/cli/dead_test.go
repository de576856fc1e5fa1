package cli

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

func TestParseDeadArgs(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		args    []string
		want    deadArgs
		wantErr string
	}{
		{args: []string{"dead", "list"}, want: deadArgs{sub: "list"}},
		{args: []string{"dead", "list", "--json"}, want: deadArgs{sub: "list", json: true}},
		{args: []string{"dead", "show", "abc"}, want: deadArgs{sub: "show", id: "abc"}},
		{args: []string{"dead", "replay", "--target", "billing", "--dry-run"}, want: deadArgs{sub: "replay", table: "outbox", target: "billing", dryRun: true}},
		{args: []string{"dead", "replay", "--table", "inbox", "--id", "x", "--json"}, want: deadArgs{sub: "replay", table: "inbox", id: "x", json: true}},
		{args: []string{"dead"}, wantErr: "Unknown arguments: dead"},
		{args: []string{"dead", "show"}, wantErr: "Unknown arguments: show"},
		{args: []string{"dead", "replay", "--table", "sent"}, wantErr: "Unknown arguments: --table sent"},
		{args: []string{"dead", "replay", "--all"}, wantErr: "Unknown arguments: --all"},
		{args: []string{"dead", "drop"}, wantErr: "Unknown arguments: drop"},
	} {
		got, err := parseArgs(tt.args)
		if tt.wantErr != "" {
			if err == nil || err.Error() != tt.wantErr {
				t.Errorf("%v: error = %v, want %q", tt.args, err, tt.wantErr)
			}
			continue
		}
		if err != nil || got.name != "dead" || got.dead != tt.want {
			t.Errorf("%v: parseArgs = %+v, %v; want %+v", tt.args, got, err, tt.want)
		}
	}
}

// TestDeadListShowReplay runs the dead commands against the real database: three dead rows of
// billing with one error shape and one sent row; the list groups the three, show prints a row
// with its secret header redacted, a dry run changes nothing, the replay moves only the dead
// rows.
func TestDeadListShowReplay(t *testing.T) {
	t.Parallel()
	env := destinationsEnv(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, pgURL(env))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `INSERT INTO outbox (topic, payload, headers, state, attempt, last_error)
		SELECT 'order.created', jsonb_build_object('n', g), '{"Authorization":"Bearer cli-secret-77"}', 'dead', 5,
		       'HTTP 503 from destination billing after ' || g || ' ms'
		FROM generate_series(1, 3) g;
		INSERT INTO outbox (topic, payload, state) VALUES ('order.created', '{}', 'sent')`); err != nil {
		t.Fatal(err)
	}
	state := func() map[string]int {
		out := map[string]int{}
		rows, err := conn.Query(ctx, `SELECT state, count(*) FROM outbox GROUP BY 1`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		for rows.Next() {
			var s string
			var n int
			if err := rows.Scan(&s, &n); err != nil {
				t.Fatal(err)
			}
			out[s] = n
		}
		return out
	}

	r := run(t, ctx, env, "dead", "list")
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if r.code != ExitOK || len(lines) != 2 || !strings.HasPrefix(lines[0], "TABLE") ||
		!strings.Contains(lines[1], "outbox  billing  3 ") || !strings.Contains(lines[1], "HTTP <n> from destination billing after <n> ms") {
		t.Fatalf("dead list: exit %d\n%s\nstderr %s", r.code, r.stdout, r.stderr)
	}
	r = run(t, ctx, env, "dead", "list", "--json")
	var groups []deadGroupJSON
	if r.code != ExitOK || json.Unmarshal([]byte(r.stdout), &groups) != nil || len(groups) != 1 || groups[0].Count != 3 || groups[0].Target != "billing" {
		t.Fatalf("dead list --json: exit %d\n%s", r.code, r.stdout)
	}

	r = run(t, ctx, env, "dead", "show", groups[0].SampleID, "--json")
	var row deadRowJSON
	if r.code != ExitOK || json.Unmarshal([]byte(r.stdout), &row) != nil || row.ID != groups[0].SampleID || row.State != "dead" {
		t.Fatalf("dead show --json: exit %d\n%s\nstderr %s", r.code, r.stdout, r.stderr)
	}
	if strings.Contains(r.stdout, "cli-secret-77") {
		t.Errorf("dead show printed the secret header:\n%s", r.stdout)
	}
	if r = run(t, ctx, env, "dead", "show", "00000000-0000-4000-8000-000000000000"); r.code != ExitFailure || !strings.Contains(r.stderr, "neither the outbox nor the inbox has it") {
		t.Errorf("dead show of an unknown id: exit %d, stderr %s", r.code, r.stderr)
	}

	r = run(t, ctx, env, "dead", "replay", "--target", "billing", "--dry-run", "--json")
	var rep replayJSON
	if r.code != ExitOK || json.Unmarshal([]byte(r.stdout), &rep) != nil || !rep.DryRun || rep.Count != 3 || rep.Moved != 0 || len(rep.Sample) != 3 {
		t.Fatalf("dry run: exit %d\n%s", r.code, r.stdout)
	}
	if got := state(); got["dead"] != 3 || got["sent"] != 1 {
		t.Fatalf("the dry run changed the rows: %v", got)
	}
	r = run(t, ctx, env, "dead", "replay", "--target", "billing")
	if r.code != ExitOK || r.stdout != "Moved 3 dead outbox rows back to pending.\n" || !strings.Contains(r.stderr, "batch 1: 3 of 3 rows moved") {
		t.Fatalf("replay: exit %d, stdout %q, stderr %s", r.code, r.stdout, r.stderr)
	}
	if got := state(); got["pending"] != 3 || got["sent"] != 1 || got["dead"] != 0 {
		t.Errorf("after the replay: %v (the sent row must stay sent)", got)
	}
}
