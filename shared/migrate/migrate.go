// Package migrate applies the bundled migration files of package migrations to a PostgreSQL or
// SQL Server database, and runs the start-up checks that go with them.
//
// It keeps the history in Flyway's own table, flyway_schema_history, with Flyway's columns, so a
// database that the original JVM QueueBox migrated is adopted as it is: a version recorded there
// with success = true is never run again, whatever its checksum (the JVM files differ from these
// in text, not in effect), and a Flyway baseline row marks every version up to its own as
// applied.
//
// A run holds a database lock from the first read of the history to the last write, so replicas
// that start together apply each version exactly once: pg_try_advisory_lock on a fixed key on
// PostgreSQL, sp_getapplock (Exclusive, Session owner) on SQL Server, both on one dedicated
// connection. Each migration runs in its own transaction together with its history row, so a
// failed migration leaves neither a half-applied schema (as far as the database's DDL is
// transactional) nor a history row; the next start tries it again.
//
// What this package stores:
//
//   - installed_rank is the largest rank plus one; version is the file's version as a decimal
//     number; description and script come from the file name as Flyway forms them; type is SQL.
//   - checksum is Flyway's checksum of the embedded file: CRC-32 (IEEE) over the file's lines
//     without their line terminators and without a leading byte order mark, as a signed 32-bit
//     number (see Checksum). Checksums are written for the record and never compared.
//   - installed_by is Options.InstalledBy, or the database user (current_user on PostgreSQL,
//     SUSER_SNAME() on SQL Server); execution_time is in milliseconds; success is true.
//   - Baseline writes one row per version 1..N with type BASELINE, checksum NULL and
//     execution_time 0.
//
// SQL Server files are split into batches at lines that read GO (see SplitBatches), the same
// rule that sqlcmd follows, so the files run unchanged with sqlcmd -b -I -i.
package migrate

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/alternayte/queuebox/migrations"
	"github.com/alternayte/queuebox/shared/store"
)

// HistoryTable is the name of the history table, Flyway's default. On SQL Server it lives in the
// dbo schema; on PostgreSQL in the first schema of the search path.
const HistoryTable = "flyway_schema_history"

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
	ErrLockTimeout = errors.New("migrate: timed out waiting for the migration lock")
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

// Result reports what one run did.
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
}

// String says what the run did, for the CLI and the start log: "applied V1..V11",
// "schema is up to date at V11", or "recorded V1..V11 as baseline".
func (r Result) String() string {
	switch {
	case r.Baseline:
		return "recorded " + versionList(r.Applied) + " as baseline"
	case len(r.Applied) > 0:
		return "applied " + versionList(r.Applied)
	case r.Current == 0:
		return "schema has no migration applied"
	default:
		return fmt.Sprintf("schema is up to date at V%d", r.Current)
	}
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

	failed     *historyEntry
	outOfOrder int // a pending version below an applied one; 0 when none
}

// historyEntry is one row of flyway_schema_history.
type historyEntry struct {
	InstalledRank int
	// Version is empty for a row without a version (Flyway's SCHEMA row, repeatable migrations).
	Version     string
	Description string
	Type        string
	Script      string
	Success     bool
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
}

// Runner applies the migrations of one dialect to one database. Its methods are safe to call
// from several goroutines and processes at once: each run takes the database lock.
type Runner struct {
	d    backend
	opts Options
}

// NewPostgres returns a Runner for a PostgreSQL database.
func NewPostgres(pool *pgxpool.Pool, opts Options) *Runner {
	return &Runner{d: &pgDriver{pool: pool}, opts: opts.WithDefaults()}
}

// NewSQLServer returns a Runner for a SQL Server database (database/sql with go-mssqldb).
func NewSQLServer(db *sql.DB, opts Options) *Runner {
	return &Runner{d: &msDriver{db: db}, opts: opts.WithDefaults()}
}

// New returns the Runner of a dialect driver's migration handle (store.Driver.Migration): a
// *pgxpool.Pool runs the PostgreSQL migrations and a *sql.DB the SQL Server ones.
func New(handle any, opts Options) (*Runner, error) {
	switch h := handle.(type) {
	case *pgxpool.Pool:
		return NewPostgres(h, opts), nil
	case *sql.DB:
		return NewSQLServer(h, opts), nil
	default:
		return nil, fmt.Errorf("creating the migration runner: unsupported handle %T", handle)
	}
}

// Postgres applies the pending PostgreSQL migrations; see Runner.Migrate.
func Postgres(ctx context.Context, pool *pgxpool.Pool, opts Options) (Result, error) {
	return NewPostgres(pool, opts).Migrate(ctx)
}

