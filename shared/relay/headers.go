package relay

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/alternayte/queuebox/shared/forwarded"
	"github.com/alternayte/queuebox/shared/store"
	"github.com/alternayte/queuebox/shared/tracing"
)

// The headers that the relay sets on every outbox row it writes (spec/25, "Headers that the
// relay adds"). Each replaces a received header of the same name in any letter case.
const (
	HeaderInboxID        = forwarded.MarkerInboxID
	HeaderSource         = forwarded.MarkerSource
	HeaderIdempotencyKey = "x-idempotency-key"
	HeaderCorrelationID  = "X-Correlation-Id"
)

var relayHeaderNames = []string{HeaderInboxID, HeaderSource, HeaderIdempotencyKey, HeaderCorrelationID}

// outboxHeaders builds the headers column of the outbox row: the inbox headers, without any
// name that equals a relay header in any letter case, without the hop-by-hop and framing
// headers (forwarded.IsHopByHop) and, when allow is not nil, without any name other than
// X-Correlation-Id that allow does not hold in lower case; then the relay headers. x-inbox-id
// and x-source are the marker by which a destination knows that the other headers came from
// outside (package forwarded). X-Correlation-Id is set, and a received one removed, only when
// the row carries a correlation id; otherwise a received value passes through unchanged.
// Received values keep their JSON form.
//
// Headers that are not a JSON object (only a hand-written row can hold them) are dropped, and
// dropped reports it so the caller can log it; the relay headers are still set.
//
// traceHeaders, when not nil (tracing is on), are the traceparent and tracestate of the
// relay's span: they replace any received traceparent and tracestate, in any letter case, so
// that the delivery continues the relay's trace (docs/tracing.md).
func outboxHeaders(m store.InboxMessage, allow map[string]bool, traceHeaders map[string]string) (headers json.RawMessage, dropped bool, err error) {
	out, dropped := receivedHeaders(m.Headers)
	set := relayHeaders(m)
	if traceHeaders != nil {
		if err := replaceTraceHeaders(out, traceHeaders); err != nil {
			return nil, dropped, err
		}
	}
	keepOnly(out, allow, set, traceHeaders != nil)
	for _, name := range relayHeaderNames {
		v, ok := set[name]
		if !ok {
			continue
		}
		raw, err := json.Marshal(v)
		if err != nil {
			return nil, dropped, fmt.Errorf("encoding header %s: %w", name, err)
		}
		out[name] = raw
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(out); err != nil {
		return nil, dropped, fmt.Errorf("encoding outbox headers: %w", err)
	}
	return bytes.TrimSpace(buf.Bytes()), dropped, nil
}

// receivedHeaders returns the received headers of an inbox row by name, each in its JSON
// form; dropped is true when they are not a JSON object (an empty map is returned then).
func receivedHeaders(raw json.RawMessage) (out map[string]json.RawMessage, dropped bool) {
	out = map[string]json.RawMessage{}
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) > 0 && !bytes.Equal(trimmed, []byte("null")) {
		if json.Unmarshal(trimmed, &out) != nil || out == nil {
			return map[string]json.RawMessage{}, true
		}
	}
	return out, false
}

// relayHeaders returns the values of the relay headers of an inbox row; X-Correlation-Id only
// when the row carries a correlation id.
func relayHeaders(m store.InboxMessage) map[string]string {
	set := map[string]string{
		HeaderInboxID:        m.ID,
		HeaderSource:         m.Source,
		HeaderIdempotencyKey: m.IdempotencyKey,
	}
	if m.CorrelationID != "" {
		set[HeaderCorrelationID] = m.CorrelationID
	}
	return set
}

// replaceTraceHeaders removes the received traceparent and tracestate, in any letter case,
// and sets those of the relay's span.
func replaceTraceHeaders(out map[string]json.RawMessage, traceHeaders map[string]string) error {
	for name := range out {
		if strings.EqualFold(name, tracing.HeaderTraceparent) || strings.EqualFold(name, tracing.HeaderTracestate) {
			delete(out, name)
		}
	}
	for name, v := range traceHeaders {
		raw, err := json.Marshal(v)
		if err != nil {
			return fmt.Errorf("encoding header %s: %w", name, err)
		}
		out[name] = raw
	}
	return nil
}

// keepOnly removes from out the hop-by-hop and framing headers, the headers that allow (when
// not nil) does not hold, X-Correlation-Id aside, and every header named as one of set in any
// letter case. With keepTrace, the relay's own traceparent and tracestate stay whatever allow
// lists.
func keepOnly(out map[string]json.RawMessage, allow map[string]bool, set map[string]string, keepTrace bool) {
	for name := range out {
		lower := strings.ToLower(name)
		if keepTrace && (lower == tracing.HeaderTraceparent || lower == tracing.HeaderTracestate) {
			continue // the relay's own trace context, kept whatever forwardHeaders lists
		}
		if forwarded.IsHopByHop(name) || (allow != nil && !allow[lower] && lower != strings.ToLower(HeaderCorrelationID)) {
			delete(out, name)
			continue
		}
		for relayName := range set {
			if strings.EqualFold(name, relayName) {
				delete(out, name)
				break
			}
		}
	}
}
