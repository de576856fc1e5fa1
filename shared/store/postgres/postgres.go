// Package postgres implements store.Store on PostgreSQL with a pgx v5 connection pool.
//
// Every statement is built once by New from store.Names, with each table and column name
// quoted as an identifier, and cached in the Store. The claims use FOR UPDATE SKIP LOCKED, the
// relay claim also takes a transaction advisory lock keyed on the inbox table name, every lease
// is computed from clock_timestamp() (the database clock, not the frozen transaction time of
// now()), and every write that finishes a claim is fenced by id, state processing, claim token
// and a live lease.
package postgres

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/alternayte/queuebox/shared/store"
)

// Store is the PostgreSQL implementation of store.Store. It is safe for concurrent use by
// many goroutines; the database is the only coordination point between processes.
type Store struct {
	pool  *boundedPool
	names store.Names
	sql   statements
	// claimTexts, windowTexts and relayTexts are the outbox claims and the relay's claim with
	// their limits in the text; lockTexts and lockWindowTexts the claims of the lock mode.
	claimTexts, windowTexts, relayTexts limitTexts
	lockTexts, lockWindowTexts          limitTexts
	// noGenerations and noSessions are set once at start (SetMissingTables) when the database
	// lacks store.ReplayGenerationTable or store.RevokedSessionTable.
	noGenerations, noSessions atomic.Bool
}

var (
	_ store.Store        = (*Store)(nil)
	_ store.OutboxLocker = (*Store)(nil)
)

// statements holds the SQL text of every statement, built once from the names.
type statements struct {
	outboxInsert         [insertVariants]string
	outboxClaim          string
	outboxClaimWindow    string
	outboxRenew          string
	outboxMarkSent       string
	outboxRetry          string
	outboxDefer          string
	outboxMarkDead       string
	outboxReclaim        string
	outboxReplay         string
	outboxReplayNoGen    string
	outboxStats          string
	outboxTopics         string
	outboxDeleteFinished string
	outboxDeleteExcess   string

	inboxInsert              string
	inboxInsertBatch         string
	inboxRelayLock           string
	inboxRelayClaim          string
	inboxRelayForward        [insertVariants]string
	inboxRelayForwardBatch   string
	inboxRelayProcessedBatch string
	inboxRelayDead           string
	inboxRelayRenew          string
	inboxRelayReclaim        string
	inboxStats               string
	inboxDeleteFinished      string

	columnExists string

	replay replayStatements
	lock   lockStatements // the claim mode lock (outboxlock.go)
}

// New returns a Store that runs its statements on pool against the tables and columns of
// names. The Store owns the pool from then on: Close closes it.
func New(pool *pgxpool.Pool, names store.Names) (*Store, error) {
	return NewWithConfig(pool, Config{Names: names})
}

// Config is what NewWithConfig builds a Store from.
type Config struct {
	// Names are the mapped table and column names. Required.
	Names store.Names
	// AcquireTimeout is the longest wait of a statement for a connection from the pool
	// (database.connectionTimeoutMs); a statement that waits longer fails with
	// store.ErrPoolTimeout. Default: 0, the caller's context alone bounds the wait.
	AcquireTimeout time.Duration
}

// NewWithConfig is New with the options of cfg. The store owns pool: Close closes it.
func NewWithConfig(pool *pgxpool.Pool, cfg Config) (*Store, error) {
	if pool == nil {
		return nil, errors.New("creating postgres store: pool is nil")
	}
	if err := cfg.Names.Validate(); err != nil {
		return nil, fmt.Errorf("creating postgres store: %w", err)
	}
	s := &Store{pool: &boundedPool{pool: pool, timeout: max(cfg.AcquireTimeout, 0)}, names: cfg.Names}
	var err error
	if s.sql, err = buildStatements(cfg.Names); err != nil {
		return nil, fmt.Errorf("creating postgres store: %w", err)
	}
	return s, nil
}

// Ping checks that the database answers.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.pool.Ping(ctx); err != nil {
		return fmt.Errorf("pinging postgres: %w", err)
	}
	return nil
}