// Baseline records versions 1..version of PostgreSQL as applied; see Runner.Baseline.
func Baseline(ctx context.Context, pool *pgxpool.Pool, version int, opts Options) (Result, error) {
	return NewPostgres(pool, opts).Baseline(ctx, version)
}

// CheckStart runs the start check on PostgreSQL; see Runner.CheckStart.
func CheckStart(ctx context.Context, pool *pgxpool.Pool, migrate bool, opts Options) (StartResult, error) {
	return NewPostgres(pool, opts).CheckStart(ctx, migrate)
}

// SQLServer applies the pending SQL Server migrations; see Runner.Migrate.
func SQLServer(ctx context.Context, db *sql.DB, opts Options) (Result, error) {
	return NewSQLServer(db, opts).Migrate(ctx)
}

// Migrate applies every pending migration up to Options.Target in version order, each in its
// own transaction together with its history row, under the migration lock. It stops with
// ErrNoHistory when the QueueBox tables exist without a history, ErrFailedMigration when the
// history records a failed migration and ErrOutOfOrder when a version is missing below an
// applied one. A second run applies nothing.
func (r *Runner) Migrate(ctx context.Context) (Result, error) {
	res := Result{Dialect: r.d.dialect()}
	if err := r.opts.validate(); err != nil {
		return res, err
	}
	list, err := migrations.List(r.d.dialect())
	if err != nil {
		return res, err
	}
	target := len(list)
	if r.opts.Target > 0 {
		if r.opts.Target > len(list) {
			return res, fmt.Errorf("%w: target V%d, this release ships V1..V%d", ErrInvalidVersion, r.opts.Target, len(list))
		}
		target = r.opts.Target
	}

	s, err := r.d.open(ctx, r.opts.LockTimeout)
	if err != nil {
		return res, err
	}
	defer s.close(ctx)

	st, rows, err := r.status(ctx, s, list)
	if err != nil {
		return res, err
	}
	res.Unknown = st.Unknown
	res.Current = st.Current
	if err := st.err(r.d.dialect()); err != nil {
		return res, err
	}
	if rows == nil {
		if err := s.createHistory(ctx); err != nil {
			return res, fmt.Errorf("creating %s: %w", HistoryTable, err)
		}
	}
	rank := 0
	for _, row := range rows {
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
		if err := s.apply(ctx, m, rank, installedBy); err != nil {
			return res, fmt.Errorf("applying migration %s: %w", m.Script, err)
		}
		r.opts.Logger.InfoContext(ctx, "applied migration", "dialect", string(r.d.dialect()),
			"version", v, "script", m.Script, "duration_ms", time.Since(start).Milliseconds())
		res.Applied = append(res.Applied, v)
		res.Current = max(res.Current, v)
	}
	return res, nil
}

// Baseline records versions 1..version as applied without running them, for tables created by
// hand (for example with psql or sqlcmd from the same files). It refuses, with
// ErrHistoryExists, a database whose history holds any row.
func (r *Runner) Baseline(ctx context.Context, version int) (Result, error) {
	res := Result{Dialect: r.d.dialect(), Baseline: true}
	list, err := migrations.List(r.d.dialect())
	if err != nil {
		return res, err
	}
	if version < 1 || version > len(list) {
		return res, fmt.Errorf("%w: --baseline %d, this release ships V1..V%d", ErrInvalidVersion, version, len(list))
	}
	s, err := r.d.open(ctx, r.opts.LockTimeout)
	if err != nil {
		return res, err
	}
	defer s.close(ctx)

	rows, err := r.readHistory(ctx, s)
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
		if err := s.createHistory(ctx); err != nil {
			return res, fmt.Errorf("creating %s: %w", HistoryTable, err)
		}
	}
	if err := s.baseline(ctx, list[:version], r.opts.InstalledBy); err != nil {
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
		return Status{Dialect: r.d.dialect()}, err
	}
	list, err := migrations.List(r.d.dialect())
	if err != nil {
		return Status{Dialect: r.d.dialect()}, err
	}
	s, err := r.d.open(ctx, 0)
	if err != nil {
		return Status{Dialect: r.d.dialect()}, err
	}
	defer s.close(ctx)
	st, _, err := r.status(ctx, s, list)
	return st, err
}

