//go:build !queuebox_no_nats

package nats

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/alternayte/queuebox/shared/connect"
	"github.com/alternayte/queuebox/shared/inbox"
	"github.com/alternayte/queuebox/shared/redact"
)

// Defaults of a NATS source.
const (
	// DefaultAckWait is the default of sources.<name>.ackWaitMs.
	DefaultAckWait = 30 * time.Second
	// DefaultBatchSize is the default of sources.<name>.batchSize.
	DefaultBatchSize = 100
	// defaultFetchWait bounds one fetch that finds nothing, so the consumer notices a stop or
	// a broken connection.
	defaultFetchWait = 5 * time.Second
)

// SourceConfig is one NATS JetStream source (sources.<name> with servers, stream and
// durable, spec/07-bridge-a-broker.md).
type SourceConfig struct {
	// Servers are the server URLs. Required.
	Servers []string
	// Stream is the JetStream stream; QueueBox never creates it. Required.
	Stream string
	// Durable names the durable consumer, which the source creates or updates; replicas
	// with the same name share the work. Required.
	Durable string
	// FilterSubject limits the consumer to a subject. Empty: every subject of the stream.
	FilterSubject string
	// AckWait is how long JetStream waits for the acknowledgement before it redelivers.
	// Default: DefaultAckWait.
	AckWait time.Duration
	// BatchSize is the largest number of messages in one fetch, stored together.
	// Default: DefaultBatchSize.
	BatchSize int
	// Username with Password, or Token, authenticate the connection.
	Username, Password, Token string
	// Intake holds how the inbox stores the messages. Its Name is the source name. Required.
	Intake inbox.BrokerSource
	// IntakeOptions are the metrics, waker, logger and clock of the intake.
	IntakeOptions inbox.IntakeOptions
	// Logger receives the consumer's log lines. Default: slog.Default().
	Logger *slog.Logger
	// Backoff is the wait between two attempts to set up the consumer, and after a failed
	// store. Default: 250 ms doubling to 30 s.
	Backoff connect.Backoff
	// fetchWait bounds one fetch that finds nothing. Default: defaultFetchWait; the tests
	// set it (WithFetchWait).
	fetchWait time.Duration
}

