//go:build !queuebox_no_rabbitmq

package rabbitmq_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/alternayte/queuebox/shared/connect/rabbitmq"
	"github.com/alternayte/queuebox/shared/outbox"
	"github.com/alternayte/queuebox/shared/route"
	"github.com/alternayte/queuebox/shared/template"
)

const (
	brokerURL = "amqp://guest:guest@127.0.0.1:5672/"
	startHint = "start it with: make services (scripts/ensure-services.sh), or: rabbitmq-server -detached"
	// waitLimit bounds every wait for a delivery, so a lost message fails the test instead of
	// hanging it. It is no speed assertion.
	waitLimit = 30 * time.Second
)

// testConn returns a channel on the machine's RabbitMQ, or fails the test saying how to start
// the broker.
func testConn(t *testing.T) *amqp.Channel {
	t.Helper()
	conn, err := amqp.Dial(brokerURL)
	if err != nil {
		t.Fatalf("RabbitMQ is not reachable at 127.0.0.1:5672 (%v); %s", err, startHint)
	}
	t.Cleanup(func() { _ = conn.Close() })
	ch, err := conn.Channel()
	if err != nil {
		t.Fatalf("opening a channel: %v", err)
	}
	return ch
}

func unique(prefix string) string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return prefix + "-" + hex.EncodeToString(b)
}

// queueOn declares exchange as the publisher does (durable, kind) unless it exists, binds a new
// exclusive queue to it with binding, and returns the deliveries of that queue. The exchange
// is deleted at the end of the test.
func queueOn(t *testing.T, ch *amqp.Channel, exchange, kind, binding string) <-chan amqp.Delivery {
	t.Helper()
	if err := ch.ExchangeDeclare(exchange, kind, true, false, false, false, nil); err != nil {
		t.Fatalf("declaring exchange %s: %v", exchange, err)
	}
	t.Cleanup(func() { deleteExchange(exchange) })
	q, err := ch.QueueDeclare("", false, true, true, false, nil)
	if err != nil {
		t.Fatalf("declaring a queue: %v", err)
	}
	if err := ch.QueueBind(q.Name, binding, exchange, false, nil); err != nil {
		t.Fatalf("binding the queue: %v", err)
	}
	d, err := ch.Consume(q.Name, "", true, true, false, false, nil)
	if err != nil {
		t.Fatalf("consuming: %v", err)
	}
	return d
}

// deleteExchange deletes an exchange of a test on its own connection.
func deleteExchange(name string) {
	conn, err := amqp.Dial(brokerURL)
	if err != nil {
		return
	}
	defer conn.Close()
	if ch, err := conn.Channel(); err == nil {
		_ = ch.ExchangeDelete(name, false, false)
	}
}

// destination is a destination on the machine's broker with every default.
func destination(exchange string) rabbitmq.Config {
	return rabbitmq.Config{URL: brokerURL, Exchange: exchange}
}

// newPublisher is the publisher of d with the static headers headers.
func newPublisher(t *testing.T, d rabbitmq.Config, headers map[string]string) *rabbitmq.Publisher {
	t.Helper()
	d.Headers = headers
	p, err := rabbitmq.New("events", d)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

func message(topic string) outbox.Message {
	return outbox.Message{
		ID:        unique("msg"),
		Topic:     topic,
		Payload:   json.RawMessage(`{"id":1}`),
		CreatedAt: time.Now(),
		Route:     route.Route{},
	}
}

func publish(t *testing.T, p *rabbitmq.Publisher, m outbox.Message) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if err := p.Publish(ctx, m); err != nil {
		t.Fatalf("Publish: %v", err)
	}
}

func receive(t *testing.T, d <-chan amqp.Delivery) amqp.Delivery {
	t.Helper()
	select {
	case msg := <-d:
		return msg
	case <-time.After(waitLimit):
		t.Fatalf("no message arrived within %s", waitLimit)
	}
	return amqp.Delivery{}
}

