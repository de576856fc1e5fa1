// Package cdc is the SQL Server source of change data capture (outbox.capture.mode
// sqlserver-cdc, spec/01-change-data-capture.md and spec/08-capture-changes.md): the
// changes.Source that polls the change table of the outbox table's capture instance, which
// the SQL Server Agent's capture job fills from the transaction log. The dialect-neutral
// connector (the reconnect loop, the health state, the wakes, the reconciliation timer, the
// state directory and its comparison with queuebox_capture_state) is shared/capture; this
// package holds what only SQL Server knows:
//
//   - the session lock of the identity: sp_getapplock on the resource
//     queuebox.capture.<identity>, owned by the session of the source's own connection, which
//     holds it until the session ends (a second owner is refused, and the connector's owner
//     grace applies);
//   - the start checks, each a *changes.Fault that names the statements an operator runs:
//     change data capture enabled on the database (sys.databases.is_cdc_enabled,
//     sys.sp_cdc_enable_db) and on the outbox table (sys.tables.is_tracked_by_cdc,
//     sys.sp_cdc_enable_table), the account's SELECT permission on the table, and a capture
//     instance that the account may read (sys.sp_cdc_help_change_data_capture; a gating role
//     hides it);
//   - the positions: SQL Server LSNs, binary(10), as changes.Position of 10 bytes and written
//     in offsets.dat as 0x followed by 20 hexadecimal digits;
//   - the poll: from the position after the last one read (sys.fn_cdc_increment_lsn) to
//     sys.fn_cdc_get_max_lsn(), the count of the inserts (__$operation = 2) of
//     cdc.fn_cdc_get_all_changes_<instance>; a poll that found inserts is one batch, a begin,
//     its inserts and a commit at the newest position, so the connector wakes delivery once
//     per batch; a poll without inserts is a keepalive at the newest position, so the
//     recorded position follows the log;
//   - the retention window: a recorded position older than sys.fn_cdc_get_min_lsn of the
//     capture instance means that the cleanup job removed changes that capture never read,
//     a Fault that needs the recovery steps of spec/08;
//   - history.dat: one JSON line per capture instance that the source read;
//   - the statements of queuebox_capture_state (sqlserver.CaptureState).
//
// Updates and deletes are never counted: the state changes that QueueBox writes create no
// work. Only the outbox table is read; the inbox table (capture.Config.InboxTable) wakes
// nothing on SQL Server. The server confirms nothing: the change table keeps changes for the
// retention of the cleanup job whatever capture read, so Confirm does nothing beyond the
// connector's offsets.dat.
package cdc

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"database/sql/driver"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	mssql "github.com/microsoft/go-mssqldb"

	"github.com/alternayte/queuebox/shared/store"
	"github.com/alternayte/queuebox/shared/store/changes"
	"github.com/alternayte/queuebox/shared/store/sqlserver"
)

// DefaultPollInterval is the wait between two polls of the change table. spec/23 has no key
// for it; the capture job itself scans the log every 5 seconds when it is idle (its
// @pollinginterval), so a shorter wait only shortens the delay after the job's scan.
const DefaultPollInterval = 500 * time.Millisecond

// HistoryFile is the file of the state directory that holds the schema history: one JSON
// line per capture instance that the source read. The PostgreSQL source writes none.
const HistoryFile = "history.dat"

// LockResourcePrefix is the start of the name of the identity's application lock; the
// identity follows it.
const LockResourcePrefix = "queuebox.capture."

// lsnSize is the width of a SQL Server LSN, binary(10).
const lsnSize = 10

// zeroLSN is the LSN that stands for no position in the statements.
var zeroLSN = make([]byte, lsnSize)

// Source is the changes.Source of SQL Server change data capture. Settings.ConnString and
// Settings.StateConnString are go-mssqldb URLs (sqlserver.EndpointConnString of the
// capture connection). The zero value is ready to use.
type Source struct {
	// PollInterval is the wait between two polls of the change table. Default
	// DefaultPollInterval.
	PollInterval time.Duration
	// Connector opens the connections of a connection string. Default: go-mssqldb's
	// (mssql.NewConnector). Tests pass a fake (sqlservertest.FakeDB).
	Connector func(connString string) (driver.Connector, error)
}

var _ changes.Source = (*Source)(nil)

