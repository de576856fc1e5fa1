//go:build !queuebox_no_rabbitmq && !queuebox_no_kafka && !queuebox_no_nats

package connectors

import (
	"context"
	"io/fs"
	"strings"
	"testing"
	"time"

	"github.com/alternayte/queuebox/shared/config"
	"github.com/alternayte/queuebox/shared/connect/kafka"
	"github.com/alternayte/queuebox/shared/connect/nats"
	"github.com/alternayte/queuebox/shared/connect/rabbitmq"
	"github.com/alternayte/queuebox/shared/inbox"
	"github.com/alternayte/queuebox/shared/service"
)

// loadSources loads a configuration file whose sources block is sources.
func loadSources(t *testing.T, sources string) *config.Config {
	t.Helper()
	return loadFile(t, "sources:\n"+sources)
}

// loadFile loads a configuration file of the database block and body.
func loadFile(t *testing.T, body string) *config.Config {
	t.Helper()
	yaml := `database:
  url: jdbc:postgresql://db:5432/queuebox
  username: queuebox
  password: secret
` + body
	cfg, _, err := service.Load(service.LoadOptions{
		Env:        map[string]string{"QUEUEBOX_CONFIG_FILE": "queuebox.yml"},
		NoPackaged: true,
		ReadFile: func(name string) ([]byte, error) {
			if name == "queuebox.yml" {
				return []byte(yaml), nil
			}
			return nil, fs.ErrNotExist
		},
	})
	if err != nil {
		t.Fatalf("loading\n%s\n: %v", yaml, err)
	}
	return cfg
}

// TestEveryBrokerSourceKeyReachesItsSource sets every key of spec/23 for the three broker
// kinds and checks the system's SourceConfig and the intake's rules.
func TestEveryBrokerSourceKeyReachesItsSource(t *testing.T) {
	cfg := loadSources(t, `  q:
    type: rabbitmq
    queueName: incoming
    connectionUrl: amqp://guest:guest@rabbit:5672/
    prefetchCount: 7
    declareQueue: true
    consumption: pull
    idempotencyKeyPath: $.messageId
    aggregateIdPath: $.orderId
    eventTypePath: $.type
    attributeHeaders:
      idempotencyKey: id
      aggregateId: aggregateId
      eventType: eventType
    filter:
      require:
        - header: x-tenant
          equals: acme
  k:
    type: kafka
    bootstrapServers: b1:9092,b2:9092
    topics: [orders, retry]
    groupId: g1
    autoOffsetReset: latest
    maxPollRecords: 42
    securityProtocol: SASL_SSL
    saslMechanism: SCRAM-SHA-512
    saslUsername: qb
    saslPassword: k-secret
    eventTypeFromHeader: true
    topic: "{{ eventType }}"
  n:
    type: nats
    servers: nats://a:4222,nats://b:4222
    stream: ORDERS
    durable: qb-orders
    filterSubject: orders.>
    ackWaitMs: 1500
    batchSize: 9
    username: u
    password: n-secret
`)
	intake, err := intakeOf(nil, "q", cfg.Sources["q"])
	if err != nil {
		t.Fatal(err)
	}
	r := rabbitmq.SourceConfigOf(cfg.Sources["q"], intake, inbox.IntakeOptions{}, nil)
	if r.URL != "amqp://guest:guest@rabbit:5672/" || r.Queue != "incoming" || r.PrefetchCount != 7 || !r.DeclareQueue {
		t.Errorf("rabbitmq config = %+v", r)
	}
	if in := r.Intake; in.Name != "q" || in.Consumption != "pull" || in.IdempotencyKeyPath != "$.messageId" ||
		in.AggregateIDPath != "$.orderId" || in.EventTypePath != "$.type" ||
		in.AttributeHeaders != (inbox.AttributeHeaders{IdempotencyKey: "id", AggregateID: "aggregateId", EventType: "eventType"}) ||
		len(in.Filter.Require) != 1 {
		t.Errorf("rabbitmq intake = %+v", in)
	}
	kin, _ := intakeOf(nil, "k", cfg.Sources["k"])
	k := kafka.SourceConfigOf(cfg.Sources["k"], kin, inbox.IntakeOptions{}, nil)
	if strings.Join(k.Brokers, ",") != "b1:9092,b2:9092" || strings.Join(k.Topics, ",") != "orders,retry" || k.GroupID != "g1" ||
		k.AutoOffsetReset != "latest" || k.MaxPollRecords != 42 || k.SecurityProtocol != kafka.SecuritySASLSSL ||
		k.SASLMechanism != "SCRAM-SHA-512" || k.SASLUsername != "qb" || k.SASLPassword != "k-secret" {
		t.Errorf("kafka config = %+v", k)
	}
	if k.Intake.IdempotencyKeyPath != "$.id" || k.Intake.AttributeHeaders.IdempotencyKey != "x-idempotency-key" {
		t.Errorf("kafka intake defaults = %+v", k.Intake)
	}
	nin, _ := intakeOf(nil, "n", cfg.Sources["n"])
	n := nats.SourceConfigOf(cfg.Sources["n"], nin, inbox.IntakeOptions{}, nil)
	if strings.Join(n.Servers, ",") != "nats://a:4222,nats://b:4222" || n.Stream != "ORDERS" || n.Durable != "qb-orders" ||
		n.FilterSubject != "orders.>" || n.AckWait != 1500*time.Millisecond || n.BatchSize != 9 || n.Username != "u" || n.Password != "n-secret" {
		t.Errorf("nats config = %+v", n)
	}
}

