package cli

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/alternayte/queuebox/migrations"
)

// TestReplayWithoutQueueBoxsOwnTables: on a database whose schema was applied by hand with
// V1..V11 only (none of QueueBox's own migrations), `queuebox dead replay` and `queuebox
// replay` move the rows; they do not fail on the missing table of the replay generations.
func TestReplayWithoutQueueBoxsOwnTables(t *testing.T) {
	t.Parallel()
	env := dbEnv(t)
	env["QUEUEBOX_DATABASE_MIGRATE"] = "false"
	env["QUEUEBOX_DESTINATIONS_BILLING_BASEURL"] = "http://127.0.0.1:9"
	env["QUEUEBOX_ROUTES_0_TOPICPATTERN"] = "**"
	env["QUEUEBOX_ROUTES_0_DESTINATION"] = "billing"
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, pgURL(env))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	main, err := migrations.ListTrack(migrations.Main, migrations.PostgreSQL)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range main {
		if _, err := conn.Exec(ctx, m.SQL); err != nil {
			t.Fatalf("applying %s by hand: %v", m.Script, err)
		}
	}
	dead := func() {
		t.Helper()
		if _, err := conn.Exec(ctx, `UPDATE outbox SET state = 'dead'; INSERT INTO outbox (topic, payload, state) VALUES ('order.created', '{}', 'dead')`); err != nil {
			t.Fatal(err)
		}
	}
	pending := func() int {
		t.Helper()
		var n int
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM outbox WHERE state = 'pending'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}

	dead()
	if r := run(t, ctx, env, "dead", "replay", "--target", "billing"); r.code != ExitOK {
		t.Fatalf("dead replay: exit %d, stdout %q, stderr %s", r.code, r.stdout, r.stderr)
	}
	if n := pending(); n != 1 {
		t.Fatalf("after dead replay: %d pending rows, want 1", n)
	}
	dead()
	if r := run(t, ctx, env, "replay", "--destination", "billing"); r.code != ExitOK {
		t.Fatalf("replay: exit %d, stdout %q, stderr %s", r.code, r.stdout, r.stderr)
	}
	if n := pending(); n != 2 {
		t.Fatalf("after replay: %d pending rows, want 2", n)
	}
}
