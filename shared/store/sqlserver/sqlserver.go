// Package sqlserver is the SQL Server dialect of the QueueBox store: it implements store.Store
// with database/sql and github.com/microsoft/go-mssqldb.
//
// Every statement is built once, in New, from the store.Names of the configuration, with every
// table and column name quoted as [name]. Placeholders are positional (@p1, @p2, ...) and
// every value is a bound parameter; T-SQL local variables carry the qb_ prefix, so that none
// shares a name with a bound parameter (Msg 134).
//
// The claims follow spec/02-claims-and-leases.md: the outbox claim and the relay claim each run
// in their own short transaction that first takes an exclusive application lock
// (queuebox_outbox_claim_<table>, queuebox_inbox_claim_<table>) with a lock timeout of 10
// seconds, and then claim rows with UPDLOCK, READPAST and ROWLOCK. The spec gives these locks
// to the session and releases them after the claim; here the claim transaction owns them and
// its commit or rollback releases them, which holds them for exactly the same span but cannot
// leave a lock behind on a pooled connection when a call is cancelled half way. A lock that is
// not granted raises Msg 51000 (THROW), which the store reports as ErrClaimLockTimeout: a
// transient condition that the caller backs off from. Set the driver timeout above 10 seconds
// (30 seconds or more), so that the server raises Msg 51000 before the driver abandons the
// call.
//
// Leases and schedules use the database clock, SYSUTCDATETIME(). Batched fenced writes send
// their claims as one JSON document that OPENJSON reads, so a batch of any size is one
// statement with one parameter. An operation that SQL Server picks as a deadlock victim (Msg
// 1205) runs again, up to three times in all.
//
// Requirements: open db with the driver name "sqlserver" (which sends @p1.. parameters as they
// are), database compatibility level 130 (SQL Server 2016) or later for OPENJSON and
// DATEDIFF_BIG, READ COMMITTED isolation (READ_COMMITTED_SNAPSHOT ON also works), and the
// session options that go-mssqldb sets at login (QUOTED_IDENTIFIER and ANSI_NULLS ON, which
// writes to tables with filtered indexes need). The statements return rows with OUTPUT
// without INTO, which SQL Server refuses on a table that has an enabled trigger.
package sqlserver

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"

	mssql "github.com/microsoft/go-mssqldb"

	"github.com/alternayte/queuebox/shared/store"
	"github.com/alternayte/queuebox/shared/store/sqlpool"
)

// ErrClaimLockTimeout reports that a claim did not get its application lock within 10 seconds
// (Msg 51000). It is transient: back off before the next claim, never retry at once.
var ErrClaimLockTimeout = errors.New("sqlserver: claim lock not acquired")

// SQL Server error numbers that the store translates.
const (
	errUniqueConstraint = 2627 // Violation of PRIMARY KEY or UNIQUE constraint.
	// errTruncation and errTruncationDetailed: string or binary data would be truncated.
	errTruncation         = 8152
	errTruncationDetailed = 2628
	errUniqueIndex        = 2601 // Cannot insert duplicate key row with unique index.
	errDeadlock           = 1205 // The transaction was chosen as the deadlock victim.
	errClaimLock          = 51000
)

// deadlockAttempts is how many times an operation runs when SQL Server chooses it as a
// deadlock victim (Msg 1205). The server has already rolled the victim's transaction back,
// and every operation of the store is safe to run again from the start: a fenced write
// matches only live claims, a claim or an insert either committed entirely or not at all.
const deadlockAttempts = 3

// retryDeadlock runs op until it succeeds, fails with anything but a deadlock, has run
// deadlockAttempts times, or ctx ends.
func retryDeadlock[T any](ctx context.Context, op func() (T, error)) (T, error) {
	for attempt := 1; ; attempt++ {
		v, err := op()
		if err == nil || attempt >= deadlockAttempts || ctx.Err() != nil || !hasErrorNumber(err, errDeadlock) {
			return v, err
		}
	}
}

// Store is the SQL Server implementation of store.Store. It is safe for concurrent use.
type Store struct {
	db    *sqlpool.Pool
	names store.Names
	stmt  statements
	// noGenerations and noSessions are set once at start (SetMissingTables) when the database
	// lacks store.ReplayGenerationTable or store.RevokedSessionTable.
	noGenerations, noSessions atomic.Bool
}

var _ store.Store = (*Store)(nil)

// New returns a store that runs its statements on db with the table and column names of
// names, with no bound on the wait for a connection beyond the caller's context (see
// NewWithPool). It validates every name and builds every statement. The store owns db: Close
// closes it.
func New(db *sql.DB, names store.Names) (*Store, error) {
	if db == nil {
		return nil, errors.New("creating sqlserver store: db is nil")
	}
	return NewWithPool(sqlpool.FromDB(db), names)
}

// NewWithPool returns a store that runs its statements on pool, which bounds the wait of each
// for a connection (database.connectionTimeoutMs) and reports the pool events. The store owns
// pool: Close closes it.
func NewWithPool(pool *sqlpool.Pool, names store.Names) (*Store, error) {
	if pool == nil {
		return nil, errors.New("creating sqlserver store: pool is nil")
	}
	if err := names.Validate(); err != nil {
		return nil, fmt.Errorf("creating sqlserver store: %w", err)
	}
	stmt, err := buildStatements(names)
	if err != nil {
		return nil, fmt.Errorf("creating sqlserver store: %w", err)
	}
	return &Store{db: pool, names: names, stmt: stmt}, nil
}

// Ping checks that the database answers.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.db.PingContext(ctx); err != nil {
		return fmt.Errorf("pinging sqlserver: %w", err)
	}
	return nil
}

