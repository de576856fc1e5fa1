//go:build !queuebox_no_rabbitmq

package rabbitmq_test

import (
	"context"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// TestRelayedRowCannotForgeHeaders: the headers of a relayed row (it carries the relay's
// x-inbox-id and x-source) came from outside, so one named like a static header or a standard
// header in any letter case, like CC or BCC (RabbitMQ reads them: a string value makes it
// close the channel, a list would route copies to other queues), or like a hop-by-hop header
// is dropped. An
// application row keeps spec/25: its header wins over a static header of the same name.
func TestRelayedRowCannotForgeHeaders(t *testing.T) {
	ch := testConn(t)
	exchange := unique("qb-test-relayed")
	deliveries := queueOn(t, ch, exchange, "topic", "order.#")
	p := newPublisher(t, destination(exchange), map[string]string{"X-Team": "orders"})

	m := message("order.created")
	m.Attempt = 1
	m.Headers = map[string]string{
		"x-inbox-id": "i-1", "x-source": "hooks",
		"x-team": "forged", "X-Topic": "forged.topic", "x-attempt": "99", "CC": "stolen",
		"connection": "close", "transfer-encoding": "chunked", "x-github-event": "push",
	}
	publish(t, p, m)
	got := receive(t, deliveries)
	want := amqp.Table{
		"x-topic": "order.created", "x-attempt": int64(1), "X-Team": "orders",
		"x-inbox-id": "i-1", "x-source": "hooks", "x-github-event": "push",
	}
	if len(got.Headers) != len(want) {
		t.Errorf("headers = %v, want exactly %v", got.Headers, want)
	}
	for k, v := range want {
		if got.Headers[k] != v {
			t.Errorf("header %s = %#v, want %#v", k, got.Headers[k], v)
		}
	}

	app := message("order.updated")
	app.Headers = map[string]string{"X-Team": "from-row", "connection": "close"}
	publish(t, p, app)
	got = receive(t, deliveries)
	if got.Headers["X-Team"] != "from-row" || got.Headers["connection"] != "close" {
		t.Errorf("application row headers = %v, want X-Team from-row and connection close (spec/25)", got.Headers)
	}
}

// TestChannelClosedByTheBrokerFailsThePublish: a header that RabbitMQ refuses (a CC header
// that is a string, on an application row) makes the broker close the channel with 406. The
// publish fails with the reason instead of spinning for ever on the closed channel.
func TestChannelClosedByTheBrokerFailsThePublish(t *testing.T) {
	ch := testConn(t)
	exchange := unique("qb-test-refused")
	deliveries := queueOn(t, ch, exchange, "topic", "#")
	p := newPublisher(t, destination(exchange), nil)

	m := message("order.created")
	m.Headers = map[string]string{"CC": "elsewhere"}
	done := make(chan error, 1)
	go func() { done <- p.Publish(context.Background(), m) }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "PRECONDITION_FAILED") {
			t.Fatalf("Publish = %v, want the channel-closed error with the broker's reason", err)
		}
	case <-time.After(waitLimit):
		t.Fatalf("Publish did not return within %s after the broker closed the channel", waitLimit)
	}
	// The publisher recovers on a new channel.
	publish(t, p, message("order.updated"))
	if got := receive(t, deliveries); got.RoutingKey != "order.updated" {
		t.Errorf("routing key = %q, want order.updated", got.RoutingKey)
	}
}
