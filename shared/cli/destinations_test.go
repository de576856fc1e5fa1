package cli

import (
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/alternayte/queuebox/shared/admin"
)

// destinationsEnv is a migrated fresh database with the destinations billing and archive.
func destinationsEnv(t *testing.T) map[string]string {
	t.Helper()
	env := dbEnv(t)
	env["QUEUEBOX_DESTINATIONS_BILLING_BASEURL"] = "http://127.0.0.1:9"
	env["QUEUEBOX_DESTINATIONS_ARCHIVE_BASEURL"] = "http://127.0.0.1:9"
	env["QUEUEBOX_ROUTES_0_TOPICPATTERN"] = "**"
	env["QUEUEBOX_ROUTES_0_DESTINATION"] = "billing"
	if r := run(t, context.Background(), env, "migrate"); r.code != ExitOK {
		t.Fatalf("migrate: exit %d, %s", r.code, r.stderr)
	}
	return env
}

func TestParseDestinationsArgs(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		args    []string
		want    command
		wantErr string
	}{
		{args: []string{"destinations", "list"}, want: command{name: "destinations-list"}},
		{args: []string{"destinations", "pause", "billing"}, want: command{name: "destinations-pause", destination: "billing"}},
		{args: []string{"destinations", "resume", "billing"}, want: command{name: "destinations-resume", destination: "billing"}},
		{args: []string{"destinations", "list", "--json"}, want: command{name: "destinations-list", json: true}},
		{args: []string{"destinations", "pause", "billing", "--json"}, want: command{name: "destinations-pause", destination: "billing", json: true}},
		{args: []string{"destinations", "resume", "--json", "billing"}, want: command{name: "destinations-resume", destination: "billing", json: true}},
		{args: []string{"destinations", "--json"}, wantErr: "Unknown arguments: --json"},
		{args: []string{"destinations"}, wantErr: "Unknown arguments: destinations"},
		{args: []string{"destinations", "pause"}, wantErr: "Unknown arguments: pause"},
		{args: []string{"destinations", "pause", "--all"}, wantErr: "Unknown arguments: pause --all"},
		{args: []string{"destinations", "resume", "a", "b"}, wantErr: "Unknown arguments: b"},
		{args: []string{"destinations", "list", "x"}, wantErr: "Unknown arguments: x"},
		{args: []string{"destinations", "drop", "x"}, wantErr: "Unknown arguments: drop x"},
	} {
		got, err := parseArgs(tt.args)
		if tt.wantErr != "" {
			if err == nil || err.Error() != tt.wantErr {
				t.Errorf("%v: error = %v, want %q", tt.args, err, tt.wantErr)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("%v: parseArgs = %+v, %v; want %+v", tt.args, got, err, tt.want)
		}
	}
}

