//go:build !queuebox_no_kafka

package kafka_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/alternayte/queuebox/shared/connect/kafka"
	"github.com/alternayte/queuebox/shared/outbox"
	"github.com/alternayte/queuebox/shared/route"
	"github.com/alternayte/queuebox/shared/template"
)

// newCluster starts kfake, the in-process Kafka-protocol broker, with the given topics (and
// partitions each), and closes it at the end of the test.
func newCluster(t *testing.T, partitions int32, topics []string, opts ...kfake.Opt) *kfake.Cluster {
	t.Helper()
	opts = append([]kfake.Opt{kfake.NumBrokers(1)}, opts...)
	if len(topics) > 0 {
		opts = append(opts, kfake.SeedTopics(partitions, topics...))
	}
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		t.Fatalf("starting the in-process Kafka broker (kfake): %v", err)
	}
	t.Cleanup(c.Close)
	return c
}

// destination returns a Kafka destination on the cluster with every default.
func destination(c *kfake.Cluster, topic string) kafka.Config {
	return kafka.Config{Brokers: c.ListenAddrs(), Topic: topic}
}

// newPublisher is the publisher of d with the static headers static.
func newPublisher(t *testing.T, d kafka.Config, static map[string]string) *kafka.Publisher {
	t.Helper()
	d.Headers = static
	p, err := kafka.New("events", d)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// consume reads n records of topic from the start, waiting at most 20 s for them.
func consume(t *testing.T, c *kfake.Cluster, topic string, n int) []*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatalf("consumer: %v", err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var out []*kgo.Record
	for len(out) < n {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d records of topic %s, want %d", len(out), topic, n)
		}
		fs.EachError(func(topic string, p int32, err error) { t.Fatalf("fetching %s/%d: %v", topic, p, err) })
		out = append(out, fs.Records()...)
	}
	return out
}

// consumeExactly is consume that also fails when more than n records arrived in the fetches.
func consumeExactly(t *testing.T, c *kfake.Cluster, topic string, n int) []*kgo.Record {
	t.Helper()
	out := consume(t, c, topic, n)
	if len(out) != n {
		t.Fatalf("consumed %d records of topic %s, want %d", len(out), topic, n)
	}
	return out
}

// saslFor returns the consumer's mechanism for the kfake superuser qb.
func saslFor(mech string) sasl.Mechanism {
	switch mech {
	case "PLAIN":
		return plain.Auth{User: "qb", Pass: "s3cret-pass"}.AsMechanism()
	case "SCRAM-SHA-256":
		return scram.Auth{User: "qb", Pass: "s3cret-pass"}.AsSha256Mechanism()
	}
	return scram.Auth{User: "qb", Pass: "s3cret-pass"}.AsSha512Mechanism()
}

func message(id string) outbox.Message {
	return outbox.Message{
		ID:            id,
		Topic:         "order.created",
		Key:           "order-42",
		AggregateType: "Order",
		Payload:       json.RawMessage(`{"id":42,"region":"eu", "total": 9.5}`),
		Attempt:       3,
		CreatedAt:     time.Now(),
		Route:         route.Route{},
	}
}

func headerList(r *kgo.Record) [][2]string {
	out := make([][2]string, 0, len(r.Headers))
	for _, h := range r.Headers {
		out = append(out, [2]string{h.Key, string(h.Value)})
	}
	return out
}

func publish(t *testing.T, p *kafka.Publisher, m outbox.Message) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := p.Publish(ctx, m); err != nil {
		t.Fatalf("Publish: %v", err)
	}
}

