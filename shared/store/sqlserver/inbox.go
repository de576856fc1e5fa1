package sqlserver

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	mssql "github.com/microsoft/go-mssqldb"

	"github.com/alternayte/queuebox/shared/store"
)

// InboxInsert stores a message once per source and idempotency key. A duplicate, including
// one that a concurrent insert wrote first (2627 or 2601), is reported as Duplicate.
func (s *Store) InboxInsert(ctx context.Context, params store.InboxInsertParams) (store.InboxInsertResult, error) {
	args, err := inboxInsertArgs(params)
	if err != nil {
		return store.InboxInsertResult{}, fmt.Errorf("inserting inbox row: %w", err)
	}
	var id mssql.UniqueIdentifier
	_, err = retryDeadlock(ctx, func() (struct{}, error) {
		return struct{}{}, s.db.QueryRowContext(ctx, s.stmt.inboxInsert, args...).Scan(&id)
	})
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return store.InboxInsertResult{Duplicate: true}, nil
	case isUniqueViolation(err):
		return store.InboxInsertResult{Duplicate: true}, nil
	case err != nil:
		return store.InboxInsertResult{}, fmt.Errorf("inserting inbox row: %w", translate(err))
	}
	return store.InboxInsertResult{ID: uuidString(id)}, nil
}

// InboxInsertBatch stores the messages in one transaction: one result per message, in
// order. Each distinct message runs inboxInsertSQL (the duplicate check under UPDLOCK and
// HOLDLOCK) inside the transaction, so a message that repeats an earlier one of the batch
// finds it, as does a message whose key is already stored; a message that repeats an earlier
// one with the very same source and key is not sent at all. The messages are written in
// source, key order, so that two batches that share keys mostly lock them in the same order;
// a batch chosen as a deadlock victim runs again from the start. Any other error rolls the
// whole batch back. A batch of one runs InboxInsert.
func (s *Store) InboxInsertBatch(ctx context.Context, params []store.InboxInsertParams) ([]store.InboxInsertResult, error) {
	if len(params) == 0 {
		return nil, nil
	}
	if len(params) == 1 {
		res, err := s.InboxInsert(ctx, params[0])
		if err != nil {
			return nil, err
		}
		return []store.InboxInsertResult{res}, nil
	}
	type keyOf struct{ source, key string }
	first := make(map[keyOf]bool, len(params))
	var order []int
	args := make([][]any, len(params))
	for i, p := range params {
		k := keyOf{p.Source, p.IdempotencyKey}
		if first[k] {
			continue
		}
		first[k] = true
		a, err := inboxInsertArgs(p)
		if err != nil {
			return nil, fmt.Errorf("inserting inbox rows: message %d: %w", i, err)
		}
		args[i] = a
		order = append(order, i)
	}
	slices.SortFunc(order, func(a, b int) int {
		if c := strings.Compare(params[a].Source, params[b].Source); c != 0 {
			return c
		}
		return strings.Compare(params[a].IdempotencyKey, params[b].IdempotencyKey)
	})
	ids, err := retryDeadlock(ctx, func() (map[int]string, error) { return s.insertBatch(ctx, order, args) })
	if err != nil {
		return nil, fmt.Errorf("inserting inbox rows: %w", translate(err))
	}
	results := make([]store.InboxInsertResult, len(params))
	for i := range results {
		if id, ok := ids[i]; ok {
			results[i].ID = id
		} else {
			results[i].Duplicate = true
		}
	}
	return results, nil
}

// insertBatch runs the transaction of InboxInsertBatch once: the insert of each message of
// order, then the commit. It returns the ids of the inserted messages by index.
func (s *Store) insertBatch(ctx context.Context, order []int, args [][]any) (map[int]string, error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("beginning transaction: %w", err)
	}
	ids := make(map[int]string, len(order))
	for _, i := range order {
		var id mssql.UniqueIdentifier
		err := tx.QueryRowContext(ctx, s.stmt.inboxInsert, args[i]...).Scan(&id)
		switch {
		case errors.Is(err, sql.ErrNoRows), isUniqueViolation(err):
			// A duplicate: the statement wrote nothing, and the transaction goes on (a
			// constraint violation ends the statement only).
		case err != nil:
			rollback(tx)
			return nil, err
		default:
			ids[i] = uuidString(id)
		}
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("committing: %w", err)
	}
	return ids, nil
}