// CheckStart is the migration step of the start.
//
// With migrate = true (database.migrate) it runs Migrate: tables without a history stop the
// start with ErrNoHistory, whose text names `queuebox migrate --baseline <version>`.
//
// With migrate = false it only reads. The operator owns the schema, so a database without any
// history (the files applied by hand, or custom tables) is accepted at LevelInfo; a history with
// pending versions gives LevelWarning and lists them. A failed migration in the history stops
// the start in both modes.
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
		return out, nil
	}
	st, err := r.Status(ctx)
	if err != nil {
		return StartResult{}, err
	}
	if st.failed != nil {
		return StartResult{}, st.err(r.d.dialect())
	}
	out := StartResult{Level: LevelInfo, Unknown: st.Unknown}
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
	res := Result{Dialect: r.d.dialect()}
	if r.opts.validate() != nil {
		return res, false
	}
	list, err := migrations.List(r.d.dialect())
	if err != nil || r.opts.Target > len(list) {
		return res, false
	}
	s, err := r.d.open(ctx, 0)
	if err != nil {
		return res, false
	}
	defer s.close(ctx)
	st, rows, err := r.status(ctx, s, list)
	if err != nil || rows == nil || len(st.Pending) > 0 || st.err(r.d.dialect()) != nil {
		return res, false
	}
	res.Current, res.Unknown = st.Current, st.Unknown
	return res, true
}

func unknownSentence(vs []string) string {
	return fmt.Sprintf("%s records versions that this release does not ship (%s); "+
		"a newer QueueBox migrated this database", HistoryTable, "V"+strings.Join(vs, ", V"))
}

// status reads the history and the tables. rows is nil when the history table does not exist.
func (r *Runner) status(ctx context.Context, s session, list []migrations.Migration) (Status, []historyEntry, error) {
	names := []string{r.opts.Names.OutboxTable, r.opts.Names.InboxTable}
	if p, ok := s.(prober); ok {
		return r.probeStatus(ctx, p, list, names)
	}
	rows, err := r.readHistory(ctx, s)
	if err != nil {
		return Status{Dialect: r.d.dialect()}, nil, err
	}
	st := interpret(list, rows)
	st.Dialect = r.d.dialect()
	st.Tables, err = s.tablesPresent(ctx, names)
	if err != nil {
		return st, rows, fmt.Errorf("looking for the tables %s: %w", strings.Join(names, ", "), err)
	}
	return st, rows, nil
}

// probeStatus is status on a session that looks for the history table and the tables in one
// statement; it reads the history only when the table exists. Its errors read as those of
// status.
func (r *Runner) probeStatus(ctx context.Context, p prober, list []migrations.Migration, names []string) (Status, []historyEntry, error) {
	exists, tables, err := p.probe(ctx, names)
	if err != nil {
		return Status{Dialect: r.d.dialect()}, nil, fmt.Errorf("looking for %s: %w", HistoryTable, err)
	}
	var rows []historyEntry
	if exists {
		if rows, err = p.readHistory(ctx); err != nil {
			return Status{Dialect: r.d.dialect()}, nil, fmt.Errorf("reading %s: %w", HistoryTable, err)
		}
		if rows == nil {
			rows = []historyEntry{}
		}
	}
	st := interpret(list, rows)
	st.Dialect = r.d.dialect()
	st.Tables = tables
	return st, rows, nil
}

