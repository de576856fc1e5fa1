// Package changes is the seam between change data capture and a database dialect: the
// change log of one dialect (Source, Log, Session), the values that it hands to the
// connector (Event, Position, Inspection, Fault), and the Settings that a Source opens with.
//
// A dialect implements Source in a folder of its own under shared/store
// (shared/store/postgres/logical reads a PostgreSQL logical replication slot with pgoutput;
// shared/store/sqlserver/cdc polls a SQL Server change table) and imports this package and
// its own store only. The dialect-neutral connector, shared/capture, reads any Source: it
// holds the reconnect loop, the wakes, the state directory and the health state, and knows no
// driver. This package imports nothing above shared/store.
package changes

import (
	"context"
	"errors"
	"fmt"

	"github.com/alternayte/queuebox/shared/store"
)

// Source is the change log of one database dialect, which the capture connector reads. It
// knows the dialect's driver, its replication protocol and the form of its log positions; the
// connector knows none of them. The composition root (shared/service.CaptureConfig) puts the
// Source of the configured mode in capture.Config.Source.
type Source interface {
	// Open binds the source to s (the connector's settings, its defaults applied and
	// validated) and returns the log that the connector's sessions read. capture.New returns
	// its error.
	Open(s Settings) (Log, error)
}

// Settings are what a Source needs of the capture configuration. The connector builds them
// from capture.Config after it applied its defaults and validated it.
type Settings struct {
	// ConnString is the connection string of the capture connection, in the form that the
	// Source's driver takes (a pgx connection string, a go-mssqldb URL).
	ConnString string
	// StateConnString is the connection of the queuebox_capture_state table; empty or equal
	// to ConnString when the capture connection reaches it.
	StateConnString string
	// Identity is the name of the capture owner (outbox.capture.identity), whose session
	// lock a Session takes.
	Identity string
	// Publication is the publication that the operator created (PostgreSQL).
	Publication string
	// Slot is the replication slot (PostgreSQL).
	Slot string
	// Schema and Table name the outbox table.
	Schema, Table string
	// StateDirectory is the durable directory of the connector's offsets.dat and identity; a
	// Source may keep files of its own there under other names.
	StateDirectory string
}

// Log is a Source bound to one Settings. Its methods are called from the connector's Run
// goroutine, and FormatPosition from any goroutine.
type Log interface {
	// Fingerprint is the digest of the settings that give a recorded position its meaning:
	// when it changes, the position of offsets.dat is meaningless.
	Fingerprint() string
	// Connect opens the stream connection of one session.
	Connect(ctx context.Context) (Session, error)
	// ParsePosition reads a position in the form that FormatPosition writes (offsets.dat).
	ParsePosition(s string) (Position, error)
	// FormatPosition writes a position as offsets.dat and the connector's Stats.Handled show
	// it.
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

// Fault is a capture fault that needs an operator's decision: the connector stops the
// stream, does not retry, and reports Reason. Delivery goes on through SQL and the
// reconciliation timer. A Source returns one for a database that is not prepared; the
// connector returns one for a recorded state that disagrees with the database.
type Fault struct {
	// Recovery is true for the faults of the recorded state, which the recovery steps of
	// spec/08-capture-changes.md repair; false for a database that is not prepared.
	Recovery bool
	// Reason names the fault.
	Reason string
}

// Error returns the sentence that the health check and the log show.
func (f *Fault) Error() string {
	if f.Recovery {
		return "capture needs recovery: " + f.Reason
	}
	return "capture cannot start: " + f.Reason
}

// Faultf returns the Fault of the reason that format and args make; a Source returns one for
// a database that is not prepared (recovery false).
func Faultf(recovery bool, format string, args ...any) *Fault {
	return &Fault{Recovery: recovery, Reason: fmt.Sprintf(format, args...)}
}
