// Package logical is the PostgreSQL source of change data capture (outbox.capture.mode
// postgres-logical): the changes.Source that reads a logical replication slot with the
// pgoutput plugin through the publication that the operator created, on a pgx replication
// connection (pglogrepl). The dialect-neutral connector (the reconnect loop, the health state,
// the wakes, the state directory) is shared/capture; this package holds what only PostgreSQL
// knows: the replication connection and its identity lock, the checks of wal_level, the
// publication and the slot, the slot's creation, the pgoutput decoding, the standby status
// updates, and the statements of queuebox_capture_state (postgres.CaptureState).
package logical

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/alternayte/queuebox/shared/store"
	"github.com/alternayte/queuebox/shared/store/changes"
	"github.com/alternayte/queuebox/shared/store/postgres"
)

// ApplicationName is the application_name of the replication connection, as
// pg_stat_replication shows it.
const ApplicationName = "queuebox-capture"

// Source is the changes.Source of PostgreSQL logical replication. Settings.ConnString and
// Settings.StateConnString are pgx connection strings. The zero value is ready to use.
type Source struct{}

var _ changes.Source = Source{}

// Open parses the capture connection of cfg.
func (Source) Open(cfg changes.Settings) (changes.Log, error) {
	repl, err := pgconn.ParseConfig(cfg.ConnString)
	if err != nil {
		return nil, fmt.Errorf("parsing the capture connection: %w", err)
	}
	repl.RuntimeParams["replication"] = "database"
	repl.RuntimeParams["application_name"] = ApplicationName
	if repl.ConnectTimeout == 0 {
		repl.ConnectTimeout = 10 * time.Second
	}
	return &replLog{
		cfg:  cfg,
		repl: repl,
		fp:   fingerprint(repl.Host, repl.Port, repl.Database, cfg.Schema, cfg.Table, cfg.Publication, cfg.Slot),
	}, nil
}

// replLog is the replication slot of one capture configuration.
type replLog struct {
	cfg  changes.Settings
	repl *pgconn.Config
	fp   string
}

// Fingerprint is the digest of the host, port, database, schema, table, publication and
// slot.
func (l *replLog) Fingerprint() string { return l.fp }

// ParsePosition reads an LSN in PostgreSQL's X/Y form.
func (l *replLog) ParsePosition(s string) (changes.Position, error) {
	lsn, err := pglogrepl.ParseLSN(s)
	return changes.PositionOf(uint64(lsn)), err
}

// FormatPosition writes an LSN in PostgreSQL's X/Y form.
func (l *replLog) FormatPosition(p changes.Position) string {
	return pglogrepl.LSN(p.Uint64()).String()
}

// Connect opens the replication connection.
func (l *replLog) Connect(ctx context.Context) (changes.Session, error) {
	conn, err := pgconn.ConnectConfig(ctx, l.repl)
	if err != nil {
		return nil, fmt.Errorf("opening the replication connection: %w", err)
	}
	return &session{log: l, cfg: l.cfg, conn: conn, relations: map[uint32]relation{}}, nil
}

// fingerprint is the digest of the settings that give the recorded position its meaning: a
// new slot, publication, schema, table, host or database makes it meaningless.
func fingerprint(host string, port uint16, database, schema, table, publication, slot string) string {
	sum := sha256.Sum256([]byte(strings.Join([]string{
		"postgres-logical", host, strconv.Itoa(int(port)), database, schema, table, publication, slot,
	}, "\x00")))
	return hex.EncodeToString(sum[:])
}

// relation is a table that a relation message of the stream named.
type relation struct{ namespace, name string }

// session is one replication connection.
type session struct {
	log       *replLog
	cfg       changes.Settings
	conn      *pgconn.PgConn
	relations map[uint32]relation
}

// Close closes the replication connection, waiting at most 5 s.
func (s *session) Close() {
	closeCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = s.conn.Close(closeCtx)
}

// Lock takes the session lock of the identity on the replication connection.
func (s *session) Lock(ctx context.Context) (bool, error) {
	res, err := s.conn.Exec(ctx, "SELECT pg_try_advisory_lock(hashtextextended('queuebox.capture."+s.cfg.Identity+"', 0))").ReadAll()
	if err != nil {
		return false, fmt.Errorf("taking the lock of the capture identity: %w", err)
	}
	if len(res) != 1 || len(res[0].Rows) != 1 || len(res[0].Rows[0]) != 1 {
		return false, errors.New("taking the lock of the capture identity: unexpected answer")
	}
	return string(res[0].Rows[0][0]) == "t", nil
}

