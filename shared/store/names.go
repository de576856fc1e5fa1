package store

import (
	"fmt"
	"regexp"
	"strings"
)

// OutboxColumns names the columns of the outbox table.
type OutboxColumns struct {
	ID, Topic, Key, AggregateType, Payload, Headers, State, Attempt, MaxAttempts,
	ScheduledAt, CreatedAt, UpdatedAt, ClaimedAt, ClaimToken, LeaseExpiresAt, LastError,
	Sequence string
}

// InboxColumns names the columns of the inbox table.
type InboxColumns struct {
	ID, Source, IdempotencyKey, AggregateID, EventType, Payload, Headers, State, Consumption,
	Attempt, LastError, ScheduledAt, CreatedAt, ProcessedAt, ClaimedAt, ClaimToken,
	LeaseExpiresAt, CorrelationID string
}

// Names holds the table and column names that every statement uses, from
// database.outboxTableName, database.inboxTableName and database.columnMapping.
type Names struct {
	OutboxTable string
	InboxTable  string
	Outbox      OutboxColumns
	Inbox       InboxColumns
}

// DefaultNames returns the names that the bundled migrations create.
func DefaultNames() Names {
	return Names{
		OutboxTable: "outbox",
		InboxTable:  "inbox",
		Outbox: OutboxColumns{
			ID: "id", Topic: "topic", Key: "key", AggregateType: "aggregate_type",
			Payload: "payload", Headers: "headers", State: "state", Attempt: "attempt",
			MaxAttempts: "max_attempts", ScheduledAt: "scheduled_at", CreatedAt: "created_at",
			UpdatedAt: "updated_at", ClaimedAt: "claimed_at", ClaimToken: "claim_token",
			LeaseExpiresAt: "lease_expires_at", LastError: "last_error", Sequence: "sequence",
		},
		Inbox: InboxColumns{
			ID: "id", Source: "source", IdempotencyKey: "idempotency_key",
			AggregateID: "aggregate_id", EventType: "event_type", Payload: "payload",
			Headers: "headers", State: "state", Consumption: "consumption", Attempt: "attempt",
			LastError: "last_error", ScheduledAt: "scheduled_at", CreatedAt: "created_at",
			ProcessedAt: "processed_at", ClaimedAt: "claimed_at", ClaimToken: "claim_token",
			LeaseExpiresAt: "lease_expires_at", CorrelationID: "correlation_id",
		},
	}
}

var identifier = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// IsIdentifier reports whether s is a SQL identifier as the configuration allows it: a
// letter or _ first, then letters, digits and _.
func IsIdentifier(s string) bool { return identifier.MatchString(s) }

// Validate checks that every name is a SQL identifier, so that a name can never carry SQL.
func (n Names) Validate() error {
	var bad []string
	check := func(what, v string) {
		if !IsIdentifier(v) {
			bad = append(bad, fmt.Sprintf("%s %q", what, v))
		}
	}
	check("outbox table", n.OutboxTable)
	check("inbox table", n.InboxTable)
	for _, c := range n.outboxList() {
		check("outbox column", c)
	}
	for _, c := range n.inboxList() {
		check("inbox column", c)
	}
	if len(bad) > 0 {
		return fmt.Errorf("store: names are not SQL identifiers: %s", strings.Join(bad, ", "))
	}
	return nil
}

func (n Names) outboxList() []string {
	c := n.Outbox
	return []string{c.ID, c.Topic, c.Key, c.AggregateType, c.Payload, c.Headers, c.State,
		c.Attempt, c.MaxAttempts, c.ScheduledAt, c.CreatedAt, c.UpdatedAt, c.ClaimedAt,
		c.ClaimToken, c.LeaseExpiresAt, c.LastError, c.Sequence}
}

func (n Names) inboxList() []string {
	c := n.Inbox
	return []string{c.ID, c.Source, c.IdempotencyKey, c.AggregateID, c.EventType, c.Payload,
		c.Headers, c.State, c.Consumption, c.Attempt, c.LastError, c.ScheduledAt, c.CreatedAt,
		c.ProcessedAt, c.ClaimedAt, c.ClaimToken, c.LeaseExpiresAt, c.CorrelationID}
}
