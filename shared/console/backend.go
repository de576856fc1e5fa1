package console

import (
	"context"
	"encoding/json"
	"errors"
	"time"
)

// ErrNotFound is returned (wrapped) by Backend.Row for an id that no row has.
var ErrNotFound = errors.New("not found")

// Backend is what the console reads and changes. shared/console/operator implements it over
// the store, the routes and the destination state; the console knows no SQL and no
// configuration.
type Backend interface {
	// Overview counts the rows of each table by state.
	Overview(ctx context.Context) (Overview, error)
	// DeadGroups groups the dead rows of both tables by destination (outbox) or source
	// (inbox) and error fingerprint, the largest group first.
	DeadGroups(ctx context.Context) ([]DeadGroup, error)
	// Row reads one row with its payload and headers; table is TableOutbox or TableInbox.
	Row(ctx context.Context, table, id string) (Row, error)
	// Preview counts the rows that Replay would move and returns a sample of their ids,
	// changing nothing.
	Preview(ctx context.Context, sel Selection) (Preview, error)
	// Replay moves the selected rows back to pending, in batches, and returns how many moved.
	Replay(ctx context.Context, sel Selection) (int64, error)
	// Destinations lists the configured destinations with their pause and circuit state.
	Destinations(ctx context.Context) ([]Destination, error)
	// SetPaused pauses or resumes a destination.
	SetPaused(ctx context.Context, name string, paused bool) error
}

// ProgressReplayer is a Backend whose replay reports its progress after each batch: the
// command line's `dead replay` prints it. progress receives the rows moved so far, the
// batches so far and the rows selected.
type ProgressReplayer interface {
	ReplayWithProgress(ctx context.Context, sel Selection, progress func(moved int64, batches int, total int64)) (int64, error)
}

// The tables of a Row and a Selection.
const (
	TableOutbox = "outbox"
	TableInbox  = "inbox"
)

// Overview is the first page: counts by state and the age of the oldest pending row.
type Overview struct {
	Outbox TableCounts
	Inbox  TableCounts
}

// TableCounts counts one table's rows by state.
type TableCounts struct {
	// ByState maps a state (pending, processing, sent or processed, dead) to its count.
	ByState map[string]int64
	// OldestPendingAge is the age of the oldest pending row; zero when none is pending.
	OldestPendingAge time.Duration
}

// DeadGroup is dead rows that share a table, a destination or source, and an error
// fingerprint.
type DeadGroup struct {
	// Table is TableOutbox or TableInbox.
	Table string
	// Target is the destination (outbox) or the source (inbox) of the rows.
	Target string
	// Fingerprint is last_error with ids, numbers and times replaced by placeholders.
	Fingerprint string
	Count       int64
	FirstSeen   time.Time
	LastSeen    time.Time
	// SampleID is one row of the group; SampleError its last_error as stored.
	SampleID    string
	SampleError string
}

// Selection is what a replay moves: the dead rows of one table, narrowed to a destination or
// source and to one error fingerprint when those are set.
type Selection struct {
	Table       string
	Target      string
	Fingerprint string
	// IDs, when set, are the only rows selected (one row's replay).
	IDs []string
}

// Preview is the answer of a dry run.
type Preview struct {
	Count  int64
	Sample []string
}

// Row is one outbox or inbox row as the row page shows it. The payload and the headers are
// shown as stored, with the headers' secrets redacted by the backend.
type Row struct {
	Table     string
	ID        string
	State     string
	Topic     string // outbox
	Source    string // inbox
	Key       string
	Attempt   int
	LastError string
	CreatedAt time.Time
	UpdatedAt time.Time
	// ClaimedAt and LeaseExpiresAt describe a claim in progress; zero when none.
	ClaimedAt      time.Time
	LeaseExpiresAt time.Time
	Payload        json.RawMessage
	Headers        json.RawMessage
}

// Destination is one configured destination's control state.
type Destination struct {
	Name    string
	Paused  bool
	Circuit string
	// Pending counts the destination's pending rows when the backend knows it; -1 otherwise.
	Pending int64
}
