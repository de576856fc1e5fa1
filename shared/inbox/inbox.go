// Package inbox stores the received messages in the inbox table. Handler is the HTTP inbox:
// a net/http handler that serves POST <inbox.basePath><path> for every HTTP source
// (spec/26-http-api.md). The local process and the inbox Lambda function both mount it, so
// every status code, header and body comes from this package. Intake stores the messages of
// a RabbitMQ, Kafka or NATS source (spec/07-bridge-a-broker.md). Both follow one compiled rule
// set per source (rules.go: filter, correlation identifier, JSON document, attributes with
// their length limits, source transform, counting, relay wake) and one write (writeRows), so
// that a rule of spec/ holds for every source by construction; they differ only as spec/25
// and spec/26 say: where the attributes come from, and an HTTP answer where a broker source
// stores a dead row.
//
// A request goes through these steps, in this order; the first that answers ends it:
//
//   - 503 {"error":"QueueBox is shutting down"} while the handler drains;
//   - 413 {"error":"Request body exceeds N bytes"} when Content-Length is above the cap;
//   - 404 {"error":"Not found"} for a path that no source serves, or a method other than POST;
//   - 429 with Retry-After and no body over rateLimit.requestsPerMinute (one token bucket per
//     source, holding requestsPerMinute tokens and refilled at requestsPerMinute a minute);
//
// then the processing order of spec/26:
//
//  1. read the body under the size cap (a chunked body is counted as it is read): 413;
//  2. check the credentials: 401 {"error":"<reason>"};
//  3. run the header filter: 202 {"status":"filtered"}, no row;
//  4. set the X-Correlation-Id response header (the received value cleaned, or a new UUID);
//  5. parse the body as JSON: 400 {"error":"Invalid JSON"};
//  6. extract the idempotency key, the event type and the aggregate identifier with their
//     definite JSONPaths: 400 {"error":"Missing idempotency key at $.id"} and the like;
//  7. run the source transform: 422 {"error":"Transform failed: <reason>"} for Fail and Dead,
//     the original body for Skip;
//  8. store the row: 202 {"messageId":"<id>"}, 200 {"status":"duplicate"}, or
//     500 {"error":"Storage failed"}.
//
// The rows of concurrent requests are written together: each request that reaches step 8
// queues its row, and a writer writes whatever is queued (up to Options.MaxBatch rows, without
// waiting for more) in one statement and one commit, then answers each request of the batch
// with its own result. A batch is written entirely or not at all: when its write fails, every
// request of the batch gets 500. A lone request is written at once on its own goroutine.
//
// Every answer except 429 is JSON with Content-Type application/json.
package inbox

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	otelattr "go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"golang.org/x/time/rate"

	"github.com/alternayte/queuebox/shared/filter"
	"github.com/alternayte/queuebox/shared/inboundauth"
	"github.com/alternayte/queuebox/shared/store"
	"github.com/alternayte/queuebox/shared/tracing"
)

// Defaults of Options.
const (
	// DefaultBasePath is the default of inbox.basePath.
	DefaultBasePath = "/inbox"
	// DefaultMaxBodyBytes is the default of inbox.maxBodyBytes.
	DefaultMaxBodyBytes int64 = 1 << 20
	// MaxKeyLength is the largest idempotency key, aggregate identifier and event type, in
	// characters as the column counts them (VARCHAR(255), code points, on PostgreSQL;
	// NVARCHAR(255), UTF-16 code units, on SQL Server; see KeyLength).
	MaxKeyLength = 255
	// MaxNestingDepth is the deepest nesting of arrays and objects that a body may have. It is
	// the default limit of the JSON parser of the original implementation (Jackson), and it
	// keeps a body within what the PostgreSQL jsonb parser accepts.
	MaxNestingDepth = 1000
)

// Metric labels.
const (
	StatusNew             = "new"
	StatusDuplicate       = "duplicate"
	ReasonExtraction      = "extraction_failed"
	ReasonTransformFailed = "transform_failed"
	ReasonStorageFailed   = "storage_failed"
)