func TestPublishRecordBodyHeadersKeyTopic(t *testing.T) {
	c := newCluster(t, 1, []string{"events.Order"})
	p := newPublisher(t, destination(c, "events.{{ aggregateType }}"), map[string]string{
		"x-team": "orders", "X-Env": "test", "x-attempt": "static-attempt",
	})
	if p.Type() != "kafka" {
		t.Fatalf("Type = %q, want kafka", p.Type())
	}
	m := message("0d4c6a2e-0000-4000-8000-000000000001")
	m.Headers = map[string]string{"X-Team": "row-team", "x-message-id": "row-id", "trace": "abc"}
	publish(t, p, m)

	recs := consumeExactly(t, c, "events.Order", 1)
	r := recs[0]
	if string(r.Value) != string(m.Payload) {
		t.Errorf("value = %q, want the payload bytes %q", r.Value, m.Payload)
	}
	if string(r.Key) != "order-42" {
		t.Errorf("key = %q, want order-42 (keyTemplate default {{ key }})", r.Key)
	}
	want := [][2]string{
		{"x-message-id", m.ID},
		{"x-topic", "order.created"},
		{"x-attempt", "3"},
		{"X-Env", "test"},               // static
		{"x-attempt", "static-attempt"}, // static named like a standard header: added, not replacing
		// the static x-team is replaced by the row's X-Team
		{"X-Team", "row-team"},
		{"trace", "abc"},
		{"x-message-id", "row-id"}, // a row header named like a standard header: added
	}
	if got := headerList(r); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("headers =\n%v\nwant\n%v", got, want)
	}
}

func TestRouteRoutingKeyTemplateWinsOverKeyTemplate(t *testing.T) {
	c := newCluster(t, 1, []string{"orders"})
	d := destination(c, "orders")
	d.KeyTemplate = "dest-{{ topic }}"
	p := newPublisher(t, d, nil)

	m := message("m1")
	m.Route = route.Route{RoutingKeyTemplate: "{{ payload.region }}.{{ topic }}.{{ payload.missing }}", RoutingKeyMissingFieldDefault: "none"}
	publish(t, p, m)
	m2 := message("m2") // no route template: the destination keyTemplate
	publish(t, p, m2)
	m3 := message("m3") // a route template rendering blank: no key
	m3.Route = route.Route{RoutingKeyTemplate: "{{ payload.missing }}"}
	publish(t, p, m3)

	recs := consumeExactly(t, c, "orders", 3)
	keys := map[string]string{}
	for _, r := range recs {
		if r.Key == nil {
			keys[string(r.Headers[0].Value)] = "<nil>"
		} else {
			keys[string(r.Headers[0].Value)] = string(r.Key)
		}
	}
	want := map[string]string{"m1": "eu.order.created.none", "m2": "dest-order.created", "m3": "<nil>"}
	if fmt.Sprint(keys) != fmt.Sprint(want) {
		t.Errorf("keys = %v, want %v", keys, want)
	}
}

func TestEmptyKeySendsNoKey(t *testing.T) {
	c := newCluster(t, 1, []string{"orders"})
	p := newPublisher(t, destination(c, "orders"), nil)
	m := message("nokey")
	m.Key = ""
	publish(t, p, m)
	r := consume(t, c, "orders", 1)[0]
	if r.Key != nil {
		t.Errorf("key = %q, want no key", r.Key)
	}
}

func TestTopicFromColumn(t *testing.T) {
	c := newCluster(t, 1, []string{"order.created", "Order"})
	d := destination(c, "ignored-template")
	d.TopicFrom = template.ColumnTopic
	p := newPublisher(t, d, nil)
	publish(t, p, message("t1"))
	r := consume(t, c, "order.created", 1)[0]
	if r.Topic != "order.created" || string(r.Headers[0].Value) != "t1" {
		t.Errorf("record on %s with id %s, want order.created / t1", r.Topic, r.Headers[0].Value)
	}

	d.TopicFrom = template.ColumnAggregateType
	p2 := newPublisher(t, d, nil)
	publish(t, p2, message("t2"))
	if r := consume(t, c, "Order", 1)[0]; string(r.Headers[0].Value) != "t2" {
		t.Errorf("record id %s on Order, want t2", r.Headers[0].Value)
	}
}

