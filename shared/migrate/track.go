package migrate

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/alternayte/queuebox/migrations"
	"github.com/alternayte/queuebox/shared/store"
)

// The QueueBox track (migrations.QueueBox): this QueueBox's own tables, numbered from V1 on
// their own and recorded in queuebox_schema_history, so that a later migration of the original
// QueueBox can never clash with one of them. The rules:
//
//   - Migrate applies the track after the last version of the main track, in the same run and
//     under the same lock, each file in its own transaction with its history row. A run with
//     Options.Target below the last main version leaves the track alone.
//   - Each file of the track creates one table (migrations.Migration.Table) and is safe to run
//     twice, so the track needs no baseline: a version that is not recorded is applied again,
//     which changes nothing when the table was created by hand, and recorded.
//   - A row of flyway_schema_history that is one of migrations.MovedToQueueBox (the V12 of
//     earlier builds) is this QueueBox's: Migrate moves it to queuebox_schema_history under
//     its new version and deletes it from flyway_schema_history, in one transaction, so that
//     flyway_schema_history holds only the original's versions and a later V12 of the original
//     applies as it would on a database that never saw this QueueBox. Until then the main
//     track ignores the row (it is neither applied nor unknown there) and the track counts its
//     version as applied.
//   - With database.migrate false, CheckStart accepts a version that is recorded or whose table
//     exists, and reports the others in StartResult.Missing: the start goes on without them,
//     each feature that needs one of their tables off (as before the track existed), with a
//     warning per file.
//   - A version missing below a recorded one is applied, not refused as on the main track.

// trackLists holds the bundled files of both tracks of one dialect.
type trackLists struct {
	main, queuebox []migrations.Migration
}

func listTracks(d migrations.Dialect) (trackLists, error) {
	main, err := migrations.ListTrack(migrations.Main, d)
	if err != nil {
		return trackLists{}, err
	}
	qb, err := migrations.ListTrack(migrations.QueueBox, d)
	if err != nil {
		return trackLists{}, err
	}
	return trackLists{main: main, queuebox: qb}, nil
}

// queueboxTables returns the table that each version of the QueueBox track creates.
func (l trackLists) queueboxTables() []string {
	out := make([]string, 0, len(l.queuebox))
	for _, m := range l.queuebox {
		out = append(out, m.Table)
	}
	return out
}

// TrackResult reports what one run did on the QueueBox track.
type TrackResult struct {
	// Applied lists the versions that this run applied, in order.
	Applied []int
	// Moved lists the versions whose row this run moved from flyway_schema_history to
	// queuebox_schema_history (migrations.MovedToQueueBox).
	Moved []int
	// Current is the highest version recorded as applied after the run; 0 when none is.
	Current int
	// Unknown lists versions that queuebox_schema_history records and this release does not
	// ship. They are left alone.
	Unknown []string
}

// String says what the run did on the track, or "" when the run did not reach it:
// "moved V12 from flyway_schema_history to queuebox_schema_history as V1", "applied QueueBox's
// own migrations V1..V3", "QueueBox's own migrations are up to date at V3".
func (r TrackResult) String() string {
	var parts []string
	for _, v := range r.Moved {
		for _, m := range migrations.MovedToQueueBox() {
			if m.To == v {
				parts = append(parts, fmt.Sprintf("moved V%d from %s to %s as V%d", m.Version,
					migrations.Main.HistoryTable(), migrations.QueueBox.HistoryTable(), v))
			}
		}
	}
	switch {
	case len(r.Applied) > 0:
		parts = append(parts, "applied QueueBox's own migrations "+versionList(r.Applied))
	case r.Current > 0:
		parts = append(parts, fmt.Sprintf("QueueBox's own migrations are up to date at V%d", r.Current))
	}
	return strings.Join(parts, "; ")
}

// TrackStatus is the state of the QueueBox track: its history compared with its bundled files.
type TrackStatus struct {
	// HasHistory is true when queuebox_schema_history exists and holds at least one row.
	HasHistory bool
	// Current is the highest version recorded as applied; 0 when none is.
	Current int
	// Applied lists the versions that the history records as applied, including those that
	// flyway_schema_history still records under their former number (InMainHistory).
	Applied []int
	// Pending lists the versions that no history records, in order.
	Pending []int
	// Missing lists the pending versions whose table does not exist.
	Missing []int
	// InMainHistory lists the versions that flyway_schema_history records under their former
	// number (migrations.MovedToQueueBox); Migrate moves their rows.
	InMainHistory []int
	// Unknown lists versions that queuebox_schema_history records and this release does not
	// ship.
	Unknown []string

	list   []migrations.Migration
	moved  []movedRow
	failed *store.HistoryRow
}

