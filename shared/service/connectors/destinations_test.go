//go:build !queuebox_no_rabbitmq && !queuebox_no_kafka && !queuebox_no_nats

package connectors

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/alternayte/queuebox/shared/config"
	"github.com/alternayte/queuebox/shared/connect"
	"github.com/alternayte/queuebox/shared/connect/kafka"
	"github.com/alternayte/queuebox/shared/connect/kafka/kafkaconfig"
	"github.com/alternayte/queuebox/shared/connect/nats"
	"github.com/alternayte/queuebox/shared/connect/nats/natsconfig"
	"github.com/alternayte/queuebox/shared/connect/rabbitmq"
	"github.com/alternayte/queuebox/shared/connect/rabbitmq/rabbitmqconfig"
	"github.com/alternayte/queuebox/shared/kind"
)

// loadDestination loads body, the destinations block of a configuration file, and returns the
// destination named d.
func loadDestination(t *testing.T, body string) *config.Destination {
	t.Helper()
	cfg := loadFile(t, "destinations:\n  d:\n"+body)
	d := cfg.Destinations["d"]
	if d == nil {
		t.Fatalf("the configuration has no destination d: %v", cfg.Destinations)
	}
	return d
}

// yamlKeys returns the yaml keys of the struct type typ, those of its inline fields included.
func yamlKeys(typ reflect.Type) []string {
	var keys []string
	for i := 0; i < typ.NumField(); i++ {
		f := typ.Field(i)
		tag := f.Tag.Get("yaml")
		name, opts, _ := strings.Cut(tag, ",")
		switch {
		case name == "-":
		case strings.Contains(opts, "inline"):
			keys = append(keys, yamlKeys(f.Type)...)
		case name != "":
			keys = append(keys, name)
		}
	}
	return keys
}

// setKeys returns the keys that the lines of body set at the indentation of a destination key.
func setKeys(body string) map[string]bool {
	out := map[string]bool{}
	for _, line := range strings.Split(body, "\n") {
		if strings.HasPrefix(line, "    ") && !strings.HasPrefix(line, "     ") {
			key, _, _ := strings.Cut(strings.TrimSpace(line), ":")
			out[key] = true
		}
	}
	return out
}

// fieldDiff names the fields of the structs got and want that differ, with both values.
func fieldDiff(got, want any) []string {
	g, w := reflect.ValueOf(got), reflect.ValueOf(want)
	var out []string
	for i := 0; i < g.NumField(); i++ {
		if !reflect.DeepEqual(g.Field(i).Interface(), w.Field(i).Interface()) {
			out = append(out, fmt.Sprintf("%s = %v, want %v", g.Type().Field(i).Name, g.Field(i).Interface(), w.Field(i).Interface()))
		}
	}
	return out
}

// mapping is one destination kind: its configuration keys, and variants that set them all
// between them, each with the system Config it maps to.
type mapping struct {
	kind     config.DestinationKind
	keys     reflect.Type // the kind's key struct of shared/config
	variants []variant
	// required is an entry with the required keys alone; defaults is its mapping.
	required string
	defaults any
	// withDefaults returns the WithDefaults of a system Config.
	withDefaults func(any) any
	mapTo        func(*config.Destination) any
}

type variant struct {
	body string
	want any
}

