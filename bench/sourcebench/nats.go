package sourcebench

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	qbnats "github.com/alternayte/queuebox/shared/connect/nats"
	"github.com/alternayte/queuebox/shared/inbox"
)

type natsBench struct {
	url    string
	memory bool
	nc     *natsgo.Conn
	js     jetstream.JetStream
}

func newNATS(_ context.Context, url string, memory bool) (*natsBench, error) {
	nc, err := natsgo.Connect(url)
	if err != nil {
		return nil, fmt.Errorf("connecting to NATS at %s: %w", url, err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("opening JetStream: %w", err)
	}
	return &natsBench{url: url, memory: memory, nc: nc, js: js}, nil
}

func (b *natsBench) setting() (string, int) { return "batchSize", qbnats.DefaultBatchSize }

func (b *natsBench) close() { b.nc.Close() }

// fill creates a stream of its own (file storage unless -nats-memory) and publishes the
// bodies to it, asynchronously with a bounded window of unacknowledged publishes.
func (b *natsBench) fill(ctx context.Context, bodies [][]byte) (backlog, error) {
	name := "QBSOURCEBENCH" + strconv.FormatInt(time.Now().UnixNano(), 36)
	storage := jetstream.FileStorage
	if b.memory {
		storage = jetstream.MemoryStorage
	}
	s, err := b.js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{name + ".>"}, Storage: storage})
	if err != nil {
		return nil, fmt.Errorf("creating stream %s: %w", name, err)
	}
	bl := &natsBacklog{b: b, stream: s, name: name}
	js, err := jetstream.New(b.nc, jetstream.WithPublishAsyncMaxPending(publishWindow))
	if err != nil {
		bl.close()
		return nil, fmt.Errorf("opening JetStream: %w", err)
	}
	subject := name + ".orders"
	for _, body := range bodies {
		if _, err := js.PublishAsync(subject, body); err != nil {
			bl.close()
			return nil, fmt.Errorf("publishing: %w", err)
		}
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-ctx.Done():
		bl.close()
		return nil, ctx.Err()
	}
	info, err := s.Info(ctx)
	if err != nil {
		bl.close()
		return nil, fmt.Errorf("reading the stream: %w", err)
	}
	if int(info.State.Msgs) != len(bodies) {
		bl.close()
		return nil, fmt.Errorf("the stream holds %d messages, want %d", info.State.Msgs, len(bodies))
	}
	return bl, nil
}

type natsBacklog struct {
	b      *natsBench
	stream jetstream.Stream
	name   string
}

func (bl *natsBacklog) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := bl.b.js.DeleteStream(ctx, bl.name); err != nil {
		logf("deleting stream %s: %v", bl.name, err)
	}
}

// consume is the source's consumer loop without the store: a durable pull consumer with the
// source's configuration, Fetch(batch), and each fetched message acknowledged.
func (bl *natsBacklog) consume(ctx context.Context, n, batch int) (int, error) {
	nc, err := natsgo.Connect(bl.b.url)
	if err != nil {
		return 0, fmt.Errorf("connecting: %w", err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return 0, fmt.Errorf("opening JetStream: %w", err)
	}
	stream, err := js.Stream(ctx, bl.name)
	if err != nil {
		return 0, fmt.Errorf("looking up the stream: %w", err)
	}
	cons, err := stream.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{
		Durable:       "sourcebench",
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       qbnats.DefaultAckWait,
		DeliverPolicy: jetstream.DeliverAllPolicy,
		MaxAckPending: max(1000, 2*batch),
	})
	if err != nil {
		return 0, fmt.Errorf("creating the consumer: %w", err)
	}
	msgs := make([]jetstream.Msg, 0, batch)
	got, fetches := 0, 0
	for got < n {
		if ctx.Err() != nil {
			return fetches, fmt.Errorf("after %d of %d messages: %w", got, n, ctx.Err())
		}
		fctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		fetched, err := cons.Fetch(batch, jetstream.FetchContext(fctx))
		if err != nil {
			cancel()
			return fetches, fmt.Errorf("fetching: %w", err)
		}
		msgs = msgs[:0]
		for m := range fetched.Messages() {
			msgs = append(msgs, m)
		}
		cancel()
		if err := fetched.Error(); err != nil && !errors.Is(err, natsgo.ErrTimeout) && !errors.Is(err, context.DeadlineExceeded) {
			logf("nats consume: a fetch ended early: %v", err)
		}
		for _, m := range msgs {
			if err := m.Ack(); err != nil {
				return fetches, fmt.Errorf("acknowledging: %w", err)
			}
		}
		got += len(msgs)
		fetches++
	}
	return fetches, nil
}

// publish publishes one message to the stream's subject and waits for its acknowledgement.
func (bl *natsBacklog) publish(ctx context.Context, body []byte) error {
	_, err := bl.b.js.Publish(ctx, bl.name+".orders", body)
	return err
}

func (bl *natsBacklog) source(name string, batch int) (runner, error) {
	return qbnats.NewSource(qbnats.SourceConfig{
		Servers: []string{bl.b.url}, Stream: bl.name, Durable: name, BatchSize: batch,
		Intake: inbox.BrokerSource{Name: name}, Logger: quietLogger(),
	})
}
