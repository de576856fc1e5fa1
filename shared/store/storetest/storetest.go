// Package storetest is the behaviour suite that every SQL dialect of store.Store must pass,
// in the manner of river's riverdrivertest: one Run that a dialect's test calls with a Harness.
//
// The suite runs against a real database. Each test opens its own private database through
// the Harness, most tests run in parallel, and the concurrency claims (no row claimed twice,
// one row of a key or an aggregate in flight, the claim fence, deduplication) are exercised with
// many goroutines and connections; run it with -race. Tests wait on conditions with deadlines,
// never on sleeps.
//
// A dialect provides only what the Store interface cannot do: open a database with a given
// schema, a few Hooks that read rows and move the clock of a row (see Hooks), and its driver
// (store.Driver from its Open) on an empty database, on which the Migrations part runs the
// bundled migrations through the driver's backend and the schema check.
package storetest

import (
	"bytes"
	"context"
	"encoding/json"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/alternayte/queuebox/shared/store"
)

// Schema selects the tables that Harness.Open creates.
type Schema int

const (
	// SchemaMigrated is a database with every bundled migration applied and the default
	// names (store.DefaultNames).
	SchemaMigrated Schema = iota
	// SchemaCustom is a database created with the custom-table DDL of
	// spec/15-use-custom-tables.md ("Create the tables"): tables qb_outbox and qb_inbox, the
	// outbox payload column body and the inbox idempotency key column dedup_key. The store
	// uses CustomNames.
	SchemaCustom
	// SchemaCustomIncomplete is SchemaCustom without the inbox headers column and without
	// the outbox sequence column (and its index): the two columns that CheckSchema checks.
	SchemaCustomIncomplete
)

// CustomNames returns the names of the custom tables of SchemaCustom.
func CustomNames() store.Names {
	n := store.DefaultNames()
	n.OutboxTable = "qb_outbox"
	n.InboxTable = "qb_inbox"
	n.Outbox.Payload = "body"
	n.Inbox.IdempotencyKey = "dedup_key"
	return n
}

// connectionHeavy lets one test at a time open 50 connections, so that the suite's parallel
// tests (two of them per dialect and schema) stay under the server's max_connections (100 by
// default) together with the other test packages running at the same time.
var connectionHeavy = make(chan struct{}, 1)

// manyConnections waits until no other test of the suite holds 50 connections, and holds
// the turn until t ends. Called before the test's database is opened, the turn is given back
// after its pool is closed (cleanups run last first).
func manyConnections(t *testing.T) {
	t.Helper()
	connectionHeavy <- struct{}{}
	t.Cleanup(func() { <-connectionHeavy })
}

// Harness is what a dialect gives the suite.
type Harness struct {
	// Open returns a store and its hooks on a new private database of the given schema, and
	// registers the cleanup of both with t. The store's connection pool must allow at least
	// 50 connections: the duplicate storm runs 50 inserts at once.
	Open func(t testing.TB, schema Schema) (store.Store, Hooks)
	// OpenEmpty returns the dialect's driver, from its Open (store.Driver with the Store and
	// the Migration backend), on a new private database without any table, and registers its
	// Close with t. The migration part of the suite runs the bundled migrations through
	// Driver.Migration and checks the schema with Driver.Store.
	OpenEmpty func(t testing.TB) *store.Driver
}

// Hooks are the dialect-specific statements that the suite needs to observe and arrange rows.
// They run outside the Store under test and use the same names as the store.
type Hooks interface {
	// Now reads the database clock (clock_timestamp(), SYSUTCDATETIME()).
	Now(ctx context.Context) (time.Time, error)
	// InsertOutbox inserts the rows in one transaction, in slice order, with the semantics of
	// Store.OutboxInsert, and returns their ids. Rows of one call share created_at.
	InsertOutbox(ctx context.Context, rows []store.OutboxInsertParams) ([]string, error)
	// OutboxRows returns every outbox row in sequence order.
	OutboxRows(ctx context.Context) ([]OutboxRow, error)
	// InboxRows returns every inbox row in created_at, id order.
	InboxRows(ctx context.Context) ([]InboxRow, error)
	// ChangeOutbox applies a Change to one outbox row.
	ChangeOutbox(ctx context.Context, id string, c Change) error
	// ChangeInbox applies a Change to one inbox row.
	ChangeInbox(ctx context.Context, id string, c Change) error
	// DropDestinationState drops store.DestinationStateTable, as on a database without
	// V1 of the QueueBox track.
	DropDestinationState(ctx context.Context) error
}