func (r *Runner) readHistory(ctx context.Context, s session) ([]historyEntry, error) {
	exists, err := s.historyExists(ctx)
	if err != nil {
		return nil, fmt.Errorf("looking for %s: %w", HistoryTable, err)
	}
	if !exists {
		return nil, nil
	}
	rows, err := s.readHistory(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", HistoryTable, err)
	}
	if rows == nil {
		rows = []historyEntry{}
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
	return nil
}

// interpret compares the history rows with the bundled files, the way Flyway reads its own
// table: rows in installed_rank order; a successful row applies its version; a successful
// BASELINE row applies every version up to its own; a DELETE or UNDO row takes its version
// back; a row without a version (SCHEMA, repeatable migrations) counts for nothing.
func interpret(list []migrations.Migration, rows []historyEntry) Status {
	st := Status{HasHistory: len(rows) > 0}
	sorted := slices.Clone(rows)
	slices.SortFunc(sorted, func(a, b historyEntry) int { return a.InstalledRank - b.InstalledRank })
	applied := map[int]bool{}
	unknown := map[string]bool{}
	baseline := 0
	for i := range sorted {
		row := sorted[i]
		if row.Version == "" {
			continue
		}
		v, ok := parseVersion(row.Version)
		typ := strings.ToUpper(row.Type)
		switch {
		case typ == "DELETE" || strings.HasPrefix(typ, "UNDO"):
			if ok {
				delete(applied, v)
			}
			delete(unknown, row.Version)
		case !row.Success:
			if st.failed == nil {
				st.failed = &sorted[i]
			}
		case !ok || v > len(list):
			unknown[row.Version] = true
		case typ == "BASELINE":
			applied[v] = true
			baseline = max(baseline, v)
		default:
			applied[v] = true
		}
	}
	for _, m := range list {
		if applied[m.Version] || m.Version <= baseline {
			st.Applied = append(st.Applied, m.Version)
			st.Current = m.Version
		}
	}
	for _, m := range list {
		if !applied[m.Version] && m.Version > baseline {
			st.Pending = append(st.Pending, m.Version)
			if m.Version < st.Current && st.outOfOrder == 0 {
				st.outOfOrder = m.Version
			}
		}
	}
	for v := range unknown {
		st.Unknown = append(st.Unknown, v)
	}
	slices.Sort(st.Unknown)
	return st
}

// parseVersion reads a Flyway version that names a whole number: "11", "011", "11.0".
func parseVersion(s string) (int, bool) {
	parts := strings.Split(strings.TrimSpace(s), ".")
	v, err := strconv.Atoi(parts[0])
	if err != nil || v < 0 {
		return 0, false
	}
	for _, p := range parts[1:] {
		if strings.Trim(p, "0") != "" || p == "" {
			return 0, false
		}
	}
	return v, true
}

// Checksum returns Flyway's checksum of a migration file: CRC-32 (IEEE) over the file's lines
// without their line terminators ("\n", "\r\n" or "\r"), after dropping a leading UTF-8 byte
// order mark, as a signed 32-bit number. It equals the CRC-32 of the text with every "\r" and
// "\n" removed.
func Checksum(sql string) int32 {
	s := strings.TrimPrefix(sql, "\uFEFF")
	h := crc32.NewIEEE()
	for len(s) > 0 {
		i := strings.IndexAny(s, "\r\n")
		if i < 0 {
			_, _ = io.WriteString(h, s)
			break
		}
		_, _ = io.WriteString(h, s[:i])
		s = s[i+1:]
	}
	return int32(h.Sum32())
}

// SplitBatches splits a SQL Server file into the batches that sqlcmd would send: a line whose
// only content, apart from blanks, is GO (in any letter case) ends a batch, and the text after
// the last such line is the last batch. Batches that hold only blanks and -- comments are
// dropped. The files hold no GO with a count, no block comment and no string that spans a GO
// line; the tests of package migrations check this.
func SplitBatches(sql string) []string {
	var out []string
	var cur strings.Builder
	flush := func() {
		b := cur.String()
		cur.Reset()
		if hasStatement(b) {
			out = append(out, strings.TrimSpace(b))
		}
	}
	for _, line := range strings.SplitAfter(strings.TrimPrefix(sql, "\uFEFF"), "\n") {
		if strings.EqualFold(strings.TrimSpace(line), "GO") {
			flush()
			continue
		}
		cur.WriteString(line)
	}
	flush()
	return out
}

// hasStatement reports whether a batch holds more than blanks and -- comments.
func hasStatement(b string) bool {
	for _, line := range strings.Split(b, "\n") {
		t := strings.TrimSpace(line)
		if t != "" && !strings.HasPrefix(t, "--") {
			return true
		}
	}
	return false
}

// backend opens sessions on one dialect.
type backend interface {
	dialect() migrations.Dialect
	// open returns a session on one connection. With lockTimeout > 0 the session holds the
	// migration lock until close; with 0 it takes no lock.
	open(ctx context.Context, lockTimeout time.Duration) (session, error)
}

// session is one connection, holding the migration lock when the run writes.
type session interface {
	historyExists(ctx context.Context) (bool, error)
	createHistory(ctx context.Context) error
	readHistory(ctx context.Context) ([]historyEntry, error)
	// apply runs m and inserts its history row in one transaction.
	apply(ctx context.Context, m migrations.Migration, rank int, installedBy string) error
	// baseline inserts one BASELINE row per migration, ranks 1..n, in one transaction.
	baseline(ctx context.Context, ms []migrations.Migration, installedBy string) error
	// tablesPresent returns the names of the tables that exist, in the order given.
	tablesPresent(ctx context.Context, names []string) ([]string, error)
	// close releases the lock and the connection.
	close(ctx context.Context)
}

// prober is a session that answers historyExists and tablesPresent in one round trip.
type prober interface {
	session
	// probe reports whether the history table exists and returns the names of the tables
	// that exist, in the order given.
	probe(ctx context.Context, names []string) (historyExists bool, tables []string, err error)
}

// historyDescription cuts a description to the width of the column.
func historyDescription(s string) string {
	if len(s) > 200 {
		return s[:200]
	}
	return s
}

// releaseContext returns a context for releasing a lock after ctx may have ended.
func releaseContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
}