// Close closes the pool. It is safe to call more than once.
func (s *Store) Close() { s.pool.Close() }

// CheckSchema verifies that the inbox headers column and the outbox sequence column exist in
// the tables that the search path resolves. Its error names each missing column with its
// table and carries the ALTER TABLE statements that add it.
func (s *Store) CheckSchema(ctx context.Context) error {
	n := s.names
	checks := [...]struct {
		table, column, fix string
	}{
		{
			table:  n.InboxTable,
			column: n.Inbox.Headers,
			fix: fmt.Sprintf(`ALTER TABLE %s ADD COLUMN %s JSONB NOT NULL DEFAULT '{}';`,
				ident(n.InboxTable), ident(n.Inbox.Headers)),
		},
		{
			table:  n.OutboxTable,
			column: n.Outbox.Sequence,
			fix: fmt.Sprintf(`ALTER TABLE %s ADD COLUMN %s BIGINT GENERATED BY DEFAULT AS IDENTITY; `+
				`CREATE INDEX ON %s (%s, %s) WHERE %s IN ('pending', 'processing');`,
				ident(n.OutboxTable), ident(n.Outbox.Sequence),
				ident(n.OutboxTable), ident(n.Outbox.Key), ident(n.Outbox.Sequence), ident(n.Outbox.State)),
		},
	}
	var found [len(checks)]struct{ table, column bool }
	find := func(sql string) error {
		// One statement answers both checks, sent unprepared (pgx.QueryExecModeExec): a
		// start runs it once, so a prepare would only add a round trip.
		return s.pool.QueryRow(ctx, sql, pgx.QueryExecModeExec,
			ident(checks[0].table), checks[0].column, ident(checks[1].table), checks[1].column,
		).Scan(&found[0].table, &found[0].column, &found[1].table, &found[1].column)
	}
	// columnProbeSQL answers in the common case, a schema with both columns, at a fraction of
	// the cost of columnExistsSQL on the fresh connection of a start; columnExistsSQL answers
	// when it cannot (a missing column, or a system column's name).
	var err error
	if systemColumn(checks[0].column) || systemColumn(checks[1].column) {
		err = find(s.sql.columnExists)
	} else if err = find(columnProbeSQL); isUndefinedColumn(err) {
		err = find(s.sql.columnExists)
	}
	if err != nil {
		return fmt.Errorf("checking schema of table %s: %w", checks[0].table, err)
	}
	var errs []error
	for i, c := range checks {
		tableExists, columnExists := found[i].table, found[i].column
		switch {
		case !tableExists:
			errs = append(errs, fmt.Errorf("table %q does not exist (column %q is required); create it, see the custom tables guide", c.table, c.column))
		case !columnExists:
			errs = append(errs, fmt.Errorf("table %q has no column %q; add it with: %s", c.table, c.column, c.fix))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("checking schema: %w", errors.Join(errs...))
	}
	return nil
}

// ident quotes a name as a PostgreSQL identifier.
func ident(name string) string { return pgx.Identifier{name}.Sanitize() }

var placeholder = regexp.MustCompile(`\{([a-z_]+)\}`)

// render replaces {table} with the quoted table name and {column} with the quoted mapped name
// of the column whose default name is column. An unknown placeholder is an error, so a typo in
// a statement fails New and every test.
func render(sql, table string, columns map[string]string) (string, error) {
	var missing []string
	out := placeholder.ReplaceAllStringFunc(sql, func(m string) string {
		key := m[1 : len(m)-1]
		if key == "table" {
			return ident(table)
		}
		name, ok := columns[key]
		if !ok {
			missing = append(missing, m)
			return m
		}
		return ident(name)
	})
	if len(missing) > 0 {
		return "", fmt.Errorf("unknown placeholders %s in statement", strings.Join(missing, ", "))
	}
	return out, nil
}

func outboxColumns(n store.Names) map[string]string {
	c := n.Outbox
	return map[string]string{
		"id": c.ID, "topic": c.Topic, "key": c.Key, "aggregate_type": c.AggregateType,
		"payload": c.Payload, "headers": c.Headers, "state": c.State, "attempt": c.Attempt,
		"max_attempts": c.MaxAttempts, "scheduled_at": c.ScheduledAt, "created_at": c.CreatedAt,
		"updated_at": c.UpdatedAt, "claimed_at": c.ClaimedAt, "claim_token": c.ClaimToken,
		"lease_expires_at": c.LeaseExpiresAt, "last_error": c.LastError, "sequence": c.Sequence,
	}
}

func inboxColumns(n store.Names) map[string]string {
	c := n.Inbox
	return map[string]string{
		"id": c.ID, "source": c.Source, "idempotency_key": c.IdempotencyKey,
		"aggregate_id": c.AggregateID, "event_type": c.EventType, "payload": c.Payload,
		"headers": c.Headers, "state": c.State, "consumption": c.Consumption,
		"attempt": c.Attempt, "last_error": c.LastError, "scheduled_at": c.ScheduledAt,
		"created_at": c.CreatedAt, "processed_at": c.ProcessedAt, "claimed_at": c.ClaimedAt,
		"claim_token": c.ClaimToken, "lease_expires_at": c.LeaseExpiresAt,
		"correlation_id": c.CorrelationID,
	}
}

func buildStatements(n store.Names) (statements, error) {
	var st statements
	var errs []error
	outbox := func(dst *string, sql string) {
		s, err := render(sql, n.OutboxTable, outboxColumns(n))
		errs = append(errs, err)
		*dst = s
	}
	inbox := func(dst *string, sql string) {
		s, err := render(sql, n.InboxTable, inboxColumns(n))
		errs = append(errs, err)
		*dst = s
	}

	for v := range insertVariant(insertVariants) {
		outbox(&st.outboxInsert[v], outboxInsertSQL(v))
	}
	outbox(&st.outboxClaim, outboxClaimSQL)
	outbox(&st.outboxClaimWindow, outboxClaimWindowSQL)
	outbox(&st.outboxRenew, outboxRenewSQL)
	outbox(&st.outboxMarkSent, outboxMarkSentSQL)
	outbox(&st.outboxRetry, outboxRetrySQL)
	outbox(&st.outboxDefer, outboxDeferSQL)
	outbox(&st.outboxMarkDead, outboxMarkDeadSQL)
	outbox(&st.outboxReclaim, outboxReclaimSQL)
	outbox(&st.outboxReplay, outboxReplaySQL)
	noGen, err := withoutGenerations(outboxReplaySQL)
	errs = append(errs, err)
	outbox(&st.outboxReplayNoGen, noGen)
	outbox(&st.outboxStats, outboxStatsSQL)
	outbox(&st.outboxTopics, outboxTopicsSQL)
	outbox(&st.outboxDeleteFinished, outboxDeleteFinishedSQL)
	outbox(&st.outboxDeleteExcess, outboxDeleteExcessSQL)

	inbox(&st.inboxInsert, inboxInsertSQL)
	inbox(&st.inboxInsertBatch, inboxInsertBatchSQL)
	st.inboxRelayLock = inboxRelayLockSQL
	inbox(&st.inboxRelayClaim, inboxRelayClaimSQL)
	inbox(&st.inboxRelayProcessedBatch, inboxRelayProcessedBatchSQL)
	fence, err := render(inboxRelayForwardFence, n.InboxTable, inboxColumns(n))
	errs = append(errs, err)
	for v := range insertVariant(insertVariants) {
		insert, err := inboxRelayForwardInsertSQL(v)
		errs = append(errs, err)
		var rendered string
		outbox(&rendered, insert)
		st.inboxRelayForward[v] = fence + "\n" + rendered
	}
	batchFence, err := render(inboxRelayForwardBatchFence, n.InboxTable, inboxColumns(n))
	errs = append(errs, err)
	var batchInsert string
	outbox(&batchInsert, inboxRelayForwardBatchInsert)
	st.inboxRelayForwardBatch = batchFence + "\n" + batchInsert
	inbox(&st.inboxRelayDead, inboxRelayDeadSQL)
	inbox(&st.inboxRelayRenew, inboxRelayRenewSQL)
	inbox(&st.inboxRelayReclaim, inboxRelayReclaimSQL)
	inbox(&st.inboxStats, inboxStatsSQL)
	inbox(&st.inboxDeleteFinished, inboxDeleteFinishedSQL)

	st.columnExists = columnExistsSQL
	var err2 error
	st.replay, err2 = buildReplayStatements(n)
	errs = append(errs, err2)
	st.lock, err2 = buildLockStatements(n)
	errs = append(errs, err2)
	return st, errors.Join(errs...)
}

// columnExistsSQL resolves $1 and $3 (quoted table names) through the search path, as every
// other statement does, and tells whether each table exists and has the column $2 and $4.
const columnExistsSQL = `
SELECT to_regclass($1) IS NOT NULL,
       EXISTS (
           SELECT 1 FROM pg_catalog.pg_attribute
           WHERE attrelid = to_regclass($1) AND attname = $2 AND attnum > 0 AND NOT attisdropped),
       to_regclass($3) IS NOT NULL,
       EXISTS (
           SELECT 1 FROM pg_catalog.pg_attribute
           WHERE attrelid = to_regclass($3) AND attname = $4 AND attnum > 0 AND NOT attisdropped)`

// columnProbeSQL is columnExistsSQL without a scan of pg_attribute, which PostgreSQL plans
// and runs at the cost of several milliseconds on a fresh connection (cold catalog caches):
// has_column_privilege finds the column through the catalog cache. It returns NULL when the
// table does not exist (the function is strict) or the column was dropped, and a boolean
// otherwise; a name that is no column of an existing table makes it fail with
// undefined_column (42703), and the name of a system column (ctid, xmin, ...) makes it
// answer true. CheckSchema uses columnExistsSQL in those two cases.
const columnProbeSQL = `
SELECT to_regclass($1) IS NOT NULL,
       has_column_privilege(to_regclass($1), $2, 'SELECT') IS NOT NULL,
       to_regclass($3) IS NOT NULL,
       has_column_privilege(to_regclass($3), $4, 'SELECT') IS NOT NULL`

// systemColumn reports whether name is the name of a PostgreSQL system column.
func systemColumn(name string) bool {
	switch name {
	case "tableoid", "cmax", "xmax", "cmin", "xmin", "ctid":
		return true
	}
	return false
}

// isUndefinedColumn reports whether err is PostgreSQL's undefined_column (42703).
func isUndefinedColumn(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "42703"
}

// micros converts a duration to whole microseconds, the unit that the statements multiply by
// interval '1 microsecond'.
func micros(d time.Duration) int64 { return d.Microseconds() }

// wrapErr adds context to a driver error and translates a unique violation (23505) to
// store.ErrConflict and a data exception (class 22) to store.ErrInvalidValue.
func wrapErr(op string, err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch {
		case pgErr.Code == "23505":
			return fmt.Errorf("%s: %w: %w", op, store.ErrConflict, err)
		case strings.HasPrefix(pgErr.Code, "22"):
			return fmt.Errorf("%s: %w: %w", op, store.ErrInvalidValue, err)
		}
	}
	return fmt.Errorf("%s: %w", op, err)
}

// cleanText makes a Go string storable in a PostgreSQL text column: PostgreSQL refuses the
// NUL byte and invalid UTF-8, and one such error would fail a whole batch.
func cleanText(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	return strings.ReplaceAll(s, "\x00", "")
}

// isUUID reports whether s is a UUID in its canonical text form (either letter case). The
// fenced writes drop a claim whose id or token is not one, so one bad claim never fails a
// batch: such a claim matches no row.
func isUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := 0; i < 36; i++ {
		c := s[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
				return false
			}
		}
	}
	return true
}
