package inbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/alternayte/queuebox/shared/filter"
	"github.com/alternayte/queuebox/shared/store"
)

// This file holds the rules that every source follows, HTTP or broker, so that a rule of
// spec/ holds for every source by construction: the header filter, the correlation
// identifier, the JSON document, the idempotency key, the event type and the aggregate
// identifier with their length limits, the source transform with its onError strategy, the
// counting of the stored rows and the relay wake. The HTTP route (inbox.go) and the broker
// intake (intake.go) each compile one rules value per source and differ only where spec/25
// and spec/26 make them differ: what a kind of source reads (a kind value, as data), and
// what it does with a message that cannot be stored as received (the HTTP route answers
// 400 or 422, a broker source stores a dead row).

// attr names one of the three attributes of a message.
type attr uint8

// The attributes, as indexes of identifiers and of rules.attrs.
const (
	attrKey attr = iota
	attrEventType
	attrAggregate
	attrCount
)

// identifiers are the resolved attributes of a message, by attr.
type identifiers [attrCount]string

// origin is one place from which an attribute is read.
type origin uint8

// The origins of an attribute.
const (
	// fromPath is the attribute's definite JSONPath in the body.
	fromPath origin = iota + 1
	// fromHeader is the attribute header (attributeHeaders), in any letter case.
	fromHeader
	// fromBrokerKey is the broker's identifier of the message (Delivery.BrokerKey).
	fromBrokerKey
	// fromRecordKey is the Kafka record key (Delivery.RecordKey).
	fromRecordKey
	// fromDigest is sha256:<hex> of the body; it always gives a value.
	fromDigest
)

// kind is what sets the sources of one kind apart: from where, in which order, each
// attribute is read (spec/25 "Headers that QueueBox reads"), the order in which the length
// limits are checked, the default idempotency key path, and whether the error texts name the
// JSONPath.
type kind struct {
	// orders are the origins of each attribute; the first that gives a value wins. A key
	// that no origin gives is refused ("Missing idempotency key at ...").
	orders [attrCount][]origin
	// checks is the order in which the lengths are checked; the first value too long names
	// the refusal.
	checks [attrCount]attr
	// defaultKeyPath is the idempotency key path of a source that sets none; empty: the
	// path is required.
	defaultKeyPath string
	// textsNamePath makes the texts of a value too long name its JSONPath ("Idempotency key
	// at $.id exceeds 255 characters"), as the 400 answers of spec/26 do. A broker's value
	// may come from a header, so its last_error names the attribute only.
	textsNamePath bool
}

// httpKind: an HTTP source takes the three attributes from the body only, and refuses a
// body without an idempotency key (spec/25, spec/26).
var httpKind = &kind{
	orders: [attrCount][]origin{
		attrKey:       {fromPath},
		attrEventType: {fromPath},
		attrAggregate: {fromPath},
	},
	checks:        [attrCount]attr{attrKey, attrEventType, attrAggregate},
	textsNamePath: true,
}

// brokerKind: a RabbitMQ, Kafka or NATS source falls back to its attribute headers, the
// broker's identifiers and, for the key, the digest of the body (spec/25).
var brokerKind = &kind{
	orders: [attrCount][]origin{
		attrKey:       {fromHeader, fromPath, fromBrokerKey, fromDigest},
		attrEventType: {fromPath, fromHeader},
		attrAggregate: {fromPath, fromHeader, fromRecordKey},
	},
	checks:         [attrCount]attr{attrKey, attrAggregate, attrEventType},
	defaultKeyPath: DefaultBrokerKeyPath,
}

// attribute is how one attribute of a source is resolved.
type attribute struct {
	// what names it in the error texts: Idempotency key, Event type, Aggregate id.
	what   string
	path   *valuePath // nil: none configured
	header string     // lower case; empty: none
	order  []origin
}

// resolve returns the attribute's value: the first origin of its order that gives a
// non-empty value, and whether that origin is its JSONPath. lookup finds a received header
// in any letter case. fromBody holds what the attribute's path selects in the body (empty:
// nothing); nil skips the path (a body that is not JSON). fit, when not nil, skips a value
// that it refuses (one longer than MaxKeyLength).
func (a *attribute) resolve(fromBody *string, m *message, lookup filter.Lookup, fit func(string) bool) (string, bool) {
	for _, o := range a.order {
		var v string
		switch o {
		case fromPath:
			if fromBody != nil {
				v = *fromBody
			}
		case fromHeader:
			if a.header != "" && lookup != nil {
				v, _ = lookup(a.header)
			}
		case fromBrokerKey:
			v = m.brokerKey
		case fromRecordKey:
			v = m.recordKey
		case fromDigest:
			v = digest(m.body)
		}
		if v != "" && (fit == nil || fit(v)) {
			return v, o == fromPath
		}
	}
	return "", false
}

// sinks are where the rules report: the metrics, the relay waker, the logger and the clock.
type sinks struct {
	metrics Metrics
	waker   Waker
	log     *slog.Logger
	now     func() time.Time
}

