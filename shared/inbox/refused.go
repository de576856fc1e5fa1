package inbox

import (
	"context"
	"log/slog"
	"strconv"

	"github.com/alternayte/queuebox/shared/filter"
	"github.com/alternayte/queuebox/shared/store"
)

// RefusalCause is why a broker source refuses to store a message as it was received, beyond
// the causes of spec/07 (a body that is not JSON, a failed transform), which the intake finds
// itself. Each cause has a counter of its own (SourceMetrics), outside spec/28's families.
type RefusalCause uint8

// The causes of a source's refusal.
const (
	// RefusedUndecodable: the broker's client library cannot decode the message (a RabbitMQ
	// header table nested too deep or with too many entries). Headers holds what the source
	// could keep of the headers (the raw bytes as base64:), and the header filter does not run,
	// since the headers it would read are unknown.
	RefusedUndecodable RefusalCause = iota + 1
	// RefusedTooLarge: the body is larger than the source's maxBodyBytes. The body is not
	// stored; the payload names its size.
	RefusedTooLarge
)

// Refusal makes a delivery a dead row whatever its body, with Text as its last_error.
type Refusal struct {
	// Cause picks the counter and what is kept of the body.
	Cause RefusalCause
	// Text is the row's last_error. It must hold no secret.
	Text string
}

// SourceMetrics counts what a broker source does outside the families of spec/28: a Metrics
// that also implements it (*metrics.Registry does) receives these counts; another Metrics
// does not. Implementations must be safe for concurrent use.
type SourceMetrics interface {
	// InboxUndecodable counts queuebox_inbox_undecodable_total{source}: messages that the
	// client library could not decode, stored as dead rows.
	InboxUndecodable(source string)
	// InboxTooLarge counts queuebox_inbox_too_large_total{source}: messages whose body is
	// over the source's maxBodyBytes, stored as dead rows without the body.
	InboxTooLarge(source string)
	// InboxTombstoneSkipped counts queuebox_inbox_tombstones_skipped_total{source}: Kafka
	// tombstones acknowledged without a row (skipTombstones).
	InboxTombstoneSkipped(source string)
}

// nopSourceMetrics discards the counts of a Metrics that does not implement SourceMetrics.
type nopSourceMetrics struct{}

func (nopSourceMetrics) InboxUndecodable(string)      {}
func (nopSourceMetrics) InboxTooLarge(string)         {}
func (nopSourceMetrics) InboxTombstoneSkipped(string) {}

// sourceMetricsOf returns m's SourceMetrics, or one that discards.
func sourceMetricsOf(m Metrics) SourceMetrics {
	if sm, ok := m.(SourceMetrics); ok {
		return sm
	}
	return nopSourceMetrics{}
}

// TombstoneSkipped counts a Kafka tombstone that the source acknowledged without a row.
func (in *Intake) TombstoneSkipped() {
	sourceMetricsOf(in.rules.metrics).InboxTombstoneSkipped(in.rules.name)
}

// prepareRefused turns a delivery refused by f into its dead row: the attributes
// from what can be read (the body when it is JSON and stored, the headers when they were
// decoded, the broker's identifiers, else the digest of the body), the payload as the body
// (JSON), {"raw": text} (not JSON) or {"bodyBytes": n} (too large), and the refusal's text as
// last_error. The transform does not run. False means that the header filter dropped it.
//
// The source's maxBodyBytes holds for every refusal: an undecodable message whose body is
// over it keeps no body either, its last_error names both causes, and it counts in both
// metrics.
func (in *Intake) prepareRefused(ctx context.Context, d *Delivery, f *Refusal) (store.InboxInsertParams, bool) {
	r := in.rules
	tooLarge := f.Cause == RefusedTooLarge
	if !tooLarge && in.tooLarge(d.Body) {
		tooLarge = true
		f = &Refusal{Cause: f.Cause, Text: f.Text + "; and " + lowerFirst(in.tooLargeText(d.Body))}
	}
	lookup := filter.FoldLookup(d.Headers)
	if f.Cause != RefusedUndecodable && !r.pass(lookup) {
		return store.InboxInsertParams{}, false
	}
	m := &message{body: d.Body, headers: d.Headers, brokerKey: d.BrokerKey,
		recordKey: d.RecordKey, correlationID: r.correlation(lookup, d.CorrelationID), receivedAt: r.now()}
	p := store.InboxInsertParams{
		Source:        r.name,
		CorrelationID: m.correlationID,
		Consumption:   r.consumption,
		State:         store.InboxDead,
		LastError:     f.Text,
	}
	var fromBody *identifiers
	switch {
	case tooLarge:
		p.Payload = []byte(`{"bodyBytes":` + strconv.Itoa(len(d.Body)) + `}`)
	case parseJSON(d.Body):
		p.Payload = d.Body
		fromBody = new(identifiers)
		var found [attrCount]bool
		selectValues(d.Body, r.paths[:], fromBody[:], found[:])
	default:
		p.Payload = rawPayload(string(d.Body))
	}
	var ids identifiers
	for a := range ids {
		var v *string
		if fromBody != nil {
			v = &fromBody[a]
		}
		ids[a], _ = r.attrs[a].resolve(v, m, lookup, r.keyLength.fits)
	}
	p.IdempotencyKey, p.EventType, p.AggregateID = ids[attrKey], ids[attrEventType], ids[attrAggregate]
	p.Headers, _ = encodeHeaders(cleanHeaders(d.Headers))
	sm := sourceMetricsOf(r.metrics)
	if f.Cause == RefusedUndecodable {
		sm.InboxUndecodable(r.name)
	}
	if tooLarge {
		sm.InboxTooLarge(r.name)
	}
	if f.Cause != RefusedUndecodable { // the source logs these with what it knows of them
		r.logger(p.CorrelationID).WarnContext(ctx, "inbox: storing a message the source refused as a dead row",
			slog.String("idempotency_key", p.IdempotencyKey), slog.String("reason", f.Text))
	}
	return p, true
}

// lowerFirst returns s with its first letter, an ASCII one, in lower case.
func lowerFirst(s string) string {
	if s != "" && s[0] >= 'A' && s[0] <= 'Z' {
		return string(s[0]+'a'-'A') + s[1:]
	}
	return s
}
