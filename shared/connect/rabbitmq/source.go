//go:build !queuebox_no_rabbitmq

package rabbitmq

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"
	"unicode/utf8"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/alternayte/queuebox/shared/connect"
	"github.com/alternayte/queuebox/shared/inbox"
	"github.com/alternayte/queuebox/shared/redact"
)

// DefaultPrefetchCount is the default of sources.<name>.prefetchCount.
const DefaultPrefetchCount = 10

// WindowGap is how long the consumer waits for the next delivery of a prefetch window before
// it stores the deliveries it holds. The client hands deliveries over one at a time, and the
// broker sends a window as a burst after each acknowledgement, so without a wait a batch would
// hold the first delivery only; a trickle of messages waits this long once per message.
const WindowGap = time.Millisecond

// SourceConfig is one RabbitMQ source (sources.<name> with queueName and connectionUrl,
// spec/07-bridge-a-broker.md).
type SourceConfig struct {
	// URL is connectionUrl, the AMQP URI of the broker. Required.
	URL string
	// Queue is queueName, the queue to consume. Required.
	Queue string
	// PrefetchCount is the largest number of unacknowledged deliveries, and so the largest
	// number of messages stored in one batch. Default: DefaultPrefetchCount.
	PrefetchCount int
	// DeclareQueue declares the queue as durable before the consumer starts; otherwise a
	// missing queue stops the source with an error that names it. Default: false.
	DeclareQueue bool
	// Intake holds how the inbox stores the messages (keys, filter, transform). Its Name is
	// the source name. Required.
	Intake inbox.BrokerSource
	// IntakeOptions are the metrics, waker, logger and clock of the intake.
	IntakeOptions inbox.IntakeOptions
	// Logger receives the consumer's log lines. Default: slog.Default().
	Logger *slog.Logger
	// Backoff is the wait between two connection attempts, and after a failed store.
	// Default: 250 ms doubling to 30 s.
	Backoff connect.Backoff
}