// withDefaults fills the sinks that are not set.
func (s sinks) withDefaults() sinks {
	if s.metrics == nil {
		s.metrics = NopMetrics{}
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	if s.now == nil {
		s.now = time.Now
	}
	return s
}

// ruleSpec is what one source configures of the shared rules.
type ruleSpec struct {
	kind                                  *kind
	name, consumption                     string
	keyPath, eventTypePath, aggregatePath string
	headers                               AttributeHeaders // read only where kind's orders say fromHeader
	filter                                filter.Config
	transform                             Transformer
	onError                               OnError
	keyLength                             KeyLength
}

// rules is the compiled rule set of one source. It is immutable and safe for concurrent use.
type rules struct {
	sinks
	kind        *kind
	name        string
	consumption string
	attrs       [attrCount]attribute
	// paths are the attributes' paths (attrs[a].path), as selectValues takes them.
	paths     [attrCount]*valuePath
	filter    *filter.Filter
	transform Transformer
	onError   OnError
	// keyLength counts the attributes against MaxKeyLength.
	keyLength KeyLength
}

// compileRules compiles one source's rules. It refuses a source without a name, a missing
// idempotency key path where the kind requires one, a JSONPath that is not definite, a
// filter that does not compile, a consumption other than push or pull and an onError other
// than Fail, Skip or Dead.
func compileRules(s ruleSpec, sk sinks) (*rules, error) {
	if s.name == "" {
		return nil, errors.New("a source needs a name")
	}
	r := &rules{sinks: sk.withDefaults(), kind: s.kind, name: s.name, consumption: s.consumption,
		transform: s.transform, onError: s.onError, keyLength: s.keyLength}
	switch r.consumption {
	case "":
		r.consumption = store.ConsumptionPush
	case store.ConsumptionPush, store.ConsumptionPull:
	default:
		return nil, fmt.Errorf("source %s: consumption %q is not push or pull", s.name, s.consumption)
	}
	if s.keyPath == "" {
		s.keyPath = s.kind.defaultKeyPath
	}
	if s.keyPath == "" {
		return nil, fmt.Errorf("source %s: an idempotency key path is required", s.name)
	}
	r.attrs[attrKey] = attribute{what: "Idempotency key", header: s.headers.IdempotencyKey}
	r.attrs[attrEventType] = attribute{what: "Event type", header: s.headers.EventType}
	r.attrs[attrAggregate] = attribute{what: "Aggregate id", header: s.headers.AggregateID}
	for a, raw := range [attrCount]string{attrKey: s.keyPath, attrEventType: s.eventTypePath, attrAggregate: s.aggregatePath} {
		at := &r.attrs[a]
		at.order = s.kind.orders[a]
		at.header = strings.ToLower(at.header)
		if raw == "" {
			continue
		}
		p, err := compilePath(raw)
		if err != nil {
			return nil, fmt.Errorf("source %s: %w", s.name, err)
		}
		at.path = &p
		r.paths[a] = &p
	}
	var err error
	if r.filter, err = filter.New(s.filter); err != nil {
		return nil, fmt.Errorf("source %s: %w", s.name, err)
	}
	switch s.onError {
	case "", OnErrorFail, OnErrorSkip, OnErrorDead:
	default:
		return nil, fmt.Errorf("source %s: onError %q is not Fail, Skip or Dead", s.name, s.onError)
	}
	return r, nil
}

// message is one received message as the shared steps read it. Its headers as the filter,
// the correlation identifier and the attribute headers read them are a filter.Lookup beside
// it, which is kept out of the struct so that the closure of an HTTP request stays on the
// stack.
type message struct {
	body []byte
	// headers are $headers of the transform.
	headers map[string]string
	// brokerKey and recordKey are Delivery.BrokerKey and Delivery.RecordKey.
	brokerKey, recordKey string
	// correlationID is the resolved correlation identifier (rules.correlation).
	correlationID string
	// receivedAt is $timestamp.
	receivedAt time.Time
}

// pass runs the header filter; a message that it drops is counted as filtered.
func (r *rules) pass(lookup filter.Lookup) bool {
	if r.filter.Pass(lookup) {
		return true
	}
	r.metrics.InboxFiltered(r.name)
	return false
}

// correlation returns the correlation identifier of a message: the X-Correlation-Id header
// in any letter case, then the broker's property (the AMQP correlation_id; empty: none),
// then a new UUID; a received value is cleaned and cut to 128 characters (CleanCorrelationID).
func (r *rules) correlation(lookup filter.Lookup, property string) string {
	if v, ok := lookup(correlationKey); ok {
		if id := CleanCorrelationID(v); id != "" {
			return id
		}
	}
	return correlationID(property)
}

// logger is the logger of one message.
func (r *rules) logger(correlationID string) *slog.Logger {
	return r.log.With(slog.String("source", r.name), slog.String("correlation_id", correlationID))
}

// cause is why a message cannot be stored as it was received.
type cause uint8

// The causes of a refusal.
const (
	// causeInvalidJSON: the body is not one JSON document (parseJSON).
	causeInvalidJSON cause = iota + 1
	// causeNoKey: no origin gives an idempotency key.
	causeNoKey
	// causeTooLong: an attribute is longer than MaxKeyLength.
	causeTooLong
	// causeTransform: the source transform failed under onError Fail or Dead.
	causeTransform
)

// refusal is why a message cannot be stored as it was received. It is counted when it is
// made: extraction_failed, or transform_failed. The HTTP route answers it with 400 or 422;
// a broker source stores the message as a dead row with Text as its last_error.
type refusal struct {
	cause cause
	attr  *attribute // causeNoKey and causeTooLong
	// atPath is the JSONPath that the text names, or empty.
	atPath string
	err    error // causeTransform
}

// Text is the reason of the refusal: the text of the HTTP answer, the last_error of a
// broker's dead row.
func (f *refusal) Text() string {
	switch f.cause {
	case causeNoKey:
		return "Missing idempotency key at " + f.atPath
	case causeTooLong:
		if f.atPath != "" {
			return fmt.Sprintf("%s at %s exceeds %d characters", f.attr.what, f.atPath, MaxKeyLength)
		}
		return fmt.Sprintf("%s exceeds %d characters", f.attr.what, MaxKeyLength)
	case causeTransform:
		return "Transform failed: " + f.err.Error()
	}
	return "Invalid JSON"
}

// prepare runs the shared steps on a message that passed the filter (steps 5 to 7 of
// spec/26): it parses the body as JSON, resolves the three attributes with their length
// limits and runs the source transform. It returns the row without its headers column, or
// the row as far as it was resolved and the refusal.
func (r *rules) prepare(ctx context.Context, m *message, lookup filter.Lookup) (store.InboxInsertParams, *refusal) {
	p := store.InboxInsertParams{
		Source:        r.name,
		CorrelationID: m.correlationID,
		Consumption:   r.consumption,
		Payload:       json.RawMessage(m.body),
	}
	if !parseJSON(m.body) {
		r.metrics.InboxRejection(ReasonExtraction)
		return p, &refusal{cause: causeInvalidJSON}
	}
	var fromBody identifiers
	var found [attrCount]bool
	selectValues(m.body, r.paths[:], fromBody[:], found[:])
	var ids identifiers
	var fromPath [attrCount]bool
	for a := range ids {
		ids[a], fromPath[a] = r.attrs[a].resolve(&fromBody[a], m, lookup, nil)
	}
	p.IdempotencyKey, p.EventType, p.AggregateID = ids[attrKey], ids[attrEventType], ids[attrAggregate]
	if ids[attrKey] == "" {
		r.metrics.InboxRejection(ReasonExtraction)
		return p, &refusal{cause: causeNoKey, attr: &r.attrs[attrKey], atPath: r.attrs[attrKey].path.raw}
	}
	for _, a := range r.kind.checks {
		if !r.keyLength.fits(ids[a]) {
			r.metrics.InboxRejection(ReasonExtraction)
			f := &refusal{cause: causeTooLong, attr: &r.attrs[a]}
			if r.kind.textsNamePath && fromPath[a] {
				f.atPath = r.attrs[a].path.raw
			}
			return p, f
		}
	}
	out, err := r.runTransform(ctx, m, &ids)
	if err != nil {
		return p, &refusal{cause: causeTransform, err: err}
	}
	p.Payload = out
	return p, nil
}

// runTransform runs the source transform on the body. It returns the payload to store: the
// transform's output, or the body when the source has no transform or when the transform
// failed under Skip (logged). A failure under Fail or Dead is counted as transform_failed
// and returned; an output that is not one JSON document is a failure.
func (r *rules) runTransform(ctx context.Context, m *message, ids *identifiers) (json.RawMessage, error) {
	body := json.RawMessage(m.body)
	if r.transform == nil {
		return body, nil
	}
	out, err := r.transform.Transform(ctx, TransformInput{
		Payload:        body,
		MessageID:      uuid.NewString(),
		Topic:          ids[attrEventType],
		Timestamp:      m.receivedAt,
		Source:         r.name,
		Headers:        m.headers,
		IdempotencyKey: ids[attrKey],
		EventType:      ids[attrEventType],
	})
	if err == nil && !json.Valid(out) {
		err = errors.New("the transform returned no JSON document")
	}
	switch {
	case err == nil:
		return out, nil
	case r.onError == OnErrorSkip:
		r.logger(m.correlationID).WarnContext(ctx, "inbox: source transform failed, storing the original body", slog.Any("error", err))
		return body, nil
	}
	r.metrics.InboxRejection(ReasonTransformFailed)
	return nil, err
}

// counted counts a written row and returns its status: Duplicate (counted as duplicate),
// StoredDead (not counted: a dead row is no message for the consumers), or Stored (counted
// as new).
func (r *rules) counted(p *store.InboxInsertParams, res store.InboxInsertResult) Status {
	switch {
	case res.Duplicate:
		r.metrics.InboxMessage(StatusDuplicate)
		return Duplicate
	case p.State == store.InboxDead:
		return StoredDead
	}
	r.metrics.InboxMessage(StatusNew)
	return Stored
}

// wake tells the relay that a new row is there, when the source is push and a waker is set.
func (r *rules) wake() {
	if r.consumption == store.ConsumptionPush && r.waker != nil {
		r.waker.Wake()
	}
}
