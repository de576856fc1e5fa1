package storetest

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/alternayte/queuebox/migrations"
	"github.com/alternayte/queuebox/shared/migrate"
	"github.com/alternayte/queuebox/shared/store"
)

// The migration part of the suite: the bundled migrations run through the driver's backend
// (store.Driver.Migration) with the runner of package migrate, on a database without tables,
// and the store's schema check (Store.CheckSchema, the last start check of service.Prepare)
// judges the result.

// migrationTests are the tests of the migration part; each gets a driver on a new empty
// database.
func migrationTests() []struct {
	name string
	run  func(t *testing.T, ctx context.Context, d *store.Driver)
} {
	return []struct {
		name string
		run  func(t *testing.T, ctx context.Context, d *store.Driver)
	}{
		{"MigrateFreshDatabase", testMigrateFreshDatabase},
		{"CheckSchemaNamesMissingTable", testCheckSchemaNamesMissingTable},
	}
}

// runMigrationTests runs the migration part with the OpenEmpty of h.
func runMigrationTests(t *testing.T, h Harness) {
	for _, tc := range migrationTests() {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			d := h.OpenEmpty(t)
			if d == nil || d.Store == nil || d.Migration == nil {
				t.Fatal("storetest: Harness.OpenEmpty returned a driver without a Store or a Migration backend")
			}
			ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
			t.Cleanup(cancel)
			tc.run(t, ctx, d)
		})
	}
}

// newRunner returns the runner of package migrate on the driver's backend, with the default
// names (the tables of SchemaMigrated).
func newRunner(t *testing.T, d *store.Driver, opts migrate.Options) *migrate.Runner {
	t.Helper()
	r, err := migrate.New(d.Migration, opts)
	if err != nil {
		t.Fatalf("creating the migration runner: %v", err)
	}
	return r
}

// bundled returns the number of migrations of the main track that the driver's dialect ships.
func bundled(t *testing.T, d *store.Driver) int {
	t.Helper()
	return bundledTrack(t, d, migrations.Main)
}

// bundledTrack returns the number of migrations of track tr that the driver's dialect ships.
func bundledTrack(t *testing.T, d *store.Driver, tr migrations.Track) int {
	t.Helper()
	list, err := migrations.ListTrack(tr, d.Migration.Dialect())
	if err != nil {
		t.Fatalf("listing the %s migrations of the %s track: %v", d.Migration.Dialect(), tr, err)
	}
	if len(list) == 0 {
		t.Fatalf("the %s dialect ships no migration of the %s track", d.Migration.Dialect(), tr)
	}
	return len(list)
}

func versions(from, to int) []int {
	var out []int
	for v := from; v <= to; v++ {
		out = append(out, v)
	}
	return out
}

// testMigrateFreshDatabase: Migrate applies every bundled version of both tracks once, Status
// and CheckStart (with and without database.migrate) then report the schema up to date, a
// second Migrate applies nothing, and the schema check passes.
func testMigrateFreshDatabase(t *testing.T, ctx context.Context, d *store.Driver) {
	n := bundled(t, d)
	nq := bundledTrack(t, d, migrations.QueueBox)
	upToDate := "schema is up to date at V" + strconv.Itoa(n) + "; QueueBox's own migrations are up to date at V" + strconv.Itoa(nq)
	r := newRunner(t, d, migrate.Options{})
	names := store.DefaultNames()
	tables := []string{names.OutboxTable, names.InboxTable}

	before, err := r.Status(ctx)
	if err != nil {
		t.Fatalf("status of an empty database: %v", err)
	}
	if before.HasHistory || before.Current != 0 || len(before.Tables) != 0 || !slices.Equal(before.Pending, versions(1, n)) {
		t.Fatalf("status of an empty database: got history %v, current V%d, tables %v, pending %v; want no history, V0, no tables, V1..V%d pending",
			before.HasHistory, before.Current, before.Tables, before.Pending, n)
	}

	res, err := r.Migrate(ctx)
	if err != nil {
		t.Fatalf("migrating an empty database: %v", err)
	}
	if res.Dialect != d.Migration.Dialect() || res.Current != n || !slices.Equal(res.Applied, versions(1, n)) || res.Baseline ||
		res.QueueBox.Current != nq || !slices.Equal(res.QueueBox.Applied, versions(1, nq)) {
		t.Fatalf("migrating an empty database: got %+v, want V1..V%d and the QueueBox track's V1..V%d applied", res, n, nq)
	}

	st, err := r.Status(ctx)
	if err != nil {
		t.Fatalf("status after migrating: %v", err)
	}
	if !st.HasHistory || st.Current != n || len(st.Pending) != 0 || len(st.Unknown) != 0 ||
		!slices.Equal(st.Applied, versions(1, n)) || !slices.Equal(st.Tables, tables) ||
		!st.QueueBox.HasHistory || st.QueueBox.Current != nq || len(st.QueueBox.Pending) != 0 || len(st.QueueBox.Missing) != 0 {
		t.Fatalf("status after migrating: got %+v, want V1..V%d applied, nothing pending, tables %v", st, n, tables)
	}

	for _, doMigrate := range []bool{true, false} {
		start, err := r.CheckStart(ctx, doMigrate)
		if err != nil {
			t.Fatalf("start check (migrate=%v) after migrating: %v", doMigrate, err)
		}
		want := migrate.StartResult{Level: migrate.LevelInfo, Message: upToDate,
			Migration: migrate.Result{Dialect: d.Migration.Dialect(), Current: n, QueueBox: migrate.TrackResult{Current: nq}}}
		if !doMigrate {
			want.Message = "schema is up to date at V" + strconv.Itoa(n) + " (database.migrate is false)"
			want.Migration = migrate.Result{}
		}
		if !startResultEqual(start, want) {
			t.Fatalf("start check (migrate=%v) after migrating:\n got %+v\nwant %+v", doMigrate, start, want)
		}
	}

	again, err := r.Migrate(ctx)
	if err != nil {
		t.Fatalf("migrating a second time: %v", err)
	}
	if len(again.Applied) != 0 || len(again.QueueBox.Applied) != 0 || again.Current != n || again.String() != upToDate {
		t.Fatalf("migrating a second time: got %+v (%q), want nothing applied", again, again.String())
	}
	if st2, err := r.Status(ctx); err != nil || !slices.Equal(st2.Applied, st.Applied) || len(st2.Pending) != 0 {
		t.Fatalf("status after the second run: got %+v, %v; want it unchanged", st2, err)
	}

	if err := d.Store.CheckSchema(ctx); err != nil {
		t.Fatalf("checking the schema that the migrations built: %v", err)
	}
}