// Inspect checks the server, the publication and the slot on a connection of its own, and
// opens the statements of queuebox_capture_state on the state connection (the same
// connection when StateConnString is ConnString).
func (s *session) Inspect(ctx context.Context) (in *changes.Inspection, err error) {
	conn, err := pgx.Connect(ctx, s.cfg.ConnString)
	if err != nil {
		return nil, fmt.Errorf("connecting to check the capture database: %w", err)
	}
	closers := []func(){func() { _ = conn.Close(context.WithoutCancel(ctx)) }}
	closeAll := func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}
	defer func() {
		if err != nil {
			closeAll()
		}
	}()
	if err := s.checkServer(ctx, conn); err != nil {
		return nil, err
	}
	slotExists, err := s.checkSlot(ctx, conn)
	if err != nil {
		return nil, err
	}
	stateConn := conn
	if s.cfg.StateConnString != s.cfg.ConnString {
		if stateConn, err = pgx.Connect(ctx, s.cfg.StateConnString); err != nil {
			return nil, fmt.Errorf("connecting to read %s: %w", store.CaptureStateTable, err)
		}
		closers = append(closers, func() { _ = stateConn.Close(context.WithoutCancel(ctx)) })
	}
	return &changes.Inspection{SlotExists: slotExists, States: postgres.NewCaptureState(stateConn), Close: closeAll}, nil
}

