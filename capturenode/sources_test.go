package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/alternayte/queuebox/shared/store/postgres/dbtest"
	"github.com/alternayte/queuebox/shared/store/postgres/logical/logicaltest"
)

const (
	rabbitURL      = "amqp://guest:guest@127.0.0.1:5672/"
	natsURL        = "nats://127.0.0.1:4222"
	pollInvokes    = "/2015-03-31/functions/queuebox-poll/invocations"
	relayInvokes   = "/2015-03-31/functions/queuebox-relay/invocations"
	rabbitSourceID = "rabbit"
)

// rabbitQueue returns a queue name of the test, deleted when it ends (the source declares it).
func rabbitQueue(t *testing.T) string {
	t.Helper()
	queue := fmt.Sprintf("qb-capnode-%d", time.Now().UnixNano())
	t.Cleanup(func() {
		if conn, err := amqp.Dial(rabbitURL); err == nil {
			if ch, err := conn.Channel(); err == nil {
				_, _ = ch.QueueDelete(queue, false, false, false)
			}
			_ = conn.Close()
		}
	})
	return queue
}

// publishRabbit publishes body to queue through the default exchange.
func publishRabbit(t *testing.T, queue, body string) {
	t.Helper()
	conn, err := amqp.Dial(rabbitURL)
	require.NoError(t, err, "RabbitMQ is not reachable at 127.0.0.1:5672; start it with: make services")
	defer conn.Close()
	ch, err := conn.Channel()
	require.NoError(t, err)
	require.NoError(t, ch.PublishWithContext(context.Background(), "", queue, true, false, amqp.Publishing{Body: []byte(body)}))
}

// configFile writes the YAML configuration file of a test and returns the variable that
// points the node at it.
func configFile(t *testing.T, yaml string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "queuebox.yml")
	require.NoError(t, os.WriteFile(path, []byte(yaml), 0o600))
	return "QUEUEBOX_CONFIG_FILE=" + path
}

func rabbitSource(queue string) string {
	return fmt.Sprintf(`
  %s:
    type: rabbitmq
    queueName: %s
    connectionUrl: %s
    declareQueue: true
    topic: order.created
`, rabbitSourceID, queue, rabbitURL)
}

// TestConsumersOnlyNodeStoresIntoTheInboxAndWakesTheRelay runs the built node with a
// RabbitMQ source and outbox.capture.enabled false (and no poll function): it becomes ready
// with the database and rabbitmq.<name> components and no outbox-capture, stores a published
// message as an inbox row, invokes the relay function after the push row is stored (and never
// the poll function), and stops with 0 on SIGTERM.
func TestConsumersOnlyNodeStoresIntoTheInboxAndWakesTheRelay(t *testing.T) {
	t.Parallel()
	// An empty database: the node migrates it (database.migrate defaults to true).
	dbURL := dbtest.NewDatabase(t)
	pool := dbtest.NewPool(t, dbURL)
	queue := rabbitQueue(t)
	fake := newFakeLambda(t)
	n := start(t, dbURL, fake.srv.URL, filepath.Join(t.TempDir(), "capture"),
		"QUEUEBOX_OUTBOX_CAPTURE_ENABLED=false",
		"CAPTURE_POLL_FUNCTION=",
		configFile(t, "sources:"+rabbitSource(queue)))

	waitFor(t, 60*time.Second, "the node ready with database and rabbitmq.rabbit up", func() bool {
		code, rep, err := ready(n.base)
		return err == nil && code == http.StatusOK && rep.Components["database"].Status == "up" &&
			rep.Components["rabbitmq."+rabbitSourceID].Status == "up"
	})
	_, rep, err := ready(n.base)
	require.NoError(t, err)
	assert.NotContains(t, rep.Components, "outbox-capture", "no capture runs")
	assert.Zero(t, fake.count(relayInvokes), "nothing was stored yet, so nothing woke the relay")

	publishRabbit(t, queue, `{"id":"o-1"}`)
	rows := dbtest.WaitInboxRows(t, pool, rabbitSourceID, 1, 30*time.Second)
	require.Len(t, rows, 1)
	assert.Equal(t, "pending", rows[0].State)
	assert.JSONEq(t, `{"id":"o-1"}`, string(rows[0].Payload))
	waitFor(t, 30*time.Second, "the relay function's invoke after the push row", func() bool { return fake.count(relayInvokes) >= 1 })
	assert.Zero(t, fake.count(pollInvokes), "without capture the poll function is never woken")

	// The sources report the inbox families, and the store's pool its own.
	resp, err := http.Get(n.base + "/metrics")
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	assert.Contains(t, string(body), `queuebox_inbox_messages_total{status="new"} 1`)
	assert.Contains(t, string(body), `hikaricp_connections{pool="queuebox"}`)

	require.NoError(t, n.cmd.Process.Signal(syscall.SIGTERM))
	assert.Equal(t, 0, n.wait(t, 60*time.Second), "a SIGTERM stops the node cleanly")
	assert.Contains(t, n.stderr.String(), `"capture":false`)
}