// Open checks the capture connection of cfg and returns the log of its outbox table.
func (s *Source) Open(cfg changes.Settings) (changes.Log, error) {
	connector := s.Connector
	if connector == nil {
		connector = func(dsn string) (driver.Connector, error) { return mssql.NewConnector(dsn) }
	}
	interval := s.PollInterval
	if interval <= 0 {
		interval = DefaultPollInterval
	}
	u, err := url.Parse(cfg.ConnString)
	if err != nil || u.Scheme != "sqlserver" {
		return nil, errors.New("parsing the capture connection: it is not a sqlserver:// URL")
	}
	if _, err := connector(cfg.ConnString); err != nil {
		return nil, fmt.Errorf("parsing the capture connection: %w", err)
	}
	return &cdcLog{
		cfg: cfg, connector: connector, interval: interval,
		fp: fingerprint(u.Hostname(), u.Port(), strings.TrimPrefix(u.Path, "/"), u.Query().Get("database"), cfg.Schema, cfg.Table),
	}, nil
}

// fingerprint is the digest of the settings that give a recorded position its meaning: a new
// host, instance, database, schema or table makes it meaningless.
func fingerprint(host, port, instance, database, schema, table string) string {
	sum := sha256.Sum256([]byte(strings.Join([]string{
		"sqlserver-cdc", strings.ToLower(host), port, strings.ToLower(instance), database, schema, table,
	}, "\x00")))
	return hex.EncodeToString(sum[:])
}

// cdcLog is the change table of one capture configuration.
type cdcLog struct {
	cfg       changes.Settings
	connector func(string) (driver.Connector, error)
	interval  time.Duration
	fp        string
}

// Fingerprint is the digest of the host, port, instance, database, schema and table.
func (l *cdcLog) Fingerprint() string { return l.fp }

// ParsePosition reads an LSN as FormatPosition writes it: 0x and 20 hexadecimal digits.
func (l *cdcLog) ParsePosition(s string) (changes.Position, error) {
	h := strings.TrimPrefix(strings.TrimPrefix(strings.TrimSpace(s), "0x"), "0X")
	b, err := hex.DecodeString(h)
	if err != nil || len(b) != lsnSize {
		return "", fmt.Errorf("%q is not a SQL Server LSN (0x and 20 hexadecimal digits)", s)
	}
	return position(b), nil
}

// FormatPosition writes an LSN as SQL Server shows it: 0x and 20 upper-case hexadecimal
// digits.
func (l *cdcLog) FormatPosition(p changes.Position) string {
	return "0x" + strings.ToUpper(hex.EncodeToString(lsnBytes(p)))
}

// position returns the Position of a binary(10) LSN; the zero LSN (and NULL) is none.
func position(b []byte) changes.Position {
	for _, c := range b {
		if c != 0 {
			return changes.Position(b)
		}
	}
	return ""
}

// lsnBytes returns the binary(10) LSN of a position; ten zero bytes for none.
func lsnBytes(p changes.Position) []byte {
	if p == "" {
		return append([]byte(nil), zeroLSN...)
	}
	return []byte(p)
}

// Connect opens the connection of one session. The session holds it, with the identity's
// lock, until Close.
func (l *cdcLog) Connect(ctx context.Context) (changes.Session, error) {
	c, err := l.connector(l.cfg.ConnString)
	if err != nil {
		return nil, fmt.Errorf("opening the capture connection: %w", err)
	}
	db := sql.OpenDB(c)
	conn, err := db.Conn(ctx)
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("opening the capture connection: %w", err)
	}
	if err := conn.PingContext(ctx); err != nil {
		_ = conn.Close()
		_ = db.Close()
		return nil, fmt.Errorf("opening the capture connection: %w", err)
	}
	return &session{log: l, cfg: l.cfg, db: db, conn: conn}, nil
}

// session is one connection of the log.
type session struct {
	log  *cdcLog
	cfg  changes.Settings
	db   *sql.DB
	conn *sql.Conn

	instance string           // the capture instance that Inspect chose
	user     string           // the database user of the connection
	from     changes.Position // the position read so far
	nextPoll time.Time

	// The rest of the batch of the last poll, which Receive still hands out.
	inserts int64
	commit  bool
	to      changes.Position
}

// Close ends the session: its connection closes, which releases the identity's lock.
func (s *session) Close() {
	_ = s.conn.Close()
	_ = s.db.Close()
}

// Lock takes the session lock of the identity without waiting.
func (s *session) Lock(ctx context.Context) (bool, error) {
	var code int64
	if err := s.conn.QueryRowContext(ctx, StmtLock, LockResourcePrefix+s.cfg.Identity).Scan(&code); err != nil {
		return false, fmt.Errorf("taking the lock of the capture identity: %w", err)
	}
	switch {
	case code >= 0:
		return true, nil
	case code == -1:
		return false, nil
	}
	return false, fmt.Errorf("taking the lock of the capture identity: sp_getapplock answered %d", code)
}