// Metrics receives the inbox measurements of spec/28-metrics.md. Implementations must be safe
// for concurrent use; *metrics.Registry is one.
type Metrics interface {
	// InboxMessage counts queuebox_inbox_messages_total{status}: new or duplicate.
	InboxMessage(status string)
	// InboxRejection counts queuebox_inbox_rejections_total{reason}: extraction_failed,
	// transform_failed or storage_failed.
	InboxRejection(reason string)
	// InboxFiltered counts queuebox_inbox_filtered_total{source}.
	InboxFiltered(source string)
}

// NopMetrics discards every measurement.
type NopMetrics struct{}

// InboxMessage implements Metrics.
func (NopMetrics) InboxMessage(string) {}

// InboxRejection implements Metrics.
func (NopMetrics) InboxRejection(string) {}

// InboxFiltered implements Metrics.
func (NopMetrics) InboxFiltered(string) {}

// Waker is told that a push row was stored, so that the relay claims it without waiting for
// its next poll. Wake must be safe for concurrent use and must not block.
type Waker interface {
	Wake()
}

// TransformInput is what the source transform of one request sees: the received body as $,
// and the variables of the source stage of spec/31-transforms-and-templates.md.
type TransformInput struct {
	// Payload is the received body ($).
	Payload json.RawMessage
	// MessageID is $messageId: a new UUID generated for the message.
	MessageID string
	// Topic is $topic: the extracted event type, or an empty string.
	Topic string
	// Timestamp is $timestamp: the receipt time. $attempt is always 0.
	Timestamp time.Time
	// Source is $source: the source name.
	Source string
	// Headers is $headers: the received headers, one value per lower-case name, without the
	// credential headers. The transform must not modify it.
	Headers map[string]string
	// IdempotencyKey is $idempotencyKey: the extracted idempotency key.
	IdempotencyKey string
	// EventType is $eventType: the extracted event type; empty binds null.
	EventType string
}

// Transformer runs the source transform of one source.
//
// Transform must be safe for concurrent use and must return when ctx is done. It returns the
// payload to store: one JSON document. An error is a transform failure (an evaluation error,
// the timeout or the depth limit): its text is the reason of the 422 answer, so it must hold
// no secret. The handler applies the onError strategy of the source; the Transformer does not.
type Transformer interface {
	Transform(ctx context.Context, in TransformInput) (json.RawMessage, error)
}

// Source is one HTTP inbox source.
type Source struct {
	// Name is the source name, stored in the source column. Required.
	Name string
	// Path is the path after the base path, for example /stripe. Required.
	Path string
	// IdempotencyKeyPath is the definite JSONPath of the idempotency key. Required.
	IdempotencyKeyPath string
	// EventTypePath is the definite JSONPath of the event type. Empty: none.
	EventTypePath string
	// AggregateIDPath is the definite JSONPath of the aggregate identifier. Empty: none.
	AggregateIDPath string
	// Consumption is push or pull. Empty means push.
	Consumption string
	// Filter is the header filter. Zero: every request passes.
	Filter filter.Config
	// RequestsPerMinute is the rate limit of the source. 0: none.
	RequestsPerMinute int
	// Verifier checks the credentials of each request. Nil: every request passes.
	Verifier inboundauth.Verifier
	// Transform is the source transform. Nil: none.
	Transform Transformer
	// OnError is the error strategy of the transform: Fail, Skip or Dead. Empty means Fail.
	OnError OnError
}

// OnError is the error strategy of a source transform (transform.onError): Fail, Skip or Dead,
// in this letter case. Fail and Dead answer 422 and store nothing; Skip stores the body as
// received.
type OnError string

// The values of OnError.
const (
	OnErrorFail OnError = "Fail"
	OnErrorSkip OnError = "Skip"
	OnErrorDead OnError = "Dead"
)

