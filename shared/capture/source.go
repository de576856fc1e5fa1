package capture

import (
	"context"
	"encoding/binary"
	"errors"

	"github.com/alternayte/queuebox/shared/store"
)

// Source is the change log of one database dialect, which a Connector reads. It knows the
// dialect's driver, its replication protocol and the form of its log positions; the
// Connector knows none of them. shared/store/postgres/logical implements it for PostgreSQL
// logical replication (pgoutput); the composition root (shared/service.CaptureConfig) puts
// it in Config.Source.
type Source interface {
	// Open binds the source to cfg (its defaults applied and validated) and returns the log
	// that the connector's sessions read. New returns its error.
	Open(cfg Config) (Log, error)
}

// Position is a position in a source's change log: the big-endian bytes of the source's log
// sequence number, of one width per source (8 bytes for a PostgreSQL LSN, PositionOf; the 10
// bytes of a SQL Server binary(10) LSN). Positions of one source therefore order as their
// strings do: a later change has a higher position. The empty Position is no position.
type Position string

// PositionOf returns the Position of a 64-bit log sequence number (PostgreSQL's LSN): its 8
// big-endian bytes, or the empty Position for 0.
func PositionOf(n uint64) Position {
	if n == 0 {
		return ""
	}
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], n)
	return Position(b[:])
}

// Uint64 returns the 64-bit log sequence number of a Position that PositionOf made (0 for the
// empty Position). A longer Position keeps its last 8 bytes.
func (p Position) Uint64() uint64 {
	var b [8]byte
	if len(p) >= 8 {
		copy(b[:], p[len(p)-8:])
	} else {
		copy(b[8-len(p):], p)
	}
	return binary.BigEndian.Uint64(b[:])
}

// Log is a Source bound to one Config. Its methods are called from the connector's Run
// goroutine, and FormatPosition from any goroutine.
type Log interface {
	// Fingerprint is the digest of the settings that give a recorded position its meaning:
	// when it changes, the position of offsets.dat is meaningless.
	Fingerprint() string
	// Connect opens the stream connection of one session.
	Connect(ctx context.Context) (Session, error)
	// ParsePosition reads a position in the form that FormatPosition writes (offsets.dat).
	ParsePosition(s string) (Position, error)
	// FormatPosition writes a position as offsets.dat and Stats.Handled show it.
	FormatPosition(p Position) string
}

// Session is one connection of a Log, from Connect until Close. The connector calls, in this
// order: Lock; Inspect (then the inspection's Close); CreateSlot when the slot is missing;
// Start; then Receive and Confirm until the stream ends; Close.
type Session interface {
	// Lock takes the lock of the capture identity on the session's connection, which holds
	// it until Close. It returns false when another session holds it.
	Lock(ctx context.Context) (bool, error)
	// Inspect checks that the database is prepared for capture (a *Fault names what is
	// missing), tells whether the slot exists, and opens the statements of
	// queuebox_capture_state.
	Inspect(ctx context.Context) (*Inspection, error)
	// CreateSlot creates the slot and returns the position that the stream of the new slot
	// starts from.
	CreateSlot(ctx context.Context) (Position, error)
	// Start starts the stream at from.
	Start(ctx context.Context, from Position) error
	// Receive returns the next event of the stream. It returns an error that wraps
	// ErrReceiveTimeout when ctx's deadline passes first, and an Event of EventNone for a
	// message that capture does not act on.
	Receive(ctx context.Context) (Event, error)
	// Confirm tells the server that every change up to pos was handled, so that it may
	// release the log before it.
	Confirm(ctx context.Context, pos Position) error
	// Close ends the session and its connection.
	Close()
}

// ErrReceiveTimeout is wrapped by the error of Session.Receive when the deadline of its
// context passed before a message arrived.
var ErrReceiveTimeout = errors.New("no message from the stream before the deadline")

// Inspection is what Session.Inspect found.
type Inspection struct {
	// SlotExists tells whether the slot exists.
	SlotExists bool
	// States reads and writes queuebox_capture_state until Close.
	States store.CaptureStateStore
	// Close releases the connections of the inspection. Required.
	Close func()
}

// EventKind is the kind of an Event.
type EventKind uint8

// The kinds of an Event.
const (
	// EventNone is a message that capture does not act on.
	EventNone EventKind = iota
	// EventBegin starts a transaction.
	EventBegin
	// EventInsert is an insert into the table Schema.Table, inside a transaction.
	EventInsert
	// EventCommit ends a transaction; Position is the end of the transaction.
	EventCommit
	// EventKeepalive is the server's heartbeat; Position is the end of its log, and
	// ReplyRequested asks for a confirmation at once.
	EventKeepalive
)

// Event is one event of the stream.
type Event struct {
	// Kind is what happened.
	Kind EventKind
	// Schema and Table name the table of an EventInsert.
	Schema, Table string
	// Position is the position of an EventCommit or an EventKeepalive.
	Position Position
	// ReplyRequested is set on an EventKeepalive that asks for a confirmation at once.
	ReplyRequested bool
}
