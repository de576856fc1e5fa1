package inbox

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"strings"
	"time"
	"unicode/utf8"

	otelattr "go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/alternayte/queuebox/shared/filter"
	"github.com/alternayte/queuebox/shared/store"
	"github.com/alternayte/queuebox/shared/tracing"
)

// The default attribute headers of a broker source (sources.<name>.attributeHeaders).
const (
	DefaultIdempotencyKeyHeader = "x-idempotency-key"
	DefaultAggregateIDHeader    = "x-aggregate-id"
	DefaultEventTypeHeader      = "x-event-type"
	// DefaultBrokerKeyPath is the default idempotencyKeyPath of a broker source.
	DefaultBrokerKeyPath = "$.id"
	// DigestPrefix starts the idempotency key of a message that gives no key: the SHA-256
	// digest of its body in hexadecimal follows.
	DigestPrefix = "sha256:"
)

// Inserter stores inbox rows: the inserts of store.InboxStore, which every store has.
type Inserter interface {
	InboxInsert(ctx context.Context, params store.InboxInsertParams) (store.InboxInsertResult, error)
	InboxInsertBatch(ctx context.Context, params []store.InboxInsertParams) ([]store.InboxInsertResult, error)
}

// AttributeHeaders names the headers from which a broker source reads three attributes.
// An empty name takes its default.
type AttributeHeaders struct {
	IdempotencyKey string
	AggregateID    string
	EventType      string
}

// BrokerSource is one RabbitMQ, Kafka or NATS source, as the intake stores its messages
// (spec/07-bridge-a-broker.md, spec/25-headers.md "Headers that QueueBox reads").
type BrokerSource struct {
	// Name is the source name, stored in the source column. Required.
	Name string
	// Consumption is push or pull. Empty means push.
	Consumption string
	// IdempotencyKeyPath is the definite JSONPath of the idempotency key. Empty means $.id.
	IdempotencyKeyPath string
	// AggregateIDPath is the definite JSONPath of the aggregate identifier. Empty: none.
	AggregateIDPath string
	// EventTypePath is the definite JSONPath of the event type. Empty: none.
	EventTypePath string
	// AttributeHeaders names the attribute headers.
	AttributeHeaders AttributeHeaders
	// Filter is the header filter. Zero: every message passes.
	Filter filter.Config
	// Transform is the source transform. Nil: none.
	Transform Transformer
	// MaxBodyBytes is the largest body stored as it is; a larger one is a dead row without
	// its body (RefusedTooLarge). Zero: no limit, the default.
	MaxBodyBytes int
	// OnError is the error strategy of the transform. Skip stores the original body as a
	// pending row; Fail and Dead (and empty) store the message as a dead row with the
	// original body, acknowledged, since a broker message that is never acknowledged blocks
	// its queue or partition.
	OnError OnError
}

// Delivery is one message that a broker source received: its body, its headers converted
// to text by the rules of spec/27-inbox-table.md, and the broker's own identifiers.
type Delivery struct {
	// Body is the message body, byte for byte.
	Body []byte
	// Headers are the received headers, one string value per name as the broker spells it.
	Headers map[string]string
	// BrokerKey is the third source of the idempotency key: the AMQP message_id property,
	// the Kafka record key, the NATS Nats-Msg-Id header. Empty: none.
	BrokerKey string
	// RecordKey is the third source of the aggregate identifier: the Kafka record key.
	// Empty: none (RabbitMQ and NATS).
	RecordKey string
	// CorrelationID is the second source of the correlation identifier: the AMQP
	// correlation_id property. Empty: none.
	CorrelationID string
	// Refused, when set, stores the delivery as a dead row whatever its body (a message that
	// the client library cannot decode, a body over the source's size limit). Nil: the
	// delivery is stored by the rules of spec/07.
	Refused *Refusal
}

// Status is what the intake did with one delivery. Every status but none is final: the
// source acknowledges the delivery.
type Status uint8

// The statuses of a delivery.
const (
	// Stored: a new pending row.
	Stored Status = iota + 1
	// Duplicate: the source already holds a row with this idempotency key.
	Duplicate
	// Filtered: the header filter dropped the message; no row.
	Filtered
	// StoredDead: a new dead row (a body that is not JSON, a rejected transform, an
	// attribute too long to store).
	StoredDead
)

// String returns the status in lower case.
func (s Status) String() string {
	switch s {
	case Stored:
		return "stored"
	case Duplicate:
		return "duplicate"
	case Filtered:
		return "filtered"
	case StoredDead:
		return "dead"
	}
	return "unknown"
}

