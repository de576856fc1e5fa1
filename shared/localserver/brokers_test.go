package localserver

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/alternayte/queuebox/shared/config"
	"github.com/alternayte/queuebox/shared/store/postgres/dbtest"
)

// brokerConfig is the configuration of a local process on dbURL (migrated at start) whose
// only route sends order.* to the destination block dest (YAML, indented under its name).
func brokerConfig(t *testing.T, dbURL, dest string) *config.Config {
	t.Helper()
	u, err := url.Parse(dbURL)
	require.NoError(t, err)
	yaml := fmt.Sprintf(`
database:
  url: jdbc:postgresql://%s%s
  username: postgres
  password: trust-auth
  migrate: true
outbox:
  pollIntervalMs: 50
  retryBaseDelayMs: 100
destinations:
  broker:
%s
routes:
  - topicPattern: "order.*"
    destination: broker
`, u.Host, u.Path, dest)
	cfg := loadYAML(t, yaml)
	cfg.Server.HTTPPort = 0
	return cfg
}

// waitForSent waits until the outbox row of topic is sent and returns its attempt.
func waitForSent(t *testing.T, dbURL, topic string) int {
	t.Helper()
	pool := dbtest.NewPool(t, dbURL)
	deadline := time.Now().Add(30 * time.Second)
	for {
		var state string
		var attempt int
		err := pool.QueryRow(context.Background(),
			`SELECT state, attempt FROM outbox WHERE topic = $1`, topic).Scan(&state, &attempt)
		if err == nil && state == "sent" {
			return attempt
		}
		if time.Now().After(deadline) {
			t.Fatalf("the outbox row %s is not sent after 30 s (state %q, error %v)", topic, state, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// rabbitExchange declares a topic exchange named prefix-<nanos> as QueueBox declares it
// (durable, not auto-deleted), removed when the test ends, and a private queue bound to it with
// key; it returns the exchange's name and the queue's deliveries.
func rabbitExchange(t *testing.T, prefix, key string) (string, <-chan amqp.Delivery) {
	t.Helper()
	conn, err := amqp.Dial("amqp://guest:guest@127.0.0.1:5672/")
	require.NoError(t, err, "RabbitMQ is not reachable at 127.0.0.1:5672; start it with: rabbitmq-server -detached")
	t.Cleanup(func() { _ = conn.Close() })
	ch, err := conn.Channel()
	require.NoError(t, err)
	exchange := fmt.Sprintf("%s-%d", prefix, time.Now().UnixNano())
	require.NoError(t, ch.ExchangeDeclare(exchange, "topic", true, false, false, false, nil))
	t.Cleanup(func() { _ = ch.ExchangeDelete(exchange, false, false) })
	q, err := ch.QueueDeclare("", false, true, true, false, nil)
	require.NoError(t, err)
	require.NoError(t, ch.QueueBind(q.Name, key, exchange, false, nil))
	deliveries, err := ch.Consume(q.Name, "", true, true, false, false, nil)
	require.NoError(t, err)
	return exchange, deliveries
}

// TestOutboxDeliversToRabbitMQ runs the local process with a RabbitMQ destination: an
// outbox row reaches a queue bound to the exchange with its body and headers, and the row
// becomes sent.
func TestOutboxDeliversToRabbitMQ(t *testing.T) {
	t.Parallel()
	exchange, deliveries := rabbitExchange(t, "qb-local-test", "order.#")

	dbURL := dbtest.NewDatabase(t)
	cfg := brokerConfig(t, dbURL, `    type: rabbitmq
    url: amqp://guest:guest@127.0.0.1:5672/
    exchange: `+exchange)
	l, err := New(context.Background(), cfg, quietLog())
	require.NoError(t, err)
	runLocal(t, l)

	pool := dbtest.NewPool(t, dbURL)
	dbtest.Exec(t, pool, `INSERT INTO outbox (topic, key, payload, headers) VALUES ('order.created', 'o-1', '{"orderId":"1"}', '{"x-tenant":"acme"}')`)
	select {
	case d := <-deliveries:
		assert.JSONEq(t, `{"orderId":"1"}`, string(d.Body))
		assert.Equal(t, "order.created", d.RoutingKey)
		assert.Equal(t, "acme", d.Headers["x-tenant"])
		assert.NotEmpty(t, d.MessageId)
		assert.True(t, strings.HasPrefix(d.ContentType, "application/json"))
	case <-time.After(30 * time.Second):
		t.Fatal("no message reached the queue within 30 s")
	}
	assert.Equal(t, 0, waitForSent(t, dbURL, "order.created"))
}

// TestOutboxDeliversToNATSJetStream runs the local process with a NATS destination: an outbox
// row is stored in a JetStream stream on the subject of the template, with its body and the
// documented headers, and the row becomes sent.
func TestOutboxDeliversToNATSJetStream(t *testing.T) {
	t.Parallel()
	nc, err := natsgo.Connect("nats://127.0.0.1:4222")
	require.NoError(t, err, "NATS is not reachable at 127.0.0.1:4222; start it with: "+
		"start-stop-daemon --start --oknodo --background --exec /usr/sbin/nats-server -- -a 127.0.0.1 -p 4222 -js -sd /var/lib/nats-server -l /var/log/nats-server.log")
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	id := fmt.Sprintf("%d", time.Now().UnixNano())
	name, prefix := "QBLOCAL_"+id, "qblocal."+id
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	stream, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{prefix + ".>"}, Storage: jetstream.MemoryStorage})
	require.NoError(t, err)
	t.Cleanup(func() { _ = js.DeleteStream(context.Background(), name) })

	dbURL := dbtest.NewDatabase(t)
	cfg := brokerConfig(t, dbURL, `    type: nats
    servers: nats://127.0.0.1:4222
    subject: "`+prefix+`.{{ topic }}"`)
	l, err := New(context.Background(), cfg, quietLog())
	require.NoError(t, err)
	runLocal(t, l)

	pool := dbtest.NewPool(t, dbURL)
	dbtest.Exec(t, pool, `INSERT INTO outbox (topic, key, payload) VALUES ('order.created', 'o-1', '{"orderId":"1"}')`)
	assert.Equal(t, 0, waitForSent(t, dbURL, "order.created"))
	m, err := stream.GetLastMsgForSubject(ctx, prefix+".order.created")
	require.NoError(t, err)
	assert.JSONEq(t, `{"orderId":"1"}`, string(m.Data))
	assert.Equal(t, "order.created", m.Header.Get("x-topic"))
	assert.Equal(t, "o-1", m.Header.Get("x-message-key"))
	assert.NotEmpty(t, m.Header.Get("x-message-id"))
}

// TestOutboxDeliversToKafka runs the local process with a Kafka destination on franz-go's
// in-process Kafka-protocol broker (no Kafka broker runs on these machines): an outbox row
// becomes a record of the topic with the row's key, body and headers, and the row is sent.
func TestOutboxDeliversToKafka(t *testing.T) {
	t.Parallel()
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "orders"))
	require.NoError(t, err)
	t.Cleanup(cluster.Close)

	dbURL := dbtest.NewDatabase(t)
	cfg := brokerConfig(t, dbURL, `    type: kafka
    bootstrapServers: `+strings.Join(cluster.ListenAddrs(), ",")+`
    topic: orders`)
	l, err := New(context.Background(), cfg, quietLog())
	require.NoError(t, err)
	runLocal(t, l)

	pool := dbtest.NewPool(t, dbURL)
	dbtest.Exec(t, pool, `INSERT INTO outbox (topic, key, payload) VALUES ('order.created', 'o-1', '{"orderId":"1"}')`)
	assert.Equal(t, 0, waitForSent(t, dbURL, "order.created"))

	consumer, err := kgo.NewClient(kgo.SeedBrokers(cluster.ListenAddrs()...), kgo.ConsumeTopics("orders"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	require.NoError(t, err)
	t.Cleanup(consumer.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	fetches := consumer.PollRecords(ctx, 1)
	require.NoError(t, fetches.Err())
	records := fetches.Records()
	require.Len(t, records, 1)
	r := records[0]
	assert.Equal(t, "o-1", string(r.Key))
	assert.JSONEq(t, `{"orderId":"1"}`, string(r.Value))
	headers := map[string]string{}
	for _, h := range r.Headers {
		headers[h.Key] = string(h.Value)
	}
	assert.Equal(t, "order.created", headers["x-topic"])
	assert.Equal(t, "0", headers["x-attempt"])
	assert.NotEmpty(t, headers["x-message-id"])
}