// Close closes the database handle.
func (s *Store) Close() {
	_ = s.db.Close()
}

// CheckSchema verifies that both tables exist, that the inbox has its headers column and that
// the outbox has its sequence column. A missing column fails with an error that names the
// table and the column and carries the ALTER TABLE statements of spec/15-use-custom-tables.md
// with the configured names.
func (s *Store) CheckSchema(ctx context.Context) error {
	var outboxID, sequenceLen, inboxID, headersLen sql.NullInt64
	err := s.db.QueryRowContext(ctx, s.stmt.checkSchema, checkSchemaArgs(s.names)...).
		Scan(&outboxID, &sequenceLen, &inboxID, &headersLen)
	if err != nil {
		return fmt.Errorf("checking schema: %w", err)
	}
	return schemaError(s.names, outboxID.Valid, sequenceLen.Valid, inboxID.Valid, headersLen.Valid)
}

func checkSchemaArgs(n store.Names) []any {
	return []any{quote(n.OutboxTable), n.Outbox.Sequence, quote(n.InboxTable), n.Inbox.Headers}
}

// schemaError builds the CheckSchema error from what the database reported, or returns nil.
func schemaError(n store.Names, outboxExists, sequenceExists, inboxExists, headersExists bool) error {
	var problems []string
	if !outboxExists {
		problems = append(problems, fmt.Sprintf("outbox table %s does not exist", quote(n.OutboxTable)))
	}
	if !inboxExists {
		problems = append(problems, fmt.Sprintf("inbox table %s does not exist", quote(n.InboxTable)))
	}
	if len(problems) > 0 {
		return fmt.Errorf("checking schema: %s; create the tables (see spec/15-use-custom-tables.md) or correct database.outboxTableName and database.inboxTableName",
			strings.Join(problems, "; "))
	}
	var fixes []string
	if !headersExists {
		problems = append(problems, fmt.Sprintf("table %s has no column %s (the inbox headers column)",
			quote(n.InboxTable), quote(n.Inbox.Headers)))
		fixes = append(fixes, addHeadersSQL(n))
	}
	if !sequenceExists {
		problems = append(problems, fmt.Sprintf("table %s has no column %s (the outbox sequence column)",
			quote(n.OutboxTable), quote(n.Outbox.Sequence)))
		fixes = append(fixes, addSequenceSQL(n))
	}
	if len(problems) == 0 {
		return nil
	}
	return fmt.Errorf("checking schema: %s; add the missing columns with: %s",
		strings.Join(problems, "; "), strings.Join(fixes, " "))
}

// addHeadersSQL is the SQL Server statement of spec/15 that adds the inbox headers column.
func addHeadersSQL(n store.Names) string {
	return fmt.Sprintf("ALTER TABLE %s ADD %s NVARCHAR(MAX) NOT NULL DEFAULT '{}';",
		quote(n.InboxTable), quote(n.Inbox.Headers))
}

// addSequenceSQL is the SQL Server statements of spec/15 that add the outbox sequence column
// and its index.
func addSequenceSQL(n store.Names) string {
	return fmt.Sprintf("ALTER TABLE %[1]s ADD %[2]s BIGINT IDENTITY(1,1) NOT NULL; CREATE INDEX %[3]s ON %[1]s (%[4]s, %[2]s);",
		quote(n.OutboxTable), quote(n.Outbox.Sequence), "ix_"+n.OutboxTable+"_key_sequence", quote(n.Outbox.Key))
}

// quote returns name as a bracketed T-SQL identifier.
func quote(name string) string {
	return "[" + strings.ReplaceAll(name, "]", "]]") + "]"
}

// unicodeLiteral returns s as an N'...' T-SQL string literal.
func unicodeLiteral(s string) string {
	return "N'" + strings.ReplaceAll(s, "'", "''") + "'"
}

// hasErrorNumber reports whether err carries a SQL Server error with one of numbers. It looks
// at every error of the batch, because SQL Server follows an error with others (2627 comes
// with 3621, "The statement has been terminated").
func hasErrorNumber(err error, numbers ...int32) bool {
	var sqlErr mssql.Error
	if !errors.As(err, &sqlErr) {
		var ptr *mssql.Error
		if !errors.As(err, &ptr) || ptr == nil {
			return false
		}
		sqlErr = *ptr
	}
	matches := func(number int32) bool {
		for _, n := range numbers {
			if number == n {
				return true
			}
		}
		return false
	}
	if matches(sqlErr.Number) {
		return true
	}
	for _, e := range sqlErr.All {
		if matches(e.Number) {
			return true
		}
	}
	return false
}

// isUniqueViolation reports a write that a unique constraint or unique index refused.
func isUniqueViolation(err error) bool {
	return hasErrorNumber(err, errUniqueConstraint, errUniqueIndex)
}

// translate maps the driver errors that callers decide on to the store sentinels: a unique
// violation to store.ErrConflict and Msg 51000 to ErrClaimLockTimeout.
func translate(err error) error {
	switch {
	case err == nil:
		return nil
	case isUniqueViolation(err):
		return fmt.Errorf("%w: %w", store.ErrConflict, err)
	case hasErrorNumber(err, errClaimLock):
		return fmt.Errorf("%w: %w", ErrClaimLockTimeout, err)
	case hasErrorNumber(err, errTruncation, errTruncationDetailed):
		return fmt.Errorf("%w: %w", store.ErrInvalidValue, err)
	default:
		return err
	}
}

// rollback ends tx after a failure; the failure is what the caller reports.
func rollback(tx *sql.Tx) {
	_ = tx.Rollback()
}
