//go:build !queuebox_no_rabbitmq

// Package rabbitmq is the RabbitMQ destination of the outbox: a Publisher that publishes each
// row's payload to an exchange, with the mandatory flag, and returns only after the broker
// confirmed the message (publisher confirms).
//
// The exchange comes from the destination's exchange template or its exchangeFrom column; the
// publisher declares it (durable, of the configured exchangeType) the first time a connection
// uses it. The routing key is the matched route's routingKeyTemplate, or else the
// destination's routingKeyTemplate (default {{ topic }}), rendered with the route's
// routingKeyMissingFieldDefault. A message that no queue takes comes back as basic.return and
// fails the publish, so the row follows the retry path; so does a negative confirm, a closed
// channel, a lost connection and an address that renders empty.
//
// One AMQP connection is dialled on the first publish and reused. It carries a small pool of
// channels in confirm mode; each publish holds one channel alone from the publish to its
// confirm, so the confirm and any basic.return on that channel belong to that publish. A
// publish abandoned on ctx gives up its channel, which is closed rather than reused. A lost
// connection is dialled again by a later publish.
//
// Errors name the destination and never hold the credentials of the URL.
package rabbitmq

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/alternayte/queuebox/shared/forwarded"
	"github.com/alternayte/queuebox/shared/outbox"
	"github.com/alternayte/queuebox/shared/redact"
	"github.com/alternayte/queuebox/shared/template"
)

const (
	// maxChannels is the largest number of channels, and so of publishes awaiting their
	// confirm, that one publisher keeps open at once. It covers outbox.concurrency up to 16;
	// a higher concurrency waits for a free channel.
	maxChannels = 16
	// dialTimeout bounds the TCP connect and the AMQP handshake of one dial.
	dialTimeout = 15 * time.Second
	// contentType is the content_type property of every message (spec/25-headers.md).
	contentType = "application/json"
	// headerTopic and headerAttempt are the standard headers of a message.
	headerTopic   = "x-topic"
	headerAttempt = "x-attempt"
)

var (
	// ErrUnroutable is the cause of a publish that the broker returned (basic.return): no
	// queue is bound for its routing key.
	ErrUnroutable = errors.New("rabbitmq: the message was returned unroutable")
	// ErrNacked is the cause of a publish that the broker refused with a negative confirm.
	ErrNacked = errors.New("rabbitmq: the broker did not confirm the message")
	// ErrClosed is returned by Publish after Close.
	ErrClosed = errors.New("rabbitmq: the publisher is closed")
)

// Publisher delivers outbox messages to one RabbitMQ destination. It implements
// outbox.Publisher and is safe for concurrent use.
type Publisher struct {
	name         string
	url          string // holds the credentials: never in an error
	exchange     *template.Address
	exchangeType string
	routingKey   string // the destination routingKeyTemplate
	deliveryMode uint8
	headers      amqp.Table // static headers of the destination
	// guard drops the received headers of a relayed row that would replace a standard or
	// static header, that RabbitMQ reads (CC, BCC) or that are hop-by-hop.
	guard forwarded.Guard

	keys sync.Map // routingKeyID -> *template.RoutingKey

	// slots holds one token per channel that may be in use; a publish takes one first.
	slots chan struct{}

	mu     sync.Mutex
	closed bool
	conn   *connection // the current connection, or nil
	dial   *dialing    // the dial in progress, or nil
	idle   []*channel  // channels free for the next publish
}

var _ outbox.Publisher = (*Publisher)(nil)

// connection is one AMQP connection and the exchanges declared on it.
type connection struct {
	conn     *amqp.Connection
	declared sync.Map // exchange name -> struct{}
}

// dialing is a dial in progress, shared by the publishes that wait for it.
type dialing struct {
	done chan struct{}
	conn *connection
	err  error
}

// channel is one channel in confirm mode, used by one publish at a time.
type channel struct {
	conn    *connection
	ch      *amqp.Channel
	returns chan amqp.Return
	closes  chan *amqp.Error
}

type routingKeyID struct{ text, missing string }