// checkServer checks wal_level and the publication.
func (s *session) checkServer(ctx context.Context, conn *pgx.Conn) error {
	var walLevel string
	if err := conn.QueryRow(ctx, `SELECT current_setting('wal_level')`).Scan(&walLevel); err != nil {
		return fmt.Errorf("reading wal_level: %w", err)
	}
	if walLevel != "logical" {
		return changes.Faultf(false, "PostgreSQL runs with wal_level = %s; capture needs wal_level = logical (set it in postgresql.conf and restart the server)", walLevel)
	}
	var inserts bool
	err := conn.QueryRow(ctx, `SELECT pubinsert FROM pg_publication WHERE pubname = $1`, s.cfg.Publication).Scan(&inserts)
	if errors.Is(err, pgx.ErrNoRows) {
		return s.missingPublication()
	}
	if err != nil {
		return fmt.Errorf("reading the publication %s: %w", s.cfg.Publication, err)
	}
	if !inserts {
		return changes.Faultf(false, "the publication %s does not publish inserts; create it with the default publish option, for example: CREATE PUBLICATION %s FOR TABLE %s",
			s.cfg.Publication, s.cfg.Publication, s.qualifiedTable())
	}
	var n int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_publication_tables WHERE pubname = $1 AND schemaname = $2 AND tablename = $3`,
		s.cfg.Publication, s.cfg.Schema, s.cfg.Table).Scan(&n); err != nil {
		return fmt.Errorf("reading the tables of the publication %s: %w", s.cfg.Publication, err)
	}
	if n == 0 {
		return changes.Faultf(false, "the publication %s does not publish the outbox table %s; add it with: ALTER PUBLICATION %s ADD TABLE %s",
			s.cfg.Publication, s.qualifiedTable(), s.cfg.Publication, s.qualifiedTable())
	}
	return nil
}

func (s *session) missingPublication() error {
	return changes.Faultf(false, "the publication %s does not exist; create it with: CREATE PUBLICATION %s FOR TABLE %s (QueueBox never creates or drops a publication)",
		s.cfg.Publication, s.cfg.Publication, s.qualifiedTable())
}

// qualifiedTable is schema.table as an operator types it: each part quoted only when it
// needs quotes.
func (s *session) qualifiedTable() string {
	return quoteIdent(s.cfg.Schema) + "." + quoteIdent(s.cfg.Table)
}

var plainIdent = regexp.MustCompile(`^[a-z_][a-z0-9_$]*$`)

func quoteIdent(s string) string {
	if plainIdent.MatchString(s) {
		return s
	}
	return pgx.Identifier{s}.Sanitize()
}

// checkSlot reports whether the slot exists, and refuses a slot that capture cannot read.
func (s *session) checkSlot(ctx context.Context, conn *pgx.Conn) (bool, error) {
	var plugin, database, slotType *string
	err := conn.QueryRow(ctx, `SELECT plugin, database, slot_type FROM pg_replication_slots WHERE slot_name = $1`, s.cfg.Slot).
		Scan(&plugin, &database, &slotType)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("reading the replication slot %s: %w", s.cfg.Slot, err)
	}
	switch {
	case slotType == nil || *slotType != "logical":
		return false, changes.Faultf(false, "the replication slot %s is not a logical slot", s.cfg.Slot)
	case plugin == nil || *plugin != "pgoutput":
		return false, changes.Faultf(false, "the replication slot %s uses the plugin %s; capture needs pgoutput", s.cfg.Slot, deref(plugin))
	case database == nil || *database != conn.Config().Database:
		return false, changes.Faultf(false, "the replication slot %s belongs to the database %s, not %s", s.cfg.Slot, deref(database), conn.Config().Database)
	}
	return true, nil
}

func deref(s *string) string {
	if s == nil {
		return "(none)"
	}
	return *s
}

// CreateSlot creates the logical slot with the pgoutput plugin and returns its consistent
// point.
func (s *session) CreateSlot(ctx context.Context) (changes.Position, error) {
	res, err := pglogrepl.CreateReplicationSlot(ctx, s.conn, s.cfg.Slot, "pgoutput",
		pglogrepl.CreateReplicationSlotOptions{Mode: pglogrepl.LogicalReplication, SnapshotAction: "NOEXPORT_SNAPSHOT"})
	if err != nil {
		return "", fmt.Errorf("creating the replication slot %s: %w", s.cfg.Slot, err)
	}
	start, err := pglogrepl.ParseLSN(res.ConsistentPoint)
	if err != nil {
		return "", fmt.Errorf("reading the consistent point of the slot %s: %w", s.cfg.Slot, err)
	}
	return changes.PositionOf(uint64(start)), nil
}

// Start starts logical replication from the slot at from, through the publication.
func (s *session) Start(ctx context.Context, from changes.Position) error {
	err := pglogrepl.StartReplication(ctx, s.conn, s.cfg.Slot, pglogrepl.LSN(from.Uint64()), pglogrepl.StartReplicationOptions{
		Mode: pglogrepl.LogicalReplication,
		PluginArgs: []string{
			"proto_version '1'",
			"publication_names '" + s.cfg.Publication + "'",
		},
	})
	if err != nil {
		return fmt.Errorf("starting replication from the slot %s: %w", s.cfg.Slot, err)
	}
	return nil
}

// Receive reads one message of the stream and decodes what capture acts on: keepalives, and
// the begin, insert and commit messages of pgoutput. A relation message records the table of
// its relation ID, which later inserts name; the tuples are not decoded.
func (s *session) Receive(ctx context.Context) (changes.Event, error) {
	raw, err := s.conn.ReceiveMessage(ctx)
	if err != nil {
		if pgconn.Timeout(err) {
			return changes.Event{}, fmt.Errorf("%w: %w", changes.ErrReceiveTimeout, err)
		}
		return changes.Event{}, fmt.Errorf("receiving from the replication stream: %w", err)
	}
	var data []byte
	switch msg := raw.(type) {
	case *pgproto3.ErrorResponse:
		return changes.Event{}, fmt.Errorf("receiving from the replication stream: %w", pgconn.ErrorResponseToPgError(msg))
	case *pgproto3.CopyData:
		data = msg.Data
	default:
		return changes.Event{}, nil
	}
	if len(data) == 0 {
		return changes.Event{}, nil
	}
	switch data[0] {
	case pglogrepl.PrimaryKeepaliveMessageByteID:
		ka, err := pglogrepl.ParsePrimaryKeepaliveMessage(data[1:])
		if err != nil {
			return changes.Event{}, fmt.Errorf("reading a keepalive message: %w", err)
		}
		return changes.Event{Kind: changes.EventKeepalive, Position: changes.PositionOf(uint64(ka.ServerWALEnd)), ReplyRequested: ka.ReplyRequested}, nil
	case pglogrepl.XLogDataByteID:
		xld, err := pglogrepl.ParseXLogData(data[1:])
		if err != nil {
			return changes.Event{}, fmt.Errorf("reading a log message: %w", err)
		}
		return s.decode(xld.WALData)
	}
	return changes.Event{}, nil
}

// decode decodes one pgoutput message.
func (s *session) decode(wal []byte) (changes.Event, error) {
	if len(wal) == 0 {
		return changes.Event{}, nil
	}
	switch wal[0] {
	case 'R':
		m, err := pglogrepl.Parse(wal)
		if err != nil {
			return changes.Event{}, fmt.Errorf("decoding a relation message: %w", err)
		}
		rel := m.(*pglogrepl.RelationMessage)
		s.relations[rel.RelationID] = relation{namespace: rel.Namespace, name: rel.RelationName}
	case 'B':
		return changes.Event{Kind: changes.EventBegin}, nil
	case 'I':
		// An insert: the relation ID follows the type byte. The tuple is not needed.
		if len(wal) < 5 {
			return changes.Event{}, errors.New("decoding an insert message: too short")
		}
		rel := s.relations[uint32(wal[1])<<24|uint32(wal[2])<<16|uint32(wal[3])<<8|uint32(wal[4])]
		return changes.Event{Kind: changes.EventInsert, Schema: rel.namespace, Table: rel.name}, nil
	case 'C':
		m, err := pglogrepl.Parse(wal)
		if err != nil {
			return changes.Event{}, fmt.Errorf("decoding a commit message: %w", err)
		}
		return changes.Event{Kind: changes.EventCommit, Position: changes.PositionOf(uint64(m.(*pglogrepl.CommitMessage).TransactionEndLSN))}, nil
	}
	return changes.Event{}, nil
}

// Confirm sends a standby status update with pos as the written position.
func (s *session) Confirm(ctx context.Context, pos changes.Position) error {
	if err := pglogrepl.SendStandbyStatusUpdate(ctx, s.conn, pglogrepl.StandbyStatusUpdate{WALWritePosition: pglogrepl.LSN(pos.Uint64())}); err != nil {
		return fmt.Errorf("sending the standby status update: %w", err)
	}
	return nil
}
