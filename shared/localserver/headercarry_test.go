package localserver

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/alternayte/queuebox/shared/forwarded"
	"github.com/alternayte/queuebox/shared/store/postgres/dbtest"
)

// longHeaderName is a header name of 256 bytes: a valid HTTP token, one byte more than an
// AMQP table key holds.
var longHeaderName = strings.Repeat("n", 256)

// uncarriedHeaders are headers that a producer may legally send and that some destination
// cannot carry: names with a space, a colon, a non-ASCII letter or no character; a value with
// a control character, one with CR LF; a name too long for AMQP; and one plain header.
func uncarriedHeaders(relayed bool) map[string]string {
	h := map[string]string{
		"with space": "v", "a:b": "v", "é": "v", "": "empty name",
		"x-ctl": "\x01,", "x-crlf": "a\r\nb", "x-ok": "fine", longHeaderName: "long name",
	}
	if relayed {
		h["x-inbox-id"] = "0b7f9a4e-0000-4c3a-9d55-000000000001"
		h["x-source"] = "spring"
	}
	return h
}

// TestHeadersADestinationCannotCarry runs queuebox serve with an HTTP, a RabbitMQ, a Kafka
// (kfake) and a NATS JetStream destination on PostgreSQL (docs/headers.md):
//   - a relayed row (x-inbox-id and x-source) with headers that its destination cannot carry
//     is delivered at its first attempt: a name that cannot travel is left out, a value that
//     cannot travel is sent as base64:, every other header as it is;
//   - an application row with such a header is dead at its first attempt, with a last_error
//     naming the header and the destination, and nothing reaches the destination; Kafka
//     carries every header, so its application row is sent;
//   - a relayed row that went dead before (as every one did) is delivered by a replay;
//   - a Kafka record with Spring Kafka's 4-byte int header retry_topic-attempts, relayed to
//     the HTTP destination, is delivered with the header as base64:;
//   - queuebox_outbox_headers_not_carried_total counts what was dropped, encoded and refused.
func TestHeadersADestinationCannotCarry(t *testing.T) {
	t.Parallel()
	rc, receiver := newHeaderReceiver(t)
	exchange, deliveries := rabbitExchange(t, "qb-local-carry", "#")

	nc, err := natsgo.Connect("nats://127.0.0.1:4222")
	require.NoError(t, err, "NATS is not reachable at 127.0.0.1:4222; start it with: make services")
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	id := fmt.Sprint(time.Now().UnixNano())
	streamName, prefix := "QBCARRY_"+id, "qbcarry."+id
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	stream, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: streamName, Subjects: []string{prefix + ".>"}, Storage: jetstream.MemoryStorage})
	require.NoError(t, err)
	t.Cleanup(func() { _ = js.DeleteStream(context.Background(), streamName) })

	kc, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "carry", "spring-in"))
	require.NoError(t, err)
	t.Cleanup(kc.Close)
	brokers := strings.Join(kc.ListenAddrs(), ",")

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
  retryBaseDelayMs: 100
inbox:
  relay:
    pollIntervalMs: 50
admin:
  enabled: true
  auth:
    type: bearer
    token: %s
destinations:
  hooks:
    type: http
    baseUrl: %s
    path: /hooks
  rabbit:
    type: rabbitmq
    url: amqp://guest:guest@127.0.0.1:5672/
    exchange: %s
  log:
    type: kafka
    bootstrapServers: %s
    topic: carry
  jet:
    type: nats
    servers: nats://127.0.0.1:4222
    subject: "%s.{{ topic }}"
routes:
  - topicPattern: "h.*"
    destination: hooks
  - topicPattern: "r.*"
    destination: rabbit
  - topicPattern: "k.*"
    destination: log
  - topicPattern: "n.*"
    destination: jet
sources:
  spring:
    type: kafka
    bootstrapServers: %[6]s
    topics: [spring-in]
    groupId: qb-carry
    topic: h.spring