func TestPublishCarriesBodyPropertiesHeadersAndRoutingKey(t *testing.T) {
	ch := testConn(t)
	exchange := unique("qb-test-props")
	deliveries := queueOn(t, ch, exchange, "topic", "#")
	p := newPublisher(t, destination(exchange), map[string]string{"x-team": "orders", "x-static": "s"})
	if p.Type() != "rabbitmq" {
		t.Fatalf("Type() = %q, want rabbitmq", p.Type())
	}

	m := message("order.created")
	m.Payload = json.RawMessage(`{"b": [1, 2],  "a":"é"}`)
	m.Key = "order-42"
	m.AggregateType = "order"
	m.Attempt = 3
	m.Headers = map[string]string{"x-tenant": "acme", "x-team": "from-row"}
	publish(t, p, m)

	got := receive(t, deliveries)
	if string(got.Body) != string(m.Payload) {
		t.Errorf("body = %q, want %q byte for byte", got.Body, m.Payload)
	}
	if got.MessageId != m.ID {
		t.Errorf("message_id = %q, want %q", got.MessageId, m.ID)
	}
	if got.ContentType != "application/json" {
		t.Errorf("content_type = %q, want application/json", got.ContentType)
	}
	if got.DeliveryMode != 2 {
		t.Errorf("delivery_mode = %d, want 2 (persistent)", got.DeliveryMode)
	}
	if got.RoutingKey != "order.created" {
		t.Errorf("routing key = %q, want the topic order.created", got.RoutingKey)
	}
	if got.Exchange != exchange {
		t.Errorf("exchange = %q, want %q", got.Exchange, exchange)
	}
	want := amqp.Table{
		"x-topic":   "order.created",
		"x-attempt": int64(3),
		"x-tenant":  "acme",
		"x-team":    "from-row", // a row header wins over a static header
		"x-static":  "s",
	}
	if len(got.Headers) != len(want) {
		t.Errorf("headers = %v, want exactly %v (no key header)", got.Headers, want)
	}
	for k, v := range want {
		if got.Headers[k] != v {
			t.Errorf("header %s = %#v, want %#v", k, got.Headers[k], v)
		}
	}
}

func TestTransientDeliveryMode(t *testing.T) {
	ch := testConn(t)
	exchange := unique("qb-test-transient")
	deliveries := queueOn(t, ch, exchange, "topic", "#")
	d := destination(exchange)
	d.DeliveryMode = rabbitmq.DeliveryTransient
	p := newPublisher(t, d, nil)
	publish(t, p, message("a.b"))
	if got := receive(t, deliveries); got.DeliveryMode != 1 {
		t.Fatalf("delivery_mode = %d, want 1 (transient)", got.DeliveryMode)
	}
}

func TestRouteRoutingKeyTemplateWinsOverDestination(t *testing.T) {
	ch := testConn(t)
	exchange := unique("qb-test-rk")
	deliveries := queueOn(t, ch, exchange, "topic", "#")
	d := destination(exchange)
	d.RoutingKeyTemplate = "dest.{{ topic }}"
	p := newPublisher(t, d, nil)

	cases := []struct {
		name    string
		route   route.Route
		payload string
		want    string
	}{
		{"destination template", route.Route{}, `{"region":"eu"}`, "dest.order.created"},
		{"route template", route.Route{RoutingKeyTemplate: "{{ payload.region }}.{{ topic }}"}, `{"region":"eu"}`, "eu.order.created"},
		{"route missing field default", route.Route{RoutingKeyTemplate: "{{ payload.region }}.{{ topic }}", RoutingKeyMissingFieldDefault: "unknown"}, `{}`, "unknown.order.created"},
		{"destination template with route default", route.Route{RoutingKeyMissingFieldDefault: "none"}, `{}`, "dest.order.created"},
	}
	for _, c := range cases {
		m := message("order.created")
		m.Route = c.route
		m.Payload = json.RawMessage(c.payload)
		publish(t, p, m)
		if got := receive(t, deliveries); got.RoutingKey != c.want || got.MessageId != m.ID {
			t.Errorf("%s: routing key %q (message %s), want %q (message %s)", c.name, got.RoutingKey, got.MessageId, c.want, m.ID)
		}
	}
}

func TestExchangeFromColumnAndTemplate(t *testing.T) {
	ch := testConn(t)
	base := unique("qb-test-addr")
	// The publisher declares the exchanges; the test declares them too, the same way, so it
	// can bind its queues first.
	orders := queueOn(t, ch, base+".order", "topic", "#")
	users := queueOn(t, ch, base+".user", "topic", "#")

	d := destination("ignored-when-a-column-is-set")
	d.ExchangeFrom = template.ColumnAggregateType
	fromColumn := newPublisher(t, d, nil)
	tmpl := newPublisher(t, destination(base+".{{ payload.kind }}"), nil)

	m := message("x.y")
	m.AggregateType = base + ".order"
	publish(t, fromColumn, m)
	if got := receive(t, orders); got.MessageId != m.ID || got.Exchange != base+".order" {
		t.Errorf("exchangeFrom: got message %s on %q, want %s on %q", got.MessageId, got.Exchange, m.ID, base+".order")
	}

	m = message("x.y")
	m.Payload = json.RawMessage(`{"kind":"user"}`)
	publish(t, tmpl, m)
	if got := receive(t, users); got.MessageId != m.ID || got.Exchange != base+".user" {
		t.Errorf("template: got message %s on %q, want %s on %q", got.MessageId, got.Exchange, m.ID, base+".user")
	}
}