// Options configure a Handler.
type Options struct {
	// BasePath is inbox.basePath, the prefix of every source path. Default: /inbox.
	BasePath string
	// MaxBodyBytes is inbox.maxBodyBytes, the largest request body. Default: 1048576.
	MaxBodyBytes int64
	// Sources are the HTTP sources. Each needs a distinct name and a distinct path.
	Sources []Source
	// Store stores the rows. Required.
	Store store.InboxStore
	// Metrics receives the measurements. Default: NopMetrics.
	Metrics Metrics
	// Logger receives the log lines. Default: slog.Default().
	Logger *slog.Logger
	// Now is the clock of the rate limits, the credential checks and $timestamp.
	// Default: time.Now.
	Now func() time.Time
	// Waker is told after a push row was stored. Default: none.
	Waker Waker
	// Draining reports whether the process is shutting down; while it is true every request
	// gets 503. Default: never (Handler.Drain still works).
	Draining func() bool
	// MaxBatch is the largest number of rows written in one statement. Default:
	// DefaultMaxBatch.
	MaxBatch int
	// Writers is the largest number of batches written at the same time, each on its own
	// database connection. Default: DefaultWriters.
	Writers int
	// BatchTimeout bounds the write of a batch of two or more rows. Default:
	// DefaultBatchTimeout. A batch of one row runs under its request's context.
	BatchTimeout time.Duration
	// Tracer creates the span of each request to a source (docs/tracing.md); nil, the
	// default, means tracing is off. With a tracer, the span continues the request's
	// traceparent, and the stored row's traceparent and tracestate are the span's.
	Tracer trace.Tracer
	// KeyLength counts the idempotency key, the aggregate id and the event type against
	// MaxKeyLength as the database's columns do: KeyLengthCodePoints on PostgreSQL,
	// KeyLengthUTF16 on SQL Server. Default: KeyLengthUTF16, which fits both.
	KeyLength KeyLength
}

// route is one compiled source: the rules that every source follows (rules.go) and what
// only an HTTP source has, the credential check and the rate limit.
type route struct {
	src            Source
	rules          *rules
	limiter        *rate.Limiter
	excludeHeaders []string // lower case
}

// Handler is the HTTP inbox. It is safe for concurrent use.
type Handler struct {
	sinks
	routes    map[string]*route // by full path
	maxBody   int64
	tooLarge  []byte
	gate      http.Handler // Gate over route
	batch     *batcher
	draining  func() bool
	drainFlag atomic.Bool
	tracer    trace.Tracer // nil when tracing is off
}

// New compiles the sources and returns the handler. It refuses a source without a name, a
// path or an idempotency key path, a JSONPath that is not definite, a filter that does not
// compile, a consumption other than push or pull, an onError other than Fail, Skip or Dead,
// a negative rate limit, and two sources with the same name or the same path.
func New(opts Options) (*Handler, error) {
	if opts.Store == nil {
		return nil, errors.New("creating inbox handler: a store is required")
	}
	if opts.BasePath == "" {
		opts.BasePath = DefaultBasePath
	}
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if opts.MaxBatch <= 0 {
		opts.MaxBatch = DefaultMaxBatch
	}
	if opts.Writers <= 0 {
		opts.Writers = DefaultWriters
	}
	if opts.BatchTimeout <= 0 {
		opts.BatchTimeout = DefaultBatchTimeout
	}
	h := &Handler{
		sinks:    sinks{metrics: opts.Metrics, waker: opts.Waker, log: opts.Logger, now: opts.Now}.withDefaults(),
		routes:   make(map[string]*route, len(opts.Sources)),
		maxBody:  opts.MaxBodyBytes,
		tooLarge: errorBody(fmt.Sprintf("Request body exceeds %d bytes", opts.MaxBodyBytes)),
		batch:    newBatcher(opts.Store, opts.MaxBatch, opts.Writers, opts.BatchTimeout),
		draining: opts.Draining,
		tracer:   opts.Tracer,
	}
	h.gate = Gate(http.HandlerFunc(h.route), h.Draining, h.maxBody)
	names := make(map[string]bool, len(opts.Sources))
	for _, src := range opts.Sources {
		rt, err := compileSource(src, h.sinks, opts.KeyLength)
		if err != nil {
			return nil, fmt.Errorf("creating inbox handler: %w", err)
		}
		if names[src.Name] {
			return nil, fmt.Errorf("creating inbox handler: two sources are named %q", src.Name)
		}
		names[src.Name] = true
		full := joinPath(opts.BasePath, src.Path)
		if other, ok := h.routes[full]; ok {
			return nil, fmt.Errorf("creating inbox handler: sources %q and %q both answer at %s", other.src.Name, src.Name, full)
		}
		h.routes[full] = rt
	}
	return h, nil
}