`, u.Host, u.Path, adminToken, receiver.URL, exchange, brokers, prefix))
	cfg.Server.HTTPPort = 0
	l, err := New(context.Background(), cfg, quietLog())
	require.NoError(t, err)
	base := runLocal(t, l)
	pool := dbtest.NewPool(t, dbURL)

	insert := func(topic, state string, headers map[string]string) string {
		t.Helper()
		h, err := json.Marshal(headers)
		require.NoError(t, err)
		var rowID string
		require.NoError(t, pool.QueryRow(ctx, `INSERT INTO outbox (topic, key, payload, headers, state, attempt, last_error)
			VALUES ($1::text, $1::text, jsonb_build_object('id', $1::text), $2::jsonb, $3::text,
			        CASE WHEN $3::text = 'dead' THEN 5 ELSE 0 END, CASE WHEN $3::text = 'dead' THEN 'webhook: invalid header' END)
			RETURNING id::text`, topic, string(h), state).Scan(&rowID))
		return rowID
	}
	final := func(topic string) outboxRow {
		t.Helper()
		var r outboxRow
		waitUntil(t, 60*time.Second, "the outbox row "+topic+" to be sent or dead", func() bool {
			r = readOutboxRow(t, pool, topic)
			return r.state == "sent" || r.state == "dead"
		})
		return r
	}
	for _, p := range []string{"h", "r", "k", "n"} {
		insert(p+".relayed", "pending", uncarriedHeaders(true))
		insert(p+".app", "pending", uncarriedHeaders(false))
	}
	replayed := insert("h.replayed", "dead", uncarriedHeaders(true))

	// Every relayed row is delivered at its first attempt.
	for _, topic := range []string{"h.relayed", "r.relayed", "k.relayed", "n.relayed"} {
		r := final(topic)
		assert.Equal(t, "sent", r.state, "%s: last_error %s", topic, r.lastError)
		assert.Equal(t, 0, r.attempt, topic)
	}
	// HTTP: the names that are no token are left out, the control characters encoded.
	h := rc.wait(t, "h.relayed")
	assert.Equal(t, "fine", h.Get("X-Ok"))
	assert.Equal(t, "base64:ASw=", h.Get("X-Ctl"))
	assert.Equal(t, "base64:YQ0KYg==", h.Get("X-Crlf"))
	assert.Equal(t, "long name", h.Get(longHeaderName))
	assert.Equal(t, "spring", h.Get("X-Source"))

	// NATS: the same names are left out; a control character travels, CR LF is encoded.
	m, err := stream.GetLastMsgForSubject(ctx, prefix+".n.relayed")
	require.NoError(t, err)
	assert.Equal(t, []string{"fine"}, m.Header.Values("x-ok"))
	assert.Equal(t, []string{"\x01,"}, m.Header.Values("x-ctl"))
	assert.Equal(t, []string{"base64:YQ0KYg=="}, m.Header.Values("x-crlf"))
	assert.Equal(t, []string{"long name"}, m.Header.Values(longHeaderName))
	for name := range m.Header {
		assert.True(t, forwarded.ValidName(name), "NATS header %q", name)
	}

	// RabbitMQ: every header but the 256-byte name travels as it is.
	select {
	case d := <-deliveries:
		require.Equal(t, "r.relayed", d.RoutingKey)
		for name, v := range uncarriedHeaders(true) {
			if name == longHeaderName {
				assert.NotContains(t, d.Headers, name)
				continue
			}
			assert.Equal(t, v, d.Headers[name], "AMQP header %q", name)
		}
	case <-ctx.Done():
		t.Fatal("no message reached the RabbitMQ queue")
	}

	// Kafka carries every header, on the relayed and on the application row.
	consumer, err := kgo.NewClient(kgo.SeedBrokers(kc.ListenAddrs()...), kgo.ConsumeTopics("carry"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	require.NoError(t, err)
	t.Cleanup(consumer.Close)
	records := map[string]map[string]string{}
	for len(records) < 2 {
		fetches := consumer.PollRecords(ctx, 10)
		require.NoError(t, fetches.Err())
		for _, r := range fetches.Records() {
			hs := map[string]string{}
			for _, rh := range r.Headers {
				hs[rh.Key] = string(rh.Value)
			}
			records[string(r.Key)] = hs
		}
	}
	for _, topic := range []string{"k.relayed", "k.app"} {
		for name, v := range uncarriedHeaders(topic == "k.relayed") {
			assert.Equal(t, v, records[topic][name], "%s: Kafka header %q", topic, name)
		}
	}
	assert.Equal(t, "sent", final("k.app").state)

	// An application row with a header its destination cannot carry is dead at once.
	for topic, want := range map[string][]string{
		"h.app": {"destination hooks (http)", "not a header name"},
		"n.app": {"destination jet (nats)", "not a header name"},
		"r.app": {"destination rabbit (rabbitmq)", "255 bytes"},
	} {
		r := final(topic)
		assert.Equal(t, "dead", r.state, topic)
		assert.Equal(t, 0, r.attempt, "%s went dead at its first attempt", topic)
		for _, w := range want {
			assert.Contains(t, r.lastError, w, topic)
		}
	}
	rc.mu.Lock()
	_, got := rc.got["h.app"]
	rc.mu.Unlock()
	assert.False(t, got, "the refused application row reached the HTTP destination")
	if m, err := stream.GetLastMsgForSubject(ctx, prefix+".n.app"); err == nil {
		t.Errorf("the refused application row reached the NATS stream: %v", m.Header)
	}

	// A replay of a relayed row that went dead on its headers delivers it.
	req, err := http.NewRequest(http.MethodPost, base+"/admin/replay", strings.NewReader(`{"ids":["`+replayed+`"]}`))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+adminToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, "replay: %s", body)
	assert.Equal(t, "base64:ASw=", rc.wait(t, "h.replayed").Get("X-Ctl"))
	assert.Equal(t, "sent", final("h.replayed").state)

	// Spring Kafka's retry_topic-attempts (a big-endian int) through the source and the relay.
	pr, err := kgo.NewClient(kgo.SeedBrokers(kc.ListenAddrs()...))
	require.NoError(t, err)
	t.Cleanup(pr.Close)
	require.NoError(t, pr.ProduceSync(ctx, &kgo.Record{Topic: "spring-in", Value: []byte(`{"id":"spring-1"}`), Headers: []kgo.RecordHeader{
		{Key: "retry_topic-attempts", Value: []byte{0, 0, 0, 1}},
		{Key: "x-int", Value: []byte{1, 2, 3, 4}},
		{Key: "retry topic", Value: []byte("v")},
	}}).FirstErr())
	sh := rc.wait(t, "spring-1")
	assert.Equal(t, "base64:AAAAAQ==", sh.Get("retry_topic-attempts"))
	assert.Equal(t, "base64:AQIDBA==", sh.Get("x-int"))
	assert.Equal(t, "spring", sh.Get("x-source"))
	r := final("h.spring")
	assert.Equal(t, "sent", r.state)
	assert.Equal(t, 0, r.attempt)

	for _, line := range []string{
		`queuebox_outbox_headers_not_carried_total{action="dropped",destination="hooks"}`,
		`queuebox_outbox_headers_not_carried_total{action="encoded",destination="hooks"}`,
		`queuebox_outbox_headers_not_carried_total{action="refused",destination="hooks"}`,
		`queuebox_outbox_headers_not_carried_total{action="dropped",destination="rabbit"}`,
		`queuebox_outbox_headers_not_carried_total{action="encoded",destination="jet"}`,
	} {
		assert.Positive(t, metricValue(t, base, line), line)
	}
	assert.Equal(t, float64(-1), metricValue(t, base, `queuebox_outbox_headers_not_carried_total{action="dropped",destination="log"}`))
}
