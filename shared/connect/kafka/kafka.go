//go:build !queuebox_no_kafka

// Package kafka is the Kafka destination of the outbox: a Publisher that produces each row's
// payload as one record, with acks=all and idempotence, and returns only when the partition
// leader has acknowledged that record (spec/23-configuration.md, "Kafka destination").
//
// The record topic comes from the destination's topic address template, or from the row
// column that topicFrom names. The record key is the route's routingKeyTemplate, or else the
// destination's keyTemplate ({{ key }} by default); an empty or blank result sends no key. The
// record carries the headers of spec/25-headers.md: x-message-id, x-topic and x-attempt, then
// the destination's static headers, then the row's headers.
//
// One franz-go client is made by New and shared by every publish; it dials lazily, keeps its
// connections and re-establishes a lost one by itself, so a row that failed while the broker
// was away succeeds on a later retry.
package kafka

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/alternayte/queuebox/shared/forwarded"
	"github.com/alternayte/queuebox/shared/outbox"
	"github.com/alternayte/queuebox/shared/template"
)

// The headers that Publish sets on every record (spec/25-headers.md).
const (
	// HeaderMessageID carries the id of the outbox row.
	HeaderMessageID = "x-message-id"
	// HeaderTopic carries the topic of the outbox row.
	HeaderTopic = "x-topic"
	// HeaderAttempt carries the attempt of the outbox row, in decimal.
	HeaderAttempt = "x-attempt"
)

const (
	// maxTopicLen is the longest topic name that Kafka accepts.
	maxTopicLen = 249
	// redactedMark replaces the SASL password wherever it could appear in an error.
	redactedMark = "[REDACTED]"
)

var (
	// ErrInvalidTopic is the cause of a publish whose rendered topic is not a legal Kafka topic
	// name. The row follows the retry path, like an empty address.
	ErrInvalidTopic = errors.New("kafka: invalid topic name")
	// ErrUnsupportedSecurity is the cause of a New refused for a securityProtocol or
	// saslMechanism that this publisher does not implement.
	ErrUnsupportedSecurity = errors.New("kafka: unsupported security setting")
)

// standardHeaders are the header names that Publish sets itself. A static or row header of
// one of these names, in any letter case, is added as a second header instead of replacing
// the standard one (spec/25-headers.md).
var standardHeaders = map[string]bool{
	HeaderMessageID: true,
	HeaderTopic:     true,
	HeaderAttempt:   true,
}

// Publisher delivers outbox messages to one Kafka destination. It implements outbox.Publisher
// and is safe for concurrent use.
type Publisher struct {
	name    string
	topic   *template.Address
	key     *template.KafkaKey
	timeout time.Duration
	static  [][2]string // static headers, sorted by name
	secret  string      // the SASL password, never shown in an error
	client  *kgo.Client

	// connErr is the error of the last failed connection to a broker (a refused dial, a TLS or
	// SASL failure), cleared by a successful one. A publish that runs out of time names it.
	connErr *connHook

	// routeKeys caches the compiled routingKeyTemplate of each route, by template and
	// missing-field default.
	routeKeys sync.Map // routeKeyID -> *template.RoutingKey

	// guard drops the received headers of a relayed row that would replace or duplicate a
	// standard or static header, and the hop-by-hop ones.
	guard forwarded.Guard
}

type routeKeyID struct{ text, missingDefault string }

var _ outbox.Publisher = (*Publisher)(nil)

// option is a hook for the tests of this package: it changes the client options.
type option func(*[]kgo.Opt, *tls.Config)

// New returns the publisher of the Kafka destination name. New fills the defaults of c
// (Config.WithDefaults), compiles the topic and key templates and checks the security
// settings: SecurityProtocol PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL, and for a SASL_
// protocol the SASLMechanism PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 with a user name and a
// password. Any other mechanism (GSSAPI, OAUTHBEARER, ...) is refused with an error that wraps
// ErrUnsupportedSecurity. The error names the bad configuration key and never holds the
// password. SSL uses the system's root certificates.
//
// New does no network I/O: the client dials the bootstrap servers at the first publish. Call
// Close when the publisher is no longer used.
func New(name string, c Config) (*Publisher, error) {
	return newPublisher(name, c)
}

