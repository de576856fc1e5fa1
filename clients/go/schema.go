package queuebox

import (
	"fmt"
	"regexp"
	"strings"
)

// Dialect names the database that a worker talks to. It selects the SQL statements and their
// parameter syntax.
type Dialect string

const (
	// DialectPostgreSQL is PostgreSQL through database/sql, for example with the pgx driver
	// (github.com/jackc/pgx/v5/stdlib). It is the default.
	DialectPostgreSQL Dialect = "postgresql"
	// DialectSQLServer is SQL Server through database/sql with the go-mssqldb driver
	// (github.com/microsoft/go-mssqldb).
	DialectSQLServer Dialect = "sqlserver"
)

// Schema holds the inbox table name and its column names, for an inbox table that
// database.inboxTableName or database.columnMapping.inbox renames. Start from DefaultSchema and
// change the names that differ; an empty field keeps its default name.
//
// Every name must be a SQL identifier: a letter or "_" first, then letters, digits and "_".
// NewInboxWorker refuses anything else (a quote, a space, a dot, a semicolon), so a name can
// never carry SQL. The library quotes each mapped name as an identifier ("name" on
// PostgreSQL, [name] on SQL Server), so the letter case of a mapped name is kept.
type Schema struct {
	// Table is the inbox table. Default "inbox".
	Table string

	// ID is the row identifier column. Default "id".
	ID string
	// Source is the source name column. Default "source".
	Source string
	// IdempotencyKey is the deduplication key column. Default "idempotency_key".
	IdempotencyKey string
	// AggregateID is the aggregate identifier column. Default "aggregate_id".
	AggregateID string
	// EventType is the event type column. Default "event_type".
	EventType string
	// Payload is the JSON body column. Default "payload".
	Payload string
	// Headers is the stored headers column (schema V10). Default "headers".
	Headers string
	// State is the row state column. Default "state".
	State string
	// Consumption is the push or pull column. Default "consumption".
	Consumption string
	// Attempt is the attempt counter column. Default "attempt".
	Attempt string
	// LastError is the last failure reason column. Default "last_error".
	LastError string
	// ScheduledAt is the due time column. Default "scheduled_at".
	ScheduledAt string
	// CreatedAt is the receipt time column. Default "created_at".
	CreatedAt string
	// ProcessedAt is the completion time column. Default "processed_at".
	ProcessedAt string
	// ClaimedAt is the claim time column. Default "claimed_at".
	ClaimedAt string
	// ClaimToken is the claim token column. Default "claim_token".
	ClaimToken string
	// LeaseExpiresAt is the lease end column. Default "lease_expires_at".
	LeaseExpiresAt string
	// CorrelationID is the correlation identifier column. Default "correlation_id".
	CorrelationID string
}

// DefaultSchema returns the names that the bundled migrations create: the table inbox and its
// columns.
func DefaultSchema() Schema {
	return Schema{
		Table:          "inbox",
		ID:             "id",
		Source:         "source",
		IdempotencyKey: "idempotency_key",
		AggregateID:    "aggregate_id",
		EventType:      "event_type",
		Payload:        "payload",
		Headers:        "headers",
		State:          "state",
		Consumption:    "consumption",
		Attempt:        "attempt",
		LastError:      "last_error",
		ScheduledAt:    "scheduled_at",
		CreatedAt:      "created_at",
		ProcessedAt:    "processed_at",
		ClaimedAt:      "claimed_at",
		ClaimToken:     "claim_token",
		LeaseExpiresAt: "lease_expires_at",
		CorrelationID:  "correlation_id",
	}
}

// schemaField is one name of a Schema: the field name for messages, a pointer to it, and the
// default name.
type schemaField struct {
	field string
	ptr   *string
	def   string
}

// fields lists the names of s with their defaults, the table first.
func (s *Schema) fields() []schemaField {
	d := DefaultSchema()
	return []schemaField{
		{"Table", &s.Table, d.Table},
		{"ID", &s.ID, d.ID},
		{"Source", &s.Source, d.Source},
		{"IdempotencyKey", &s.IdempotencyKey, d.IdempotencyKey},
		{"AggregateID", &s.AggregateID, d.AggregateID},
		{"EventType", &s.EventType, d.EventType},
		{"Payload", &s.Payload, d.Payload},
		{"Headers", &s.Headers, d.Headers},
		{"State", &s.State, d.State},
		{"Consumption", &s.Consumption, d.Consumption},
		{"Attempt", &s.Attempt, d.Attempt},
		{"LastError", &s.LastError, d.LastError},
		{"ScheduledAt", &s.ScheduledAt, d.ScheduledAt},
		{"CreatedAt", &s.CreatedAt, d.CreatedAt},
		{"ProcessedAt", &s.ProcessedAt, d.ProcessedAt},
		{"ClaimedAt", &s.ClaimedAt, d.ClaimedAt},
		{"ClaimToken", &s.ClaimToken, d.ClaimToken},
		{"LeaseExpiresAt", &s.LeaseExpiresAt, d.LeaseExpiresAt},
		{"CorrelationID", &s.CorrelationID, d.CorrelationID},
	}
}

var identifier = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// reservedColumns are the names that the claims give to their computed columns and local
// variables. A column of that name would be read as the computed one.
var reservedColumns = map[string]bool{"qb_now": true, "qb_rank": true, "qb_lock_result": true}

// reservedTables are the names of the WITH parts of the claims and the pseudo-tables of the
// SQL Server OUTPUT clause. A table of that name would be read as that part.
var reservedTables = map[string]bool{
	"clock": true, "due": true, "expired": true, "heads": true, "ready": true, "locked": true,
	"claimed": true, "candidates": true, "ranked": true, "inserted": true, "deleted": true,
}

// resolve returns the schema with empty names set to their defaults, and an error that names
// every name that is not a SQL identifier, is reserved or is used twice.
func (s Schema) resolve() (Schema, error) {
	out := s
	var bad []string
	seen := map[string]string{}
	for _, f := range out.fields() {
		if *f.ptr == "" {
			*f.ptr = f.def
		}
		name := *f.ptr
		switch {
		case !identifier.MatchString(name):
			bad = append(bad, fmt.Sprintf("Schema.%s %q is not a SQL identifier (a letter or _, then letters, digits and _)", f.field, name))
			continue
		case f.field == "Table" && reservedTables[strings.ToLower(name)],
			f.field != "Table" && reservedColumns[strings.ToLower(name)]:
			bad = append(bad, fmt.Sprintf("Schema.%s %q is a name that the statements use for their own parts", f.field, name))
			continue
		}
		if f.field == "Table" {
			continue
		}
		// SQL Server compares names without regard to case in the default collation.
		key := strings.ToLower(name)
		if other, ok := seen[key]; ok {
			bad = append(bad, fmt.Sprintf("Schema.%s %q is also the name of Schema.%s", f.field, name, other))
			continue
		}
		seen[key] = f.field
	}
	if len(bad) > 0 {
		return Schema{}, fmt.Errorf("checking the schema: %s", strings.Join(bad, "; "))
	}
	return out, nil
}

// renames returns the default names that s changes, mapped to their new names.
func (s Schema) renames() map[string]string {
	m := map[string]string{}
	for _, f := range s.fields() {
		if *f.ptr != f.def {
			m[f.def] = *f.ptr
		}
	}
	return m
}