// WithDefaults returns c with every unset optional field at its default.
func (c SourceConfig) WithDefaults() SourceConfig {
	if c.PrefetchCount <= 0 {
		c.PrefetchCount = DefaultPrefetchCount
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
	if c.Intake.Name == "" {
		return errors.New("creating RabbitMQ source: a source name is required")
	}
	if c.Queue == "" {
		return fmt.Errorf("source %s: queueName is required", c.Intake.Name)
	}
	if _, err := amqp.ParseURI(c.URL); err != nil {
		return fmt.Errorf("source %s: connectionUrl: %s", c.Intake.Name, uriError(err, c.URL))
	}
	return nil
}

// Source consumes one RabbitMQ queue into the inbox: it stores the deliveries of each
// prefetch window with one batched insert, acknowledges them once the rows commit, and
// requeues them when the store fails. It reconnects with backoff after the connection
// breaks. Its State is the health component rabbitmq.<name>.
type Source struct {
	cfg   SourceConfig
	state connect.SourceState
}

// NewSource checks c and returns the source; it makes no connection.
func NewSource(c SourceConfig) (*Source, error) {
	c = c.WithDefaults()
	if err := c.validate(); err != nil {
		return nil, err
	}
	return &Source{cfg: c}, nil
}

// Name returns the source name.
func (s *Source) Name() string { return s.cfg.Intake.Name }

// Check is the probe of the health component rabbitmq.<name>: nil while the consumer
// consumes.
func (s *Source) Check(ctx context.Context) error { return s.state.Check(ctx) }

// Run consumes until ctx ends, storing through sink, and returns ctx's error; or it returns
// an error wrapping connect.ErrStopped when the queue is missing. A batch whose store began
// is finished and acknowledged after ctx ends; what the consumer holds beyond it returns to
// the queue when the connection closes.
func (s *Source) Run(ctx context.Context, sink inbox.Inserter) error {
	intake, err := inbox.NewIntake(s.cfg.Intake, sink, s.cfg.IntakeOptions)
	if err != nil {
		return err
	}
	log := s.cfg.Logger.With(slog.String("source", s.Name()))
	backoff := s.cfg.Backoff
	var rec recovery
	return connect.Reconnect(ctx, &s.state, &backoff, log, "rabbitmq", "the consumer is reconnecting to the broker", redact.Error,
		func(ctx context.Context) error {
			if rec.rescueDue {
				if err := s.rescue(ctx, intake, log, &rec); err != nil {
					return err
				}
			}
			return s.session(ctx, intake, &backoff, log, &rec)
		})
}

// session connects, consumes until the connection breaks or ctx ends, and closes the
// connection, which returns every unacknowledged delivery to the queue.
func (s *Source) session(ctx context.Context, intake *inbox.Intake, backoff *connect.Backoff, log *slog.Logger, rec *recovery) error {
	conn, err := s.dial()
	if err != nil {
		return err
	}
	defer conn.Close()
	closed := conn.NotifyClose(make(chan *amqp.Error, 1))
	ch, err := s.openQueue(conn)
	if err != nil {
		return err
	}
	prefetch := s.cfg.PrefetchCount
	if rec.careful {
		prefetch = 1
	}
	tag := "queuebox-" + s.Name()
	if err := ch.Qos(prefetch, 0, false); err != nil {
		return fmt.Errorf("source %s: setting the prefetch count: %w", s.Name(), err)
	}
	deliveries, err := ch.Consume(s.cfg.Queue, tag, false, false, false, false, nil)
	if err != nil {
		return fmt.Errorf("source %s: consuming queue %q: %w", s.Name(), s.cfg.Queue, err)
	}
	s.state.Up()
	backoff.Reset()
	log.Info("rabbitmq source consuming", slog.String("queue", s.cfg.Queue), slog.Int("prefetch_count", prefetch))
	c := &consumer{
		s: s, conn: conn, closed: closed, ch: ch, tag: tag, deliveries: deliveries,
		batch: intake.NewBatch(s.cfg.PrefetchCount), addCtx: context.WithoutCancel(ctx),
		backoff: backoff, log: log, rec: rec, gap: time.NewTimer(WindowGap),
	}
	c.gap.Stop()
	defer c.gap.Stop()
	return c.run(ctx)
}

// dial connects to the broker.
func (s *Source) dial() (*amqp.Connection, error) {
	props := amqp.NewConnectionProperties()
	props.SetClientConnectionName("queuebox source " + s.Name())
	conn, err := amqp.DialConfig(s.cfg.URL, amqp.Config{
		Heartbeat:  10 * time.Second,
		Properties: props,
		Dial:       amqp.DefaultDial(dialTimeout),
	})
	if err != nil {
		return nil, fmt.Errorf("connecting source %s: %s", s.Name(), uriError(err, s.cfg.URL))
	}
	return conn, nil
}

// openQueue opens a channel and declares the queue (durable, with DeclareQueue) or checks
// that it exists. A missing queue, and a queue that the broker refuses access to, stop the
// source (connect.ErrStopped).
func (s *Source) openQueue(conn *amqp.Connection) (*amqp.Channel, error) {
	ch, err := conn.Channel()
	if err != nil {
		return nil, fmt.Errorf("opening a channel for source %s: %w", s.Name(), err)
	}
	if s.cfg.DeclareQueue {
		_, err = ch.QueueDeclare(s.cfg.Queue, true, false, false, false, nil)
	} else {
		_, err = ch.QueueDeclarePassive(s.cfg.Queue, true, false, false, false, nil)
	}
	if err == nil {
		return ch, nil
	}
	var aerr *amqp.Error
	if errors.As(err, &aerr) && aerr.Code == amqp.NotFound {
		return nil, fmt.Errorf("source %s: queue %q does not exist on the broker; create it, or set declareQueue: true: %w",
			s.Name(), s.cfg.Queue, connect.ErrStopped)
	}
	if errors.As(err, &aerr) && aerr.Code == amqp.AccessRefused {
		return nil, fmt.Errorf("source %s: the broker refuses access to queue %q: %s: %w", s.Name(), s.cfg.Queue, aerr.Reason, connect.ErrStopped)
	}
	return nil, fmt.Errorf("source %s: checking queue %q: %w", s.Name(), s.cfg.Queue, err)
}

// consumer is the state of one session's consumption: it stores each prefetch window with one
// batched insert and acknowledges it once the rows commit. It belongs to the goroutine of
// session.
type consumer struct {
	s          *Source
	conn       *amqp.Connection
	closed     <-chan *amqp.Error // the connection's NotifyClose channel
	ch         *amqp.Channel
	tag        string
	deliveries <-chan amqp.Delivery
	// batch holds the rows of the window. Each delivery is turned into its row as it arrives
	// (Batch.Add), while the consumer waits for the rest of the window; as the write, that
	// work finishes when ctx ends (addCtx: a transform is not cut short into a dead row).
	batch  *inbox.Batch
	addCtx context.Context
	last   uint64 // the delivery tag of the window's last delivery
	// carried are the deliveries of a cancelled consumer that the next batch stores first.
	carried      []amqp.Delivery
	carefulAcked int // deliveries acknowledged while careful
	gap          *time.Timer
	backoff      *connect.Backoff
	log          *slog.Logger
	rec          *recovery
}

// run stores and acknowledges windows until ctx ends or the session ends.
func (c *consumer) run(ctx context.Context) error {
	s := c.s
	for {
		if err := c.first(ctx); err != nil {
			return err
		}
		c.fillWindow()
		sctx, cancel := connect.StoreContext(ctx)
		_, err := c.batch.Write(sctx)
		cancel()
		if err != nil {
			c.log.Error("rabbitmq source: storing messages failed; requeueing them", slog.Int("messages", c.batch.Len()), slog.Any("error", err))
			if nerr := c.ch.Nack(c.last, true, true); nerr != nil {
				return c.ended(fmt.Errorf("source %s: requeueing after a failed store: %w", s.Name(), nerr))
			}
			if c.backoff.Wait(ctx) != nil {
				return ctx.Err()
			}
			continue
		}
		c.backoff.Reset()
		// Every delivery up to last is answered: the batch holds each unacknowledged one.
		if err := c.ch.Ack(c.last, true); err != nil {
			return c.ended(fmt.Errorf("source %s: acknowledging stored messages: %w", s.Name(), err))
		}
		if c.rec.careful {
			if err := c.leaveCareful(); err != nil {
				return err
			}
		}
	}
}

// ended returns the error that ends the session: the client's frame error, which starts the
// recovery of an undecodable message, or err.
func (c *consumer) ended(err error) error {
	if e := frameError(c.closed); e != nil {
		c.rec.afterFrameError(c.log, e)
		return fmt.Errorf("source %s: the AMQP client closed the connection: %w", c.s.Name(), e)
	}
	return err
}

// add turns a delivery into its row of the batch.
func (c *consumer) add(d *amqp.Delivery) {
	msg := delivery(d)
	c.batch.Add(c.addCtx, &msg)
	c.last = d.DeliveryTag
}

// first empties the batch and adds the window's first deliveries: those carried over, or else
// the next delivery, waited for.
func (c *consumer) first(ctx context.Context) error {
	c.batch.Reset()
	if len(c.carried) > 0 {
		for i := range c.carried {
			c.add(&c.carried[i])
		}
		c.carried = nil
		return nil
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case d, ok := <-c.deliveries:
		if !ok {
			return c.ended(fmt.Errorf("source %s: the broker closed the consumer: %w", c.s.Name(), closeReason(c.conn)))
		}
		c.add(&d)
	}
	return nil
}

// fillWindow adds the rest of the prefetch window to the batch: each delivery that follows
// the one before within WindowGap.
func (c *consumer) fillWindow() {
	for c.batch.Len() < c.s.cfg.PrefetchCount {
		select {
		case d, ok := <-c.deliveries:
			if !ok {
				return
			}
			c.add(&d)
			continue
		default:
		}
		c.gap.Reset(WindowGap)
		select {
		case d, ok := <-c.deliveries:
			c.gap.Stop()
			if !ok {
				return
			}
			c.add(&d)
		case <-c.gap.C:
			return
		}
	}
}

// leaveCareful counts the deliveries acknowledged while careful and, past the window in which
// the client failed, raises the prefetch to its full count again.
func (c *consumer) leaveCareful() error {
	if c.carefulAcked += c.batch.Len(); c.carefulAcked < c.s.cfg.PrefetchCount {
		return nil
	}
	var err error
	if c.deliveries, c.carried, err = c.s.raisePrefetch(c.ch, c.tag, c.deliveries); err != nil {
		return c.ended(err)
	}
	c.rec.careful, c.rec.decodableHeads = false, 0
	c.log.Info("rabbitmq source consuming at the full prefetch count again", slog.Int("prefetch_count", c.s.cfg.PrefetchCount))
	return nil
}

// closeReason is the error with which the connection closed, or a generic one.
func closeReason(conn *amqp.Connection) error {
	if conn.IsClosed() {
		return errors.New("the connection closed")
	}
	return errors.New("the delivery channel closed")
}

// delivery converts an AMQP delivery: the headers by the rules of spec/27-inbox-table.md,
// message_id as the third idempotency key, correlation_id as the second correlation
// identifier.
func delivery(d *amqp.Delivery) inbox.Delivery {
	return inbox.Delivery{
		Body:          d.Body,
		Headers:       Headers(d.Headers),
		BrokerKey:     d.MessageId,
		CorrelationID: d.CorrelationId,
	}
}

// Headers converts AMQP headers to the inbox's text values: a string as it is; a number, a
// boolean or a timestamp (RFC 3339, UTC) as its string form; a nested table or array as
// JSON text; a byte array as UTF-8 text, or base64: and its Base64 text when it is not
// valid UTF-8; a void value as an empty string.
func Headers(t amqp.Table) map[string]string {
	if len(t) == 0 {
		return nil
	}
	out := make(map[string]string, len(t))
	for k, v := range t {
		out[k] = headerText(v)
	}
	return out
}

func headerText(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	case []byte:
		return bytesText(x)
	case amqp.Table, []any:
		b, err := json.Marshal(jsonValue(x))
		if err != nil {
			return fmt.Sprint(x)
		}
		return string(b)
	}
	return scalarText(v)
}