func newPublisher(name string, c Config, opts ...option) (*Publisher, error) {
	c = c.WithDefaults()
	if err := c.validate(name); err != nil {
		return nil, err
	}
	prefix := "destinations." + name
	topic, err := c.topic(prefix)
	if err != nil {
		return nil, err
	}

	tlsCfg := &tls.Config{MinVersion: tls.VersionTLS12}
	kopts := []kgo.Opt{
		kgo.SeedBrokers(c.brokers()...),
		kgo.ClientID("queuebox"),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		// Idempotence is the kgo default with acks=all; it is left on. Records of one
		// partition keep their order across retries.
		kgo.RecordDeliveryTimeout(c.Timeout),
	}
	useSASL, err := c.security(prefix)
	if err != nil {
		return nil, err
	}
	secret := ""
	if useSASL {
		mech, err := c.saslMechanism(prefix)
		if err != nil {
			return nil, err
		}
		kopts = append(kopts, kgo.SASL(mech))
		secret = c.SASLPassword
	}
	hook := &connHook{}
	kopts = append(kopts, kgo.WithHooks(hook))
	for _, o := range opts {
		o(&kopts, tlsCfg)
	}
	if c.usesTLS() {
		kopts = append(kopts, kgo.DialTLSConfig(tlsCfg))
	}

	client, err := kgo.NewClient(kopts...)
	if err != nil {
		return nil, fmt.Errorf("%s: making the Kafka client: %w", prefix, scrub(err, secret))
	}
	p := &Publisher{
		name:    name,
		topic:   topic,
		key:     template.CompileKafkaKey(c.KeyTemplate),
		timeout: c.Timeout,
		static:  sortedHeaders(c.Headers),
		secret:  secret,
		client:  client,
		connErr: hook,
	}
	protected := []string{HeaderMessageID, HeaderTopic, HeaderAttempt}
	for _, kv := range p.static {
		protected = append(protected, kv[0])
	}
	p.guard = forwarded.NewGuard(protected...)
	return p, nil
}

// Type returns "kafka", the destination_type label.
func (p *Publisher) Type() string { return Type }

// Close closes the client and its connections; a publish in flight fails. Publish must not be
// called after Close. Close always returns nil.
func (p *Publisher) Close() error {
	p.client.Close()
	return nil
}

// Publish produces m as one record and returns nil when the partition leader acknowledged it
// with acks=all.
//
// The record value is m.Payload, byte for byte. The topic is the rendered topic template or the
// topicFrom column; an empty or blank topic fails the publish with an error that wraps
// template.ErrEmptyAddress, and a name that Kafka refuses with ErrInvalidTopic, before any I/O.
// The key is the route's routingKeyTemplate when the route sets one, else the destination's
// keyTemplate; a blank result sends no key. The headers are x-message-id, x-topic and
// x-attempt, then the static headers, then m.Headers in name order; a row header replaces a
// static header of the same name in any letter case, and a static or row header named like a
// standard header is added after it, never replacing it. A relayed row (forwarded.IsRelayed:
// its headers came from a webhook sender or a broker producer) is stricter: a row header
// named like a standard or static header, in any letter case, or like a hop-by-hop header is
// dropped (docs/headers.md).
//
// The whole publish is bounded by timeoutMs and by ctx: Publish returns when either ends, with
// an error, even when the record is still buffered (it may then still reach the broker, which
// at-least-once delivery allows).
func (p *Publisher) Publish(ctx context.Context, m outbox.Message) error {
	row := template.Row{Topic: m.Topic, Key: m.Key, AggregateType: m.AggregateType, Payload: m.Payload}
	topic, err := p.topic.Render(row)
	if err != nil {
		return fmt.Errorf("publishing to destination %s: %w", p.name, err)
	}
	if err := checkTopic(topic); err != nil {
		return fmt.Errorf("publishing to destination %s: %w", p.name, err)
	}
	rec := &kgo.Record{Topic: topic, Value: []byte(m.Payload), Headers: p.headers(m)}
	if key, ok := p.recordKey(m, row); ok {
		rec.Key = []byte(key)
	}

	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	done := make(chan error, 1)
	p.client.Produce(ctx, rec, func(_ *kgo.Record, err error) { done <- err })
	select {
	case err = <-done:
	case <-ctx.Done():
		err = ctx.Err()
	}
	if err == nil {
		return nil
	}
	if ctx.Err() != nil {
		if last := p.connErr.last(); last != nil {
			err = fmt.Errorf("%w (last connection error: %w)", err, last)
		}
	}
	if parent.Err() == nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("producing to topic %s of destination %s: no acknowledgement within %s: %w",
			topic, p.name, p.timeout, scrub(err, p.secret))
	}
	return fmt.Errorf("producing to topic %s of destination %s: %w", topic, p.name, scrub(err, p.secret))
}

