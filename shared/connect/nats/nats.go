//go:build !queuebox_no_nats

// Package nats is the NATS destination of the outbox: a Publisher that sends each row's payload
// to a subject, through JetStream (the default: the publish waits for the stream's PubAck) or
// on core NATS (jetStream: false: no acknowledgement; the publish is flushed to the server).
//
// The subject is the destination's subject template rendered for the row, or the value of its
// subjectFrom column. A route routingKeyTemplate does not change the subject (spec/07). A
// subject that renders empty fails the publish of that row, which then follows the retry path.
//
// Each message carries the headers of spec/25-headers.md: x-message-id, x-topic, x-attempt and
// x-message-key (absent when the row has no key), then the destination's static headers, then
// the row's own headers; a row header replaces a static header of its name and is added as a
// second value to a standard header of its name. A JetStream publish also sets
// Nats-Msg-Id to outbox.Message.DedupID: the row id, so that the stream's duplicate window drops
// a row that is published again after a publish whose acknowledgement was lost (such a
// duplicate PubAck counts as a delivery); after a replay of the row, the row id and the replay
// generation, so that the stream stores the replay (docs/headers.md).
//
// The Publisher dials on the first publish and reuses the connection. The client reconnects
// in the background; while it is disconnected a publish fails at once (nothing is buffered),
// and a connection that the client gave up on is dialled again by a later publish. Errors
// never hold the password, the token or the user information of a server URL.
package nats

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/alternayte/queuebox/shared/forwarded"
	"github.com/alternayte/queuebox/shared/outbox"
	"github.com/alternayte/queuebox/shared/redact"
	"github.com/alternayte/queuebox/shared/template"
)

// The standard headers of a NATS delivery (spec/25-headers.md).
const (
	// HeaderMessageID carries the id of the outbox row.
	HeaderMessageID = "x-message-id"
	// HeaderTopic carries the topic of the row.
	HeaderTopic = "x-topic"
	// HeaderAttempt carries the attempt of the row, 0 on the first delivery.
	HeaderAttempt = "x-attempt"
	// HeaderMessageKey carries the key of the row; it is absent when the row has no key.
	HeaderMessageKey = "x-message-key"
	// HeaderMsgID is the JetStream deduplication header, set on a JetStream publish to
	// outbox.Message.DedupID: the id of the row, with its replay generation after a replay.
	HeaderMsgID = jetstream.MsgIDHeader
)

// redactedMark replaces a credential of the destination in the text of an error.
const redactedMark = "[REDACTED]"

// ErrClosed is returned by Publish after Close.
var ErrClosed = errors.New("the NATS publisher is closed")

// Publisher delivers outbox messages to one NATS destination. It implements outbox.Publisher
// and is safe for concurrent use.
type Publisher struct {
	name      string
	servers   []string
	shown     string // servers without user information, for errors
	address   *template.Address
	jetStream bool
	timeout   time.Duration
	opts      []natsgo.Option
	secrets   []string
	static    [][2]string // the destination's static headers, sorted by name
	// guard drops the received headers of a relayed row that would replace or duplicate a
	// standard or static header, that the NATS server reads, and the hop-by-hop ones.
	guard forwarded.Guard

	mu sync.Mutex
	nc *natsgo.Conn
	js jetstream.JetStream
	// live is cancelled when the connection drops, so the publishes waiting on it fail at
	// once instead of at their timeout; a reconnect gives a new one.
	live     context.Context
	liveStop context.CancelCauseFunc
	dialing  chan struct{} // closed when the running dial ends; nil when none runs
	dialErr  error         // the error of the last dial
	closed   bool
}