// Change arranges a row for a test. Every set field applies.
type Change struct {
	// ExpireLease sets lease_expires_at to the database clock minus one second.
	ExpireLease bool
	// Age moves created_at back by Age; on the outbox it also moves updated_at back by Age.
	Age time.Duration
	// EmptyKey writes the empty string into the outbox key column.
	EmptyKey bool
	// ExpiredClaim sets state processing, a new claim token and a lease that has passed, as
	// a crashed claimer (for example a pull worker) leaves a row.
	ExpiredClaim bool
}

// OutboxRow is every column of an outbox row. A nil pointer is a null column; Token is empty
// when claim_token is null.
type OutboxRow struct {
	ID             string
	Topic          string
	Key            *string
	AggregateType  *string
	Payload        json.RawMessage
	Headers        json.RawMessage
	State          string
	Attempt        int
	MaxAttempts    int
	ScheduledAt    time.Time
	CreatedAt      time.Time
	UpdatedAt      time.Time
	ClaimedAt      *time.Time
	Token          string
	LeaseExpiresAt *time.Time
	LastError      *string
	Sequence       int64
}

// InboxRow is every column of an inbox row. A nil pointer is a null column; Token is empty
// when claim_token is null.
type InboxRow struct {
	ID             string
	Source         string
	IdempotencyKey string
	AggregateID    *string
	EventType      *string
	Payload        json.RawMessage
	Headers        json.RawMessage
	CorrelationID  *string
	Consumption    string
	State          string
	Attempt        int
	LastError      *string
	CreatedAt      time.Time
	ProcessedAt    *time.Time
	ClaimedAt      *time.Time
	Token          string
	LeaseExpiresAt *time.Time
}

// testCase is one behaviour of the suite.
type testCase struct {
	name string
	// custom also runs the test on SchemaCustom.
	custom bool
	// heavy marks a test that opens 50 connections: one such test runs at a time.
	heavy bool
	run   func(t *testing.T, e *env)
}

// Run runs the whole suite. Every test opens its own database through h and runs in parallel
// with the others. The Migrations part runs the migration runner of package migrate on the
// driver of Harness.OpenEmpty.
func Run(t *testing.T, h Harness) {
	if h.Open == nil || h.OpenEmpty == nil {
		t.Fatal("storetest: Harness.Open or Harness.OpenEmpty is nil")
	}
	tests := slices.Concat(outboxTests(), lockTests(), inboxTests(), destinationTests(), sessionTests(), replayTests(), replayGenerationTests(), schemaTests())
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if tc.heavy {
				manyConnections(t)
			}
			tc.run(t, openEnv(t, h, SchemaMigrated))
		})
	}
	t.Run("CustomNames", func(t *testing.T) {
		t.Parallel()
		for _, tc := range tests {
			if !tc.custom {
				continue
			}
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				if tc.heavy {
					manyConnections(t)
				}
				tc.run(t, openEnv(t, h, SchemaCustom))
			})
		}
	})
	t.Run("Migrations", func(t *testing.T) {
		t.Parallel()
		runMigrationTests(t, h)
	})
}

// env is what a test works with: the store under test, the hooks and a context with the
// deadline of the test.
type env struct {
	s      store.Store
	h      Hooks
	ctx    context.Context
	schema Schema
	// open opens another database of the harness for a subtest.
	open func(t testing.TB, schema Schema) (store.Store, Hooks)
	// window is the Window of the test's claims (store.OutboxClaimParams); 0 claims without.
	window int
}

// testTimeout bounds every test; a test that waits on a condition fails at this deadline.
const testTimeout = 3 * time.Minute

// lease is the lease of claims that must not expire during a test.
const lease = 5 * time.Minute

func openEnv(t *testing.T, h Harness, schema Schema) *env {
	t.Helper()
	s, hooks := h.Open(t, schema)
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	t.Cleanup(cancel)
	return &env{s: s, h: hooks, ctx: ctx, schema: schema, open: h.Open}
}

func (e *env) now(t *testing.T) time.Time {
	t.Helper()
	now, err := e.h.Now(e.ctx)
	if err != nil {
		t.Fatalf("reading database clock: %v", err)
	}
	return now
}

// insert inserts outbox rows in one transaction and returns their ids.
func (e *env) insert(t *testing.T, rows ...store.OutboxInsertParams) []string {
	t.Helper()
	ids, err := e.h.InsertOutbox(e.ctx, rows)
	if err != nil {
		t.Fatalf("inserting outbox rows: %v", err)
	}
	if len(ids) != len(rows) {
		t.Fatalf("inserting outbox rows: got %d ids for %d rows", len(ids), len(rows))
	}
	return ids
}

