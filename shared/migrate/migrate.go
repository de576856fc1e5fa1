// Package migrate applies the bundled migration files of package migrations to a PostgreSQL or
// SQL Server database, and runs the start-up checks that go with them.
//
// The files come in two tracks (migrations.Track), each with its own history table of Flyway's
// columns. The main track keeps its history in Flyway's own table, flyway_schema_history, so a
// database that the original JVM QueueBox migrated is adopted as it is: a version recorded there
// with success = true is never run again, whatever its checksum (the JVM files differ from these
// in text, not in effect), and a Flyway baseline row marks every version up to its own as
// applied. The QueueBox track (this QueueBox's own tables) keeps its history in
// queuebox_schema_history and is applied after the last version of the main track, so that no
// version of it can clash with a later version of the original; track.go holds its rules,
// among them the move of the V12 that earlier builds recorded in flyway_schema_history.
//
// A run holds a database lock from the first read of the history to the last write, so replicas
// that start together apply each version exactly once: pg_try_advisory_lock on a fixed key on
// PostgreSQL, sp_getapplock (Exclusive, Session owner) on SQL Server, both on one dedicated
// connection. Each migration runs in its own transaction together with its history row, so a
// failed migration leaves neither a half-applied schema (as far as the database's DDL is
// transactional) nor a history row; the next start tries it again.
//
// The runner knows no dialect: the statements of each database live in its driver, behind
// store.MigrationBackend (shared/store/postgres and shared/store/sqlserver, each with
// NewMigrationBackend; Open returns it as store.Driver.Migration). New takes that backend.
//
// What this package stores:
//
//   - installed_rank is the largest rank plus one; version is the file's version as a decimal
//     number; description and script come from the file name as Flyway forms them; type is SQL.
//   - checksum is Flyway's checksum of the embedded file: CRC-32 (IEEE) over the file's lines
//     without their line terminators and without a leading byte order mark, as a signed 32-bit
//     number (see migrations.Checksum). Checksums are written for the record and never compared.
//   - installed_by is Options.InstalledBy, or the database user (current_user on PostgreSQL,
//     SUSER_SNAME() on SQL Server); execution_time is in milliseconds; success is true.
//   - Baseline writes one row per version 1..N with type BASELINE, checksum NULL and
//     execution_time 0.
//
// SQL Server files are split into batches at lines that read GO (see migrations.SplitBatches), the same
// rule that sqlcmd follows, so the files run unchanged with sqlcmd -b -I -i.
package migrate

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/alternayte/queuebox/migrations"
	"github.com/alternayte/queuebox/shared/store"
)

// HistoryTable is the name of the history table, Flyway's default. On SQL Server it lives in the
// dbo schema; on PostgreSQL in the first schema of the search path.
const HistoryTable = store.MigrationHistoryTable

// DefaultLockTimeout is the default of Options.LockTimeout.
const DefaultLockTimeout = 10 * time.Minute

// Sentinel errors. Each error that this package returns for one of these cases wraps the
// sentinel and explains the case and its remedy in its text.
var (
	// ErrNoHistory: the QueueBox tables exist but the database has no migration history, so the
	// runner cannot know which versions the tables already have. The remedy is
	// `queuebox migrate --baseline <version>`.
	ErrNoHistory = errors.New("migrate: tables without migration history")
	// ErrFailedMigration: the history records a migration with success = false.
	ErrFailedMigration = errors.New("migrate: a failed migration is recorded")
	// ErrOutOfOrder: the history records a version but not an earlier one that this release
	// ships.
	ErrOutOfOrder = errors.New("migrate: a version is missing below the applied ones")
	// ErrHistoryExists: Baseline found a database that already has a migration history.
	ErrHistoryExists = errors.New("migrate: the database already has a migration history")
	// ErrLockTimeout: another process held the migration lock for longer than
	// Options.LockTimeout.
	// It is store.ErrMigrationLockTimeout, which the dialect backends return.
	ErrLockTimeout = store.ErrMigrationLockTimeout
	// ErrInvalidVersion: Baseline or Options.Target names a version that this release does not
	// ship.
	ErrInvalidVersion = errors.New("migrate: no such migration version")
	// ErrStartupTimeout: WaitForDatabase gave up after database.startupTimeoutMs.
	ErrStartupTimeout = errors.New("migrate: the database did not answer in time")
)

