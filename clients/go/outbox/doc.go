// Package outbox writes QueueBox outbox rows from application code: one call, inside the
// transaction of the business write, with the column mapping of a renamed outbox table.
//
// spec/17 ("Write outbox rows") leaves the insert to the application's own SQL and lists what
// goes wrong when it is written by hand: a payload that is a JSON string holding JSON (encoded
// twice), a NULL headers column, a key that is not text, a row that joins no transaction.
// Enqueue prevents each of them:
//
//   - Message.Payload is encoded to JSON exactly once: a json.RawMessage or a []byte is taken
//     as JSON text (it must be valid), anything else goes through json.Marshal. A payload whose
//     JSON is null, or a JSON string that itself holds a JSON object, array or string, is
//     refused with ErrInvalidMessage.
//   - Message.Headers is written as a JSON object of strings, "{}" when there is none; the
//     column is never NULL.
//   - Message.Key and Message.AggregateType are Go strings, written as text; "" writes NULL.
//   - The row is written through the caller's transaction only: Enqueue takes a pgx.Tx or a
//     *sql.Tx, never a pool or a *sql.DB, so the message commits or rolls back with the business
//     write.
//   - MaxAttempts and Delay are checked against their bounds before anything is sent.
//
// Enqueue writes the columns topic, key, aggregate_type, payload, headers and, when set,
// max_attempts and scheduled_at, and returns the id that the database gave the row. It leaves
// every column that QueueBox owns (state, attempt, claims, sequence) to its default.
//
// The package-level Enqueue writes the default table "outbox" on PostgreSQL. A Writer built by
// New writes a renamed table or renamed columns (database.outboxTableName and
// database.columnMapping.outbox of the QueueBox configuration) and SQL Server. Every name is
// checked to be a SQL identifier and quoted ("name" on PostgreSQL, [name] on SQL Server), so a
// mapping cannot carry SQL.
package outbox