func TestEmptyOrInvalidTopicFails(t *testing.T) {
	c := newCluster(t, 1, []string{"orders"})
	p := newPublisher(t, destination(c, "{{ payload.missing }}"), nil)
	err := p.Publish(context.Background(), message("e1"))
	if !errors.Is(err, template.ErrEmptyAddress) {
		t.Fatalf("Publish with an empty topic: %v, want ErrEmptyAddress", err)
	}
	if !strings.Contains(err.Error(), "destination events") {
		t.Errorf("error %q does not name the destination", err)
	}

	d := destination(c, "")
	d.TopicFrom = template.ColumnKey
	p2 := newPublisher(t, d, nil)
	m := message("e2")
	m.Key = ""
	if err := p2.Publish(context.Background(), m); !errors.Is(err, template.ErrEmptyAddress) {
		t.Fatalf("Publish with an empty key column: %v, want ErrEmptyAddress", err)
	}

	p3 := newPublisher(t, destination(c, "orders/{{ key }}"), nil)
	if err := p3.Publish(context.Background(), message("e3")); !errors.Is(err, kafka.ErrInvalidTopic) {
		t.Fatalf("Publish with an illegal topic: %v, want ErrInvalidTopic", err)
	}
}

func TestUnknownTopicFails(t *testing.T) {
	c := newCluster(t, 1, []string{"orders"})
	p := newPublisher(t, destination(c, "no-such-topic"), nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err := p.Publish(ctx, message("u1"))
	if err == nil {
		t.Fatal("Publish to a topic that does not exist succeeded")
	}
	if ctx.Err() != nil {
		t.Fatalf("Publish waited for the caller's deadline: %v", err)
	}
	if !strings.Contains(err.Error(), "no-such-topic") {
		t.Errorf("error %q does not name the topic", err)
	}
}

func TestBrokerRefusalFails(t *testing.T) {
	c := newCluster(t, 1, []string{"orders"})
	c.ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		preq := req.(*kmsg.ProduceRequest)
		resp := preq.ResponseKind().(*kmsg.ProduceResponse)
		for _, rt := range preq.Topics {
			st := kmsg.NewProduceResponseTopic()
			st.Topic, st.TopicID = rt.Topic, rt.TopicID
			for _, rp := range rt.Partitions {
				sp := kmsg.NewProduceResponseTopicPartition()
				sp.Partition = rp.Partition
				sp.ErrorCode = kerr.TopicAuthorizationFailed.Code
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true
	})
	p := newPublisher(t, destination(c, "orders"), nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err := p.Publish(ctx, message("r1"))
	if !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("Publish refused by the broker: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
}

func TestTimeoutMsBoundsThePublish(t *testing.T) {
	c := newCluster(t, 1, []string{"orders"})
	c.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		return nil, nil, true // never answered
	})
	d := destination(c, "orders")
	d.Timeout = 2 * time.Second
	p := newPublisher(t, d, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	err := p.Publish(ctx, message("to1"))
	if err == nil || ctx.Err() != nil {
		t.Fatalf("Publish to a broker that never answers: %v (caller ctx %v), want the 2 s budget to end it", err, ctx.Err())
	}
	if !strings.Contains(err.Error(), "no acknowledgement within 2s") {
		t.Errorf("error %q does not say the budget ran out", err)
	}
}

func TestPerKeyOrder(t *testing.T) {
	c := newCluster(t, 4, []string{"ordered"})
	p := newPublisher(t, destination(c, "ordered"), nil)
	for i := range 20 {
		m := message(fmt.Sprintf("o%02d", i))
		m.Key = "same-key"
		publish(t, p, m)
	}
	recs := consumeExactly(t, c, "ordered", 20)
	for i, r := range recs {
		if want := fmt.Sprintf("o%02d", i); string(r.Headers[0].Value) != want || r.Partition != recs[0].Partition {
			t.Fatalf("record %d is %s on partition %d, want %s on %d", i, r.Headers[0].Value, r.Partition, want, recs[0].Partition)
		}
	}
}

func TestSASL(t *testing.T) {
	for _, mech := range []string{"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"} {
		t.Run(mech, func(t *testing.T) {
			c := newCluster(t, 1, []string{"secure"}, kfake.EnableSASL(), kfake.Superuser(mech, "qb", "s3cret-pass"))
			d := destination(c, "secure")
			d.SecurityProtocol = kafka.SecuritySASLPlaintext
			d.SASLMechanism = mech
			d.SASLUsername = "qb"
			d.SASLPassword = "s3cret-pass"
			publish(t, newPublisher(t, d, nil), message("s1"))

			d.SASLPassword = "wrong-pass-xyz"
			bad := newPublisher(t, d, nil)
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			err := bad.Publish(ctx, message("s2"))
			if err == nil {
				t.Fatal("Publish with a wrong password succeeded")
			}
			t.Logf("wrong password: %v", err)
			if strings.Contains(err.Error(), "wrong-pass-xyz") {
				t.Errorf("the error holds the password: %v", err)
			}

			// Only s1 arrived.
			cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.ConsumeTopics("secure"),
				kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
				kgo.SASL(saslFor(mech)))
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			pctx, pcancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer pcancel()
			fs := cl.PollFetches(pctx)
			if recs := fs.Records(); len(recs) != 1 || string(recs[0].Headers[0].Value) != "s1" {
				t.Fatalf("records %v (errors %v), want only s1", recs, fs.Errors())
			}
		})
	}
}

func TestNewRefusesBadSettings(t *testing.T) {
	base := kafka.Config{Brokers: []string{"127.0.0.1:1"}, Topic: "orders"}
	cases := []struct {
		name, want string
		edit       func(*kafka.Config)
	}{
		{"gssapi", "destinations.events.saslMechanism", func(d *kafka.Config) {
			d.SecurityProtocol, d.SASLMechanism, d.SASLUsername = kafka.SecuritySASLSSL, "GSSAPI", "u"
			d.SASLPassword = "hidden-pw"
		}},
		{"oauthbearer", "unsupported", func(d *kafka.Config) {
			d.SecurityProtocol, d.SASLMechanism, d.SASLUsername = kafka.SecuritySASLPlaintext, "OAUTHBEARER", "u"
			d.SASLPassword = "hidden-pw"
		}},
		{"protocol", "destinations.events.securityProtocol", func(d *kafka.Config) { d.SecurityProtocol = "KERBEROS" }},
		{"no user", "destinations.events.saslUsername", func(d *kafka.Config) {
			d.SecurityProtocol, d.SASLMechanism = kafka.SecuritySASLPlaintext, "PLAIN"
			d.SASLPassword = "hidden-pw"
		}},
		{"no password", "destinations.events.saslPassword", func(d *kafka.Config) {
			d.SecurityProtocol, d.SASLMechanism, d.SASLUsername = kafka.SecuritySASLPlaintext, "PLAIN", "u"
		}},
		{"mechanism without sasl", "destinations.events.saslMechanism", func(d *kafka.Config) { d.SASLMechanism = "PLAIN" }},
		{"timeout", "destinations.events.timeoutMs", func(d *kafka.Config) { d.Timeout = 1999 * time.Millisecond }},
		{"topicFrom", "destinations.events.topicFrom", func(d *kafka.Config) { d.TopicFrom = "payload" }},
		{"placeholder", "destinations.events.topic", func(d *kafka.Config) { d.Topic = "{{ source }}" }},
		{"no broker", "destinations.events.bootstrapServers", func(d *kafka.Config) { d.Brokers = []string{" ", ""} }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := base
			tc.edit(&d)
			p, err := kafka.New("events", d)
			if err == nil {
				_ = p.Close()
				t.Fatal("New accepted the destination")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not contain %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "hidden-pw") {
				t.Errorf("error holds the password: %q", err)
			}
		})
	}
}