// qualifiedTable is the outbox table as [schema].[table].
func (s *session) qualifiedTable() string { return quote(s.cfg.Schema) + "." + quote(s.cfg.Table) }

// Inspect runs the start checks of spec/08 on the session's connection, chooses the capture
// instance, records it in history.dat, and opens the statements of queuebox_capture_state
// (on the session's connection, or on a connection of Config.StateConnString when it
// differs). The capture instance is the slot of this source: it always exists once the checks
// pass.
func (s *session) Inspect(ctx context.Context) (*changes.Inspection, error) {
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	inst, err := s.chooseInstance(ctx)
	if err != nil {
		return nil, err
	}
	s.instance = inst.name
	if err := s.recordHistory(inst); err != nil {
		return nil, err
	}
	if s.cfg.StateConnString == "" || s.cfg.StateConnString == s.cfg.ConnString {
		return &changes.Inspection{SlotExists: true, States: sqlserver.NewCaptureState(s.conn), Close: func() {}}, nil
	}
	c, err := s.log.connector(s.cfg.StateConnString)
	if err != nil {
		return nil, fmt.Errorf("opening the connection of %s: %w", store.CaptureStateTable, err)
	}
	db := sql.OpenDB(c)
	db.SetMaxOpenConns(1)
	return &changes.Inspection{SlotExists: true, States: sqlserver.NewCaptureState(db), Close: func() { _ = db.Close() }}, nil
}

// check runs StmtCheck and refuses a database that is not prepared.
func (s *session) check(ctx context.Context) error {
	var dbEnabled bool
	var tracked sql.NullBool
	var canSelect sql.NullInt64
	var user, database sql.NullString
	err := s.conn.QueryRowContext(ctx, StmtCheck, s.qualifiedTable()).Scan(&dbEnabled, &tracked, &canSelect, &user, &database)
	if errors.Is(err, sql.ErrNoRows) {
		return errors.New("checking the capture database: sys.databases has no row for the current database")
	}
	if err != nil {
		return fmt.Errorf("checking the capture database: %w", err)
	}
	table, enable := s.qualifiedTable(), EnableTable(s.cfg.Schema, s.cfg.Table)
	switch {
	case !dbEnabled:
		return changes.Faultf(false, "change data capture is not enabled on the database %s; as a member of sysadmin, run: %s %s and keep the SQL Server Agent running",
			database.String, EnableDB, enable)
	case !tracked.Valid:
		return changes.Faultf(false, "the outbox table %s does not exist in the database %s, or the capture account %s cannot see it; create it (queuebox migrate) or grant the account SELECT on it: GRANT SELECT ON %s TO %s;",
			table, database.String, user.String, table, quote(user.String))
	case !tracked.Bool:
		return changes.Faultf(false, "change data capture is not enabled on the outbox table %s; as a member of db_owner, run: %s and keep the SQL Server Agent running",
			table, enable)
	case !canSelect.Valid || canSelect.Int64 != 1:
		return changes.Faultf(false, "the capture account %s has no SELECT permission on the outbox table %s, which reading its change data needs; run: GRANT SELECT ON %s TO %s;",
			user.String, table, table, quote(user.String))
	}
	s.user = user.String
	return nil
}

// instance is a capture instance of the outbox table.
type instance struct {
	name     string
	startLSN []byte
	created  time.Time
	columns  string
}

// chooseInstance lists the capture instances of the table that the account may read and
// takes the oldest (the lowest start_lsn): during a change of the outbox table an operator
// creates a second instance, and the oldest is the one that holds the changes after the
// recorded position; once the operator drops it, the next session reads the new one.
func (s *session) chooseInstance(ctx context.Context) (instance, error) {
	rows, err := s.conn.QueryContext(ctx, StmtInstances, s.cfg.Schema, s.cfg.Table)
	if err != nil {
		return instance{}, fmt.Errorf("listing the capture instances of %s: %w", s.qualifiedTable(), err)
	}
	defer func() { _ = rows.Close() }()
	cols, err := rows.Columns()
	if err != nil {
		return instance{}, fmt.Errorf("listing the capture instances of %s: %w", s.qualifiedTable(), err)
	}
	var found []instance
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return instance{}, fmt.Errorf("reading the capture instances of %s: %w", s.qualifiedTable(), err)
		}
		var in instance
		for i, c := range cols {
			switch strings.ToLower(c) {
			case "capture_instance":
				in.name = asString(vals[i])
			case "start_lsn":
				in.startLSN, _ = vals[i].([]byte)
			case "create_date":
				in.created, _ = vals[i].(time.Time)
			case "captured_column_list":
				in.columns = asString(vals[i])
			}
		}
		if in.name != "" {
			found = append(found, in)
		}
	}
	if err := rows.Err(); err != nil {
		return instance{}, fmt.Errorf("reading the capture instances of %s: %w", s.qualifiedTable(), err)
	}
	if len(found) == 0 {
		return instance{}, changes.Faultf(false, "the capture account %s cannot read a capture instance of the outbox table %s: its capture instance has a gating role (the @role_name of sys.sp_cdc_enable_table) that the account is not a member of; add the account to that role (ALTER ROLE <role> ADD MEMBER %s; a member of db_owner sees the role with EXEC sys.sp_cdc_help_change_data_capture @source_schema = %s, @source_name = %s;), or enable the table without a gating role: %s",
			s.user, s.qualifiedTable(), quote(s.user), literal(s.cfg.Schema), literal(s.cfg.Table), EnableTable(s.cfg.Schema, s.cfg.Table))
	}
	oldest := found[0]
	for _, in := range found[1:] {
		if string(in.startLSN) < string(oldest.startLSN) {
			oldest = in
		}
	}
	return oldest, nil
}