func scalarText(v any) string {
	switch x := v.(type) {
	case bool:
		return strconv.FormatBool(x)
	case int8:
		return strconv.FormatInt(int64(x), 10)
	case int16:
		return strconv.FormatInt(int64(x), 10)
	case int32:
		return strconv.FormatInt(int64(x), 10)
	case int64:
		return strconv.FormatInt(x, 10)
	case int:
		return strconv.Itoa(x)
	case uint8:
		return strconv.FormatUint(uint64(x), 10)
	case uint16:
		return strconv.FormatUint(uint64(x), 10)
	case uint32:
		return strconv.FormatUint(uint64(x), 10)
	case uint64:
		return strconv.FormatUint(x, 10)
	case float32:
		return strconv.FormatFloat(float64(x), 'g', -1, 32)
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64)
	case time.Time:
		return x.UTC().Format(time.RFC3339)
	case amqp.Decimal:
		return decimalText(x)
	}
	return fmt.Sprint(v)
}

// decimalText renders an AMQP decimal: value * 10^-scale.
func decimalText(d amqp.Decimal) string {
	neg := d.Value < 0
	digits := strconv.FormatInt(int64(d.Value), 10)
	if neg {
		digits = digits[1:]
	}
	if s := int(d.Scale); s > 0 {
		for len(digits) <= s {
			digits = "0" + digits
		}
		digits = digits[:len(digits)-s] + "." + digits[len(digits)-s:]
	}
	if neg {
		return "-" + digits
	}
	return digits
}

func bytesText(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	return "base64:" + base64.StdEncoding.EncodeToString(b)
}

// jsonValue converts a nested table or array to values that encoding/json writes: strings,
// numbers and booleans as themselves, byte arrays and timestamps as their text.
func jsonValue(v any) any {
	switch x := v.(type) {
	case amqp.Table:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[k] = jsonValue(e)
		}
		return m
	case []any:
		a := make([]any, len(x))
		for i, e := range x {
			a[i] = jsonValue(e)
		}
		return a
	case nil, string, bool, int8, int16, int32, int64, int, uint8, uint16, uint32, uint64, float32, float64:
		return x
	case []byte:
		return bytesText(x)
	case amqp.Decimal:
		return json.Number(decimalText(x))
	}
	return scalarText(v)
}
