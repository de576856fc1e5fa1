package queuebox

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
)

// Handler handles one message. It receives the message and an open transaction on the
// worker's database; the library runs the completion in that transaction after the handler
// returns nil, and commits it. Rules for a handler:
//
//  1. Write every change through tx, so that it commits together with the completion.
//  2. Do not commit and do not roll back tx: the library owns both.
//  3. Return an error to fail the message; the retry policy then decides what happens.
//  4. Honour ctx: it is cancelled when the lease is lost (a renewal changed no row, or failed),
//     at the lease's local deadline, and when a shutdown runs out of grace. The library then
//     rolls tx back, whatever the handler returns.
//  5. Deduplicate work outside the database on the message's Source and IdempotencyKey
//     together. A transaction cannot roll back a call to another system, and delivery is at
//     least once.
//
// With Options.MaxConcurrency above 1, the handler runs on several goroutines at once, never
// for two messages of one aggregate.
type Handler func(ctx context.Context, message Message, tx *sql.Tx) error

// Message is one inbox row that the worker claimed. It carries no claim token: only the
// library acts on the row.
type Message struct {
	// ID is the inbox row identifier, a UUID in its canonical text form.
	ID string
	// Source is the source name.
	Source string
	// IdempotencyKey is the deduplication key. The identity of a message is Source and
	// IdempotencyKey together.
	IdempotencyKey string
	// AggregateID is the aggregate identifier, the unit of order, or "" when the row has none.
	AggregateID string
	// EventType is the event type, or "" when the row has none.
	EventType string
	// Payload is the JSON body.
	Payload json.RawMessage
	// Headers holds the stored headers, one string value per name. It is empty, not nil, when
	// there are none.
	Headers map[string]string
	// Attempt is 0 on the first delivery and counts the retries before this one.
	Attempt int
	// CorrelationID is the correlation identifier for logs, or "" when the row has none.
	CorrelationID string
}

// UnmarshalPayload parses the JSON payload into target, as json.Unmarshal does. A payload
// that does not fit target returns the *json.SyntaxError or *json.UnmarshalTypeError of
// encoding/json, so that a retry policy can recognise it with errors.As.
func (m Message) UnmarshalPayload(target any) error {
	return json.Unmarshal(m.Payload, target)
}

// parseHeaders reads the headers column: a JSON object with one string value per name. A
// value that is not a string is kept as its JSON text.
func parseHeaders(raw []byte) (map[string]string, error) {
	out := map[string]string{}
	if len(raw) == 0 || string(raw) == "{}" {
		return out, nil // the common case, without a parse
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		return nil, fmt.Errorf("parsing headers: %w", err)
	}
	for k, v := range fields {
		var s string
		if err := json.Unmarshal(v, &s); err == nil {
			out[k] = s
			continue
		}
		out[k] = string(v)
	}
	return out, nil
}