// movedRow is a row of flyway_schema_history that belongs to the QueueBox track.
type movedRow struct {
	row store.HistoryRow
	to  int
}

// splitMoved takes the rows of migrations.MovedToQueueBox out of the main history: a
// successful row whose version and script are those of a moved migration.
func splitMoved(rows []store.HistoryRow) ([]store.HistoryRow, []movedRow) {
	if rows == nil {
		return nil, nil
	}
	out := make([]store.HistoryRow, 0, len(rows))
	var moved []movedRow
	for _, row := range rows {
		v, ok := parseVersion(row.Version)
		typ := strings.ToUpper(row.Type)
		isMoved := false
		if ok && row.Success && typ != "DELETE" && !strings.HasPrefix(typ, "UNDO") {
			for _, m := range migrations.MovedToQueueBox() {
				if m.Version == v && m.Script == row.Script {
					moved = append(moved, movedRow{row: row, to: m.To})
					isMoved = true
				}
			}
		}
		if !isMoved {
			out = append(out, row)
		}
	}
	slices.SortFunc(moved, func(a, b movedRow) int { return a.row.InstalledRank - b.row.InstalledRank })
	return out, moved
}

// queueboxStatus compares the QueueBox history (nil when its table does not exist) and the
// moved rows of flyway_schema_history with the track's files; present lists the tables that
// exist.
func queueboxStatus(list []migrations.Migration, rows []store.HistoryRow, moved []movedRow, present []string) TrackStatus {
	// A moved row counts as a row of the track, after the track's own rows.
	all := slices.Clone(rows)
	rank := 0
	for _, row := range rows {
		rank = max(rank, row.InstalledRank)
	}
	for i, m := range moved {
		all = append(all, store.HistoryRow{InstalledRank: rank + i + 1, Version: strconv.Itoa(m.to), Type: "SQL", Success: true})
	}
	st := interpret(list, all)
	out := TrackStatus{
		HasHistory: len(rows) > 0, Current: st.Current, Applied: st.Applied, Pending: st.Pending,
		Unknown: st.Unknown, list: list, moved: moved, failed: st.failed,
	}
	for _, m := range moved {
		out.InMainHistory = append(out.InMainHistory, m.to)
	}
	for _, v := range st.Pending {
		if !slices.Contains(present, list[v-1].Table) {
			out.Missing = append(out.Missing, v)
		}
	}
	return out
}

// err returns the error that stops a run, or nil.
func (st TrackStatus) err(d migrations.Dialect) error {
	table := migrations.QueueBox.HistoryTable()
	if f := st.failed; f != nil {
		return fmt.Errorf("%w: %s records version V%s (%s) as failed at installed_rank %d; "+
			"complete or undo that migration by hand (the file is %s of migrations/%s), "+
			"then delete that row and start again",
			ErrFailedMigration, table, f.Version, f.Description, f.InstalledRank, f.Script, migrations.QueueBox.Dir(d))
	}
	// A version missing below a recorded one is not an error here, unlike on the main track:
	// each file of this track is safe to run again, so Migrate applies it (an operator who
	// dropped a table and deleted its row gets the table back).
	return nil
}

// MissingFile is a file of the QueueBox track that CheckStart without migrate found neither
// recorded in queuebox_schema_history nor applied (its table does not exist). The start goes
// on without it: each feature that needs its table is off until it is applied (the start logs
// what), and the store is told so once (store.TrackTables).
type MissingFile struct {
	// Version is the file's version on the QueueBox track.
	Version int
	// Script is the file name, for example V2__add_revoked_sessions.sql.
	Script string
	// Table is the table that the file creates.
	Table string
	// Path is the file's path in the repository and the release archive, for example
	// migrations/queuebox/postgresql/V2__add_revoked_sessions.sql.
	Path string
	// Apply says how to apply it: by hand with the dialect's client, or with
	// `queuebox migrate`.
	Apply string
}