// WithDefaults returns c with every unset optional field at its default.
func (c SourceConfig) WithDefaults() SourceConfig {
	if c.AckWait <= 0 {
		c.AckWait = DefaultAckWait
	}
	if c.BatchSize <= 0 {
		c.BatchSize = DefaultBatchSize
	}
	if c.fetchWait <= 0 {
		c.fetchWait = defaultFetchWait
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.IntakeOptions.Logger == nil {
		c.IntakeOptions.Logger = c.Logger
	}
	return c
}

func (c SourceConfig) validate() error {
	name := c.Intake.Name
	switch {
	case name == "":
		return errors.New("creating NATS source: a source name is required")
	case len(c.Servers) == 0:
		return fmt.Errorf("source %s: servers is required", name)
	case c.Stream == "":
		return fmt.Errorf("source %s: stream is required", name)
	case c.Durable == "":
		return fmt.Errorf("source %s: durable is required", name)
	case c.Token != "" && c.Username != "":
		return fmt.Errorf("source %s: set a token or a user name, not both", name)
	}
	return nil
}

// Source consumes a JetStream stream through a durable pull consumer into the inbox: it
// stores each fetched batch with one batched insert, acknowledges each message once the
// rows commit, and sends a negative acknowledgement when the store fails, so JetStream
// delivers it again at once. The client reconnects by itself after the connection breaks.
// Its Check is the health component nats.<name>.
type Source struct {
	cfg     SourceConfig
	state   connect.SourceState
	secrets []string
}

// NewSource checks c and returns the source; it makes no connection.
func NewSource(c SourceConfig) (*Source, error) {
	c = c.WithDefaults()
	if err := c.validate(); err != nil {
		return nil, err
	}
	s := &Source{cfg: c}
	for _, secret := range []string{c.Password, c.Token} {
		if secret != "" {
			s.secrets = append(s.secrets, secret)
		}
	}
	for _, srv := range c.Servers {
		if u, err := url.Parse(srv); err == nil && u.User != nil {
			if pw, ok := u.User.Password(); ok {
				s.secrets = append(s.secrets, pw)
			} else if u.User.Username() != "" {
				s.secrets = append(s.secrets, u.User.Username())
			}
		}
	}
	return s, nil
}

// Name returns the source name.
func (s *Source) Name() string { return s.cfg.Intake.Name }

// Check is the probe of the health component nats.<name>.
func (s *Source) Check(ctx context.Context) error { return s.state.Check(ctx) }

// scrub removes the source's credentials from an error text.
func (s *Source) scrub(err error) string {
	text := redact.Error(err)
	for _, secret := range s.secrets {
		text = strings.ReplaceAll(text, secret, redactedMark)
	}
	return text
}

// Run consumes until ctx ends, storing through sink, and returns ctx's error; or it returns
// an error wrapping connect.ErrStopped when the stream is missing. A batch whose store
// began is finished and acknowledged after ctx ends; what the consumer fetched beyond it
// gets a negative acknowledgement, and JetStream delivers it again (after AckWait when the
// connection is already lost).
func (s *Source) Run(ctx context.Context, sink inbox.Inserter) error {
	intake, err := inbox.NewIntake(s.cfg.Intake, sink, s.cfg.IntakeOptions)
	if err != nil {
		return err
	}
	log := s.cfg.Logger.With(slog.String("source", s.Name()))
	opts := []natsgo.Option{
		natsgo.Name("queuebox source " + s.Name()),
		natsgo.MaxReconnects(-1),
		natsgo.RetryOnFailedConnect(true),
		natsgo.ErrorHandler(func(*natsgo.Conn, *natsgo.Subscription, error) {}),
		natsgo.DisconnectErrHandler(func(nc *natsgo.Conn, err error) {
			if !nc.IsClosed() { // a close at the end of Run keeps the final state
				s.state.Down("the connection to NATS is lost; reconnecting", err)
			}
		}),
	}
	if s.cfg.Username != "" {
		opts = append(opts, natsgo.UserInfo(s.cfg.Username, s.cfg.Password))
	}
	if s.cfg.Token != "" {
		opts = append(opts, natsgo.Token(s.cfg.Token))
	}
	servers := strings.Join(s.cfg.Servers, ",")
	nc, err := natsgo.Connect(servers, opts...)
	if err != nil {
		err = fmt.Errorf("source %s: connecting to NATS: %s", s.Name(), s.scrub(err))
		s.state.Down("the source cannot connect to NATS", err)
		return err
	}
	defer func() { nc.Close() }()
	js, err := jetstream.New(nc)
	if err != nil {
		return fmt.Errorf("source %s: %s", s.Name(), s.scrub(err))
	}
	backoff := s.cfg.Backoff
	return connect.Reconnect(ctx, &s.state, &backoff, log, "nats", "the consumer is reconnecting to NATS", s.scrub,
		func(ctx context.Context) error {
			// The client reconnects by itself, but it closes the connection for good when the
			// server refuses the credentials twice in a row: then the session starts on a new
			// connection, so that credentials fixed on the server are taken up without a restart.
			if nc.IsClosed() {
				fresh, err := natsgo.Connect(servers, opts...)
				if err != nil {
					return fmt.Errorf("source %s: connecting to NATS: %s", s.Name(), s.scrub(err))
				}
				if js, err = jetstream.New(fresh); err != nil {
					fresh.Close()
					return fmt.Errorf("source %s: %s", s.Name(), s.scrub(err))
				}
				nc = fresh
			}
			err := s.consume(ctx, js, intake, &backoff, log)
			if err != nil && nc.IsClosed() && nc.LastError() != nil {
				// Say why the connection closed (a refused credential, say), not only that it did.
				err = fmt.Errorf("%w; the connection to NATS closed: %s", err, s.scrub(nc.LastError()))
			}
			return err
		})
}

// consume sets up the durable consumer and fetches, stores and acknowledges batches until
// ctx ends or a fetch fails.
func (s *Source) consume(ctx context.Context, js jetstream.JetStream, intake *inbox.Intake, backoff *connect.Backoff, log *slog.Logger) error {
	cons, err := s.durable(ctx, js)
	if err != nil {
		return err
	}
	s.state.Up()
	backoff.Reset()
	log.Info("nats source consuming", slog.String("stream", s.cfg.Stream), slog.String("durable", s.cfg.Durable))

	// The next batch is fetched while the current one is stored, so that the broker's
	// round trip and the database's overlap: a pull request that takes only the messages
	// available (no wait) goes out before the insert of each batch, and a goroutine turns
	// its messages into rows (inbox.Batch.Add) as they arrive, during the insert. When it
	// brings none, the next pull request waits for messages, as the first one does. The
	// acknowledgements of a stored batch go out from another goroutine while the next batch
	// is stored. What a prefetch holds when the consumer stops, or when a store fails, gets a
	// negative acknowledgement, so that JetStream delivers it again at once.
	pl := s.newPipeline(ctx, cons, intake, log)
	defer pl.close()
	for {
		cur, err := pl.next(ctx)
		if err != nil {
			return err
		}
		if nc := js.Conn(); nc.IsConnected() {
			s.state.Up()
		}
		if len(cur.msgs) == 0 {
			continue
		}
		fetchErr := pl.prefetch(ctx, cur)
		sctx, cancel := connect.StoreContext(ctx)
		_, err = cur.batch.Write(sctx)
		cancel()
		if err != nil {
			pl.storeFailed(cur, err)
			if fetchErr != nil {
				return fetchErr
			}
			if backoff.Wait(ctx) != nil {
				return ctx.Err()
			}
			continue
		}
		backoff.Reset()
		pl.acks <- cur.msgs
		if fetchErr != nil {
			return fetchErr
		}
	}
}

// durable looks up the stream and creates or updates the durable consumer on it. A missing
// stream stops the source (connect.ErrStopped).
func (s *Source) durable(ctx context.Context, js jetstream.JetStream) (jetstream.Consumer, error) {
	setup, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	stream, err := js.Stream(setup, s.cfg.Stream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, fmt.Errorf("source %s: stream %q does not exist; create it before QueueBox starts (QueueBox never creates a stream): %w",
			s.Name(), s.cfg.Stream, connect.ErrStopped)
	}
	if err != nil {
		return nil, fmt.Errorf("source %s: looking up stream %q: %s", s.Name(), s.cfg.Stream, s.scrub(err))
	}
	cons, err := stream.CreateOrUpdateConsumer(setup, jetstream.ConsumerConfig{
		Durable:       s.cfg.Durable,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       s.cfg.AckWait,
		FilterSubject: s.cfg.FilterSubject,
		DeliverPolicy: jetstream.DeliverAllPolicy,
		MaxAckPending: max(1000, 2*s.cfg.BatchSize),
	})
	if err != nil {
		return nil, fmt.Errorf("source %s: creating durable consumer %q on stream %q: %s", s.Name(), s.cfg.Durable, s.cfg.Stream, s.scrub(err))
	}
	return cons, nil
}

// pipeline is the state of one consume: the two batches that take turns, the next batch
// while it gathers, and the acknowledgements of the stored batches, which go out from their
// own goroutine. It belongs to the goroutine of consume.
type pipeline struct {
	s    *Source
	cons jetstream.Consumer
	log  *slog.Logger
	// addCtx is the context of the rows' preparation: as the writes, it finishes when the
	// consume's ctx ends (a transform is not cut short into a dead row).
	addCtx  context.Context
	batches [2]*inbox.Batch
	pending <-chan gathered // the next batch, gathering; nil when none
	acks    chan []jetstream.Msg
	acked   chan struct{} // closed when every acknowledgement went out
}

// newPipeline returns the pipeline of a consume and starts its acknowledgements.
func (s *Source) newPipeline(ctx context.Context, cons jetstream.Consumer, intake *inbox.Intake, log *slog.Logger) *pipeline {
	pl := &pipeline{
		s: s, cons: cons, log: log,
		addCtx:  context.WithoutCancel(ctx),
		batches: [2]*inbox.Batch{intake.NewBatch(s.cfg.BatchSize), intake.NewBatch(s.cfg.BatchSize)},
		acks:    make(chan []jetstream.Msg, 1),
		acked:   make(chan struct{}),
	}
	go pl.acknowledge()
	return pl
}

// acknowledge acknowledges the messages of each stored batch until acks is closed.
func (pl *pipeline) acknowledge() {
	defer close(pl.acked)
	for msgs := range pl.acks {
		for _, m := range msgs {
			if err := m.Ack(); err != nil {
				// The row is stored: JetStream delivers the message again after AckWait
				// and the store finds it a duplicate.
				pl.log.Warn("nats source: acknowledging a stored message failed", slog.String("error", pl.s.scrub(err)))
			}
		}
	}
}

// next returns the batch to store: the prefetched one, or else one fetched with a wait.
func (pl *pipeline) next(ctx context.Context) (gathered, error) {
	if pl.pending != nil {
		cur := <-pl.pending
		pl.pending = nil
		return cur, nil
	}
	if ctx.Err() != nil {
		return gathered{}, ctx.Err()
	}
	p, err := pl.s.fetch(ctx, pl.cons, true)
	if err != nil {
		return gathered{}, err
	}
	return p.gather(pl.addCtx, pl.batches[0], pl.s, pl.log), nil
}

// prefetch sends the no-wait pull request of the batch after cur, unless ctx ended, and
// gathers its messages into the other batch on a goroutine of its own. It returns the error
// of the request, which ends the consume once cur is stored.
func (pl *pipeline) prefetch(ctx context.Context, cur gathered) error {
	if ctx.Err() != nil {
		return nil
	}
	p, err := pl.s.fetch(ctx, pl.cons, false)
	if p != nil {
		other := pl.batches[0]
		if cur.batch == other {
			other = pl.batches[1]
		}
		next := make(chan gathered, 1)
		go func() { next <- p.gather(pl.addCtx, other, pl.s, pl.log) }()
		pl.pending = next
	}
	return err
}

// storeFailed sends negative acknowledgements for the batch whose store failed with err and
// for the prefetched one.
func (pl *pipeline) storeFailed(cur gathered, err error) {
	pl.log.Error("nats source: storing messages failed; sending negative acknowledgements", slog.Int("messages", len(cur.msgs)), slog.Any("error", err))
	nakAll(cur.msgs)
	if pl.pending != nil {
		nakAll((<-pl.pending).msgs)
		pl.pending = nil
	}
}

// close sends negative acknowledgements for the prefetched batch and waits for the
// acknowledgements of the stored ones.
func (pl *pipeline) close() {
	if pl.pending != nil {
		nakAll((<-pl.pending).msgs)
	}
	close(pl.acks)
	<-pl.acked
}

// gathered is the messages of one fetch and their rows.
type gathered struct {
	msgs  []jetstream.Msg
	batch *inbox.Batch
}

// nakAll sends a negative acknowledgement for each message.
func nakAll(msgs []jetstream.Msg) {
	for _, m := range msgs {
		_ = m.Nak()
	}
}

// prefetch is one pull request under way.
type prefetch struct {
	fetched jetstream.MessageBatch
	cancel  context.CancelFunc
	// more, set on a waiting fetch, takes what else is available at once once the waited-for
	// message has arrived.
	more func() (jetstream.MessageBatch, error)
}

// fetch sends a pull request for the next batch and returns at once. With wait the request
// waits up to fetchWait for one message, and the batch is that message and what else is
// available when it arrives (a second, no-wait request for up to BatchSize-1): a pull request
// for BatchSize messages would hold a lone message until the batch fills or the wait ends.
// Without wait, it takes only the messages available.
func (s *Source) fetch(ctx context.Context, cons jetstream.Consumer, wait bool) (*prefetch, error) {
	var (
		fetched jetstream.MessageBatch
		err     error
		cancel  context.CancelFunc = func() {}
		more    func() (jetstream.MessageBatch, error)
	)
	if wait {
		var fctx context.Context
		fctx, cancel = context.WithTimeout(ctx, s.cfg.fetchWait)
		fetched, err = cons.Fetch(1, jetstream.FetchContext(fctx))
		if s.cfg.BatchSize > 1 {
			more = func() (jetstream.MessageBatch, error) { return cons.FetchNoWait(s.cfg.BatchSize - 1) }
		}
	} else {
		fetched, err = cons.FetchNoWait(s.cfg.BatchSize)
	}
	if err != nil {
		cancel()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("source %s: fetching: %s", s.Name(), s.scrub(err))
	}
	return &prefetch{fetched: fetched, cancel: cancel, more: more}, nil
}

// gather takes the messages of the fetch as they arrive, until it ends, and adds each to b,
// which it empties first; after a waiting fetch that brought its message, it takes the
// messages available at once too.
func (p *prefetch) gather(ctx context.Context, b *inbox.Batch, s *Source, log *slog.Logger) gathered {
	b.Reset()
	g := gathered{batch: b}
	take := func(fetched jetstream.MessageBatch) {
		for m := range fetched.Messages() {
			g.msgs = append(g.msgs, m)
			d := delivery(m)
			b.Add(ctx, &d)
		}
		if err := fetched.Error(); err != nil && !errors.Is(err, natsgo.ErrTimeout) && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
			log.Debug("nats source: a fetch ended early", slog.String("error", s.scrub(err)))
		}
	}
	take(p.fetched)
	p.cancel()
	if p.more != nil && len(g.msgs) > 0 {
		rest, err := p.more()
		if err != nil {
			// The batch holds what the first request brought; the rest is fetched next.
			log.Debug("nats source: fetching the rest of a batch failed", slog.String("error", s.scrub(err)))
			return g
		}
		take(rest)
	}
	return g
}

// delivery converts a JetStream message: every header with its last value, Nats-Msg-Id as
// the third idempotency key.
func delivery(m jetstream.Msg) inbox.Delivery {
	h := m.Headers()
	d := inbox.Delivery{Body: m.Data()}
	if len(h) > 0 {
		d.Headers = make(map[string]string, len(h))
		for name, values := range h {
			if len(values) > 0 {
				d.Headers[name] = values[len(values)-1]
			}
		}
		if ids := h.Values(HeaderMsgID); len(ids) > 0 {
			d.BrokerKey = ids[len(ids)-1]
		}
	}
	return d
}
