package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/alternayte/queuebox/bench/benchdb"
	"github.com/alternayte/queuebox/shared/store/postgres/pgtool"
)

// watermillSystem is Watermill's SQL Pub/Sub on PostgreSQL over the pgx pool, with one of
// watermill-sql's two PostgreSQL schema adapters: the offsets schema (DefaultPostgreSQLSchema
// and DefaultPostgreSQLOffsetsAdapter: an append-only table per topic read past a consumer
// group's offset) or the queue schema (PostgreSQLQueueSchema and PostgreSQLQueueOffsetsAdapter:
// each row marked acked). The messages are published before the clock starts; one
// message.Router consumer handler per topic POSTs each message. A topic's subscriber hands out
// one message at a time and waits for its ack, so the topics are the concurrency: with keys,
// topic = hash(key) % topics keeps a key in order.
type watermillSystem struct {
	settings WatermillSettings
	pool     *pgtool.Pool
	pub      *wsql.Publisher
	sub      *wsql.Subscriber
	router   *message.Router
	poster   *poster
	acks     *acks
	stopped  chan struct{}
	cancel   context.CancelFunc
}

// The Watermill schema adapters, as -watermill-schemas names them.
const (
	watermillOffsets = "offsets"
	watermillQueue   = "queue"
)

func watermillFactory(s WatermillSettings) factory {
	return factory{
		system: SystemWatermill, variant: variantPeer,
		label: fmt.Sprintf("Watermill %s (%d topics, batch %d)", s.Schema, s.Topics, s.BatchSize),
		order: fmt.Sprintf("a topic per key shard (%d), one subscriber each", s.Topics), ordered: true,
		new: func() system { return &watermillSystem{settings: s} },
	}
}

// adapters are the schema and offsets adapters of s.Schema and the consumer group they take
// (the queue schema has none).
func (s WatermillSettings) adapters() (wsql.SchemaAdapter, wsql.OffsetsAdapter, string) {
	if s.Schema == watermillQueue {
		return wsql.PostgreSQLQueueSchema{SubscribeBatchSize: s.BatchSize}, wsql.PostgreSQLQueueOffsetsAdapter{}, ""
	}
	return wsql.DefaultPostgreSQLSchema{SubscribeBatchSize: s.BatchSize}, wsql.DefaultPostgreSQLOffsetsAdapter{}, "bench"
}

// watermillPoolSize leaves a connection for each topic's subscriber, which holds a transaction
// while its handler works, and a few for the router and the publisher.
func watermillPoolSize(s WatermillSettings) int { return s.Topics + 4 }

func (w *watermillSystem) appName() string { return "peers-watermill" }

func topicName(i int) string { return fmt.Sprintf("bench_%02d", i) }

// publishChunk is the number of messages of one Publish (3 parameters each).
const publishChunk = 1000