// compileSource compiles the shared rules of an HTTP source (the HTTP kind: the attributes
// come from the body only, and the idempotency key path is required) and its route: the
// path, the rate limit and the credential headers that no row keeps.
func compileSource(src Source, sk sinks, keyLength KeyLength) (*route, error) {
	if src.Name != "" && src.Path == "" {
		return nil, fmt.Errorf("source %s: a path is required", src.Name)
	}
	rules, err := compileRules(ruleSpec{
		kind:          httpKind,
		name:          src.Name,
		consumption:   src.Consumption,
		keyPath:       src.IdempotencyKeyPath,
		eventTypePath: src.EventTypePath,
		aggregatePath: src.AggregateIDPath,
		filter:        src.Filter,
		transform:     src.Transform,
		onError:       src.OnError,
		keyLength:     keyLength,
	}, sk)
	if err != nil {
		return nil, err
	}
	rt := &route{src: src, rules: rules}
	switch {
	case src.RequestsPerMinute < 0:
		return nil, fmt.Errorf("source %s: requestsPerMinute must be above 0", src.Name)
	case src.RequestsPerMinute > 0:
		n := src.RequestsPerMinute
		rt.limiter = rate.NewLimiter(rate.Limit(float64(n)/60), n)
	}
	rt.excludeHeaders = append(rt.excludeHeaders, alwaysExcluded...)
	if src.Verifier != nil {
		for _, name := range src.Verifier.CredentialHeaders() {
			rt.excludeHeaders = append(rt.excludeHeaders, strings.ToLower(name))
		}
	}
	return rt, nil
}

// joinPath joins the base path and a source path with exactly one slash.
func joinPath(base, path string) string {
	return "/" + strings.Trim(strings.TrimSpace(base), "/") + "/" + strings.TrimLeft(strings.TrimSpace(path), "/")
}

// Drain makes every later request answer 503. It is safe to call more than once.
func (h *Handler) Drain() { h.drainFlag.Store(true) }

// Draining reports whether the handler answers 503.
func (h *Handler) Draining() bool {
	return h.drainFlag.Load() || (h.draining != nil && h.draining())
}

// Paths returns the full path of every source, for a log line at start.
func (h *Handler) Paths() map[string]string {
	out := make(map[string]string, len(h.routes))
	for p, rt := range h.routes {
		out[rt.src.Name] = p
	}
	return out
}

// Fixed answers.
var (
	bodyShuttingDown = errorBody("QueueBox is shutting down")
	bodyNotFound     = errorBody("Not found")
	bodyInvalidJSON  = errorBody("Invalid JSON")
	bodyStorage      = errorBody("Storage failed")
	bodyFiltered     = []byte(`{"status":"filtered"}`)
	bodyDuplicate    = []byte(`{"status":"duplicate"}`)
)

// ServeHTTP implements http.Handler: the 503 and 413 of Gate, then route.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.gate.ServeHTTP(w, r) }