// inboxInsertArgs returns the ten arguments of inboxInsertSQL.
func inboxInsertArgs(p store.InboxInsertParams) ([]any, error) {
	consumption := p.Consumption
	if consumption == "" {
		consumption = store.ConsumptionPush
	}
	if consumption != store.ConsumptionPush && consumption != store.ConsumptionPull {
		return nil, fmt.Errorf("consumption %q is not %s or %s", consumption, store.ConsumptionPush, store.ConsumptionPull)
	}
	state := p.State
	if state == "" {
		state = store.InboxPending
	}
	if state != store.InboxPending && state != store.InboxDead {
		return nil, fmt.Errorf("state %q is not %s or %s", state, store.InboxPending, store.InboxDead)
	}
	headers := "{}"
	if p.Headers != nil {
		headers = string(p.Headers)
	}
	// last_error is written with a dead state only.
	var lastError any
	if state == store.InboxDead {
		lastError = nullIfEmpty(p.LastError)
	}
	return []any{
		p.Source, p.IdempotencyKey, nullIfEmpty(p.AggregateID), nullIfEmpty(p.EventType),
		string(p.Payload), headers, nullIfEmpty(p.CorrelationID), consumption, state,
		lastError,
	}, nil
}

// InboxRelayClaim claims up to Limit pending push rows under the relay lock, at most one per
// aggregate and none of an aggregate that has a processing push row, and returns them in
// created_at, id order.
func (s *Store) InboxRelayClaim(ctx context.Context, params store.InboxRelayClaimParams) ([]store.InboxMessage, error) {
	args, err := claimArgs(params.Limit, params.Lease)
	if err != nil {
		return nil, fmt.Errorf("claiming inbox relay batch: %w", err)
	}
	msgs, err := retryDeadlock(ctx, func() ([]store.InboxMessage, error) {
		return claimInTx(ctx, s.db, s.stmt.inboxRelayClaim, args, scanInboxMessage)
	})
	if err != nil {
		return nil, fmt.Errorf("claiming inbox relay batch: %w", err)
	}
	// OUTPUT returns the rows in no particular order; sort them as ORDER BY created_at, id
	// does on SQL Server.
	slices.SortFunc(msgs, func(a, b store.InboxMessage) int {
		if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
			return c
		}
		return compareUniqueIdentifiers(a.ID, b.ID)
	})
	return msgs, nil
}

func scanInboxMessage(rows *sql.Rows) (store.InboxMessage, error) {
	var (
		id, token                             mssql.UniqueIdentifier
		aggregateID, eventType, correlationID sql.NullString
		payload, headers                      string
		m                                     store.InboxMessage
		createdAt, leaseExpiresAt             time.Time
	)
	err := rows.Scan(&id, &m.Source, &m.IdempotencyKey, &aggregateID, &eventType, &payload,
		&headers, &correlationID, &m.Consumption, &m.Attempt, &createdAt, &token, &leaseExpiresAt)
	if err != nil {
		return store.InboxMessage{}, fmt.Errorf("scanning inbox row: %w", err)
	}
	m.ID = uuidString(id)
	m.AggregateID = aggregateID.String
	m.EventType = eventType.String
	m.CorrelationID = correlationID.String
	m.Payload = json.RawMessage(payload)
	m.Headers = jsonObject(headers)
	m.CreatedAt = createdAt.UTC()
	m.ClaimToken = uuidString(token)
	m.LeaseExpiresAt = leaseExpiresAt.UTC()
	return m, nil
}

// guidOrder is the order in which SQL Server compares the bytes of a UNIQUEIDENTIFIER, as
// indexes into its RFC 4122 (text order) bytes: the last six bytes first, the first four last.
var guidOrder = [16]int{10, 11, 12, 13, 14, 15, 8, 9, 7, 6, 5, 4, 3, 2, 1, 0}

// compareUniqueIdentifiers compares two canonical UUID strings as SQL Server orders
// UNIQUEIDENTIFIER values.
func compareUniqueIdentifiers(a, b string) int {
	var ua, ub mssql.UniqueIdentifier
	if ua.Scan(a) != nil || ub.Scan(b) != nil {
		switch {
		case a < b:
			return -1
		case a > b:
			return 1
		}
		return 0
	}
	for _, i := range guidOrder {
		switch {
		case ua[i] < ub[i]:
			return -1
		case ua[i] > ub[i]:
			return 1
		}
	}
	return 0
}

// InboxRelayForward marks the inbox row processed through the fence and inserts the outbox
// row, in one transaction. When the fence fails it rolls back and returns false, so that no
// outbox row exists for a lost claim.
func (s *Store) InboxRelayForward(ctx context.Context, params store.InboxForwardParams) (bool, error) {
	fence, ok := fenceArgs(params.Claim)
	if !ok {
		return false, nil
	}
	return retryDeadlock(ctx, func() (bool, error) { return s.forward(ctx, fence, params.Outbox) })
}