// New returns the publisher of the NATS destination name. New fills the defaults of c
// (Config.WithDefaults), compiles the subject (or the SubjectFrom column) and does no network
// I/O: the first Publish dials. c.Username with c.Password, or c.Token, authenticate the
// connection; the configuration's validation refuses both at once.
func New(name string, c Config) (*Publisher, error) {
	c = c.WithDefaults()
	if err := c.validate(name); err != nil {
		return nil, err
	}
	servers := c.servers()
	shown := make([]string, len(servers))
	for i, s := range servers {
		shown[i] = stripUserInfo(s)
	}
	address, err := c.address(name)
	if err != nil {
		return nil, err
	}
	p := &Publisher{
		name:      name,
		servers:   servers,
		shown:     strings.Join(shown, ","),
		address:   address,
		jetStream: c.Mode == ModeJetStream,
		timeout:   c.Timeout,
	}
	protected := []string{HeaderMessageID, HeaderTopic, HeaderAttempt, HeaderMessageKey}
	for name, value := range c.Headers {
		p.static = append(p.static, [2]string{name, value})
		protected = append(protected, name)
	}
	sort.Slice(p.static, func(i, j int) bool { return p.static[i][0] < p.static[j][0] })
	p.guard = forwarded.NewGuard(protected...).WithPrefix("Nats-")
	p.opts = []natsgo.Option{
		natsgo.Name("queuebox destination " + name),
		natsgo.Timeout(c.Timeout),
		natsgo.MaxReconnects(-1),
		// No buffer while reconnecting: a publish then fails at once and the row retries,
		// instead of being reported sent from a buffer that a process exit would lose.
		natsgo.ReconnectBufSize(-1),
		// The client's own error callback would log; the publish errors carry what matters.
		natsgo.ErrorHandler(func(*natsgo.Conn, *natsgo.Subscription, error) {}),
		natsgo.DisconnectErrHandler(p.onDisconnect),
		natsgo.ReconnectHandler(p.onReconnect),
	}
	if user := c.Username; user != "" {
		p.opts = append(p.opts, natsgo.UserInfo(user, c.Password))
		p.addSecret(c.Password)
	}
	if tok := c.Token; tok != "" {
		p.opts = append(p.opts, natsgo.Token(tok))
		p.addSecret(tok)
	}
	for _, s := range servers {
		if u, err := url.Parse(s); err == nil && u.User != nil {
			if pw, ok := u.User.Password(); ok {
				p.addSecret(pw)
			} else {
				p.addSecret(u.User.Username()) // a token in the URL
			}
		}
	}
	return p, nil
}

func (p *Publisher) addSecret(s string) {
	if s != "" {
		p.secrets = append(p.secrets, s)
	}
}

// Type returns "nats".
func (p *Publisher) Type() string { return Type }

var _ outbox.DedupPublisher = (*Publisher)(nil)

// UsesDedupID reports whether the publisher sends Nats-Msg-Id: on JetStream only.
func (p *Publisher) UsesDedupID() bool { return p.jetStream }

// Name returns the destination name.
func (p *Publisher) Name() string { return p.name }

// Close closes the connection. A Publish after Close returns ErrClosed. Close is safe to call
// more than once.
func (p *Publisher) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	if p.liveStop != nil {
		p.liveStop(ErrClosed)
	}
	if p.nc != nil {
		p.nc.Close()
		p.nc, p.js = nil, nil
	}
	return nil
}

// Publish sends m to the subject of its row and returns nil once the destination took it: on
// JetStream, when the stream acknowledged it (a duplicate acknowledgement included); on core
// NATS, when the server answered the flush that follows the publish. It returns when ctx is
// done, and it gives up after the destination's timeoutMs.
func (p *Publisher) Publish(ctx context.Context, m outbox.Message) error {
	subject, err := p.address.Render(template.Row{
		Topic:         m.Topic,
		Key:           m.Key,
		AggregateType: m.AggregateType,
		Payload:       m.Payload,
	})
	if err != nil {
		return fmt.Errorf("destination %s: subject: %w", p.name, err)
	}

	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()

	nc, js, live, err := p.connection(ctx)
	if err != nil {
		return err
	}
	pctx, pcancel := context.WithCancelCause(ctx)
	defer pcancel(nil)
	stop := context.AfterFunc(live, func() { pcancel(context.Cause(live)) })
	defer stop()
	ctx = pctx

	msg := &natsgo.Msg{Subject: subject, Data: m.Payload, Header: p.headers(m)}
	if p.jetStream {
		if _, err := js.PublishMsg(ctx, msg); err != nil {
			return p.wrap(fmt.Sprintf("publishing to JetStream subject %q", subject), cause(ctx, err))
		}
		return nil
	}
	if err := nc.PublishMsg(msg); err != nil {
		return p.wrap(fmt.Sprintf("publishing to subject %q", subject), err)
	}
	if err := nc.FlushWithContext(ctx); err != nil {
		return p.wrap(fmt.Sprintf("flushing the publish to subject %q", subject), cause(ctx, err))
	}
	return nil
}

// errConnectionLost is the cause of a publish that was waiting when the connection dropped.
var errConnectionLost = errors.New("the connection to NATS was lost while the publish waited for the server")

// cause returns the cause of ctx when err is its cancellation, so a publish that the lost
// connection ended says so; otherwise err.
func cause(ctx context.Context, err error) error {
	if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		if c := context.Cause(ctx); c != nil {
			return c
		}
	}
	return err
}

// onDisconnect ends the publishes that wait on the connection that dropped.
func (p *Publisher) onDisconnect(nc *natsgo.Conn, _ error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.nc == nc && p.liveStop != nil {
		p.liveStop(errConnectionLost)
	}
}

// onReconnect gives the publishes on the reconnected connection a new live context.
func (p *Publisher) onReconnect(nc *natsgo.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.nc == nc {
		p.newLive()
	}
}

// newLive replaces the live context. p.mu is held.
func (p *Publisher) newLive() {
	if p.liveStop != nil {
		p.liveStop(errConnectionLost)
	}
	p.live, p.liveStop = context.WithCancelCause(context.Background())
}