// testCheckSchemaNamesMissingTable: on a database without tables, and on one migrated only up
// to V1 (the outbox without the inbox), the schema check fails and its error names the
// missing table; the start check without database.migrate lists the versions left.
func testCheckSchemaNamesMissingTable(t *testing.T, ctx context.Context, d *store.Driver) {
	n := bundled(t, d)
	names := store.DefaultNames()

	err := d.Store.CheckSchema(ctx)
	if err == nil {
		t.Fatal("checking the schema of a database without tables: got no error")
	}
	for _, want := range []string{"checking schema", names.OutboxTable, names.InboxTable, "does not exist"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("checking the schema of a database without tables: error %q does not contain %q", err, want)
		}
	}

	r := newRunner(t, d, migrate.Options{Target: 1})
	if _, err := r.Migrate(ctx); err != nil {
		t.Fatalf("migrating up to V1: %v", err)
	}
	// The QueueBox track waits for the last version of the main track, so its tables do not
	// exist yet: the start without migrate lists them and goes on.
	early, err := newRunner(t, d, migrate.Options{}).CheckStart(ctx, false)
	if err != nil || len(early.Missing) == 0 {
		t.Fatalf("start check without migrate after V1: got %+v, %v; want the QueueBox track listed as missing", early, err)
	}
	applyQueueBoxTrack(t, ctx, d)
	start, err := newRunner(t, d, migrate.Options{}).CheckStart(ctx, false)
	if err != nil {
		t.Fatalf("start check without migrate after V1 and the QueueBox track: %v", err)
	}
	if start.Level != migrate.LevelWarning || !slices.Equal(start.Pending, versions(2, n)) {
		t.Fatalf("start check without migrate after V1: got %+v, want a warning with V2..V%d pending", start, n)
	}

	err = d.Store.CheckSchema(ctx)
	if err == nil {
		t.Fatalf("checking the schema of a database without the %s table: got no error", names.InboxTable)
	}
	msg := err.Error()
	for _, want := range []string{"checking schema", names.InboxTable, "does not exist"} {
		if !strings.Contains(msg, want) {
			t.Errorf("checking the schema of a database without the %s table: error %q does not contain %q", names.InboxTable, msg, want)
		}
	}
}

// applyQueueBoxTrack applies and records every file of the QueueBox track through the
// driver's backend, as `queuebox migrate` would once the main track is complete.
func applyQueueBoxTrack(t *testing.T, ctx context.Context, d *store.Driver) {
	t.Helper()
	list, err := migrations.ListTrack(migrations.QueueBox, d.Migration.Dialect())
	if err != nil {
		t.Fatalf("listing the QueueBox track: %v", err)
	}
	s, err := d.Migration.Open(ctx, time.Minute)
	if err != nil {
		t.Fatalf("opening a migration session: %v", err)
	}
	defer s.Close(ctx)
	if err := s.CreateHistory(ctx, migrations.QueueBox); err != nil {
		t.Fatalf("creating %s: %v", migrations.QueueBox.HistoryTable(), err)
	}
	for i, m := range list {
		if err := s.Apply(ctx, m, i+1, ""); err != nil {
			t.Fatalf("applying %s of the QueueBox track: %v", m.Script, err)
		}
	}
}

func startResultEqual(a, b migrate.StartResult) bool {
	return a.Level == b.Level && a.Message == b.Message && slices.Equal(a.Pending, b.Pending) &&
		slices.Equal(a.Unknown, b.Unknown) && a.Migration.Dialect == b.Migration.Dialect &&
		a.Migration.Current == b.Migration.Current && a.Migration.Baseline == b.Migration.Baseline &&
		slices.Equal(a.Migration.Applied, b.Migration.Applied) && slices.Equal(a.Migration.Unknown, b.Migration.Unknown) &&
		a.Migration.QueueBox.Current == b.Migration.QueueBox.Current &&
		slices.Equal(a.Migration.QueueBox.Applied, b.Migration.QueueBox.Applied) &&
		slices.Equal(a.Migration.QueueBox.Moved, b.Migration.QueueBox.Moved)
}