// Options configures a Runner. The zero value is ready to use.
type Options struct {
	// Names holds the table names that the start check looks for: when one of them exists and
	// the database has no history, a run stops with ErrNoHistory. Only OutboxTable and
	// InboxTable are read. Default: store.DefaultNames().
	Names store.Names
	// InstalledBy is written to installed_by. Default: the database user.
	InstalledBy string
	// LockTimeout bounds the wait for the migration lock that another process holds while it
	// migrates. Default: DefaultLockTimeout (10 minutes). The context bounds it as well.
	LockTimeout time.Duration
	// Target is the last version that Migrate applies. Default: 0, every version.
	Target int
	// Logger receives one Info record for each migration applied. Default: no logging.
	Logger *slog.Logger
}

// WithDefaults returns the options with every zero field set to its default.
func (o Options) WithDefaults() Options {
	if o.Names.OutboxTable == "" && o.Names.InboxTable == "" {
		o.Names = store.DefaultNames()
	}
	if o.LockTimeout <= 0 {
		o.LockTimeout = DefaultLockTimeout
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return o
}

func (o Options) validate() error {
	for _, n := range []struct{ key, v string }{
		{"database.outboxTableName", o.Names.OutboxTable},
		{"database.inboxTableName", o.Names.InboxTable},
	} {
		if !store.IsIdentifier(n.v) {
			return fmt.Errorf("migrate: %s %q is not a SQL identifier", n.key, n.v)
		}
	}
	if o.Target < 0 {
		return fmt.Errorf("%w: target version %d", ErrInvalidVersion, o.Target)
	}
	return nil
}

// Result reports what one run did. Its top-level fields are the main track's.
type Result struct {
	// Dialect is the database kind.
	Dialect migrations.Dialect
	// Applied lists the versions that this run applied, or that Baseline recorded, in order.
	Applied []int
	// Current is the highest version recorded as applied after the run; 0 when none is.
	Current int
	// Baseline is true when Baseline recorded Applied without running them.
	Baseline bool
	// Unknown lists versions that the history records and this release does not ship, most
	// likely from a newer QueueBox release. They are left alone.
	Unknown []string
	// QueueBox is what the run did on the QueueBox track.
	QueueBox TrackResult
}

// String says what the run did, for the CLI and the start log: "applied V1..V11",
// "schema is up to date at V11", or "recorded V1..V11 as baseline", followed by the QueueBox
// track's part when the run reached it: "; applied QueueBox's own migrations V1..V3".
func (r Result) String() string {
	var main string
	switch {
	case r.Baseline:
		main = "recorded " + versionList(r.Applied) + " as baseline"
	case len(r.Applied) > 0:
		main = "applied " + versionList(r.Applied)
	case r.Current == 0:
		main = "schema has no migration applied"
	default:
		main = fmt.Sprintf("schema is up to date at V%d", r.Current)
	}
	if q := r.QueueBox.String(); q != "" {
		return main + "; " + q
	}
	return main
}

// versionList writes versions as "V1..V11" when they are consecutive, else "V3, V5".
func versionList(vs []int) string {
	if len(vs) == 0 {
		return "no version"
	}
	consecutive := true
	for i := 1; i < len(vs); i++ {
		if vs[i] != vs[i-1]+1 {
			consecutive = false
		}
	}
	if len(vs) == 1 {
		return fmt.Sprintf("V%d", vs[0])
	}
	if consecutive {
		return fmt.Sprintf("V%d..V%d", vs[0], vs[len(vs)-1])
	}
	parts := make([]string, len(vs))
	for i, v := range vs {
		parts[i] = fmt.Sprintf("V%d", v)
	}
	return strings.Join(parts, ", ")
}

// Status is the state of the migration history compared with the bundled files.
type Status struct {
	// Dialect is the database kind.
	Dialect migrations.Dialect
	// HasHistory is true when flyway_schema_history exists and holds at least one row.
	HasHistory bool
	// Current is the highest version recorded as applied; 0 when none is.
	Current int
	// Applied lists the bundled versions that the history records as applied (a baseline row
	// counts for every version up to its own).
	Applied []int
	// Pending lists the bundled versions that the history does not record, in order.
	Pending []int
	// Unknown lists versions that the history records and this release does not ship.
	Unknown []string
	// Tables lists the QueueBox tables (Options.Names) that exist.
	Tables []string
	// QueueBox is the state of the QueueBox track.
	QueueBox TrackStatus

	failed     *store.HistoryRow
	outOfOrder int // a pending version below an applied one; 0 when none
}

// Level says how the start reports a StartResult.
type Level int

// The levels of a StartResult.
const (
	// LevelInfo: nothing for the operator to do.
	LevelInfo Level = iota
	// LevelWarning: the start goes on, and the operator has something to do (apply pending
	// migrations by hand, or look at versions that this release does not know).
	LevelWarning
)

// String returns "info" or "warning".
func (l Level) String() string {
	if l == LevelWarning {
		return "warning"
	}
	return "info"
}

// StartResult is the outcome of CheckStart that lets the start go on.
type StartResult struct {
	// Level says whether Message is a warning.
	Level Level
	// Message is one sentence for the start log.
	Message string
	// Migration is what the start applied (migrate = true).
	Migration Result
	// Pending lists the versions that the operator must apply by hand (migrate = false).
	Pending []int
	// Unknown lists versions that the history records and this release does not ship.
	Unknown []string
	// Missing lists the files of the QueueBox track that are neither recorded nor applied
	// (migrate = false): the start goes on without their tables and warns once per file.
	Missing []MissingFile
}

// Runner applies the migrations of one dialect to one database. Its methods are safe to call
// from several goroutines and processes at once: each run takes the database lock.
type Runner struct {
	d    store.MigrationBackend
	opts Options
}

// New returns the Runner that applies the migrations of backend's dialect: the
// Driver.Migration of a dialect driver's Open (shared/store/postgres, shared/store/sqlserver),
// or the NewMigrationBackend of one of those packages.
func New(backend store.MigrationBackend, opts Options) (*Runner, error) {
	if backend == nil {
		return nil, errors.New("creating the migration runner: the driver has no migration backend")
	}
	return &Runner{d: backend, opts: opts.WithDefaults()}, nil
}

// Migrate applies every pending migration of the main track up to Options.Target in version
// order, each in its own transaction together with its history row, under the migration lock;
// then, once the main track is complete, the QueueBox track (see migrateQueueBox). It stops with
// ErrNoHistory when the QueueBox tables exist without a history, ErrFailedMigration when a
// history records a failed migration and ErrOutOfOrder when a version is missing below an
// applied one. A second run applies nothing.
func (r *Runner) Migrate(ctx context.Context) (Result, error) {
	res := Result{Dialect: r.d.Dialect()}
	if err := r.opts.validate(); err != nil {
		return res, err
	}
	lists, err := listTracks(r.d.Dialect())
	if err != nil {
		return res, err
	}
	list := lists.main
	target := len(list)
	if r.opts.Target > 0 {
		if r.opts.Target > len(list) {
			return res, fmt.Errorf("%w: target V%d, this release ships V1..V%d", ErrInvalidVersion, r.opts.Target, len(list))
		}
		target = r.opts.Target
	}

	s, err := r.d.Open(ctx, r.opts.LockTimeout)
	if err != nil {
		return res, err
	}
	defer s.Close(ctx)

	st, h, err := r.status(ctx, s, lists)
	if err != nil {
		return res, err
	}
	res.Unknown = st.Unknown
	res.Current = st.Current
	res.QueueBox.Current, res.QueueBox.Unknown = st.QueueBox.Current, st.QueueBox.Unknown
	if err := st.err(r.d.Dialect()); err != nil {
		return res, err
	}
	if h.main == nil {
		if err := s.CreateHistory(ctx, migrations.Main); err != nil {
			return res, fmt.Errorf("creating %s: %w", HistoryTable, err)
		}
	}
	rank := 0
	for _, row := range h.main {
		rank = max(rank, row.InstalledRank)
	}
	installedBy := r.opts.InstalledBy
	for _, v := range st.Pending {
		if v > target {
			break
		}
		m := list[v-1]
		rank++
		start := time.Now()
		if err := s.Apply(ctx, m, rank, installedBy); err != nil {
			return res, fmt.Errorf("applying migration %s: %w", m.Script, err)
		}
		r.opts.Logger.InfoContext(ctx, "applied migration", "dialect", string(r.d.Dialect()),
			"version", v, "script", m.Script, "duration_ms", time.Since(start).Milliseconds())
		res.Applied = append(res.Applied, v)
		res.Current = max(res.Current, v)
	}
	if res.Current < len(list) {
		// The QueueBox track comes after the last version of the main track.
		res.QueueBox = TrackResult{}
		return res, nil
	}
	return res, r.migrateQueueBox(ctx, s, st.QueueBox, h, lists.queuebox, &res.QueueBox)
}

// Baseline records versions 1..version as applied without running them, for tables created by
// hand (for example with psql or sqlcmd from the same files). It refuses, with
// ErrHistoryExists, a database whose history holds any row.
func (r *Runner) Baseline(ctx context.Context, version int) (Result, error) {
	res := Result{Dialect: r.d.Dialect(), Baseline: true}
	list, err := migrations.List(r.d.Dialect())
	if err != nil {
		return res, err
	}
	if version < 1 || version > len(list) {
		return res, fmt.Errorf("%w: --baseline %d, this release ships V1..V%d", ErrInvalidVersion, version, len(list))
	}
	s, err := r.d.Open(ctx, r.opts.LockTimeout)
	if err != nil {
		return res, err
	}
	defer s.Close(ctx)

	rows, err := r.readHistory(ctx, s, migrations.Main)
	if err != nil {
		return res, err
	}
	if len(rows) > 0 {
		st := interpret(list, rows)
		return res, fmt.Errorf("%w: %s holds %d rows (highest applied version V%d); "+
			"--baseline is only for tables created by hand without a history, use queuebox migrate instead",
			ErrHistoryExists, HistoryTable, len(rows), st.Current)
	}
	if rows == nil {
		if err := s.CreateHistory(ctx, migrations.Main); err != nil {
			return res, fmt.Errorf("creating %s: %w", HistoryTable, err)
		}
	}
	if err := s.Baseline(ctx, list[:version], r.opts.InstalledBy); err != nil {
		return res, fmt.Errorf("recording baseline V%d: %w", version, err)
	}
	for v := 1; v <= version; v++ {
		res.Applied = append(res.Applied, v)
	}
	res.Current = version
	return res, nil
}

// Status reads the history and compares it with the bundled files, without the lock and
// without writing.
func (r *Runner) Status(ctx context.Context) (Status, error) {
	if err := r.opts.validate(); err != nil {
		return Status{Dialect: r.d.Dialect()}, err
	}
	lists, err := listTracks(r.d.Dialect())
	if err != nil {
		return Status{Dialect: r.d.Dialect()}, err
	}
	s, err := r.d.Open(ctx, 0)
	if err != nil {
		return Status{Dialect: r.d.Dialect()}, err
	}
	defer s.Close(ctx)
	st, _, err := r.status(ctx, s, lists)
	return st, err
}

// CheckStart is the migration step of the start.
//
// With migrate = true (database.migrate) it runs Migrate: tables without a history stop the
// start with ErrNoHistory, whose text names `queuebox migrate --baseline <version>`.
//
// With migrate = false it only reads. The operator owns the schema, so a database without any
// history (the files applied by hand, or custom tables) is accepted at LevelInfo; a history with
// pending versions gives LevelWarning and lists them. A version of the QueueBox track that is
// neither recorded nor visible (its table does not exist) does not stop the start: it is listed
// in StartResult.Missing, for the caller to warn and to run without that table. A failed
// migration in a history stops the start in both modes.
func (r *Runner) CheckStart(ctx context.Context, migrate bool) (StartResult, error) {
	if migrate {
		res, ok := r.upToDate(ctx)
		var err error
		if !ok {
			res, err = r.Migrate(ctx)
		}
		if err != nil {
			return StartResult{Migration: res}, err
		}
		out := StartResult{Level: LevelInfo, Message: res.String(), Migration: res, Unknown: res.Unknown}
		if len(res.Unknown) > 0 {
			out.Level = LevelWarning
			out.Message += "; " + unknownSentence(res.Unknown)
		}
		if len(res.QueueBox.Unknown) > 0 {
			out.Level = LevelWarning
			out.Message += "; " + queueboxUnknownSentence(res.QueueBox.Unknown)
		}
		return out, nil
	}
	st, err := r.Status(ctx)
	if err != nil {
		return StartResult{}, err
	}
	if st.failed != nil {
		return StartResult{}, st.err(r.d.Dialect())
	}
	if st.QueueBox.failed != nil {
		return StartResult{}, st.QueueBox.err(r.d.Dialect())
	}
	out := StartResult{Level: LevelInfo, Unknown: st.Unknown, Missing: st.QueueBox.MissingFiles(r.d.Dialect())}
	switch {
	case !st.HasHistory:
		out.Message = "database.migrate is false and the database has no migration history; " +
			"the schema is managed by hand"
	case len(st.Pending) > 0:
		out.Level = LevelWarning
		out.Pending = st.Pending
		out.Message = fmt.Sprintf("database.migrate is false and migrations %s are not applied; "+
			"apply them by hand before this version runs (see Upgrade QueueBox)", versionList(st.Pending))
	default:
		out.Message = fmt.Sprintf("schema is up to date at V%d (database.migrate is false)", st.Current)
	}
	if len(st.Unknown) > 0 {
		out.Level = LevelWarning
		out.Message += "; " + unknownSentence(st.Unknown)
	}
	if w := st.QueueBox.warning(); w != "" {
		out.Level = LevelWarning
		out.Message += "; " + w
	}
	return out, nil
}

// upToDate is the fast path of CheckStart with migrate = true: it reads the history without
// the lock, in as few round trips as the dialect allows, and returns what Migrate would return
// and true when Migrate would find nothing to do: every bundled version recorded as applied and
// nothing in the history that stops a run. The history that it reads was committed, and a
// version that the history records as applied is never run again, so taking the lock first
// could not change that answer. In every other case (and on any error) it returns false and
// CheckStart runs Migrate, under the lock, which reports the error or applies what is pending.
func (r *Runner) upToDate(ctx context.Context) (Result, bool) {
	res := Result{Dialect: r.d.Dialect()}
	if r.opts.validate() != nil {
		return res, false
	}
	lists, err := listTracks(r.d.Dialect())
	if err != nil || r.opts.Target > len(lists.main) {
		return res, false
	}
	s, err := r.d.Open(ctx, 0)
	if err != nil {
		return res, false
	}
	defer s.Close(ctx)
	st, h, err := r.status(ctx, s, lists)
	if err != nil || h.main == nil || len(st.Pending) > 0 || st.err(r.d.Dialect()) != nil ||
		h.queuebox == nil || len(st.QueueBox.Pending) > 0 || len(st.QueueBox.InMainHistory) > 0 {
		return res, false
	}
	res.Current, res.Unknown = st.Current, st.Unknown
	res.QueueBox.Current, res.QueueBox.Unknown = st.QueueBox.Current, st.QueueBox.Unknown
	return res, true
}

func unknownSentence(vs []string) string {
	return fmt.Sprintf("%s records versions that this release does not ship (%s); "+
		"a newer QueueBox migrated this database", HistoryTable, "V"+strings.Join(vs, ", V"))
}

// histories holds the rows of each track's history table; a field is nil when its table does
// not exist.
type histories struct {
	main, queuebox []store.HistoryRow
}

// status reads both histories and the tables, and compares them with the bundled files.
func (r *Runner) status(ctx context.Context, s store.MigrationSession, lists trackLists) (Status, histories, error) {
	names := []string{r.opts.Names.OutboxTable, r.opts.Names.InboxTable}
	probe := append(slices.Clone(names), lists.queueboxTables()...)
	var h histories
	var present []string
	if p, ok := s.(store.MigrationProber); ok {
		exists, tables, err := p.Probe(ctx, migrations.Tracks, probe)
		if err != nil {
			return Status{Dialect: r.d.Dialect()}, h, fmt.Errorf("looking for %s: %w", HistoryTable, err)
		}
		present = tables
		var existing []migrations.Track
		for i, t := range migrations.Tracks {
			if exists[i] {
				existing = append(existing, t)
			}
		}
		if len(existing) > 0 {
			all, err := p.ReadHistories(ctx, existing)
			if err != nil {
				return Status{Dialect: r.d.Dialect()}, h, fmt.Errorf("reading the migration history: %w", err)
			}
			for i, t := range existing {
				rows := all[i]
				if rows == nil {
					rows = []store.HistoryRow{}
				}
				h.set(t, rows)
			}
		}
	} else {
		for _, t := range migrations.Tracks {
			rows, err := r.readHistory(ctx, s, t)
			if err != nil {
				return Status{Dialect: r.d.Dialect()}, h, err
			}
			h.set(t, rows)
		}
		var err error
		present, err = s.TablesPresent(ctx, probe)
		if err != nil {
			return Status{Dialect: r.d.Dialect()}, h, fmt.Errorf("looking for the tables %s: %w", strings.Join(probe, ", "), err)
		}
	}
	mainRows, moved := splitMoved(h.main)
	st := interpret(lists.main, mainRows)
	st.Dialect = r.d.Dialect()
	for _, n := range names {
		if slices.Contains(present, n) {
			st.Tables = append(st.Tables, n)
		}
	}
	st.QueueBox = queueboxStatus(lists.queuebox, h.queuebox, moved, present)
	return st, h, nil
}

func (h *histories) set(t migrations.Track, rows []store.HistoryRow) {
	if t == migrations.QueueBox {
		h.queuebox = rows
	} else {
		h.main = rows
	}
}

// readHistory reads the history of track t; nil when its table does not exist.
func (r *Runner) readHistory(ctx context.Context, s store.MigrationSession, t migrations.Track) ([]store.HistoryRow, error) {
	exists, err := s.HistoryExists(ctx, t)
	if err != nil {
		return nil, fmt.Errorf("looking for %s: %w", t.HistoryTable(), err)
	}
	if !exists {
		return nil, nil
	}
	rows, err := s.ReadHistory(ctx, t)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", t.HistoryTable(), err)
	}
	if rows == nil {
		rows = []store.HistoryRow{}
	}
	return rows, nil
}

// err returns the error that stops a run, or nil.
func (st Status) err(d migrations.Dialect) error {
	if !st.HasHistory && len(st.Tables) > 0 {
		return fmt.Errorf("%w: the database has the QueueBox tables %s but no migration history (%s); "+
			"record the version that the tables have with `queuebox migrate --baseline <version>` "+
			"(11 when every bundled file was applied), or set database.migrate to false",
			ErrNoHistory, strings.Join(st.Tables, ", "), HistoryTable)
	}
	if f := st.failed; f != nil {
		return fmt.Errorf("%w: %s records version V%s (%s) as failed at installed_rank %d; "+
			"complete or undo that migration by hand (the file is %s of the %s migrations), "+
			"then delete that row and start again",
			ErrFailedMigration, HistoryTable, f.Version, f.Description, f.InstalledRank, f.Script, d)
	}
	if st.outOfOrder > 0 {
		return fmt.Errorf("%w: %s does not record V%d but records the later V%d; "+
			"apply V%d by hand and record it, or repair the history",
			ErrOutOfOrder, HistoryTable, st.outOfOrder, st.Current, st.outOfOrder)
	}
	return st.QueueBox.err(d)
}
