// Command publish sends one message to a broker and waits until the broker has taken it: a
// RabbitMQ publisher confirm (and no return, so a queue received it), a Kafka produce
// acknowledgement, or a JetStream publish acknowledgement. The bridge examples run it to feed
// their source:
//
//	publish -broker rabbitmq -url amqp://guest:guest@127.0.0.1:5672/ -to incoming-orders -body '{"id":"1"}'
//	publish -broker kafka -url 127.0.0.1:19092 -to orders -body '{"id":"1"}'
//	publish -broker nats -url nats://127.0.0.1:4222 -to orders.created -body '{"id":"1"}'
//
// For RabbitMQ, -to is the queue (the message goes through the default exchange); for Kafka,
// the topic; for NATS, the subject, which a stream must hold. -header name=value adds a
// header (a RabbitMQ header, a Kafka record header or a NATS header) and may be repeated.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/twmb/franz-go/pkg/kgo"
)

// headerFlags collects the repeated -header name=value flags.
type headerFlags [][2]string

func (h *headerFlags) String() string { return fmt.Sprint([][2]string(*h)) }

func (h *headerFlags) Set(s string) error {
	name, value, ok := strings.Cut(s, "=")
	if !ok || name == "" {
		return fmt.Errorf("want name=value, got %q", s)
	}
	*h = append(*h, [2]string{name, value})
	return nil
}

func main() {
	broker := flag.String("broker", "", "rabbitmq, kafka or nats")
	url := flag.String("url", "", "the broker: an amqp:// URL, Kafka bootstrap servers (host:port,...) or NATS servers (nats://...)")
	to := flag.String("to", "", "the RabbitMQ queue, the Kafka topic or the NATS subject")
	body := flag.String("body", "", "the message body")
	timeout := flag.Duration("timeout", 15*time.Second, "how long to wait for the broker")
	var headers headerFlags
	flag.Var(&headers, "header", "a header name=value (repeatable)")
	flag.Parse()
	if *url == "" || *to == "" || *body == "" {
		fmt.Fprintln(os.Stderr, "publish: -url, -to and -body are required")
		flag.Usage()
		os.Exit(2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	var err error
	switch *broker {
	case "rabbitmq":
		err = publishRabbitMQ(ctx, *url, *to, []byte(*body), headers)
	case "kafka":
		err = publishKafka(ctx, *url, *to, []byte(*body), headers)
	case "nats":
		err = publishNATS(ctx, *url, *to, []byte(*body), headers)
	default:
		err = fmt.Errorf("-broker is %q; want rabbitmq, kafka or nats", *broker)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "publish:", err)
		os.Exit(1)
	}
	fmt.Printf("published to %s %s: %s\n", *broker, *to, *body)
}

// publishRabbitMQ publishes body to queue through the default exchange, mandatory and in
// confirm mode, and returns once the broker confirmed it; a message that no queue took comes
// back as a return, which is an error.
func publishRabbitMQ(ctx context.Context, url, queue string, body []byte, headers headerFlags) error {
	conn, err := amqp.Dial(url)
	if err != nil {
		return fmt.Errorf("connecting to RabbitMQ: %w", err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		return fmt.Errorf("opening a RabbitMQ channel: %w", err)
	}
	if err := ch.Confirm(false); err != nil {
		return fmt.Errorf("entering confirm mode: %w", err)
	}
	returns := ch.NotifyReturn(make(chan amqp.Return, 1))
	table := amqp.Table{}
	for _, h := range headers {
		table[h[0]] = h[1]
	}
	confirm, err := ch.PublishWithDeferredConfirmWithContext(ctx, "", queue, true, false, amqp.Publishing{
		ContentType:  "application/json",
		DeliveryMode: amqp.Persistent,
		Headers:      table,
		Body:         body,
	})
	if err != nil {
		return fmt.Errorf("publishing to queue %s: %w", queue, err)
	}
	acked, err := confirm.WaitContext(ctx)
	if err != nil {
		return fmt.Errorf("waiting for the confirm of queue %s: %w", queue, err)
	}
	select {
	case r := <-returns:
		return fmt.Errorf("RabbitMQ returned the message: %s (does queue %s exist?)", r.ReplyText, queue)
	default:
	}
	if !acked {
		return fmt.Errorf("RabbitMQ refused the message for queue %s", queue)
	}
	return nil
}

// publishKafka produces body to topic and returns once the broker acknowledged it.
func publishKafka(ctx context.Context, servers, topic string, body []byte, headers headerFlags) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(servers, ",")...))
	if err != nil {
		return fmt.Errorf("creating the Kafka client: %w", err)
	}
	defer cl.Close()
	rec := &kgo.Record{Topic: topic, Value: body}
	for _, h := range headers {
		rec.Headers = append(rec.Headers, kgo.RecordHeader{Key: h[0], Value: []byte(h[1])})
	}
	if err := cl.ProduceSync(ctx, rec).FirstErr(); err != nil {
		return fmt.Errorf("producing to topic %s: %w", topic, err)
	}
	return nil
}

// publishNATS publishes body to subject on JetStream and returns once a stream acknowledged
// it.
func publishNATS(ctx context.Context, servers, subject string, body []byte, headers headerFlags) error {
	nc, err := natsgo.Connect(servers)
	if err != nil {
		return fmt.Errorf("connecting to NATS: %w", err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return fmt.Errorf("opening JetStream: %w", err)
	}
	msg := natsgo.NewMsg(subject)
	msg.Data = body
	for _, h := range headers {
		msg.Header.Add(h[0], h[1])
	}
	if _, err := js.PublishMsg(ctx, msg); err != nil {
		if errors.Is(err, jetstream.ErrNoStreamResponse) {
			return fmt.Errorf("publishing to subject %s: no stream holds the subject: %w", subject, err)
		}
		return fmt.Errorf("publishing to subject %s: %w", subject, err)
	}
	return nil
}