// New returns the publisher of the RabbitMQ destination name. New fills the defaults of c
// (Config.WithDefaults), checks it (the URL, the exchange template or column, the exchange
// type and the delivery mode) and does no network I/O: the first publish dials the broker. The
// error names the configuration key and never holds the URL. Call Close when the publisher is
// no longer used.
func New(name string, c Config) (*Publisher, error) {
	c = c.WithDefaults()
	if err := c.validate(name); err != nil {
		return nil, err
	}
	exchange, err := c.exchange(name)
	if err != nil {
		return nil, err
	}
	mode, err := c.amqpDeliveryMode(name)
	if err != nil {
		return nil, err
	}
	p := &Publisher{
		name:         name,
		url:          c.URL,
		exchange:     exchange,
		exchangeType: string(c.ExchangeType),
		routingKey:   c.RoutingKeyTemplate,
		deliveryMode: mode,
		slots:        make(chan struct{}, maxChannels),
	}
	protected := []string{headerTopic, headerAttempt, "CC", "BCC"}
	if len(c.Headers) > 0 {
		p.headers = make(amqp.Table, len(c.Headers))
		for k, v := range c.Headers {
			p.headers[k] = v
			protected = append(protected, k)
		}
	}
	p.guard = forwarded.NewGuard(protected...)
	return p, nil
}

// Type returns "rabbitmq", the destination_type label.
func (p *Publisher) Type() string { return Type }

// Close closes the connection and its channels. Publishes in flight fail; a later Publish
// returns ErrClosed. Close always returns nil.
func (p *Publisher) Close() error {
	p.mu.Lock()
	p.closed = true
	conn := p.conn
	p.conn = nil
	p.idle = nil
	p.mu.Unlock()
	if conn != nil {
		_ = conn.conn.Close()
	}
	return nil
}

// Publish publishes m to its exchange and returns nil once the broker confirmed it.
//
// The message body is m.Payload, byte for byte. Its properties are message_id (m.ID),
// content_type application/json and delivery_mode 2 (persistent) or 1 (transient). Its headers
// are the static headers of the destination, then the row headers m.Headers (a row header
// replaces a static header of the same name), then x-topic (m.Topic) and x-attempt (m.Attempt,
// an integer). AMQP headers are a table with one value per name, so a row header named
// exactly x-topic or x-attempt does not replace the standard value (spec/25-headers.md).
//
// A relayed row (forwarded.IsRelayed: its headers came from a webhook sender or a broker
// producer) is stricter: a row header named, in any letter case, like a static header, like
// x-topic or x-attempt, like CC or BCC (RabbitMQ reads them for sender-selected distribution:
// a list routes copies to other queues, a string makes the broker close the channel) or like
// a hop-by-hop header is dropped (docs/headers.md).
//
// An exchange that renders empty, a declare the broker refuses, a returned (unroutable)
// message, a negative confirm and a lost channel or connection fail the publish. Publish
// returns ctx.Err(), wrapped, when ctx ends first.
func (p *Publisher) Publish(ctx context.Context, m outbox.Message) error {
	row := template.Row{Topic: m.Topic, Key: m.Key, AggregateType: m.AggregateType, Payload: m.Payload}
	exchange, err := p.exchange.Render(row)
	if err != nil {
		return fmt.Errorf("publishing to destination %s: %w", p.name, err)
	}
	key := p.routingKeyOf(m).Render(row)
	msg := amqp.Publishing{
		Headers:      p.messageHeaders(m),
		ContentType:  contentType,
		DeliveryMode: p.deliveryMode,
		MessageId:    m.ID,
		Body:         m.Payload,
	}

	select {
	case p.slots <- struct{}{}:
	case <-ctx.Done():
		return p.ctxError(ctx, exchange)
	}
	defer func() { <-p.slots }()

	ch, err := p.channel(ctx)
	if err != nil {
		return err
	}
	if err := p.declare(ch, exchange); err != nil {
		p.discard(ch)
		return err
	}
	confirm, err := ch.ch.PublishWithDeferredConfirm(exchange, key, true, false, msg)
	if err != nil {
		p.discard(ch)
		return fmt.Errorf("publishing to destination %s, exchange %q: %s", p.name, exchange, redact.Error(err))
	}
	select {
	case <-confirm.Done():
	case <-ctx.Done():
		// The confirm may still come; the channel is not reused, so that a late return or
		// confirm cannot be taken for another publish's.
		p.discard(ch)
		return p.ctxError(ctx, exchange)
	}
	// The broker sends basic.return before the basic.ack of the same message, and the client
	// hands both over in that order, so a return of this publish is already buffered.
	if err := p.returned(ch, m.ID, exchange, key); err != nil {
		p.release(ch)
		return err
	}
	if !confirm.Acked() {
		// A channel closed before the confirm also resolves it negatively.
		select {
		case cerr := <-ch.closes:
			p.discard(ch)
			if cerr != nil {
				return fmt.Errorf("publishing to destination %s, exchange %q: the channel closed: %s", p.name, exchange, redact.Error(cerr))
			}
			return fmt.Errorf("publishing to destination %s, exchange %q: the channel closed before the confirm", p.name, exchange)
		default:
		}
		if ch.ch.IsClosed() {
			p.discard(ch)
			return fmt.Errorf("publishing to destination %s, exchange %q: the channel closed before the confirm", p.name, exchange)
		}
		p.release(ch)
		return fmt.Errorf("publishing to destination %s, exchange %q: %w", p.name, exchange, ErrNacked)
	}
	p.release(ch)
	return nil
}