func (w *watermillSystem) prepare(ctx context.Context, db *benchdb.Database, receiver string, rows, keys int) error {
	var err error
	w.pool, err = pgtool.OpenPool(ctx, db.URL, pgtool.PoolOptions{MaxConns: int32(watermillPoolSize(w.settings)), AppName: w.appName()})
	if err != nil {
		return fmt.Errorf("opening the Watermill pool: %w", err)
	}
	logger := watermill.NopLogger{}
	beginner := wsql.BeginnerFromPgx(w.pool)
	schema, offsets, group := w.settings.adapters()
	w.pub, err = wsql.NewPublisher(beginner, wsql.PublisherConfig{SchemaAdapter: schema, AutoInitializeSchema: true}, logger)
	if err != nil {
		return fmt.Errorf("creating the Watermill publisher: %w", err)
	}
	// The tables are made here, before the clock; the router's subscriber then subscribes
	// without initializing them again.
	subConfig := wsql.SubscriberConfig{
		ConsumerGroup:    group,
		PollInterval:     w.settings.PollInterval,
		SchemaAdapter:    schema,
		OffsetsAdapter:   offsets,
		InitializeSchema: true,
	}
	setup, err := wsql.NewSubscriber(beginner, subConfig, logger)
	if err != nil {
		return fmt.Errorf("creating the Watermill subscriber: %w", err)
	}
	defer func() { _ = setup.Close() }()
	subConfig.InitializeSchema = false
	if w.sub, err = wsql.NewSubscriber(beginner, subConfig, logger); err != nil {
		return fmt.Errorf("creating the Watermill subscriber: %w", err)
	}

	byTopic := make([][]*message.Message, w.settings.Topics)
	for i := range rows {
		k := keyOf(i, keys)
		m := message.NewMessage(messageID(i), payload(i, k))
		if k != "" {
			m.Metadata.Set("key", k)
		}
		t := topicIndex(i, k, w.settings.Topics)
		byTopic[t] = append(byTopic[t], m)
	}
	for t, msgs := range byTopic {
		if err := setup.SubscribeInitialize(topicName(t)); err != nil {
			return fmt.Errorf("initializing Watermill topic %s: %w", topicName(t), err)
		}
		for from := 0; from < len(msgs); from += publishChunk {
			if err := w.pub.Publish(topicName(t), msgs[from:min(len(msgs), from+publishChunk)]...); err != nil {
				return fmt.Errorf("publishing to Watermill topic %s: %w", topicName(t), err)
			}
		}
	}
	if _, err := db.Admin.Exec(ctx, `VACUUM ANALYZE`); err != nil {
		return fmt.Errorf("vacuuming: %w", err)
	}

	w.poster = newPoster(receiver)
	w.acks = newAcks(rows)
	if !w.settings.Router {
		return nil
	}
	w.router, err = message.NewRouter(message.RouterConfig{CloseTimeout: 10 * time.Second}, logger)
	if err != nil {
		return fmt.Errorf("creating the Watermill router: %w", err)
	}
	for t := range w.settings.Topics {
		w.router.AddConsumerHandler("post_"+topicName(t), topicName(t), w.sub, w.handle)
	}
	return nil
}

// consume POSTs each message of one topic's channel and acks it, or nacks it (the subscriber
// sends it again) when the POST failed, until the channel closes.
func (w *watermillSystem) consume(msgs <-chan *message.Message) {
	for m := range msgs {
		if w.handle(m) != nil {
			m.Nack()
			continue
		}
		m.Ack()
	}
}

// handle POSTs one message; an error nacks it and the subscriber sends it again.
func (w *watermillSystem) handle(m *message.Message) error {
	if err := w.poster.post(m.Context(), m.UUID, m.Metadata.Get("key"), m.Payload); err != nil {
		w.acks.failures.Add(1)
		return err
	}
	w.acks.ack(m.UUID)
	return nil
}

func (w *watermillSystem) deliver(ctx context.Context) (int, error) {
	runCtx, cancel := context.WithCancel(context.Background())
	w.cancel = cancel
	w.stopped = make(chan struct{})
	if w.router != nil {
		go func() {
			defer close(w.stopped)
			if err := w.router.Run(runCtx); err != nil {
				logf("Watermill router: %v", err)
			}
		}()
		return w.acks.wait(ctx)
	}
	var wg sync.WaitGroup
	for t := range w.settings.Topics {
		msgs, err := w.sub.Subscribe(runCtx, topicName(t))
		if err != nil {
			cancel()
			wg.Wait()
			close(w.stopped)
			return 0, fmt.Errorf("subscribing to Watermill topic %s: %w", topicName(t), err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.consume(msgs)
		}()
	}
	go func() {
		wg.Wait()
		close(w.stopped)
	}()
	return w.acks.wait(ctx)
}

func (w *watermillSystem) expected(_ context.Context, _ *benchdb.Database, rows, keys int) (map[string]ref, error) {
	return peerExpected(rows, keys), nil
}

func (w *watermillSystem) problems() []string { return nil }

func (w *watermillSystem) close() {
	if w.router != nil {
		_ = w.router.Close()
	}
	if w.sub != nil {
		_ = w.sub.Close() // closes the subscribers' channels
	}
	if w.cancel != nil {
		w.cancel()
		<-w.stopped
	}
	if w.pub != nil {
		_ = w.pub.Close()
	}
	if w.poster != nil {
		w.poster.close()
	}
	if w.pool != nil {
		w.pool.Close()
	}
}
