// Command sourcebench measures the broker sources: messages per second that the RabbitMQ,
// NATS JetStream and Kafka sources store in the inbox from a backlog, beside the broker's own
// consume-and-acknowledge rate and the batched inbox insert rate measured in the same run
// (bench/README.md, "Broker sources"). `make bench` runs it.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/alternayte/queuebox/bench/benchcmd"
	"github.com/alternayte/queuebox/bench/sourcebench"
)

// Defaults of the servers of the tests, used when their variables are not set.
const (
	defaultRabbit = "amqp://guest:guest@127.0.0.1:5672/"
	defaultNATS   = "nats://127.0.0.1:4222"
)

func main() { benchcmd.Main(run) }

func run(ctx context.Context, args []string) int {
	fs := flag.NewFlagSet("sourcebench", flag.ContinueOnError)
	messages := fs.Int("messages", 50000, "messages in each backlog")
	bodyBytes := fs.Int("body-bytes", 300, "bytes of each JSON body")
	brokers := fs.String("brokers", "rabbitmq,nats,kafka", "brokers to measure, comma-separated")
	rabbitPrefetch := fs.String("rabbitmq-prefetch", "10,100", "RabbitMQ prefetchCount values, comma-separated")
	natsBatch := fs.String("nats-batch", "100", "NATS batchSize values, comma-separated")
	kafkaPoll := fs.String("kafka-poll", "100", "Kafka maxPollRecords values, comma-separated")
	rounds := fs.Int("rounds", 1, "measurements of each broker and setting; the targets judge the median")
	partitions := fs.Int("kafka-partitions", 1, "partitions of the Kafka topic")
	natsMemory := fs.Bool("nats-memory", false, "keep the NATS stream in memory (default: file storage)")
	poolSize := fs.Int("pool-size", 10, "connections of the source's pgx pool (database.poolSize)")
	runTimeout := fs.Duration("run-timeout", 3*time.Minute, "bound of each measurement")
	loneMessages := fs.Int("lone-messages", 20, "lone messages whose store latency is measured per broker (0 skips it)")
	loneGap := fs.Duration("lone-gap", 200*time.Millisecond, "idle time before each lone message")
	rabbitURL := fs.String("rabbitmq-url", defaultRabbit, "AMQP URL of the RabbitMQ broker")
	natsURL := fs.String("nats-url", defaultNATS, "URL of the NATS server (JetStream enabled)")
	profile := fs.String("cpuprofile", "", "prefix of one CPU profile per source run (<prefix>-<broker>-<batch>.pprof)")
	out := fs.String("out", "bench/results/sources.json", "JSON report file (empty writes none)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	benchcmd.QueueBoxRuntime(os.Stderr, "sourcebench")
	settings := map[string][]int{}
	for broker, list := range map[string]string{sourcebench.RabbitMQ: *rabbitPrefetch, sourcebench.NATS: *natsBatch, sourcebench.Kafka: *kafkaPoll} {
		v, err := sourcebench.ParseInts(list)
		if err != nil {
			fmt.Fprintf(os.Stderr, "sourcebench: settings of %s: %v\n", broker, err)
			return 2
		}
		settings[broker] = v
	}
	if *messages <= 0 || *bodyBytes < 100 || *poolSize <= 0 || *loneMessages < 0 || *loneGap < 0 {
		fmt.Fprintln(os.Stderr, "sourcebench: -messages and -pool-size must be above 0, -body-bytes at least 100, -lone-messages and -lone-gap not negative")
		return 2
	}
	opts := sourcebench.Options{
		ServerURL:       benchcmd.ServerURL(),
		RabbitURL:       *rabbitURL,
		NATSURL:         *natsURL,
		Messages:        *messages,
		BodyBytes:       *bodyBytes,
		Brokers:         strings.Split(*brokers, ","),
		Settings:        settings,
		Rounds:          *rounds,
		KafkaPartitions: *partitions,
		NATSMemory:      *natsMemory,
		PoolSize:        *poolSize,
		RunTimeout:      *runTimeout,
		LoneMessages:    *loneMessages,
		LoneGap:         *loneGap,
		CPUProfile:      *profile,
		Out:             *out,
		Stdout:          os.Stdout,
	}
	if _, err := sourcebench.Run(ctx, opts); err != nil {
		fmt.Fprintln(os.Stderr, "sourcebench:", err)
		return 1
	}
	return 0
}
