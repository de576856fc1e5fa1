package config

// The default table names.
const (
	DefaultOutboxTableName = "outbox"
	DefaultInboxTableName  = "inbox"
)

// ColumnMapping is database.columnMapping: the column names of both tables.
type ColumnMapping struct {
	// Outbox holds the names of the outbox table's columns, one key per column; the default of
	// each is the column's name in the bundled migrations.
	Outbox OutboxColumns `yaml:"outbox"`
	// Inbox holds the names of the inbox table's columns, one key per column; the default of
	// each is the column's name in the bundled migrations.
	Inbox InboxColumns `yaml:"inbox"`
}

// OutboxColumns is database.columnMapping.outbox: one SQL identifier per column of the outbox
// table. Each field's default is the column name in its comment.
type OutboxColumns struct {
	ID             string `yaml:"id"`             // id
	Topic          string `yaml:"topic"`          // topic
	Key            string `yaml:"key"`            // key
	AggregateType  string `yaml:"aggregateType"`  // aggregate_type
	Payload        string `yaml:"payload"`        // payload
	Headers        string `yaml:"headers"`        // headers
	State          string `yaml:"state"`          // state
	Attempt        string `yaml:"attempt"`        // attempt
	MaxAttempts    string `yaml:"maxAttempts"`    // max_attempts
	ScheduledAt    string `yaml:"scheduledAt"`    // scheduled_at
	CreatedAt      string `yaml:"createdAt"`      // created_at
	UpdatedAt      string `yaml:"updatedAt"`      // updated_at
	ClaimedAt      string `yaml:"claimedAt"`      // claimed_at
	ClaimToken     string `yaml:"claimToken"`     // claim_token
	LeaseExpiresAt string `yaml:"leaseExpiresAt"` // lease_expires_at
	LastError      string `yaml:"lastError"`      // last_error
	Sequence       string `yaml:"sequence"`       // sequence
}

// DefaultOutboxColumns returns the default outbox column names.
func DefaultOutboxColumns() OutboxColumns {
	return OutboxColumns{
		ID:             "id",
		Topic:          "topic",
		Key:            "key",
		AggregateType:  "aggregate_type",
		Payload:        "payload",
		Headers:        "headers",
		State:          "state",
		Attempt:        "attempt",
		MaxAttempts:    "max_attempts",
		ScheduledAt:    "scheduled_at",
		CreatedAt:      "created_at",
		UpdatedAt:      "updated_at",
		ClaimedAt:      "claimed_at",
		ClaimToken:     "claim_token",
		LeaseExpiresAt: "lease_expires_at",
		LastError:      "last_error",
		Sequence:       "sequence",
	}
}

// All returns every column name, in the order of the documentation's table.
func (c OutboxColumns) All() []string {
	return []string{c.ID, c.Topic, c.Key, c.AggregateType, c.Payload, c.Headers, c.State,
		c.Attempt, c.MaxAttempts, c.ScheduledAt, c.CreatedAt, c.UpdatedAt, c.ClaimedAt,
		c.ClaimToken, c.LeaseExpiresAt, c.LastError, c.Sequence}
}

// InboxColumns is database.columnMapping.inbox: one SQL identifier per column of the inbox
// table. Each field's default is the column name in its comment.
type InboxColumns struct {
	ID             string `yaml:"id"`             // id
	Source         string `yaml:"source"`         // source
	IdempotencyKey string `yaml:"idempotencyKey"` // idempotency_key
	AggregateID    string `yaml:"aggregateId"`    // aggregate_id
	EventType      string `yaml:"eventType"`      // event_type
	Payload        string `yaml:"payload"`        // payload
	State          string `yaml:"state"`          // state
	CreatedAt      string `yaml:"createdAt"`      // created_at
	ProcessedAt    string `yaml:"processedAt"`    // processed_at
	ClaimedAt      string `yaml:"claimedAt"`      // claimed_at
	ClaimToken     string `yaml:"claimToken"`     // claim_token
	LeaseExpiresAt string `yaml:"leaseExpiresAt"` // lease_expires_at
	CorrelationID  string `yaml:"correlationId"`  // correlation_id
	Consumption    string `yaml:"consumption"`    // consumption
	ScheduledAt    string `yaml:"scheduledAt"`    // scheduled_at
	Attempt        string `yaml:"attempt"`        // attempt
	LastError      string `yaml:"lastError"`      // last_error
	Headers        string `yaml:"headers"`        // headers
}