// headers returns the NATS headers of m: the standard ones, Nats-Msg-Id on JetStream, the
// destination's static headers, then the row's headers. A row header replaces a static header
// of the same name in any letter case, and is added after a standard value of the same name
// (spec/25-headers.md). A relayed row (forwarded.IsRelayed: its headers came from a webhook
// sender or a broker producer) drops a row header named like a standard or static header, a
// Nats- header (which the server reads: Nats-Msg-Id, Nats-Rollup, Nats-Expected-*, ...) or a
// hop-by-hop one, in any letter case (docs/headers.md).
func (p *Publisher) headers(m outbox.Message) natsgo.Header {
	h := make(natsgo.Header, 5+len(p.static)+len(m.Headers))
	h[HeaderMessageID] = []string{m.ID}
	h[HeaderTopic] = []string{m.Topic}
	h[HeaderAttempt] = []string{strconv.Itoa(m.Attempt)}
	if m.Key != "" {
		h[HeaderMessageKey] = []string{m.Key}
	}
	if p.jetStream && m.ID != "" {
		h[HeaderMsgID] = []string{m.DedupID()}
	}
	relayed := forwarded.IsRelayed(m.Headers)
	for _, kv := range p.static {
		if !relayed && hasFold(m.Headers, kv[0]) {
			continue // the row's header of this name wins
		}
		h[kv[0]] = append(h[kv[0]], kv[1])
	}
	for name, value := range m.Headers {
		if relayed && p.guard.Drops(name) {
			continue
		}
		h[name] = append(h[name], value) // case-sensitive, as NATS headers are
	}
	return h
}

// hasFold reports whether headers has a name equal to name in any letter case.
func hasFold(headers map[string]string, name string) bool {
	for k := range headers {
		if strings.EqualFold(k, name) {
			return true
		}
	}
	return false
}

// connection returns the open connection, dialling it when there is none or the client closed
// it. Concurrent callers share one dial; each stops waiting when its ctx is done.
func (p *Publisher) connection(ctx context.Context) (*natsgo.Conn, jetstream.JetStream, context.Context, error) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, nil, nil, fmt.Errorf("destination %s: %w", p.name, ErrClosed)
	}
	if p.nc != nil && !p.nc.IsClosed() {
		nc, js, live := p.nc, p.js, p.live
		p.mu.Unlock()
		return nc, js, live, nil
	}
	if p.dialing == nil {
		p.dialing = make(chan struct{})
		go p.dial(p.dialing)
	}
	done := p.dialing
	p.mu.Unlock()

	select {
	case <-done:
	case <-ctx.Done():
		return nil, nil, nil, p.wrap("connecting to "+p.shown, ctx.Err())
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, nil, nil, fmt.Errorf("destination %s: %w", p.name, ErrClosed)
	}
	if p.nc == nil || p.nc.IsClosed() {
		return nil, nil, nil, p.wrap("connecting to "+p.shown, p.dialErr)
	}
	return p.nc, p.js, p.live, nil
}

// dial connects, stores the connection and closes done.
func (p *Publisher) dial(done chan struct{}) {
	nc, err := natsgo.Connect(strings.Join(p.servers, ","), p.opts...)
	var js jetstream.JetStream
	if err == nil {
		js, err = jetstream.New(nc)
		if err != nil {
			nc.Close()
			nc = nil
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	defer close(done)
	p.dialing = nil
	if err != nil {
		p.dialErr = err
		return
	}
	if p.closed {
		nc.Close()
		return
	}
	if p.nc != nil {
		p.nc.Close()
	}
	p.nc, p.js, p.dialErr = nc, js, nil
	p.newLive()
}

// wrap returns err with the destination and the action, its text cleared of the
// destination's credentials. errors.Is and errors.As still see err.
func (p *Publisher) wrap(action string, err error) error {
	if err == nil {
		err = errors.New("unknown error")
	}
	return &Error{text: p.scrub(fmt.Sprintf("destination %s: %s: %v", p.name, action, err)), err: err}
}

// scrub removes the credentials of the destination from s.
func (p *Publisher) scrub(s string) string {
	for _, secret := range p.secrets {
		s = strings.ReplaceAll(s, secret, redactedMark)
	}
	return redact.String(s)
}

// Error is a failed connect or publish. Its text names the destination and never holds a
// credential; Unwrap returns the error of the client.
type Error struct {
	text string
	err  error
}

// Error returns the text.
func (e *Error) Error() string { return e.text }

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.err }

// stripUserInfo returns a server URL without its user information.
func stripUserInfo(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.User == nil {
		if at := strings.LastIndex(s, "@"); at >= 0 {
			return s[at+1:]
		}
		return s
	}
	u.User = nil
	return u.String()
}
