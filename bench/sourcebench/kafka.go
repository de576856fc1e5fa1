package sourcebench

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/alternayte/queuebox/shared/connect/kafka"
	"github.com/alternayte/queuebox/shared/inbox"
)

// kafkaTopic is the topic of every kfake cluster of the bench.
const kafkaTopic = "orders"

type kafkaBench struct {
	partitions int32
}

func newKafka(partitions int) *kafkaBench { return &kafkaBench{partitions: int32(max(1, partitions))} }

func (b *kafkaBench) setting() (string, int) { return "maxPollRecords", kafka.DefaultMaxPollRecords }

func (b *kafkaBench) close() {}

// fill starts a kfake cluster of its own (one broker, in this process, in memory) with the
// topic, and produces the bodies to it.
func (b *kafkaBench) fill(ctx context.Context, bodies [][]byte) (backlog, error) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(b.partitions, kafkaTopic))
	if err != nil {
		return nil, fmt.Errorf("starting kfake: %w", err)
	}
	bl := &kafkaBacklog{c: c}
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.DefaultProduceTopic(kafkaTopic))
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("making the producer: %w", err)
	}
	defer cl.Close()
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	for _, body := range bodies {
		wg.Add(1)
		cl.Produce(ctx, &kgo.Record{Value: body}, func(_ *kgo.Record, err error) {
			if err != nil {
				mu.Lock()
				first = err
				mu.Unlock()
			}
			wg.Done()
		})
	}
	wg.Wait()
	if first != nil {
		c.Close()
		return nil, fmt.Errorf("producing: %w", first)
	}
	return bl, nil
}

type kafkaBacklog struct {
	c *kfake.Cluster
	// producer publishes lone messages; made on the first.
	producer *kgo.Client
}

func (bl *kafkaBacklog) close() {
	if bl.producer != nil {
		bl.producer.Close()
	}
	bl.c.Close()
}

// publish produces one record and waits for the broker's acknowledgement.
func (bl *kafkaBacklog) publish(ctx context.Context, body []byte) error {
	if bl.producer == nil {
		cl, err := kgo.NewClient(kgo.SeedBrokers(bl.c.ListenAddrs()...), kgo.DefaultProduceTopic(kafkaTopic))
		if err != nil {
			return fmt.Errorf("making the producer: %w", err)
		}
		bl.producer = cl
	}
	return bl.producer.ProduceSync(ctx, &kgo.Record{Value: body}).FirstErr()
}

// consume is the source's consumer loop without the store: a group member with the source's
// client options, PollRecords(maxPollRecords), and the offsets of each poll committed.
func (bl *kafkaBacklog) consume(ctx context.Context, n, maxPoll int) (int, error) {
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(bl.c.ListenAddrs()...),
		kgo.ClientID("queuebox"),
		kgo.ConsumerGroup("sourcebench-"+strconv.FormatInt(time.Now().UnixNano(), 36)),
		kgo.ConsumeTopics(kafkaTopic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.DisableAutoCommit(),
		kgo.BlockRebalanceOnPoll(),
	)
	if err != nil {
		return 0, fmt.Errorf("making the consumer: %w", err)
	}
	defer func() {
		cl.AllowRebalance()
		cl.Close()
	}()
	got, polls := 0, 0
	for got < n {
		fetches := cl.PollRecords(ctx, maxPoll)
		if ctx.Err() != nil {
			return polls, fmt.Errorf("after %d of %d messages: %w", got, n, ctx.Err())
		}
		if err := fetches.Err(); err != nil {
			return polls, fmt.Errorf("polling: %w", err)
		}
		records := fetches.Records()
		if len(records) > 0 {
			if err := cl.CommitRecords(ctx, records...); err != nil {
				return polls, fmt.Errorf("committing: %w", err)
			}
		}
		got += len(records)
		polls++
		cl.AllowRebalance()
	}
	return polls, nil
}

func (bl *kafkaBacklog) source(name string, maxPoll int) (runner, error) {
	return kafka.NewSource(kafka.SourceConfig{
		Brokers: bl.c.ListenAddrs(), Topics: []string{kafkaTopic}, GroupID: name, MaxPollRecords: maxPoll,
		Intake: inbox.BrokerSource{Name: name}, Logger: quietLogger(),
	})
}