// forward runs the transaction of InboxRelayForward once.
func (s *Store) forward(ctx context.Context, fence []any, outbox store.OutboxInsertParams) (bool, error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return false, fmt.Errorf("forwarding inbox row: beginning transaction: %w", err)
	}
	res, err := tx.ExecContext(ctx, s.stmt.inboxRelayProcessed, fence...)
	if err != nil {
		rollback(tx)
		return false, fmt.Errorf("forwarding inbox row: marking it processed: %w", translate(err))
	}
	n, err := res.RowsAffected()
	if err != nil {
		rollback(tx)
		return false, fmt.Errorf("forwarding inbox row: reading the row count: %w", err)
	}
	if n == 0 {
		if err := tx.Rollback(); err != nil {
			return false, fmt.Errorf("forwarding inbox row: rolling back a lost claim: %w", err)
		}
		return false, nil
	}
	if _, err := s.outboxInsert(ctx, txRower(tx), outbox); err != nil {
		rollback(tx)
		return false, fmt.Errorf("forwarding inbox row: inserting outbox row: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return false, fmt.Errorf("forwarding inbox row: committing: %w", translate(err))
	}
	return true, nil
}

// InboxRelayDead marks a claimed row dead through the fence and reports whether it did.
func (s *Store) InboxRelayDead(ctx context.Context, claim store.Claim, lastError string) (bool, error) {
	fence, ok := fenceArgs(claim)
	if !ok {
		return false, nil
	}
	n, err := s.execCount(ctx, s.stmt.inboxRelayDead, append(fence, lastError)...)
	if err != nil {
		return false, fmt.Errorf("marking inbox row dead: %w", err)
	}
	return n > 0, nil
}

// InboxRelayRenew extends the lease of a claim whose fence still holds.
func (s *Store) InboxRelayRenew(ctx context.Context, claim store.Claim, lease time.Duration) (bool, error) {
	if lease <= 0 {
		return false, fmt.Errorf("renewing inbox lease: lease %s is not above 0", lease)
	}
	leaseMS, err := durationMS(lease)
	if err != nil {
		return false, fmt.Errorf("renewing inbox lease: lease: %w", err)
	}
	fence, ok := fenceArgs(claim)
	if !ok {
		return false, nil
	}
	n, err := s.execCount(ctx, s.stmt.inboxRelayRenew, append(fence, leaseMS)...)
	if err != nil {
		return false, fmt.Errorf("renewing inbox lease: %w", err)
	}
	return n > 0, nil
}

// fenceArgs returns @p1 id and @p2 token of a single fenced write; false when the claim
// cannot hold a fence because its id or token is not a UUID.
func fenceArgs(c store.Claim) ([]any, bool) {
	id, okID := canonicalUUID(c.ID)
	token, okToken := canonicalUUID(c.Token)
	if !okID || !okToken {
		return nil, false
	}
	return []any{id, token}, true
}

// InboxRelayReclaim returns every processing push row whose lease expired to pending and
// returns the count.
func (s *Store) InboxRelayReclaim(ctx context.Context) (int64, error) {
	n, err := s.execCount(ctx, s.stmt.inboxRelayReclaim)
	if err != nil {
		return 0, fmt.Errorf("reclaiming inbox rows: %w", err)
	}
	return n, nil
}

// InboxStats returns the count of pending push and pull rows and the age of the oldest.
func (s *Store) InboxStats(ctx context.Context) (store.InboxStats, error) {
	var stats store.InboxStats
	var ageMS sql.NullInt64
	_, err := retryDeadlock(ctx, func() (struct{}, error) {
		return struct{}{}, s.db.QueryRowContext(ctx, s.stmt.inboxStats).Scan(&stats.Pending, &ageMS)
	})
	if err != nil {
		return store.InboxStats{}, fmt.Errorf("reading inbox stats: %w", err)
	}
	stats.OldestPendingAge = ageFromMS(ageMS)
	return stats, nil
}

// InboxDeleteFinished deletes at most Limit processed or dead rows whose created_at is older
// than MaxAge by the database clock, and returns the count.
func (s *Store) InboxDeleteFinished(ctx context.Context, params store.DeleteFinishedParams) (int64, error) {
	args, err := deleteFinishedArgs(params)
	if err != nil {
		return 0, fmt.Errorf("deleting finished inbox rows: %w", err)
	}
	n, err := s.execCount(ctx, s.stmt.inboxDeleteFinished, args...)
	if err != nil {
		return 0, fmt.Errorf("deleting finished inbox rows: %w", err)
	}
	return n, nil
}