var mappings = []mapping{
	{
		kind: rabbitmqconfig.Kind,
		keys: reflect.TypeFor[rabbitmqconfig.Destination](),
		variants: []variant{{
			body: `    type: rabbitmq
    url: amqp://qb:rabbit-pw@rabbit.example:5671/orders
    exchange: orders.{{ topic }}
    exchangeFrom: aggregate_type
    exchangeType: fanout
    routingKeyTemplate: rk.{{ key }}
    deliveryMode: transient
    headers:
      X-Team: orders
      x-env: prod
`,
			want: rabbitmq.Config{
				URL:                "amqp://qb:rabbit-pw@rabbit.example:5671/orders",
				Exchange:           "orders.{{ topic }}",
				ExchangeFrom:       "aggregate_type",
				ExchangeType:       rabbitmq.ExchangeFanout,
				RoutingKeyTemplate: "rk.{{ key }}",
				DeliveryMode:       rabbitmq.DeliveryTransient,
				Headers:            map[string]string{"X-Team": "orders", "x-env": "prod"},
			},
		}},
		required: "    url: amqp://rabbit:5672/\n    exchange: events\n",
		defaults: rabbitmq.Config{
			URL: "amqp://rabbit:5672/", Exchange: "events",
			ExchangeType: rabbitmq.ExchangeTopic, RoutingKeyTemplate: "{{ topic }}", DeliveryMode: rabbitmq.DeliveryPersistent,
		},
		withDefaults: func(c any) any { return c.(rabbitmq.Config).WithDefaults() },
		mapTo:        func(d *config.Destination) any { return rabbitmq.ConfigOf(d) },
	},
	{
		kind: kafkaconfig.Kind,
		keys: reflect.TypeFor[kafkaconfig.Destination](),
		variants: []variant{{
			body: `    type: kafka
    bootstrapServers: "k1:9092, k2:9093"
    topic: orders.{{ aggregateType }}
    topicFrom: key
    keyTemplate: "{{ topic }}"
    timeoutMs: 5000
    securityProtocol: SASL_SSL
    saslMechanism: SCRAM-SHA-512
    saslUsername: qb
    saslPassword: kafka-pw
    headers:
      X-Team: orders
`,
			want: kafka.Config{
				Brokers:          []string{"k1:9092", "k2:9093"},
				Topic:            "orders.{{ aggregateType }}",
				TopicFrom:        "key",
				KeyTemplate:      "{{ topic }}",
				Timeout:          5 * time.Second,
				SecurityProtocol: kafka.SecuritySASLSSL,
				SASLMechanism:    kafka.SASLScramSHA512,
				SASLUsername:     "qb",
				SASLPassword:     "kafka-pw",
				Headers:          map[string]string{"X-Team": "orders"},
			},
		}},
		required: "    bootstrapServers: k:9092\n    topic: events\n",
		defaults: kafka.Config{
			Brokers: []string{"k:9092"}, Topic: "events",
			KeyTemplate: "{{ key }}", Timeout: 30 * time.Second, SecurityProtocol: kafka.SecurityPlaintext,
		},
		withDefaults: func(c any) any { return c.(kafka.Config).WithDefaults() },
		mapTo:        func(d *config.Destination) any { return kafka.ConfigOf(d) },
	},
	{
		kind: natsconfig.Kind,
		keys: reflect.TypeFor[natsconfig.Destination](),
		variants: []variant{{
			body: `    type: nats
    servers: "nats://n1:4222, nats://n2:4223"
    subject: orders.{{ topic }}
    subjectFrom: topic
    jetStream: false
    timeoutMs: 7000
    username: qb
    password: nats-pw
    headers:
      X-Team: orders
`,
			want: nats.Config{
				Servers:     []string{"nats://n1:4222", "nats://n2:4223"},
				Subject:     "orders.{{ topic }}",
				SubjectFrom: "topic",
				Mode:        nats.ModeCore,
				Timeout:     7 * time.Second,
				Username:    "qb",
				Password:    "nats-pw",
				Headers:     map[string]string{"X-Team": "orders"},
			},
		}, {
			// A token, and jetStream written out: a user name and a token exclude each other.
			body: `    servers: nats://n:4222
    subject: s
    jetStream: true
    token: nats-token
`,
			want: nats.Config{
				Servers: []string{"nats://n:4222"}, Subject: "s", Mode: nats.ModeJetStream,
				Timeout: 30 * time.Second, Token: "nats-token",
			},
		}},
		required: "    servers: nats://n:4222\n    subject: events\n",
		defaults: nats.Config{
			Servers: []string{"nats://n:4222"}, Subject: "events", Mode: nats.ModeJetStream, Timeout: 30 * time.Second,
		},
		withDefaults: func(c any) any { return c.(nats.Config).WithDefaults() },
		mapTo:        func(d *config.Destination) any { return nats.ConfigOf(d) },
	},
}