// Outcome is the result of one delivery.
type Outcome struct {
	Status Status
	// ID is the id of the new row; empty for a duplicate or a filtered message.
	ID string
}

// IntakeOptions are the optional parts of an Intake.
type IntakeOptions struct {
	// Metrics receives the inbox measurements. Default: NopMetrics.
	Metrics Metrics
	// Waker is told after a push row was stored. Default: none.
	Waker Waker
	// Logger receives the log lines. Default: slog.Default().
	Logger *slog.Logger
	// Now is the clock of $timestamp. Default: time.Now.
	Now func() time.Time
	// Tracer creates the span of each stored message (docs/tracing.md); nil, the default,
	// means tracing is off. With a tracer, the span continues the message's traceparent
	// header, and the stored row's traceparent and tracestate are the span's.
	Tracer trace.Tracer
	// KeyLength counts the idempotency key, the aggregate id and the event type against
	// MaxKeyLength as the database's columns do. Default: KeyLengthUTF16.
	KeyLength KeyLength
}

// Intake stores the messages of one broker source: the attribute orders of spec/25, the
// header filter, the source transform, the deduplicated batched insert and the relay wake,
// through the rules and the write that the HTTP inbox follows too (rules.go, writeRows). It
// is safe for concurrent use.
type Intake struct {
	rules   *rules
	st      Inserter
	tracer  trace.Tracer // nil when tracing is off
	maxBody int          // BrokerSource.MaxBodyBytes; 0: no limit
}