func asString(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case []byte:
		return string(x)
	}
	return ""
}

// HistoryRecord is one line of history.dat: a capture instance that the source read.
type HistoryRecord struct {
	// CaptureInstance is the name of the capture instance.
	CaptureInstance string `json:"captureInstance"`
	// Schema and Table name the outbox table.
	Schema string `json:"schema"`
	Table  string `json:"table"`
	// StartLSN is the start_lsn of the capture instance, as offsets.dat writes positions.
	StartLSN string `json:"startLsn"`
	// CreateDate is the create_date of the capture instance, RFC 3339.
	CreateDate string `json:"createDate,omitempty"`
	// CapturedColumns is the captured_column_list of the capture instance.
	CapturedColumns string `json:"capturedColumns,omitempty"`
	// RecordedAt is when the line was written, RFC 3339.
	RecordedAt string `json:"recordedAt"`
}

// recordHistory appends the capture instance to history.dat unless its last line names the
// same capture instance with the same start_lsn.
func (s *session) recordHistory(in instance) error {
	if err := os.MkdirAll(s.cfg.StateDirectory, 0o700); err != nil {
		return fmt.Errorf("creating the capture state directory: %w", err)
	}
	path := filepath.Join(s.cfg.StateDirectory, HistoryFile)
	rec := HistoryRecord{
		CaptureInstance: in.name, Schema: s.cfg.Schema, Table: s.cfg.Table,
		StartLSN: s.log.FormatPosition(position(in.startLSN)), CapturedColumns: in.columns,
	}
	if !in.created.IsZero() {
		rec.CreateDate = in.created.UTC().Format(time.RFC3339Nano)
	}
	if last, ok := lastHistory(path); ok && last.CaptureInstance == rec.CaptureInstance && last.StartLSN == rec.StartLSN &&
		last.Schema == rec.Schema && last.Table == rec.Table {
		return nil
	}
	rec.RecordedAt = time.Now().UTC().Format(time.RFC3339Nano)
	line, _ := json.Marshal(rec)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("writing %s: %w", HistoryFile, err)
	}
	if _, err := f.Write(append(line, '\n')); err != nil {
		_ = f.Close()
		return fmt.Errorf("writing %s: %w", HistoryFile, err)
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return fmt.Errorf("writing %s: %w", HistoryFile, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("writing %s: %w", HistoryFile, err)
	}
	return nil
}

// lastHistory returns the last complete line of history.dat.
func lastHistory(path string) (HistoryRecord, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return HistoryRecord{}, false
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		var r HistoryRecord
		if json.Unmarshal([]byte(lines[i]), &r) == nil && r.CaptureInstance != "" {
			return r, true
		}
	}
	return HistoryRecord{}, false
}

// CreateSlot is never called: the capture instance, which the operator creates with
// sys.sp_cdc_enable_table, is the slot of this source, and Inspect refuses a table without
// one.
func (s *session) CreateSlot(context.Context) (changes.Position, error) {
	return "", errors.New("sqlserver-cdc has no replication slot to create: enable change data capture on the outbox table with " +
		EnableTable(s.cfg.Schema, s.cfg.Table))
}