// route serves a request that Gate let through: 404, 429, then the source.
func (h *Handler) route(w http.ResponseWriter, r *http.Request) {
	rt, ok := h.routes[r.URL.Path]
	if !ok || r.Method != http.MethodPost {
		writeJSON(w, http.StatusNotFound, bodyNotFound)
		return
	}
	if rt.limiter != nil {
		if wait, ok := h.take(rt.limiter); !ok {
			w.Header().Set("Retry-After", strconv.FormatInt(wait, 10))
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
	}
	if h.tracer != nil {
		h.traced(w, r, rt)
		return
	}
	h.serveSource(w, r, rt)
}

// take takes a token from the bucket, or returns the whole seconds until one is there.
func (h *Handler) take(l *rate.Limiter) (int64, bool) {
	now := h.now()
	res := l.ReserveN(now, 1)
	if !res.OK() {
		return 60, false
	}
	delay := res.DelayFrom(now)
	if delay <= 0 {
		return 0, true
	}
	res.CancelAt(now)
	return max(1, int64(math.Ceil(delay.Seconds()))), false
}

// traced serves a request to a source under its span: the child of the request's trace
// context, or the root of a new trace.
func (h *Handler) traced(w http.ResponseWriter, r *http.Request, rt *route) {
	ctx, span := h.tracer.Start(tracing.ContextFromHTTP(r.Context(), r.Header), "inbox receive",
		trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(
			otelattr.String("queuebox.source", rt.src.Name),
			otelattr.String("http.request.method", r.Method),
			otelattr.String("url.path", r.URL.Path)))
	defer span.End()
	sw := &statusWriter{ResponseWriter: w}
	h.serveSource(sw, r.WithContext(ctx), rt)
	span.SetAttributes(otelattr.Int("http.response.status_code", sw.status))
	if sw.status >= 500 {
		span.SetStatus(codes.Error, http.StatusText(sw.status))
	}
}

// statusWriter remembers the status of the answer for the request's span.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// parseJSON reports whether the body is one JSON document, with whitespace around it
// allowed. It refuses text that is not UTF-8 (RFC 8259 requires it, and the database would
// refuse it), an empty body, a second document after the first, and nesting deeper than
// MaxNestingDepth. It decodes nothing and allocates nothing; selectValues reads the values of
// a body that it accepts.
func parseJSON(body []byte) bool {
	return utf8.Valid(body) && !tooDeep(body, MaxNestingDepth) && json.Valid(body)
}

// tooDeep reports whether the text opens more than limit arrays and objects at once. It skips
// the brackets inside strings. It runs before the syntax check, so that a hostile body costs
// one pass.
func tooDeep(body []byte, limit int) bool {
	depth := 0
	inString := false
	for i := 0; i < len(body); i++ {
		c := body[i]
		if inString {
			switch c {
			case '\\':
				i++
			case '"':
				inString = false
			}
			continue
		}
		switch c {
		case '"':
			inString = true
		case '[', '{':
			depth++
			if depth > limit {
				return true
			}
		case ']', '}':
			depth--
		}
	}
	return false
}

// contentTypeJSON is the Content-Type of every JSON answer. writeJSON puts this slice into
// each response's header map as it is (Header.Set would allocate one per answer); net/http
// only reads it, and an append to it copies, because its capacity is its length.
var contentTypeJSON = []string{"application/json"}

func writeJSON(w http.ResponseWriter, status int, body []byte) {
	h := w.Header()
	h["Content-Type"] = contentTypeJSON
	h["Content-Length"] = []string{strconv.Itoa(len(body))}
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// errorBody returns {"error":"<text>"}.
func errorBody(text string) []byte {
	return append(append([]byte(`{"error":`), jsonString(text)...), '}')
}

// jsonString returns s as a JSON string without HTML escapes.
func jsonString(s string) []byte {
	return appendJSONString(nil, s)
}

// appendJSONString appends s as a JSON string without HTML escapes, as encoding/json writes
// it with SetEscapeHTML(false). Text of printable ASCII other than " and \ (a message id, a
// usual header value) is copied as it is; any other text goes through encoding/json, which
// escapes control characters, U+2028 and U+2029 and replaces bytes that are not UTF-8.
func appendJSONString(dst []byte, s string) []byte {
	plain := true
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' {
			plain = false
			break
		}
	}
	if plain {
		dst = append(dst, '"')
		dst = append(dst, s...)
		return append(dst, '"')
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes
	return append(dst, bytes.TrimSuffix(buf.Bytes(), []byte("\n"))...)
}