// TestDefaultsMatchTheSources checks that the configuration's defaults are the sources'.
func TestDefaultsMatchTheSources(t *testing.T) {
	cfg := loadSources(t, `  q:
    queueName: incoming
    connectionUrl: amqp://rabbit:5672/
  k:
    bootstrapServers: b1:9092
    topics: [orders]
    groupId: g1
  n:
    servers: nats://a:4222
    stream: ORDERS
    durable: qb
`)
	in, _ := intakeOf(nil, "q", cfg.Sources["q"])
	if r := rabbitmq.SourceConfigOf(cfg.Sources["q"], in, inbox.IntakeOptions{}, nil); r.PrefetchCount != rabbitmq.DefaultPrefetchCount || r.DeclareQueue {
		t.Errorf("rabbitmq defaults = %+v", r)
	}
	if k := kafka.SourceConfigOf(cfg.Sources["k"], in, inbox.IntakeOptions{}, nil); k.MaxPollRecords != kafka.DefaultMaxPollRecords || k.AutoOffsetReset != kafka.OffsetEarliest {
		t.Errorf("kafka defaults = %+v", k)
	}
	if n := nats.SourceConfigOf(cfg.Sources["n"], in, inbox.IntakeOptions{}, nil); n.AckWait != nats.DefaultAckWait || n.BatchSize != nats.DefaultBatchSize {
		t.Errorf("nats defaults = %+v", n)
	}
	if in.IdempotencyKeyPath != inbox.DefaultBrokerKeyPath || in.Consumption != "push" {
		t.Errorf("intake defaults = %+v", in)
	}
	runners, err := FromConfig(cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range runners {
		names = append(names, r.Component())
	}
	if strings.Join(names, " ") != "kafka.k nats.n rabbitmq.q" {
		t.Errorf("components = %v, want kafka.k nats.n rabbitmq.q", names)
	}
	g := NewGroup(runners, nil)
	for _, c := range g.Checks() {
		if !c.Decides {
			t.Errorf("component %s does not decide readiness", c.Name)
		}
		if err := c.Probe(context.Background()); err == nil {
			t.Errorf("component %s is up before its consumer connected", c.Name)
		}
	}
}

// TestSkipTombstonesReachesTheKafkaSource: skipTombstones is off unless set, and reaches the
// Kafka source.
func TestSkipTombstonesReachesTheKafkaSource(t *testing.T) {
	cfg := loadSources(t, `  on:
    type: kafka
    bootstrapServers: b1:9092
    topics: [compacted]
    groupId: g1
    skipTombstones: true
  off:
    type: kafka
    bootstrapServers: b1:9092
    topics: [orders]
    groupId: g2
`)
	for name, want := range map[string]bool{"on": true, "off": false} {
		in, _ := intakeOf(nil, name, cfg.Sources[name])
		if k := kafka.SourceConfigOf(cfg.Sources[name], in, inbox.IntakeOptions{}, nil); k.SkipTombstones != want {
			t.Errorf("source %s: SkipTombstones = %v, want %v", name, k.SkipTombstones, want)
		}
	}
}

// TestMaxBodyBytesReachesTheIntake: maxBodyBytes of each broker kind reaches the intake; no
// limit unless set.
func TestMaxBodyBytesReachesTheIntake(t *testing.T) {
	cfg := loadSources(t, `  q:
    queueName: incoming
    connectionUrl: amqp://rabbit:5672/
    maxBodyBytes: 1000
  k:
    bootstrapServers: b1:9092
    topics: [orders]
    groupId: g1
    maxBodyBytes: 2000
  n:
    servers: nats://a:4222
    stream: ORDERS
    durable: qb
    maxBodyBytes: 3000
  none:
    servers: nats://a:4222
    stream: ORDERS
    durable: qb2
`)
	for name, want := range map[string]int{"q": 1000, "k": 2000, "n": 3000, "none": 0} {
		in, err := intakeOf(nil, name, cfg.Sources[name])
		if err != nil {
			t.Fatal(err)
		}
		if in.MaxBodyBytes != want {
			t.Errorf("source %s: MaxBodyBytes = %d, want %d", name, in.MaxBodyBytes, want)
		}
	}
}