// Start checks the recorded position against the retention window of the capture instance
// and starts polling after it; without a recorded position (a first start, or after a reset)
// it starts at the newest position of the database, since the connector wakes delivery on
// every attempt anyway.
func (s *session) Start(ctx context.Context, from changes.Position) error {
	var minLSN, maxLSN, next []byte
	if err := s.conn.QueryRowContext(ctx, StmtStart, s.instance, lsnBytes(from)).Scan(&minLSN, &maxLSN, &next); err != nil {
		return fmt.Errorf("reading the positions of the capture instance %s: %w", s.instance, err)
	}
	if position(minLSN) == "" {
		return s.instanceGone()
	}
	if from == "" {
		s.from = position(maxLSN)
	} else {
		if err := s.checkRetention(from, position(next), position(minLSN)); err != nil {
			return err
		}
		s.from = from
	}
	s.nextPoll = time.Time{}
	return nil
}

// checkRetention refuses a recorded position whose next position the capture instance no
// longer keeps.
func (s *session) checkRetention(from, next, minLSN changes.Position) error {
	if next != "" && next < minLSN {
		return changes.Faultf(true, "the recorded position %s is older than the oldest change that the capture instance %s keeps (%s): the change data capture cleanup job removed changes that capture never read (capture was stopped for longer than the cleanup job's retention); follow the recovery steps of the capture guide to reset the capture identity %s",
			s.log.FormatPosition(from), s.instance, s.log.FormatPosition(minLSN), s.cfg.Identity)
	}
	return nil
}

// instanceGone is the fault of a capture instance that vanished after Inspect chose it.
func (s *session) instanceGone() error {
	return changes.Faultf(false, "the capture instance %s of the outbox table %s does not exist any more, or the capture account cannot read it; enable change data capture on the table again with: %s",
		s.instance, s.qualifiedTable(), EnableTable(s.cfg.Schema, s.cfg.Table))
}

// Receive hands out the batch of the last poll, event by event; when it is out, it waits for
// the poll interval and polls once. It returns an error that wraps changes.ErrReceiveTimeout
// when ctx's deadline passes first.
func (s *session) Receive(ctx context.Context) (changes.Event, error) {
	switch {
	case s.inserts > 0:
		s.inserts--
		return changes.Event{Kind: changes.EventInsert, Schema: s.cfg.Schema, Table: s.cfg.Table}, nil
	case s.commit:
		s.commit = false
		return changes.Event{Kind: changes.EventCommit, Position: s.to}, nil
	}
	if wait := time.Until(s.nextPoll); wait > 0 {
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return changes.Event{}, receiveError(ctx, ctx.Err())
		case <-t.C:
		}
	}
	ev, err := s.poll(ctx)
	s.nextPoll = time.Now().Add(s.log.interval)
	return ev, err
}

// receiveError wraps err in changes.ErrReceiveTimeout when ctx's deadline passed.
func receiveError(ctx context.Context, err error) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("%w: %w", changes.ErrReceiveTimeout, err)
	}
	return err
}

// pollTimeout bounds one poll statement.
const pollTimeout = 30 * time.Second

// poll runs StmtPoll once: a batch when inserts committed since the last poll, a keepalive at
// the newest position when only other changes did, and nothing when the log did not move.
// The deadline of ctx (the connector's next confirmation) does not cut a poll short, which
// would cancel the statement on the server; its cancellation does, and pollTimeout bounds it.
func (s *session) poll(ctx context.Context) (changes.Event, error) {
	pollCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), pollTimeout)
	defer cancel()
	stop := context.AfterFunc(ctx, func() {
		if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
			cancel()
		}
	})
	defer stop()
	var minLSN, maxLSN, first []byte
	var count sql.NullInt64
	err := s.conn.QueryRowContext(pollCtx, StmtPoll(s.instance), s.instance, lsnBytes(s.from)).Scan(&minLSN, &maxLSN, &first, &count)
	if err != nil {
		if ctx.Err() != nil && !errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return changes.Event{}, ctx.Err()
		}
		return changes.Event{}, fmt.Errorf("polling the capture instance %s: %w", s.instance, err)
	}
	lo, to := position(minLSN), position(maxLSN)
	if lo == "" {
		return changes.Event{}, s.instanceGone()
	}
	if s.from != "" {
		if err := s.checkRetention(s.from, position(first), lo); err != nil {
			return changes.Event{}, err
		}
	}
	if !count.Valid || to == "" || to <= s.from {
		return changes.Event{}, nil
	}
	s.from = to
	if count.Int64 == 0 {
		return changes.Event{Kind: changes.EventKeepalive, Position: to}, nil
	}
	s.inserts, s.commit, s.to = count.Int64, true, to
	return changes.Event{Kind: changes.EventBegin}, nil
}

// Confirm does nothing: SQL Server keeps the changes for the retention of the cleanup job
// whatever a reader confirmed; the connector records the position in offsets.dat.
func (s *session) Confirm(context.Context, changes.Position) error { return nil }