// Every key of spec/23 of a RabbitMQ, Kafka or NATS destination, the headers of every
// destination included, reaches the system's Config: the variants set every key of the
// kind's configuration struct between them, each to a value that is not its default, and
// they map to the expected Config exactly; between them they fill every field of it.
func TestEveryKeyReachesTheSystemConfig(t *testing.T) {
	t.Parallel()
	for _, m := range mappings {
		t.Run(string(m.kind), func(t *testing.T) {
			set := map[string]bool{}
			filled := map[string]bool{}
			for _, v := range m.variants {
				for k := range setKeys(v.body) {
					set[k] = true
				}
				d := loadDestination(t, v.body)
				if d.Kind != m.kind {
					t.Fatalf("the variant loads as kind %s, want %s", d.Kind, m.kind)
				}
				got := m.mapTo(d)
				for _, diff := range fieldDiff(got, v.want) {
					t.Errorf("variant %q: %s", strings.SplitN(strings.TrimSpace(v.body), "\n", 2)[0], diff)
				}
				rv := reflect.ValueOf(got)
				for i := 0; i < rv.NumField(); i++ {
					if !rv.Field(i).IsZero() {
						filled[rv.Type().Field(i).Name] = true
					}
				}
			}
			for _, key := range append(yamlKeys(m.keys), "headers") {
				if !set[key] {
					t.Errorf("no variant sets the key %s", key)
				}
			}
			typ := reflect.TypeOf(m.defaults)
			for i := 0; i < typ.NumField(); i++ {
				if name := typ.Field(i).Name; !filled[name] {
					t.Errorf("no variant fills %s.%s", typ, name)
				}
			}
		})
	}
}

// The defaults of the configuration tree and those of the system's WithDefaults agree: an
// entry with its required keys alone maps to the Config that WithDefaults leaves unchanged.
func TestDefaultsAgree(t *testing.T) {
	t.Parallel()
	for _, m := range mappings {
		t.Run(string(m.kind), func(t *testing.T) {
			got := m.mapTo(loadDestination(t, m.required))
			for _, diff := range fieldDiff(got, m.defaults) {
				t.Errorf("required keys alone: %s", diff)
			}
			for _, diff := range fieldDiff(m.withDefaults(got), got) {
				t.Errorf("WithDefaults changes the mapped config: %s", diff)
			}
		})
	}
}

// Every enum value of the configuration is one of the system's: the mapping converts them by
// their text.
func TestEnumsAgree(t *testing.T) {
	t.Parallel()
	pairs := []struct{ config, system string }{
		{string(rabbitmqconfig.ExchangeTopic), string(rabbitmq.ExchangeTopic)},
		{string(rabbitmqconfig.ExchangeDirect), string(rabbitmq.ExchangeDirect)},
		{string(rabbitmqconfig.ExchangeFanout), string(rabbitmq.ExchangeFanout)},
		{string(rabbitmqconfig.DeliveryPersistent), string(rabbitmq.DeliveryPersistent)},
		{string(rabbitmqconfig.DeliveryTransient), string(rabbitmq.DeliveryTransient)},
		{string(kafkaconfig.SecurityPlaintext), string(kafka.SecurityPlaintext)},
		{string(kafkaconfig.SecuritySSL), string(kafka.SecuritySSL)},
		{string(kafkaconfig.SecuritySASLPlaintext), string(kafka.SecuritySASLPlaintext)},
		{string(kafkaconfig.SecuritySASLSSL), string(kafka.SecuritySASLSSL)},
	}
	for _, p := range pairs {
		if p.config != p.system {
			t.Errorf("the configuration's %q is the system's %q", p.config, p.system)
		}
	}
}