// DefaultInboxColumns returns the default inbox column names.
func DefaultInboxColumns() InboxColumns {
	return InboxColumns{
		ID:             "id",
		Source:         "source",
		IdempotencyKey: "idempotency_key",
		AggregateID:    "aggregate_id",
		EventType:      "event_type",
		Payload:        "payload",
		State:          "state",
		CreatedAt:      "created_at",
		ProcessedAt:    "processed_at",
		ClaimedAt:      "claimed_at",
		ClaimToken:     "claim_token",
		LeaseExpiresAt: "lease_expires_at",
		CorrelationID:  "correlation_id",
		Consumption:    "consumption",
		ScheduledAt:    "scheduled_at",
		Attempt:        "attempt",
		LastError:      "last_error",
		Headers:        "headers",
	}
}

// All returns every column name, in the order of the documentation's table.
func (c InboxColumns) All() []string {
	return []string{c.ID, c.Source, c.IdempotencyKey, c.AggregateID, c.EventType, c.Payload,
		c.State, c.CreatedAt, c.ProcessedAt, c.ClaimedAt, c.ClaimToken, c.LeaseExpiresAt,
		c.CorrelationID, c.Consumption, c.ScheduledAt, c.Attempt, c.LastError, c.Headers}
}

// Tables is the mapped schema that the stores build their statements from: both table names
// and every column name, unquoted. A store quotes each name as an identifier of its dialect.
type Tables struct {
	// Outbox is the name of the outbox table.
	Outbox string
	// Inbox is the name of the inbox table.
	Inbox string
	// OutboxColumns holds the outbox column names.
	OutboxColumns OutboxColumns
	// InboxColumns holds the inbox column names.
	InboxColumns InboxColumns
}

// DefaultTables returns the default schema: tables outbox and inbox with the default columns.
func DefaultTables() Tables {
	return Tables{
		Outbox:        DefaultOutboxTableName,
		Inbox:         DefaultInboxTableName,
		OutboxColumns: DefaultOutboxColumns(),
		InboxColumns:  DefaultInboxColumns(),
	}
}

// Tables returns the table and column names of the database section.
func (d *Database) Tables() Tables {
	return Tables{
		Outbox:        d.OutboxTableName,
		Inbox:         d.InboxTableName,
		OutboxColumns: d.ColumnMapping.Outbox,
		InboxColumns:  d.ColumnMapping.Inbox,
	}
}

// renamedSettings returns the key paths of every table or column whose name differs from its
// default, in the documentation's order.
func (d *Database) renamedSettings() []string {
	var out []string
	if d.OutboxTableName != DefaultOutboxTableName {
		out = append(out, "database.outboxTableName")
	}
	if d.InboxTableName != DefaultInboxTableName {
		out = append(out, "database.inboxTableName")
	}
	out = append(out, renamedColumns("database.columnMapping.outbox", outboxColumnKeys, d.ColumnMapping.Outbox.All(), DefaultOutboxColumns().All())...)
	out = append(out, renamedColumns("database.columnMapping.inbox", inboxColumnKeys, d.ColumnMapping.Inbox.All(), DefaultInboxColumns().All())...)
	return out
}

// The column keys, in the order of All.
var (
	outboxColumnKeys = []string{"id", "topic", "key", "aggregateType", "payload", "headers", "state",
		"attempt", "maxAttempts", "scheduledAt", "createdAt", "updatedAt", "claimedAt",
		"claimToken", "leaseExpiresAt", "lastError", "sequence"}
	inboxColumnKeys = []string{"id", "source", "idempotencyKey", "aggregateId", "eventType", "payload",
		"state", "createdAt", "processedAt", "claimedAt", "claimToken", "leaseExpiresAt",
		"correlationId", "consumption", "scheduledAt", "attempt", "lastError", "headers"}
)

func renamedColumns(prefix string, keys, got, def []string) []string {
	var out []string
	for i, k := range keys {
		if got[i] != def[i] {
			out = append(out, prefix+"."+k)
		}
	}
	return out
}