func TestDestinationsPauseListResume(t *testing.T) {
	t.Parallel()
	env := destinationsEnv(t)
	ctx := context.Background()

	r := run(t, ctx, env, "destinations", "list")
	want := "DESTINATION  PAUSED  CIRCUIT  OPEN REMAINING  FAILURES\n" +
		"archive      no      closed   -               0\n" +
		"billing      no      closed   -               0\n"
	if r.code != ExitOK || r.stdout != want {
		t.Fatalf("list: exit %d, stdout\n%s\nwant\n%s\nstderr %s", r.code, r.stdout, want, r.stderr)
	}

	var pausedLine string
	for i := range 2 {
		r = run(t, ctx, env, "destinations", "pause", "billing")
		if r.code != ExitOK || !strings.HasPrefix(r.stdout, "Destination billing is paused (since ") {
			t.Fatalf("pause %d: exit %d, stdout %q, stderr %s", i, r.code, r.stdout, r.stderr)
		}
		// A second pause keeps the time of the first.
		if i == 1 && r.stdout != pausedLine {
			t.Errorf("a second pause answered %q, want %q", r.stdout, pausedLine)
		}
		pausedLine = r.stdout
	}
	conn, err := pgx.Connect(ctx, pgURL(env))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var paused bool
	if err := conn.QueryRow(ctx, `SELECT paused FROM queuebox_destination_state WHERE destination = 'billing'`).Scan(&paused); err != nil || !paused {
		t.Fatalf("the row of billing after the pause: paused %v, %v", paused, err)
	}
	r = run(t, ctx, env, "destinations", "list")
	if !regexp.MustCompile(`(?m)^billing +since \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ +closed +- +0$`).MatchString(r.stdout) ||
		!regexp.MustCompile(`(?m)^archive +no +closed`).MatchString(r.stdout) {
		t.Errorf("list after the pause:\n%s", r.stdout)
	}

	// An open breaker shows its state and what is left of its cool-down.
	if _, err := conn.Exec(ctx, `INSERT INTO queuebox_destination_state (destination, open_until) VALUES ('archive', clock_timestamp() + interval '10 minutes')`); err != nil {
		t.Fatal(err)
	}
	r = run(t, ctx, env, "destinations", "list")
	if !regexp.MustCompile(`(?m)^archive +no +open +(9m5\ds|10m0s) +0$`).MatchString(r.stdout) {
		t.Errorf("list with archive open:\n%s", r.stdout)
	}

	for range 2 {
		r = run(t, ctx, env, "destinations", "resume", "billing")
		if r.code != ExitOK || r.stdout != "Destination billing is resumed: its rows are delivered again (circuit closed).\n" {
			t.Fatalf("resume: exit %d, stdout %q, stderr %s", r.code, r.stdout, r.stderr)
		}
	}
	if err := conn.QueryRow(ctx, `SELECT paused FROM queuebox_destination_state WHERE destination = 'billing'`).Scan(&paused); err != nil || paused {
		t.Fatalf("the row of billing after the resume: paused %v, %v", paused, err)
	}

	// The same answers as JSON, in the shape of GET /admin/destinations.
	var one admin.DestinationStatus
	r = run(t, ctx, env, "destinations", "pause", "billing", "--json")
	if r.code != ExitOK || json.Unmarshal([]byte(r.stdout), &one) != nil || one.Name != "billing" || !one.Paused || one.PausedAt == nil {
		t.Fatalf("pause --json: exit %d, stdout %s, stderr %s", r.code, r.stdout, r.stderr)
	}
	var list []admin.DestinationStatus
	r = run(t, ctx, env, "destinations", "list", "--json")
	if r.code != ExitOK || json.Unmarshal([]byte(r.stdout), &list) != nil || len(list) != 2 ||
		list[0].Name != "archive" || list[0].Circuit != "open" || list[0].OpenRemainingMs <= 0 ||
		list[1].Name != "billing" || !list[1].Paused {
		t.Fatalf("list --json: exit %d, stdout %s", r.code, r.stdout)
	}
	r = run(t, ctx, env, "destinations", "resume", "billing", "--json")
	if r.code != ExitOK || json.Unmarshal([]byte(r.stdout), &one) != nil || one.Paused || one.PausedAt != nil {
		t.Fatalf("resume --json: exit %d, stdout %s", r.code, r.stdout)
	}
}

func TestDestinationsUnknownNameFails(t *testing.T) {
	t.Parallel()
	env := destinationsEnv(t)
	for _, verb := range []string{"pause", "resume"} {
		r := run(t, context.Background(), env, "destinations", verb, "nowhere")
		want := `QueueBox could not ` + verb + ` destination "nowhere". Reason: no destination has this name (the configured destinations are archive, billing).` + "\n"
		if r.code != ExitFailure || !strings.HasSuffix(r.stderr, want) || r.stdout != "" {
			t.Errorf("%s nowhere: exit %d, stdout %q, stderr %q; want exit 1 and %q", verb, r.code, r.stdout, r.stderr, want)
		}
	}
}

func TestDestinationsWithoutTheStateTableFails(t *testing.T) {
	t.Parallel()
	env := destinationsEnv(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, pgURL(env))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `DROP TABLE queuebox_destination_state`); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"destinations", "list"}, {"destinations", "pause", "billing"}} {
		r := run(t, ctx, env, args...)
		if r.code != ExitFailure || !strings.Contains(r.stderr, "Reason: the table queuebox_destination_state does not exist; apply QueueBox's own migration V1__add_destination_state.sql (queuebox migrate) first.") {
			t.Errorf("%v without the table: exit %d, stderr %q", args, r.code, r.stderr)
		}
	}
}