// recordKey returns the record key of m, and false when the record carries none.
func (p *Publisher) recordKey(m outbox.Message, row template.Row) (string, bool) {
	if m.Route.RoutingKeyTemplate == "" {
		return p.key.Render(row)
	}
	id := routeKeyID{m.Route.RoutingKeyTemplate, m.Route.RoutingKeyMissingFieldDefault}
	k, ok := p.routeKeys.Load(id)
	if !ok {
		k, _ = p.routeKeys.LoadOrStore(id, template.CompileRoutingKey(id.text, id.missingDefault))
	}
	key := k.(*template.RoutingKey).Render(row)
	if strings.TrimSpace(key) == "" {
		return "", false
	}
	return key, true
}

// headers returns the record headers of m (spec/25-headers.md).
func (p *Publisher) headers(m outbox.Message) []kgo.RecordHeader {
	rowHeaders := sortedHeaders(m.Headers)
	if forwarded.IsRelayed(m.Headers) {
		kept := rowHeaders[:0]
		for _, kv := range rowHeaders {
			if !p.guard.Drops(kv[0]) {
				kept = append(kept, kv)
			}
		}
		rowHeaders = kept
	}
	out := make([]kgo.RecordHeader, 0, 3+len(p.static)+len(rowHeaders))
	out = append(out,
		kgo.RecordHeader{Key: HeaderMessageID, Value: []byte(m.ID)},
		kgo.RecordHeader{Key: HeaderTopic, Value: []byte(m.Topic)},
		kgo.RecordHeader{Key: HeaderAttempt, Value: []byte(strconv.Itoa(m.Attempt))},
	)
	for _, kv := range p.static {
		if !standardHeaders[strings.ToLower(kv[0])] && hasFold(rowHeaders, kv[0]) {
			continue // the row header of the same name wins
		}
		out = append(out, kgo.RecordHeader{Key: kv[0], Value: []byte(kv[1])})
	}
	for _, kv := range rowHeaders {
		out = append(out, kgo.RecordHeader{Key: kv[0], Value: []byte(kv[1])})
	}
	return out
}

// hasFold reports whether headers has an entry named name in any letter case.
func hasFold(headers [][2]string, name string) bool {
	for _, kv := range headers {
		if strings.EqualFold(kv[0], name) {
			return true
		}
	}
	return false
}

// sortedHeaders returns the entries of headers in name order, so that records are the same
// for the same row every time.
func sortedHeaders(headers map[string]string) [][2]string {
	if len(headers) == 0 {
		return nil
	}
	out := make([][2]string, 0, len(headers))
	for name, value := range headers {
		out = append(out, [2]string{name, value})
	}
	sort.Slice(out, func(i, j int) bool { return out[i][0] < out[j][0] })
	return out
}

// checkTopic refuses a name that Kafka does not accept as a topic: at most 249 characters
// from ASCII letters, digits, '.', '_' and '-', and not "." or "..".
func checkTopic(topic string) error {
	if len(topic) > maxTopicLen {
		return fmt.Errorf("%w: %q is longer than %d characters", ErrInvalidTopic, topic[:40]+"...", maxTopicLen)
	}
	if topic == "." || topic == ".." {
		return fmt.Errorf("%w: %q", ErrInvalidTopic, topic)
	}
	for i := 0; i < len(topic); i++ {
		c := topic[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("%w: %q holds %q: use letters, digits, '.', '_' and '-'", ErrInvalidTopic, topic, rune(c))
		}
	}
	return nil
}

// connHook is a kgo hook that keeps the error of the last failed broker connection.
type connHook struct {
	err atomic.Pointer[error]
}

var _ kgo.HookBrokerConnect = (*connHook)(nil)

// OnBrokerConnect records a failed connection and clears the record on a successful one.
func (h *connHook) OnBrokerConnect(_ kgo.BrokerMetadata, _ time.Duration, _ net.Conn, err error) {
	if err == nil {
		h.err.Store(nil)
		return
	}
	h.err.Store(&err)
}

// last returns the error of the last failed connection, or nil.
func (h *connHook) last() error {
	if e := h.err.Load(); e != nil {
		return *e
	}
	return nil
}

// scrubbedError is an error whose text has the SASL password replaced. It still unwraps to the
// original error, so errors.Is works.
type scrubbedError struct {
	msg string
	err error
}

func (e *scrubbedError) Error() string { return e.msg }
func (e *scrubbedError) Unwrap() error { return e.err }

// scrub returns err with every occurrence of secret in its text replaced.
func scrub(err error, secret string) error {
	if err == nil || secret == "" || !strings.Contains(err.Error(), secret) {
		return err
	}
	return &scrubbedError{msg: strings.ReplaceAll(err.Error(), secret, redactedMark), err: err}
}
