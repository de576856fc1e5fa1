package inbox

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/alternayte/queuebox/shared/filter"
	"github.com/alternayte/queuebox/shared/store"
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
}

// Intake stores the messages of one broker source: the attribute orders of spec/25, the
// header filter, the source transform, the deduplicated batched insert and the relay wake.
// It is safe for concurrent use.
type Intake struct {
	src           BrokerSource
	filter        *filter.Filter
	consumption   string
	keyPath       valuePath
	aggregatePath *valuePath
	eventTypePath *valuePath
	keyHeader     string
	aggHeader     string
	typeHeader    string
	st            Inserter
	metrics       Metrics
	waker         Waker
	log           *slog.Logger
	now           func() time.Time
}

// NewIntake compiles the source's rules. It refuses a source without a name, a JSONPath
// that is not definite and a consumption other than push or pull.
func NewIntake(src BrokerSource, st Inserter, o IntakeOptions) (*Intake, error) {
	if src.Name == "" {
		return nil, errors.New("creating inbox intake: a source needs a name")
	}
	if st == nil {
		return nil, fmt.Errorf("creating inbox intake for source %s: a store is required", src.Name)
	}
	in := &Intake{src: src, st: st, metrics: o.Metrics, waker: o.Waker, log: o.Logger, now: o.Now}
	if in.metrics == nil {
		in.metrics = NopMetrics{}
	}
	if in.log == nil {
		in.log = slog.Default()
	}
	if in.now == nil {
		in.now = time.Now
	}
	switch src.Consumption {
	case "", store.ConsumptionPush:
		in.consumption = store.ConsumptionPush
	case store.ConsumptionPull:
		in.consumption = store.ConsumptionPull
	default:
		return nil, fmt.Errorf("source %s: consumption must be push or pull, not %q", src.Name, src.Consumption)
	}
	keyPath := src.IdempotencyKeyPath
	if keyPath == "" {
		keyPath = DefaultBrokerKeyPath
	}
	var err error
	if in.filter, err = filter.New(src.Filter); err != nil {
		return nil, fmt.Errorf("source %s: filter: %w", src.Name, err)
	}
	if in.keyPath, err = compilePath(keyPath); err != nil {
		return nil, fmt.Errorf("source %s: idempotencyKeyPath: %w", src.Name, err)
	}
	if src.AggregateIDPath != "" {
		p, err := compilePath(src.AggregateIDPath)
		if err != nil {
			return nil, fmt.Errorf("source %s: aggregateIdPath: %w", src.Name, err)
		}
		in.aggregatePath = &p
	}
	if src.EventTypePath != "" {
		p, err := compilePath(src.EventTypePath)
		if err != nil {
			return nil, fmt.Errorf("source %s: eventTypePath: %w", src.Name, err)
		}
		in.eventTypePath = &p
	}
	in.keyHeader = orDefault(src.AttributeHeaders.IdempotencyKey, DefaultIdempotencyKeyHeader)
	in.aggHeader = orDefault(src.AttributeHeaders.AggregateID, DefaultAggregateIDHeader)
	in.typeHeader = orDefault(src.AttributeHeaders.EventType, DefaultEventTypeHeader)
	return in, nil
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// Name returns the source name.
func (in *Intake) Name() string { return in.src.Name }

// Store stores the deliveries that arrived together with one batched insert (one statement
// and one commit) and returns one outcome per delivery, in order. An error means that
// nothing is known to be stored: the source must not acknowledge any of the deliveries,
// so that the broker delivers them again (a redelivery of a stored message is then a
// duplicate).
func (in *Intake) Store(ctx context.Context, ds []Delivery) ([]Outcome, error) {
	out := make([]Outcome, len(ds))
	params := make([]store.InboxInsertParams, 0, len(ds))
	index := make([]int, 0, len(ds)) // params[i] is the row of ds[index[i]]
	for i := range ds {
		p, ok := in.prepare(ctx, &ds[i])
		if !ok {
			out[i] = Outcome{Status: Filtered}
			continue
		}
		params = append(params, p)
		index = append(index, i)
	}
	if len(params) == 0 {
		return out, nil
	}
	results, err := in.insert(ctx, params)
	if err != nil {
		in.metrics.InboxRejection(ReasonStorageFailed)
		return nil, fmt.Errorf("source %s: storing %d messages: %w", in.src.Name, len(params), err)
	}
	woke := false
	for j, res := range results {
		i := index[j]
		switch {
		case res.Duplicate:
			out[i] = Outcome{Status: Duplicate}
			in.metrics.InboxMessage(StatusDuplicate)
		case params[j].State == store.InboxDead:
			out[i] = Outcome{Status: StoredDead, ID: res.ID}
		default:
			out[i] = Outcome{Status: Stored, ID: res.ID}
			in.metrics.InboxMessage(StatusNew)
			woke = woke || in.consumption == store.ConsumptionPush
		}
	}
	if woke && in.waker != nil {
		in.waker.Wake()
	}
	return out, nil
}

// insert writes the rows in one statement. When the database refuses a value of one row
// (store.ErrInvalidValue: the statement does not say which), each row is written alone, and
// a refused row is written again as a dead row of the raw body, so that one message the
// database cannot hold does not block the others for ever.
func (in *Intake) insert(ctx context.Context, params []store.InboxInsertParams) ([]store.InboxInsertResult, error) {
	var results []store.InboxInsertResult
	var err error
	if len(params) == 1 {
		var r store.InboxInsertResult
		r, err = in.st.InboxInsert(ctx, params[0])
		results = []store.InboxInsertResult{r}
	} else {
		results, err = in.st.InboxInsertBatch(ctx, params)
		if err == nil && len(results) != len(params) {
			err = fmt.Errorf("the store returned %d results for %d rows", len(results), len(params))
		}
	}
	if !errors.Is(err, store.ErrInvalidValue) {
		return results, err
	}
	results = make([]store.InboxInsertResult, len(params))
	for i := range params {
		r, err := in.st.InboxInsert(ctx, params[i])
		if errors.Is(err, store.ErrInvalidValue) {
			in.log.WarnContext(ctx, "inbox: the database refuses a value of the message; storing it as a dead row",
				slog.String("source", in.src.Name), slog.String("idempotency_key", params[i].IdempotencyKey), slog.Any("error", err))
			params[i] = refusedRow(params[i])
			r, err = in.st.InboxInsert(ctx, params[i])
		}
		if err != nil {
			return nil, err
		}
		results[i] = r
	}
	return results, nil
}

// refusedRow is p as a dead row whose payload is the raw text of the stored payload, with
// every character the database refuses in a JSON document removed.
func refusedRow(p store.InboxInsertParams) store.InboxInsertParams {
	p.Payload = rawPayload(strings.ReplaceAll(string(p.Payload), `\u0000`, ""))
	p.State = store.InboxDead
	p.LastError = "The database refused a value of the message"
	p.AggregateID, p.EventType = cleanText(p.AggregateID), cleanText(p.EventType)
	return p
}

// prepare turns a delivery into its row; false means the filter dropped it.
func (in *Intake) prepare(ctx context.Context, d *Delivery) (store.InboxInsertParams, bool) {
	lookup := filter.FoldLookup(d.Headers)
	if !in.filter.Pass(lookup) {
		in.metrics.InboxFiltered(in.src.Name)
		return store.InboxInsertParams{}, false
	}
	headerJSON, _ := encodeHeaders(cleanHeaders(d.Headers))
	p := store.InboxInsertParams{
		Source:        in.src.Name,
		Headers:       headerJSON,
		CorrelationID: in.correlation(lookup, d),
		Consumption:   in.consumption,
	}
	header := func(name string) string {
		v, _ := lookup(strings.ToLower(name))
		return v
	}

	doc, isJSON := parseJSON(d.Body)
	if !isJSON {
		// No consumer can read the body, and a message never acknowledged would block the
		// queue or the partition: a dead row of the raw text, acknowledged.
		in.metrics.InboxRejection(ReasonExtraction)
		p.IdempotencyKey = firstKey(header(in.keyHeader), d.BrokerKey, d.Body)
		p.Payload = rawPayload(string(d.Body))
		p.State = store.InboxDead
		p.LastError = "Invalid JSON"
		return in.fitted(p), true
	}

	key, _ := in.keyPath.lookup(doc)
	if v := header(in.keyHeader); v != "" {
		key = v
	}
	if key == "" {
		key = d.BrokerKey
	}
	p.IdempotencyKey = key
	if p.IdempotencyKey == "" {
		p.IdempotencyKey = digest(d.Body)
	}
	if in.aggregatePath != nil {
		p.AggregateID, _ = in.aggregatePath.lookup(doc)
	}
	if p.AggregateID == "" {
		p.AggregateID = header(in.aggHeader)
	}
	if p.AggregateID == "" {
		p.AggregateID = d.RecordKey
	}
	if in.eventTypePath != nil {
		p.EventType, _ = in.eventTypePath.lookup(doc)
	}
	if p.EventType == "" {
		p.EventType = header(in.typeHeader)
	}
	p.Payload = json.RawMessage(d.Body)
	if p = in.fitted(p); p.State == store.InboxDead {
		return p, true
	}

	if in.src.Transform != nil {
		res, err := in.src.Transform.Transform(ctx, TransformInput{
			Payload:        p.Payload,
			MessageID:      uuid.NewString(),
			Topic:          p.EventType,
			Timestamp:      in.now(),
			Source:         in.src.Name,
			Headers:        d.Headers,
			IdempotencyKey: p.IdempotencyKey,
			EventType:      p.EventType,
		})
		if err == nil && !json.Valid(res) {
			err = errors.New("the transform returned no JSON document")
		}
		switch {
		case err == nil:
			p.Payload = res
		case in.src.OnError == OnErrorSkip:
			in.log.WarnContext(ctx, "inbox: source transform failed, storing the original body",
				slog.String("source", in.src.Name), slog.String("correlation_id", p.CorrelationID), slog.Any("error", err))
		default:
			in.metrics.InboxRejection(ReasonTransformFailed)
			in.log.InfoContext(ctx, "inbox: source transform failed, storing the message as a dead row",
				slog.String("source", in.src.Name), slog.String("correlation_id", p.CorrelationID), slog.Any("error", err))
			p.State = store.InboxDead
			p.LastError = "Transform failed: " + err.Error()
		}
	}
	return p, true
}

// fitted returns p, or p as a dead row when an attribute is too long for its column: the
// message can never be stored as it is, so it is kept dead under the digest of its body
// instead of being refused for ever.
func (in *Intake) fitted(p store.InboxInsertParams) store.InboxInsertParams {
	var what string
	switch {
	case textLength(p.IdempotencyKey) > MaxKeyLength:
		what = "Idempotency key"
	case textLength(p.AggregateID) > MaxKeyLength:
		what = "Aggregate id"
	case textLength(p.EventType) > MaxKeyLength:
		what = "Event type"
	default:
		return p
	}
	in.metrics.InboxRejection(ReasonExtraction)
	body := []byte(p.Payload)
	if p.State == store.InboxDead {
		body = []byte(p.IdempotencyKey) // already a dead row: a digest of its key
	}
	p.IdempotencyKey = digest(body)
	if textLength(p.AggregateID) > MaxKeyLength {
		p.AggregateID = ""
	}
	if textLength(p.EventType) > MaxKeyLength {
		p.EventType = ""
	}
	p.State = store.InboxDead
	p.LastError = fmt.Sprintf("%s exceeds %d characters", what, MaxKeyLength)
	return p
}

// correlation returns the correlation identifier: the X-Correlation-Id header in any letter
// case, then the broker's property, then a new UUID; cleaned and cut to 128 characters.
func (in *Intake) correlation(lookup filter.Lookup, d *Delivery) string {
	if v, ok := lookup(correlationKey); ok {
		if id := CleanCorrelationID(v); id != "" {
			return id
		}
	}
	return correlationID(d.CorrelationID)
}

// firstKey is the key of a body that is not JSON: the header, the broker's identifier,
// then the digest.
func firstKey(header, brokerKey string, body []byte) string {
	switch {
	case header != "" && textLength(header) <= MaxKeyLength:
		return header
	case brokerKey != "" && textLength(brokerKey) <= MaxKeyLength:
		return brokerKey
	}
	return digest(body)
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

// cleanHeaders returns the headers with names and values as cleanText makes them, copying
// only when one needs it.
func cleanHeaders(h map[string]string) map[string]string {
	dirty := false
	for k, v := range h {
		if cleanText(k) != k || cleanText(v) != v {
			dirty = true
			break
		}
	}
	if !dirty {
		return h
	}
	out := make(map[string]string, len(h))
	for k, v := range h {
		out[cleanText(k)] = cleanText(v)
	}
	return out
}