// returned returns the error of a basic.return of the publish of id on ch, or nil.
func (p *Publisher) returned(ch *channel, id, exchange, key string) error {
	for {
		select {
		case ret, ok := <-ch.returns:
			if !ok {
				// The channel closed (the broker refused the message, for example): the
				// confirm is negative and the caller reports the close.
				return nil
			}
			if ret.MessageId != id {
				continue // another publish's: cannot happen with one publish per channel
			}
			return fmt.Errorf("publishing to destination %s, exchange %q, routing key %q: %w (%d %s)",
				p.name, exchange, key, ErrUnroutable, ret.ReplyCode, ret.ReplyText)
		default:
			return nil
		}
	}
}

// routingKeyOf returns the compiled routing key template of m: the route's, or else the
// destination's, with the route's missing-field default.
func (p *Publisher) routingKeyOf(m outbox.Message) *template.RoutingKey {
	id := routingKeyID{text: m.Route.RoutingKeyTemplate, missing: m.Route.RoutingKeyMissingFieldDefault}
	if id.text == "" {
		id.text = p.routingKey
	}
	if k, ok := p.keys.Load(id); ok {
		return k.(*template.RoutingKey)
	}
	k, _ := p.keys.LoadOrStore(id, template.CompileRoutingKey(id.text, id.missing))
	return k.(*template.RoutingKey)
}

// messageHeaders returns the header table of m.
func (p *Publisher) messageHeaders(m outbox.Message) amqp.Table {
	h := make(amqp.Table, len(p.headers)+len(m.Headers)+2)
	for k, v := range p.headers {
		h[k] = v
	}
	relayed := forwarded.IsRelayed(m.Headers)
	for k, v := range m.Headers {
		if relayed && p.guard.Drops(k) {
			continue
		}
		h[k] = v
	}
	h[headerTopic] = m.Topic
	h[headerAttempt] = int64(m.Attempt)
	return h
}

// ctxError describes a publish that ctx ended.
func (p *Publisher) ctxError(ctx context.Context, exchange string) error {
	return fmt.Errorf("publishing to destination %s, exchange %q: %w", p.name, exchange, context.Cause(ctx))
}

// channel returns a free channel of the current connection, dialling the broker or opening a
// channel when needed.
func (p *Publisher) channel(ctx context.Context) (*channel, error) {
	conn, err := p.connection(ctx)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	for len(p.idle) > 0 {
		ch := p.idle[len(p.idle)-1]
		p.idle = p.idle[:len(p.idle)-1]
		if ch.conn == conn && !ch.ch.IsClosed() {
			p.mu.Unlock()
			return ch, nil
		}
		go ch.ch.Close() //nolint:errcheck // a stale channel: its close result does not matter
	}
	p.mu.Unlock()

	c, err := conn.conn.Channel()
	if err != nil {
		p.forget(conn)
		return nil, fmt.Errorf("opening a channel to destination %s: %s", p.name, redact.Error(err))
	}
	if err := c.Confirm(false); err != nil {
		go c.Close() //nolint:errcheck
		return nil, fmt.Errorf("putting the channel of destination %s in confirm mode: %s", p.name, redact.Error(err))
	}
	ch := &channel{
		conn:    conn,
		ch:      c,
		returns: c.NotifyReturn(make(chan amqp.Return, 4)),
		closes:  c.NotifyClose(make(chan *amqp.Error, 1)),
	}
	return ch, nil
}

