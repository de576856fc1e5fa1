package transform

import (
	"fmt"
	"time"
)

// Vars are the variables that an evaluation binds, by name without the leading $. Each value
// must encode as JSON (strings, numbers, booleans, nil, maps and slices of them); a name that
// Vars leaves out is not bound, and reads as JSONata's undefined. DeliveryVars and SourceVars
// build the variables of each stage.
type Vars map[string]any

// The variable names of the stages (spec/31-transforms-and-templates.md, Variables).
const (
	VarMessageID      = "messageId"
	VarTopic          = "topic"
	VarAttempt        = "attempt"
	VarTimestamp      = "timestamp"
	VarSource         = "source"
	VarHeaders        = "headers"
	VarIdempotencyKey = "idempotencyKey"
	VarEventType      = "eventType"
)

// DeliveryVars returns the variables of the route and destination stages: $messageId (the id of
// the outbox row), $topic, $attempt (0 on the first delivery) and $timestamp (the created_at of
// the row, as ISO-8601 text). $source, $headers, $idempotencyKey and $eventType are not bound.
func DeliveryVars(messageID, topic string, attempt int, createdAt time.Time) Vars {
	return Vars{
		VarMessageID: messageID,
		VarTopic:     topic,
		VarAttempt:   attempt,
		VarTimestamp: FormatTimestamp(createdAt),
	}
}

// Inbound describes a received message for the source stage.
type Inbound struct {
	// MessageID is the id of the new inbox row.
	MessageID string
	// Source is the source name.
	Source string
	// Headers are the received headers, one string value per name, without the credential
	// headers that the source omits. Nil binds an empty object.
	Headers map[string]string
	// IdempotencyKey is the extracted idempotency key; nil binds null.
	IdempotencyKey *string
	// EventType is the extracted event type; nil binds null (and $topic to an empty string).
	EventType *string
	// ReceivedAt is the receipt time.
	ReceivedAt time.Time
}

// SourceVars returns the variables of the source stage: $messageId, $topic (the event type or an
// empty string), $attempt (0), $timestamp (the receipt time), $source, $headers,
// $idempotencyKey and $eventType (each null when not extracted).
func SourceVars(in Inbound) Vars {
	headers := in.Headers
	if headers == nil {
		headers = map[string]string{}
	}
	topic := ""
	var eventType, key any
	if in.EventType != nil {
		topic = *in.EventType
		eventType = *in.EventType
	}
	if in.IdempotencyKey != nil {
		key = *in.IdempotencyKey
	}
	return Vars{
		VarMessageID:      in.MessageID,
		VarTopic:          topic,
		VarAttempt:        0,
		VarTimestamp:      FormatTimestamp(in.ReceivedAt),
		VarSource:         in.Source,
		VarHeaders:        headers,
		VarIdempotencyKey: key,
		VarEventType:      eventType,
	}
}

// FormatTimestamp renders t as ISO-8601 text in UTC the way the original implementation does
// (Java's Instant.toString): seconds always, then a fraction of 3, 6 or 9 digits only when t has
// one, then Z. For example 2026-05-01T12:00:00Z and 2026-05-01T12:00:00.250Z.
func FormatTimestamp(t time.Time) string {
	t = t.UTC()
	s := t.Format("2006-01-02T15:04:05")
	switch ns := t.Nanosecond(); {
	case ns == 0:
	case ns%1_000_000 == 0:
		s += fmt.Sprintf(".%03d", ns/1_000_000)
	case ns%1_000 == 0:
		s += fmt.Sprintf(".%06d", ns/1_000)
	default:
		s += fmt.Sprintf(".%09d", ns)
	}
	return s + "Z"
}