// TestCaptureAndSourcesNodeReportsBoth runs the built node with capture and a RabbitMQ, a
// NATS JetStream and a Kafka (kfake) source: /health/ready lists outbox-capture and every
// source's component up; an outbox insert wakes the poll function and a RabbitMQ message
// becomes an inbox row.
func TestCaptureAndSourcesNodeReportsBoth(t *testing.T) {
	t.Parallel()
	dbURL := server.NewDatabase(t)
	pg := logicaltest.Pool(t, dbURL)
	_, err := pg.Exec(context.Background(), `CREATE PUBLICATION queuebox_outbox FOR TABLE outbox`)
	require.NoError(t, err)
	queue := rabbitQueue(t)

	nc, err := natsgo.Connect(natsURL)
	require.NoError(t, err, "NATS is not reachable at 127.0.0.1:4222; start it with: make services")
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	id := fmt.Sprint(time.Now().UnixNano())
	stream := "QB_CAPNODE_" + id
	_, err = js.CreateStream(context.Background(), jetstream.StreamConfig{Name: stream, Subjects: []string{"qbcapnode." + id + ".>"}, Storage: jetstream.MemoryStorage})
	require.NoError(t, err)
	t.Cleanup(func() { _ = js.DeleteStream(context.Background(), stream) })

	kc, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "orders"))
	require.NoError(t, err)
	t.Cleanup(kc.Close)

	fake := newFakeLambda(t)
	// logicaltest applied the migrations by hand, without a history.
	n := start(t, dbURL, fake.srv.URL, filepath.Join(t.TempDir(), "capture"), "QUEUEBOX_DATABASE_MIGRATE=false", configFile(t, "sources:"+rabbitSource(queue)+fmt.Sprintf(`
  jet:
    type: nats
    servers: %s
    stream: %s
    durable: qb-capnode
    topic: order.created
  log:
    type: kafka
    bootstrapServers: %s
    topics: [orders]
    groupId: qb-capnode
    topic: order.created
`, natsURL, stream, strings.Join(kc.ListenAddrs(), ","))))

	components := []string{"database", "outbox-capture", "rabbitmq." + rabbitSourceID, "nats.jet", "kafka.log"}
	waitFor(t, 90*time.Second, "the node ready with capture and every source up", func() bool {
		code, rep, err := ready(n.base)
		if err != nil || code != http.StatusOK {
			return false
		}
		for _, c := range components {
			if rep.Components[c].Status != "up" {
				return false
			}
		}
		return true
	})

	waitFor(t, 30*time.Second, "the wake of the start", func() bool { return fake.count(pollInvokes) >= 1 })
	before := fake.count(pollInvokes)
	_, err = pg.Exec(context.Background(), `INSERT INTO outbox (topic, key, payload) VALUES ('order.created', 'o-1', '{}')`)
	require.NoError(t, err)
	waitFor(t, 30*time.Second, "the poll invoke of the insert", func() bool { return fake.count(pollInvokes) > before })

	publishRabbit(t, queue, `{"id":"o-2"}`)
	var stored int
	waitFor(t, 30*time.Second, "the RabbitMQ message in the inbox", func() bool {
		return pg.QueryRow(context.Background(), `SELECT count(*) FROM inbox WHERE source = $1`, rabbitSourceID).Scan(&stored) == nil && stored == 1
	})

	require.NoError(t, n.cmd.Process.Signal(syscall.SIGTERM))
	assert.Equal(t, 0, n.wait(t, 60*time.Second), "a SIGTERM stops the node cleanly")
}

// TestNodeRefusesToStartWithNeitherCaptureNorSources: outbox.capture.enabled false and no
// broker source exits 1 with a reason that names both.
func TestNodeRefusesToStartWithNeitherCaptureNorSources(t *testing.T) {
	t.Parallel()
	cmd := exec.Command(binary)
	cmd.Env = []string{
		"QUEUEBOX_DATABASE_URL=jdbc:postgresql://127.0.0.1:1/queuebox",
		"QUEUEBOX_DATABASE_USERNAME=queuebox",
		"QUEUEBOX_DATABASE_PASSWORD=secret",
		"QUEUEBOX_OUTBOX_CAPTURE_ENABLED=false",
		"CAPTURE_POLL_FUNCTION=queuebox-poll",
	}
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit)
	assert.Equal(t, 1, exit.ExitCode())
	assert.Contains(t, string(out), "QueueBox could not start the capture node. Reason: outbox.capture.enabled is false "+
		"(QUEUEBOX_OUTBOX_CAPTURE_ENABLED) and no broker source is configured (sources.<name> of type rabbitmq, kafka or nats)")
}