// declare declares exchange on ch the first time its connection uses it.
func (p *Publisher) declare(ch *channel, exchange string) error {
	if _, ok := ch.conn.declared.Load(exchange); ok {
		return nil
	}
	if err := ch.ch.ExchangeDeclare(exchange, p.exchangeType, true, false, false, false, nil); err != nil {
		return fmt.Errorf("declaring the %s exchange %q of destination %s: %s", p.exchangeType, exchange, p.name, redact.Error(err))
	}
	ch.conn.declared.Store(exchange, struct{}{})
	return nil
}

// release returns ch to the idle channels.
func (p *Publisher) release(ch *channel) {
	p.mu.Lock()
	if !p.closed && p.conn == ch.conn && !ch.ch.IsClosed() {
		p.idle = append(p.idle, ch)
		p.mu.Unlock()
		return
	}
	p.mu.Unlock()
	go ch.ch.Close() //nolint:errcheck
}

// discard closes ch without reusing it. The close runs in the background: it waits for the
// broker's answer, which a dead connection never sends until its heartbeat fails.
func (p *Publisher) discard(ch *channel) {
	if ch.conn.conn.IsClosed() {
		p.forget(ch.conn)
	}
	go ch.ch.Close() //nolint:errcheck
}

// forget drops conn as the current connection when it is closed, so that the next publish
// dials again.
func (p *Publisher) forget(conn *connection) {
	if !conn.conn.IsClosed() {
		return
	}
	p.mu.Lock()
	if p.conn == conn {
		p.conn = nil
		p.idle = nil
	}
	p.mu.Unlock()
}

// connection returns the open connection, dialling one when there is none. Concurrent
// callers share one dial. A caller whose ctx ends stops waiting; the dial goes on and its
// connection serves the next publish.
func (p *Publisher) connection(ctx context.Context) (*connection, error) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, fmt.Errorf("publishing to destination %s: %w", p.name, ErrClosed)
	}
	if p.conn != nil && !p.conn.conn.IsClosed() {
		conn := p.conn
		p.mu.Unlock()
		return conn, nil
	}
	if p.conn != nil {
		p.conn, p.idle = nil, nil
	}
	d := p.dial
	if d == nil {
		d = &dialing{done: make(chan struct{})}
		p.dial = d
		go p.dialBroker(d)
	}
	p.mu.Unlock()

	select {
	case <-d.done:
		if d.err != nil {
			return nil, d.err
		}
		return d.conn, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("connecting to destination %s: %w", p.name, context.Cause(ctx))
	}
}

// dialBroker dials the broker for d and makes the connection current.
func (p *Publisher) dialBroker(d *dialing) {
	props := amqp.NewConnectionProperties()
	props.SetClientConnectionName("queuebox destination " + p.name)
	c, err := amqp.DialConfig(p.url, amqp.Config{
		Heartbeat:  10 * time.Second,
		Properties: props,
		Dial:       amqp.DefaultDial(dialTimeout),
	})
	p.mu.Lock()
	defer p.mu.Unlock()
	p.dial = nil
	if err != nil {
		d.err = fmt.Errorf("connecting to destination %s: %s", p.name, uriError(err, p.url))
	} else if p.closed {
		_ = c.Close()
		d.err = fmt.Errorf("connecting to destination %s: %w", p.name, ErrClosed)
	} else {
		d.conn = &connection{conn: c}
		p.conn = d.conn
		p.idle = nil
	}
	close(d.done)
}

// uriError returns the text of err without the URL or its password.
func uriError(err error, url string) string {
	text := redact.Error(err)
	if u, perr := amqp.ParseURI(url); perr == nil && u.Password != "" {
		text = strings.ReplaceAll(text, u.Password, "[REDACTED]")
	}
	return strings.ReplaceAll(text, url, "[URL]")
}
