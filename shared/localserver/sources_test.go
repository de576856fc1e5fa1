package localserver

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/alternayte/queuebox/shared/store/postgres/dbtest"
)

// TestBrokerSourcesReachAnHTTPReceiverThroughTheRelay runs queuebox serve with a RabbitMQ,
// a NATS JetStream and a Kafka (kfake) source: a message on each broker becomes an inbox
// row, the relay forwards it into the outbox, and the poller delivers it to an HTTP
// receiver; /health/ready lists rabbitmq.<name>, nats.<name> and kafka.<name> up.
func TestBrokerSourcesReachAnHTTPReceiverThroughTheRelay(t *testing.T) {
	t.Parallel()
	id := fmt.Sprint(time.Now().UnixNano())

	var mu sync.Mutex
	got := map[string]string{} // body id -> x-source header
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var m map[string]any
		_ = json.Unmarshal(body, &m)
		mu.Lock()
		got[fmt.Sprint(m["id"])] = r.Header.Get("x-source")
		mu.Unlock()
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(receiver.Close)

	queue := "qb-serve-src-" + id
	t.Cleanup(func() {
		if conn, err := amqp.Dial("amqp://guest:guest@127.0.0.1:5672/"); err == nil {
			if ch, err := conn.Channel(); err == nil {
				_, _ = ch.QueueDelete(queue, false, false, false)
			}
			_ = conn.Close()
		}
	})

	nc, err := natsgo.Connect("nats://127.0.0.1:4222")
	require.NoError(t, err, "NATS is not reachable at 127.0.0.1:4222; start it with: make services")
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	stream := "QB_SERVE_" + id
	_, err = js.CreateStream(context.Background(), jetstream.StreamConfig{Name: stream, Subjects: []string{"qbserve." + id + ".>"}, Storage: jetstream.MemoryStorage})
	require.NoError(t, err)
	t.Cleanup(func() { _ = js.DeleteStream(context.Background(), stream) })

	kc, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, "orders"))
	require.NoError(t, err)
	t.Cleanup(kc.Close)

	dbURL := dbtest.NewDatabase(t)
	u, err := url.Parse(dbURL)
	require.NoError(t, err)
	cfg := loadYAML(t, fmt.Sprintf(`
database:
  url: jdbc:postgresql://%s%s
  username: postgres
  password: trust-auth
  migrate: true
outbox:
  pollIntervalMs: 50
inbox:
  relay:
    pollIntervalMs: 50
destinations:
  receiver:
    type: http
    baseUrl: %s
    path: /in
routes:
  - topicPattern: "order.*"
    destination: receiver
sources:
  rabbit:
    type: rabbitmq
    queueName: %s
    connectionUrl: amqp://guest:guest@127.0.0.1:5672/
    declareQueue: true
    eventTypePath: $.type
    topic: "order.{{ eventType }}"
  jet:
    type: nats
    servers: nats://127.0.0.1:4222
    stream: %s
    durable: qb-serve
    eventTypePath: $.type
    topic: "order.{{ eventType }}"
  log:
    type: kafka
    bootstrapServers: %s
    topics: [orders]
    groupId: qb-serve
    eventTypePath: $.type
    topic: "order.{{ eventType }}"
`, u.Host, u.Path, receiver.URL, queue, stream, strings.Join(kc.ListenAddrs(), ",")))
	cfg.Server.HTTPPort = 0
	l, err := New(context.Background(), cfg, quietLog())
	require.NoError(t, err)
	base := runLocal(t, l)

	deadline := time.Now().Add(60 * time.Second)
	for {
		code, rep := readiness(t, base)
		if code == http.StatusOK {
			for _, c := range []string{"rabbitmq.rabbit", "nats.jet", "kafka.log"} {
				assert.Equal(t, "up", rep.Components[c].Status, "component %s", c)
			}
			break
		}
		require.True(t, time.Now().Before(deadline), "not ready within 60 s: %+v", rep)
		time.Sleep(50 * time.Millisecond)
	}

	conn, err := amqp.Dial("amqp://guest:guest@127.0.0.1:5672/")
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	ch, err := conn.Channel()
	require.NoError(t, err)
	require.NoError(t, ch.PublishWithContext(context.Background(), "", queue, true, false,
		amqp.Publishing{Body: []byte(`{"id":"from-rabbit","type":"created"}`)}))
	_, err = js.Publish(context.Background(), "qbserve."+id+".orders", []byte(`{"id":"from-nats","type":"created"}`))
	require.NoError(t, err)
	pr, err := kgo.NewClient(kgo.SeedBrokers(kc.ListenAddrs()...))
	require.NoError(t, err)
	t.Cleanup(pr.Close)
	require.NoError(t, pr.ProduceSync(context.Background(), &kgo.Record{Topic: "orders", Value: []byte(`{"id":"from-kafka","type":"created"}`)}).FirstErr())

	want := map[string]string{"from-rabbit": "rabbit", "from-nats": "jet", "from-kafka": "log"}
	for {
		mu.Lock()
		done := len(got) >= len(want)
		mu.Unlock()
		if done {
			break
		}
		require.True(t, time.Now().Before(deadline.Add(30*time.Second)), "the receiver got %v, want %v", got, want)
		time.Sleep(20 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, want, got)
}