// MissingFiles lists the files whose version is neither recorded nor visible (Missing), in
// version order, for the dialect d of the status.
func (st TrackStatus) MissingFiles(d migrations.Dialect) []MissingFile {
	if len(st.Missing) == 0 {
		return nil
	}
	dir := "migrations/" + migrations.QueueBox.Dir(d)
	how := "psql -v ON_ERROR_STOP=1 -f"
	if d == migrations.SQLServer {
		how = "sqlcmd -b -I -i"
	}
	out := make([]MissingFile, 0, len(st.Missing))
	for _, v := range st.Missing {
		m := st.list[v-1]
		path := dir + "/" + m.Script
		out = append(out, MissingFile{
			Version: v, Script: m.Script, Table: m.Table, Path: path,
			Apply: fmt.Sprintf("apply it by hand (%s %s; safe to run twice; the files of %s in version order) and restart QueueBox, "+
				"or run `queuebox migrate` with a database user that may create tables, which applies and records it in %s "+
				"(see docs/migrations.md)", how, path, dir, migrations.QueueBox.HistoryTable()),
		})
	}
	return out
}

// warning is the sentence that CheckStart without migrate adds at LevelWarning, or "".
func (st TrackStatus) warning() string {
	var parts []string
	for _, m := range st.moved {
		parts = append(parts, fmt.Sprintf("%s records V%s (%s), which is now V%d of QueueBox's own migrations; "+
			"run `queuebox migrate` once, or move the row by hand (docs/migrations.md), "+
			"so that a later V%s of the original QueueBox can apply",
			migrations.Main.HistoryTable(), m.row.Version, m.row.Script, m.to, m.row.Version))
	}
	if len(st.Unknown) > 0 {
		parts = append(parts, queueboxUnknownSentence(st.Unknown))
	}
	return strings.Join(parts, "; ")
}

func queueboxUnknownSentence(vs []string) string {
	return fmt.Sprintf("%s records versions that this release does not ship (%s); "+
		"a newer QueueBox migrated this database", migrations.QueueBox.HistoryTable(), "V"+strings.Join(vs, ", V"))
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// migrateQueueBox is the QueueBox track's part of Migrate, on the session s that holds the
// lock: it creates queuebox_schema_history, moves the rows of flyway_schema_history that
// belong to the track, then applies each pending version, filling res.
func (r *Runner) migrateQueueBox(ctx context.Context, s store.MigrationSession, st TrackStatus, h histories,
	list []migrations.Migration, res *TrackResult) error {
	if len(list) == 0 {
		return nil
	}
	if h.queuebox == nil {
		if err := s.CreateHistory(ctx, migrations.QueueBox); err != nil {
			return fmt.Errorf("creating %s: %w", migrations.QueueBox.HistoryTable(), err)
		}
	}
	rank := 0
	recorded := map[int]bool{}
	for _, row := range h.queuebox {
		rank = max(rank, row.InstalledRank)
		if v, ok := parseVersion(row.Version); ok && row.Success {
			recorded[v] = true
		}
	}
	for _, m := range st.moved {
		to := list[m.to-1]
		toRank := 0
		if !recorded[m.to] {
			rank++
			toRank = rank
			recorded[m.to] = true
		}
		if err := s.MoveToQueueBox(ctx, m.row.InstalledRank, to, toRank); err != nil {
			return fmt.Errorf("moving V%s of %s to V%d of %s: %w", m.row.Version, migrations.Main.HistoryTable(),
				m.to, migrations.QueueBox.HistoryTable(), err)
		}
		r.opts.Logger.InfoContext(ctx, "moved a migration of QueueBox's own tables to its history",
			"dialect", string(r.d.Dialect()), "from", migrations.Main.HistoryTable(), "from_version", m.row.Version,
			"to", migrations.QueueBox.HistoryTable(), "to_version", m.to, "script", to.Script)
		res.Moved = append(res.Moved, m.to)
	}
	for _, v := range st.Pending {
		m := list[v-1]
		rank++
		start := time.Now()
		if err := s.Apply(ctx, m, rank, r.opts.InstalledBy); err != nil {
			return fmt.Errorf("applying migration %s of migrations/%s: %w", m.Script, migrations.QueueBox.Dir(r.d.Dialect()), err)
		}
		r.opts.Logger.InfoContext(ctx, "applied migration", "dialect", string(r.d.Dialect()), "track", string(migrations.QueueBox),
			"version", v, "script", m.Script, "duration_ms", time.Since(start).Milliseconds())
		res.Applied = append(res.Applied, v)
		res.Current = max(res.Current, v)
	}
	return nil
}
