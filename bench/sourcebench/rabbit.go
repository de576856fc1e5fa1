package sourcebench

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/alternayte/queuebox/shared/connect/rabbitmq"
	"github.com/alternayte/queuebox/shared/inbox"
)

// publishWindow is the number of unconfirmed publishes while a backlog fills.
const publishWindow = 2000

type rabbitBench struct {
	url  string
	conn *amqp.Connection
	ch   *amqp.Channel
}

func newRabbit(_ context.Context, url string) (*rabbitBench, error) {
	conn, err := amqp.Dial(url)
	if err != nil {
		return nil, fmt.Errorf("connecting to RabbitMQ at %s: %w", url, err)
	}
	ch, err := conn.Channel()
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("opening a RabbitMQ channel: %w", err)
	}
	if err := ch.Confirm(false); err != nil {
		conn.Close()
		return nil, fmt.Errorf("enabling publisher confirms: %w", err)
	}
	return &rabbitBench{url: url, conn: conn, ch: ch}, nil
}

func (b *rabbitBench) setting() (string, int) { return "prefetchCount", rabbitmq.DefaultPrefetchCount }

func (b *rabbitBench) close() { b.conn.Close() }

// fill declares a durable queue of its own and publishes the bodies to it as persistent
// messages, with publisher confirms.
func (b *rabbitBench) fill(ctx context.Context, bodies [][]byte) (backlog, error) {
	q := "qb-sourcebench-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	if _, err := b.ch.QueueDeclare(q, true, false, false, false, nil); err != nil {
		return nil, fmt.Errorf("declaring queue %s: %w", q, err)
	}
	bl := &rabbitBacklog{b: b, queue: q}
	pending := make([]*amqp.DeferredConfirmation, 0, publishWindow)
	wait := func() error {
		for _, c := range pending {
			ok, err := c.WaitContext(ctx)
			if err != nil {
				return fmt.Errorf("waiting for a publisher confirm: %w", err)
			}
			if !ok {
				return fmt.Errorf("the broker refused a publish")
			}
		}
		pending = pending[:0]
		return nil
	}
	for _, body := range bodies {
		c, err := b.ch.PublishWithDeferredConfirmWithContext(ctx, "", q, false, false, amqp.Publishing{
			ContentType: "application/json", DeliveryMode: amqp.Persistent, Body: body,
		})
		if err != nil {
			bl.close()
			return nil, fmt.Errorf("publishing: %w", err)
		}
		if pending = append(pending, c); len(pending) == publishWindow {
			if err := wait(); err != nil {
				bl.close()
				return nil, err
			}
		}
	}
	if err := wait(); err != nil {
		bl.close()
		return nil, err
	}
	return bl, nil
}

type rabbitBacklog struct {
	b     *rabbitBench
	queue string
}

func (bl *rabbitBacklog) close() {
	if _, err := bl.b.ch.QueueDelete(bl.queue, false, false, false); err != nil {
		logf("deleting queue %s: %v", bl.queue, err)
	}
}

// consume is the source's consumer loop without the store: a connection and channel of its
// own, Qos(prefetch), and each prefetch window that has arrived acknowledged with one
// multiple acknowledgement of its last delivery.
func (bl *rabbitBacklog) consume(ctx context.Context, n, prefetch int) (int, error) {
	conn, err := amqp.Dial(bl.b.url)
	if err != nil {
		return 0, fmt.Errorf("connecting: %w", err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		return 0, fmt.Errorf("opening a channel: %w", err)
	}
	if err := ch.Qos(prefetch, 0, false); err != nil {
		return 0, fmt.Errorf("setting the prefetch count: %w", err)
	}
	deliveries, err := ch.Consume(bl.queue, "sourcebench", false, false, false, false, nil)
	if err != nil {
		return 0, fmt.Errorf("consuming: %w", err)
	}
	gap := time.NewTimer(rabbitmq.WindowGap)
	gap.Stop()
	defer gap.Stop()
	got, acks := 0, 0
	for got < n {
		var last uint64
		select {
		case <-ctx.Done():
			return acks, fmt.Errorf("after %d of %d messages: %w", got, n, ctx.Err())
		case d, ok := <-deliveries:
			if !ok {
				return acks, fmt.Errorf("the delivery channel closed after %d messages", got)
			}
			last, got = d.DeliveryTag, got+1
		}
		// The rest of the window, as the source gathers it (rabbitmq.WindowGap).
	window:
		for i := 1; i < prefetch; i++ {
			select {
			case d, ok := <-deliveries:
				if !ok {
					break window
				}
				last, got = d.DeliveryTag, got+1
				continue
			default:
			}
			gap.Reset(rabbitmq.WindowGap)
			select {
			case d, ok := <-deliveries:
				gap.Stop()
				if !ok {
					break window
				}
				last, got = d.DeliveryTag, got+1
			case <-gap.C:
				break window
			}
		}
		if err := ch.Ack(last, true); err != nil {
			return acks, fmt.Errorf("acknowledging: %w", err)
		}
		acks++
	}
	return acks, nil
}

// publish publishes one persistent message and waits for its confirm.
func (bl *rabbitBacklog) publish(ctx context.Context, body []byte) error {
	c, err := bl.b.ch.PublishWithDeferredConfirmWithContext(ctx, "", bl.queue, false, false, amqp.Publishing{
		ContentType: "application/json", DeliveryMode: amqp.Persistent, Body: body,
	})
	if err != nil {
		return err
	}
	ok, err := c.WaitContext(ctx)
	if err != nil {
		return fmt.Errorf("waiting for the publisher confirm: %w", err)
	}
	if !ok {
		return fmt.Errorf("the broker refused the publish")
	}
	return nil
}

func (bl *rabbitBacklog) source(name string, prefetch int) (runner, error) {
	return rabbitmq.NewSource(rabbitmq.SourceConfig{
		URL: bl.b.url, Queue: bl.queue, PrefetchCount: prefetch,
		Intake: inbox.BrokerSource{Name: name}, Logger: quietLogger(),
	})
}

// quietLogger logs warnings and errors of the sources to stderr.
func quietLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}