func (e *env) outboxRows(t *testing.T) []OutboxRow {
	t.Helper()
	rows, err := e.h.OutboxRows(e.ctx)
	if err != nil {
		t.Fatalf("reading outbox rows: %v", err)
	}
	return rows
}

func (e *env) outboxRow(t *testing.T, id string) OutboxRow {
	t.Helper()
	for _, r := range e.outboxRows(t) {
		if r.ID == id {
			return r
		}
	}
	t.Fatalf("outbox row %s does not exist", id)
	return OutboxRow{}
}

func (e *env) inboxRows(t *testing.T) []InboxRow {
	t.Helper()
	rows, err := e.h.InboxRows(e.ctx)
	if err != nil {
		t.Fatalf("reading inbox rows: %v", err)
	}
	return rows
}

func (e *env) inboxRow(t *testing.T, id string) InboxRow {
	t.Helper()
	for _, r := range e.inboxRows(t) {
		if r.ID == id {
			return r
		}
	}
	t.Fatalf("inbox row %s does not exist", id)
	return InboxRow{}
}

func (e *env) changeOutbox(t *testing.T, id string, c Change) {
	t.Helper()
	if err := e.h.ChangeOutbox(e.ctx, id, c); err != nil {
		t.Fatalf("changing outbox row %s: %v", id, err)
	}
}

func (e *env) changeInbox(t *testing.T, id string, c Change) {
	t.Helper()
	if err := e.h.ChangeInbox(e.ctx, id, c); err != nil {
		t.Fatalf("changing inbox row %s: %v", id, err)
	}
}

func (e *env) claim(t *testing.T, limit int) []store.OutboxMessage {
	t.Helper()
	msgs, err := e.s.OutboxClaim(e.ctx, store.OutboxClaimParams{Limit: limit, Lease: lease, Window: e.window})
	if err != nil {
		t.Fatalf("claiming: %v", err)
	}
	return msgs
}

func (e *env) markSent(t *testing.T, claims ...store.Claim) []string {
	t.Helper()
	ids, err := e.s.OutboxMarkSent(e.ctx, claims)
	if err != nil {
		t.Fatalf("marking sent: %v", err)
	}
	return ids
}

func (e *env) inboxInsert(t *testing.T, p store.InboxInsertParams) store.InboxInsertResult {
	t.Helper()
	if p.Payload == nil {
		p.Payload = json.RawMessage(`{"n":1}`)
	}
	res, err := e.s.InboxInsert(e.ctx, p)
	if err != nil {
		t.Fatalf("inserting inbox row: %v", err)
	}
	return res
}

func (e *env) relayClaim(t *testing.T, limit int) []store.InboxMessage {
	t.Helper()
	msgs, err := e.s.InboxRelayClaim(e.ctx, store.InboxRelayClaimParams{Limit: limit, Lease: lease})
	if err != nil {
		t.Fatalf("claiming relay batch: %v", err)
	}
	return msgs
}

// msgIDs returns the ids of claimed outbox messages.
func msgIDs(msgs []store.OutboxMessage) []string {
	ids := make([]string, len(msgs))
	for i, m := range msgs {
		ids[i] = m.ID
	}
	return ids
}

func inboxMsgIDs(msgs []store.InboxMessage) []string {
	ids := make([]string, len(msgs))
	for i, m := range msgs {
		ids[i] = m.ID
	}
	return ids
}

// sameSet reports whether a and b hold the same strings, in any order.
func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// jsonEqual reports whether two JSON documents are equal as values.
func jsonEqual(t *testing.T, a, b []byte) bool {
	t.Helper()
	var va, vb any
	if err := json.Unmarshal(a, &va); err != nil {
		t.Fatalf("decoding JSON %q: %v", a, err)
	}
	if err := json.Unmarshal(b, &vb); err != nil {
		t.Fatalf("decoding JSON %q: %v", b, err)
	}
	return reflect.DeepEqual(va, vb)
}

// within reports whether got lies in [from, to], allowing slack either side for the rounding
// of the database clock.
func within(got, from, to time.Time, slack time.Duration) bool {
	return !got.Before(from.Add(-slack)) && !got.After(to.Add(slack))
}

func ptr[T any](v T) *T { return &v }

func strOrNil(p *string) string {
	if p == nil {
		return "<null>"
	}
	return *p
}

// payloadN is a small JSON payload that carries a number.
func payloadN(n int) json.RawMessage {
	var b bytes.Buffer
	_ = json.NewEncoder(&b).Encode(map[string]int{"n": n})
	return bytes.TrimSpace(b.Bytes())
}