// connector returns the connector of kind k in All.
func connector(t *testing.T, k kind.Kind) connect.Connector {
	t.Helper()
	for _, c := range All() {
		if c.Kind == k {
			return c
		}
	}
	t.Fatalf("All has no connector of kind %s", k)
	return connect.Connector{}
}

// All registers one constructor per broker kind, and each builds the publisher of its
// system from a loaded destination, without a connection, with a closer.
func TestAllBuildsEachBrokerPublisher(t *testing.T) {
	t.Parallel()
	var kinds []string
	for _, b := range All() {
		kinds = append(kinds, string(b.Kind))
	}
	sort.Strings(kinds)
	if fmt.Sprint(kinds) != "[kafka nats rabbitmq]" {
		t.Fatalf("All registers the kinds %v, want kafka, nats and rabbitmq", kinds)
	}
	for _, m := range mappings {
		for _, b := range All() {
			if b.Kind != m.kind {
				continue
			}
			p, closeIt, err := b.Publisher(context.Background(), connect.PublisherParams{Name: "d", Destination: loadDestination(t, m.variants[0].body)})
			if err != nil {
				t.Fatalf("%s: New: %v", m.kind, err)
			}
			if p.Type() != string(m.kind) {
				t.Errorf("%s: the publisher's type is %q", m.kind, p.Type())
			}
			closeIt()
		}
	}
}

// A destination that the system refuses fails the constructor with the system's error,
// which names the key and holds no secret.
func TestRefusalNamesTheKeyWithoutTheSecret(t *testing.T) {
	t.Parallel()
	r := rabbitmqconfig.NewDestination("bus")
	rabbitmqconfig.DestinationOf(r).URL = config.NewConnectionURL("amqp://qb:hidden-pw@rabbit/")
	rabbitmqconfig.DestinationOf(r).Exchange = "events"
	rabbitmqconfig.DestinationOf(r).ExchangeType = "headers"
	k := kafkaconfig.NewDestination("stream")
	kafkaconfig.DestinationOf(k).BootstrapServers, kafkaconfig.DestinationOf(k).Topic = "k:9092", "events"
	kafkaconfig.DestinationOf(k).SecurityProtocol, kafkaconfig.DestinationOf(k).SASLMechanism, kafkaconfig.DestinationOf(k).SASLUsername = kafkaconfig.SecuritySASLSSL, "GSSAPI", "qb"
	kafkaconfig.DestinationOf(k).SASLPassword = config.NewSecret("hidden-pw")
	n := natsconfig.NewDestination("subjects")
	natsconfig.DestinationOf(n).Servers, natsconfig.DestinationOf(n).Subject = "nats://qb:hidden-pw@n:4222", "{{ nope }}"
	for _, c := range []struct {
		b    connect.Connector
		d    *config.Destination
		want string
	}{
		{connector(t, rabbitmqconfig.Kind), r, `destinations.bus.exchangeType: "headers": use topic, direct or fanout`},
		{connector(t, kafkaconfig.Kind), k, `destinations.stream.saslMechanism: kafka: unsupported security setting: "GSSAPI"`},
		{connector(t, natsconfig.Kind), n, `destination subjects: subject:`},
	} {
		_, _, err := c.b.Publisher(context.Background(), connect.PublisherParams{Name: c.d.Name, Destination: c.d})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("New = %v, want an error holding %q", err, c.want)
			continue
		}
		if strings.Contains(err.Error(), "hidden-pw") {
			t.Errorf("the error %q holds the password", err)
		}
	}
	if _, _, err := connector(t, kafkaconfig.Kind).Publisher(context.Background(), connect.PublisherParams{Name: "stream", Destination: k}); !errors.Is(err, kafka.ErrUnsupportedSecurity) {
		t.Errorf("Kafka New = %v, want ErrUnsupportedSecurity", err)
	}
}
