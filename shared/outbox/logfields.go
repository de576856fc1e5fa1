package outbox

import (
	"encoding/json"
	"log/slog"
	"strings"

	"go.opentelemetry.io/otel/trace"

	"github.com/alternayte/queuebox/shared/store"
	"github.com/alternayte/queuebox/shared/tracing"
)

// correlationHeader is the header of a row that names the message's correlation identifier
// (spec/17: an application puts it in the row's headers to follow one message through every
// log line). Its name is matched in any letter case.
const correlationHeader = "X-Correlation-Id"

// CorrelationID returns the X-Correlation-Id of a row's headers (a JSON object), matched in
// any letter case, or "" when the headers hold none or are not a JSON object. A value that is
// not a JSON string is returned as its JSON text.
func CorrelationID(headers json.RawMessage) string {
	if len(headers) == 0 || !strings.Contains(strings.ToLower(string(headers)), "x-correlation-id") {
		return ""
	}
	var raw map[string]json.RawMessage
	if json.Unmarshal(headers, &raw) != nil {
		return ""
	}
	for k, v := range raw {
		if !strings.EqualFold(k, correlationHeader) {
			continue
		}
		var s string
		if json.Unmarshal(v, &s) == nil {
			return s
		}
		return string(v)
	}
	return ""
}

// rowAttrs returns the attributes that name a row in each log line about it: message_id,
// destination (empty when no route takes the row), topic, attempt and, when the row's headers
// hold one, correlation_id. It is built only for a line that is written.
func rowAttrs(row store.OutboxMessage, destination string) []any {
	attrs := make([]any, 0, 5)
	attrs = append(attrs,
		slog.String("message_id", row.ID),
		slog.String("destination", destination),
		slog.String("topic", row.Topic),
		slog.Int("attempt", row.Attempt))
	if c := CorrelationID(row.Headers); c != "" {
		attrs = append(attrs, slog.String("correlation_id", c))
	}
	return attrs
}

// destinationOf returns the destination that the first matching route gives the row's topic,
// or "" when no route takes it.
func (p *Poller) destinationOf(row store.OutboxMessage) string {
	if rt, ok := p.routes.Match(row.Topic); ok {
		return rt.Destination
	}
	return ""
}

// rowLog returns the logger of the lines about one row. sc is the row's delivery span when
// tracing is on (its trace_id and span_id join the line), or the zero SpanContext.
func (p *Poller) rowLog(row store.OutboxMessage, destination string, sc trace.SpanContext) *slog.Logger {
	attrs := rowAttrs(row, destination)
	if sc.IsValid() {
		attrs = append(attrs, tracing.SpanLogAttrs(sc)...)
	}
	return p.log.With(attrs...)
}