func TestEmptyAddressFails(t *testing.T) {
	d := destination("unused")
	d.ExchangeFrom = template.ColumnKey
	p := newPublisher(t, d, nil)
	err := p.Publish(context.Background(), message("a.b")) // the row has no key
	if !errors.Is(err, template.ErrEmptyAddress) {
		t.Fatalf("Publish of a row without key = %v, want ErrEmptyAddress", err)
	}
	if !strings.Contains(err.Error(), "events") {
		t.Errorf("error %q does not name the destination", err)
	}

	p = newPublisher(t, destination("{{ payload.missing }}"), nil)
	if err := p.Publish(context.Background(), message("a.b")); !errors.Is(err, template.ErrEmptyAddress) {
		t.Fatalf("Publish with a template that renders empty = %v, want ErrEmptyAddress", err)
	}
}

func TestUnroutableMessageFailsThenSucceedsOnceBound(t *testing.T) {
	ch := testConn(t)
	exchange := unique("qb-test-unroutable")
	p := newPublisher(t, destination(exchange), nil)
	t.Cleanup(func() { deleteExchange(exchange) })

	m := message("nobody.listens")
	err := p.Publish(context.Background(), m)
	if !errors.Is(err, rabbitmq.ErrUnroutable) {
		t.Fatalf("Publish with no bound queue = %v, want ErrUnroutable", err)
	}
	if !strings.Contains(err.Error(), "NO_ROUTE") {
		t.Errorf("error %q does not carry the broker's reason", err)
	}

	// The retry, once a queue is bound, arrives; the failed publish left nothing behind.
	deliveries := queueOn(t, ch, exchange, "topic", "#")
	for i := 0; i < 3; i++ { // the same channels serve the next publishes
		publish(t, p, m)
		if got := receive(t, deliveries); got.MessageId != m.ID {
			t.Fatalf("got message %s, want %s", got.MessageId, m.ID)
		}
	}
	// A routing key that the binding does not take is unroutable again.
	bound := unique("qb-test-direct")
	d := destination(bound)
	d.ExchangeType = rabbitmq.ExchangeDirect
	direct := newPublisher(t, d, nil)
	dq := queueOn(t, ch, bound, "direct", "only.this")
	if err := direct.Publish(context.Background(), message("other.key")); !errors.Is(err, rabbitmq.ErrUnroutable) {
		t.Fatalf("Publish to an unbound routing key = %v, want ErrUnroutable", err)
	}
	ok := message("only.this")
	publish(t, direct, ok)
	if got := receive(t, dq); got.MessageId != ok.ID {
		t.Fatalf("got message %s, want %s", got.MessageId, ok.ID)
	}
}

func TestDeclareRefusedFailsAndPublisherRecovers(t *testing.T) {
	ch := testConn(t)
	fanout := unique("qb-test-fanout")
	queueOn(t, ch, fanout, "fanout", "")
	p := newPublisher(t, destination(fanout), nil) // declares topic: the broker refuses
	err := p.Publish(context.Background(), message("a.b"))
	if err == nil || !strings.Contains(err.Error(), "PRECONDITION_FAILED") {
		t.Fatalf("Publish to an exchange of another type = %v, want a PRECONDITION_FAILED error", err)
	}
	// The closed channel is not reused.
	if err := p.Publish(context.Background(), message("a.b")); err == nil || !strings.Contains(err.Error(), "PRECONDITION_FAILED") {
		t.Fatalf("second Publish = %v, want the same refusal", err)
	}
}

func TestErrorsHoldNoSecret(t *testing.T) {
	// The failed publish with a wrong password is a case of the publisher contract
	// (contract_test.go); New refuses a bad URL without repeating its password.
	const password = "s3cr3t-pa55"
	d := destination("x")
	d.URL = "http://guest:" + password + "@host/"
	if _, err := rabbitmq.New("events", d); err == nil || strings.Contains(err.Error(), password) {
		t.Fatalf("New with a bad URL = %v, want an error without the password", err)
	}
}

func TestNewRefusesBadConfiguration(t *testing.T) {
	for name, mutate := range map[string]func(*rabbitmq.Config){
		"unknown placeholder": func(d *rabbitmq.Config) { d.Exchange = "{{ nope }}" },
		"unknown column":      func(d *rabbitmq.Config) { d.ExchangeFrom = "payload" },
		"exchange type":       func(d *rabbitmq.Config) { d.ExchangeType = "headers" },
		"delivery mode":       func(d *rabbitmq.Config) { d.DeliveryMode = "sometimes" },
		"no url":              func(d *rabbitmq.Config) { d.URL = "" },
	} {
		d := destination("x")
		mutate(&d)
		if _, err := rabbitmq.New("events", d); err == nil || !strings.Contains(err.Error(), "destinations.events.") {
			t.Errorf("%s: New = %v, want an error naming the key", name, err)
		}
	}
}