// NewIntake compiles the source's rules. It refuses a source without a name, a JSONPath
// that is not definite, a filter that does not compile, a consumption other than push or
// pull and an onError other than Fail, Skip or Dead.
func NewIntake(src BrokerSource, st Inserter, o IntakeOptions) (*Intake, error) {
	if st == nil {
		return nil, fmt.Errorf("creating inbox intake for source %s: a store is required", src.Name)
	}
	if src.MaxBodyBytes < 0 {
		return nil, fmt.Errorf("creating inbox intake for source %s: maxBodyBytes must not be negative", src.Name)
	}
	h := src.AttributeHeaders
	r, err := compileRules(ruleSpec{
		kind:          brokerKind,
		name:          src.Name,
		consumption:   src.Consumption,
		keyPath:       src.IdempotencyKeyPath,
		eventTypePath: src.EventTypePath,
		aggregatePath: src.AggregateIDPath,
		headers: AttributeHeaders{
			IdempotencyKey: orDefault(h.IdempotencyKey, DefaultIdempotencyKeyHeader),
			AggregateID:    orDefault(h.AggregateID, DefaultAggregateIDHeader),
			EventType:      orDefault(h.EventType, DefaultEventTypeHeader),
		},
		filter:    src.Filter,
		transform: src.Transform,
		onError:   src.OnError,
		keyLength: o.KeyLength,
	}, sinks{metrics: o.Metrics, waker: o.Waker, log: o.Logger, now: o.Now})
	if err != nil {
		return nil, fmt.Errorf("creating inbox intake: %w", err)
	}
	return &Intake{rules: r, st: st, tracer: o.Tracer, maxBody: src.MaxBodyBytes}, nil
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// Name returns the source name.
func (in *Intake) Name() string { return in.rules.name }

// Store stores the deliveries that arrived together with one batched insert (one statement
// and one commit) and returns one outcome per delivery, in order. An error means that
// nothing is known to be stored: the source must not acknowledge any of the deliveries,
// so that the broker delivers them again (a redelivery of a stored message is then a
// duplicate). A push source wakes the relay once per batch that stored a new row. Store is
// a Batch of the deliveries, written with Batch.Write.
func (in *Intake) Store(ctx context.Context, ds []Delivery) ([]Outcome, error) {
	b := in.NewBatch(len(ds))
	for i := range ds {
		b.Add(ctx, &ds[i])
	}
	return b.Write(ctx)
}

// Batch is the rows of deliveries that arrived together. A source adds each delivery as it
// arrives, so that the work of turning it into a row is done while the source waits for the
// rest of the batch, and then writes the batch once with Write. A Batch is not safe for
// concurrent use.
type Batch struct {
	in     *Intake
	out    []Outcome
	params []store.InboxInsertParams
	index  []int // params[i] is the row of delivery index[i]
	// spans[i] is the span of params[i] while tracing is on; Write ends them.
	spans []trace.Span
}

// NewBatch returns an empty batch with room for n deliveries.
func (in *Intake) NewBatch(n int) *Batch {
	return &Batch{
		in:     in,
		out:    make([]Outcome, 0, n),
		params: make([]store.InboxInsertParams, 0, n),
		index:  make([]int, 0, n),
	}
}

// Add turns the delivery into its row: the attribute orders, the header filter and the
// source transform, with the measurements of what it refuses. It writes nothing; the row
// keeps no reference to d beyond its body and headers.
func (b *Batch) Add(ctx context.Context, d *Delivery) {
	i := len(b.out)
	b.out = append(b.out, Outcome{})
	var span trace.Span
	if b.in.tracer != nil {
		ctx, span = b.in.tracer.Start(tracing.ContextFromHeaders(ctx, d.Headers), "inbox store",
			trace.WithSpanKind(trace.SpanKindConsumer),
			trace.WithAttributes(otelattr.String("queuebox.source", b.in.rules.name)))
	}
	p, ok := b.in.prepare(ctx, d)
	if !ok {
		b.out[i] = Outcome{Status: Filtered}
		if span != nil {
			span.SetAttributes(otelattr.String("queuebox.result", Filtered.String()))
			span.End()
		}
		return
	}
	b.params = append(b.params, p)
	b.index = append(b.index, i)
	if span != nil {
		b.spans = append(b.spans, span)
	}
}

// endSpans ends the spans of the batch's rows with their outcomes, or with err.
func (b *Batch) endSpans(err error) {
	for j, span := range b.spans {
		if err != nil {
			span.SetStatus(codes.Error, "storing the message failed")
		} else {
			span.SetAttributes(otelattr.String("queuebox.result", b.out[b.index[j]].Status.String()),
				otelattr.String("queuebox.message_id", b.out[b.index[j]].ID))
		}
		span.End()
	}
	clear(b.spans)
	b.spans = b.spans[:0]
}

// Len returns the number of deliveries added.
func (b *Batch) Len() int { return len(b.out) }

// Reset empties the batch for the next deliveries; the outcomes that Write returned for it
// are overwritten.
func (b *Batch) Reset() {
	b.endSpans(errors.New("the batch was not written"))
	clear(b.params)
	b.out, b.params, b.index = b.out[:0], b.params[:0], b.index[:0]
}

// Write stores the rows of the batch with one batched insert and returns one outcome per
// delivery, in order; its error means what Store's error means. A batch is written once
// (Reset makes it ready for new deliveries).
func (b *Batch) Write(ctx context.Context) ([]Outcome, error) {
	in := b.in
	if len(b.params) == 0 {
		return b.out, nil
	}
	results := writeRows(ctx, in.st, b.params, nil, in.refused)
	for _, res := range results {
		if res.err != nil {
			in.rules.metrics.InboxRejection(ReasonStorageFailed)
			b.endSpans(res.err)
			return nil, fmt.Errorf("source %s: storing %d messages: %w", in.rules.name, len(b.params), res.err)
		}
	}
	woke := false
	for j, res := range results {
		status := in.rules.counted(&b.params[j], res.res)
		b.out[b.index[j]] = Outcome{Status: status}
		if status != Duplicate {
			b.out[b.index[j]].ID = res.res.ID
		}
		woke = woke || status == Stored
	}
	b.endSpans(nil)
	if woke {
		in.rules.wake()
	}
	return b.out, nil
}

// refused makes a row that the database refuses a dead row of the raw text of its payload,
// with every character that the database refuses in a JSON document removed, so that one
// message the database cannot hold does not block the others for ever.
func (in *Intake) refused(ctx context.Context, p *store.InboxInsertParams, err error) bool {
	in.rules.log.WarnContext(ctx, "inbox: the database refuses a value of the message; storing it as a dead row",
		slog.String("source", in.rules.name), slog.String("idempotency_key", p.IdempotencyKey), slog.Any("error", err))
	p.Payload = rawPayload(strings.ReplaceAll(string(p.Payload), `\u0000`, ""))
	p.State = store.InboxDead
	p.LastError = "The database refused a value of the message"
	p.AggregateID, p.EventType = cleanText(p.AggregateID), cleanText(p.EventType)
	return true
}

// prepare turns a delivery into its row through the shared rules; false means the filter
// dropped it. What an HTTP source answers with 400 or 422 a broker source stores as a dead
// row and acknowledges, since a message never acknowledged blocks its queue or partition:
// a body that is not JSON as {"raw": text} under the key of its header or broker
// identifier (or the digest), an attribute too long for its column under the digest of the
// body, a failed transform with the original body.
func (in *Intake) prepare(ctx context.Context, d *Delivery) (store.InboxInsertParams, bool) {
	if d.Refused != nil {
		return in.prepareRefused(ctx, d, d.Refused)
	}
	if in.tooLarge(d.Body) {
		return in.prepareRefused(ctx, d, &Refusal{Cause: RefusedTooLarge, Text: in.tooLargeText(d.Body)})
	}
	r := in.rules
	lookup := filter.FoldLookup(d.Headers)
	if !r.pass(lookup) {
		return store.InboxInsertParams{}, false
	}
	m := &message{body: d.Body, headers: d.Headers, brokerKey: d.BrokerKey,
		recordKey: d.RecordKey, correlationID: r.correlation(lookup, d.CorrelationID), receivedAt: r.now()}
	p, refused := r.prepare(ctx, m, lookup)
	headers := cleanHeaders(d.Headers)
	if in.tracer != nil {
		// The row continues the span of its store (docs/tracing.md); the delivery's own
		// headers stay as received.
		traced := make(map[string]string, len(headers)+2)
		maps.Copy(traced, headers)
		tracing.SetHeaders(ctx, traced)
		headers = traced
	}
	p.Headers, _ = encodeHeaders(headers)
	if refused == nil {
		return p, true
	}
	p.State = store.InboxDead
	p.LastError = refused.Text()
	switch refused.cause {
	case causeInvalidJSON:
		// The body paths read nothing; the other origins of each attribute still apply.
		p.IdempotencyKey, _ = r.attrs[attrKey].resolve(nil, m, lookup, r.keyLength.fits)
		p.AggregateID, _ = r.attrs[attrAggregate].resolve(nil, m, lookup, r.keyLength.fits)
		p.EventType, _ = r.attrs[attrEventType].resolve(nil, m, lookup, r.keyLength.fits)
		p.Payload = rawPayload(string(d.Body))
	case causeTooLong:
		p.IdempotencyKey = digest(d.Body)
		if !r.keyLength.fits(p.AggregateID) {
			p.AggregateID = ""
		}
		if !r.keyLength.fits(p.EventType) {
			p.EventType = ""
		}
	case causeTransform:
		r.logger(p.CorrelationID).InfoContext(ctx, "inbox: source transform failed, storing the message as a dead row", slog.Any("error", refused.err))
		p.Payload = json.RawMessage(d.Body)
	}
	return p, true
}

// tooLarge reports whether body is over the source's maxBodyBytes.
func (in *Intake) tooLarge(body []byte) bool { return in.maxBody > 0 && len(body) > in.maxBody }

// tooLargeText is the last_error of a body over the source's maxBodyBytes.
func (in *Intake) tooLargeText(body []byte) string {
	return fmt.Sprintf("The body of %d bytes exceeds the source's maxBodyBytes of %d", len(body), in.maxBody)
}

// digest is the idempotency key of a message that gives none: sha256: and the hexadecimal
// SHA-256 digest of the body.
func digest(body []byte) string {
	sum := sha256.Sum256(body)
	return DigestPrefix + hex.EncodeToString(sum[:])
}

// rawPayload is the payload of a dead row for a body that is not JSON: {"raw": text}, the
// text made valid UTF-8 and without NUL characters, which no database JSON column holds.
func rawPayload(text string) json.RawMessage {
	text = cleanText(text)
	out := appendJSONString(append(make([]byte, 0, len(text)+10), `{"raw":`...), text)
	return append(out, '}')
}

// cleanText makes s valid UTF-8 without NUL characters.
func cleanText(s string) string {
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	if strings.IndexByte(s, 0) >= 0 {
		s = strings.ReplaceAll(s, "\x00", "")
	}
	return s
}

// cleanHeaders returns the headers with names as cleanText makes them, copying only when one
// needs it. The values keep their bytes: encodeHeaders stores one that cleanText would change
// in its base64: form (StoredHeaderValue).
func cleanHeaders(h map[string]string) map[string]string {
	dirty := false
	for k := range h {
		if cleanText(k) != k {
			dirty = true
			break
		}
	}
	if !dirty {
		return h
	}
	out := make(map[string]string, len(h))
	for k, v := range h {
		out[cleanText(k)] = v
	}
	return out
}
