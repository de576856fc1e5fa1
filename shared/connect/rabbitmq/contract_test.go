//go:build !queuebox_no_rabbitmq

package rabbitmq_test

import (
	"net"
	"sync"
	"testing"

	"github.com/alternayte/queuebox/shared/connect/publishtest"
	"github.com/alternayte/queuebox/shared/connect/rabbitmq"
	"github.com/alternayte/queuebox/shared/outbox"
)

// The RabbitMQ destination passes the publisher contract on the machine's broker.
func TestPublisherContract(t *testing.T) {
	publishtest.Run(t, publishtest.Features{
		Type:      rabbitmq.Type,
		ErrClosed: rabbitmq.ErrClosed,
		Stalls: func(t *testing.T) []publishtest.Stall {
			d := destination(unique("qb-test-ctx"))
			addr, accepted := silentPeer(t)
			d.URL = "amqp://guest:guest@" + addr + "/"
			return []publishtest.Stall{{Name: "silent broker", Publisher: newPublisher(t, d, nil), Reached: accepted}}
		},
		WithSecret: func(t *testing.T, secret string) []outbox.Publisher {
			d := destination("x")
			d.URL = "amqp://guest:" + secret + "@127.0.0.1:5672/"
			return []outbox.Publisher{newPublisher(t, d, nil)}
		},
		Break: func(t *testing.T, tg publishtest.Target) (func(), func()) {
			if !rabbitmq.DropConnection(tg.Publisher.(*rabbitmq.Publisher)) {
				t.Fatal("no connection after a publish")
			}
			return nil, nil
		},
	}, newTarget)
}

// newTarget is a publisher on an exchange of its own, with a queue bound to every routing key.
// Received publishes a sentinel and reads the queue up to it: every confirmed publish before
// it is in the queue, so a duplicate would show.
func newTarget(t *testing.T) publishtest.Target {
	ch := testConn(t)
	exchange := unique("qb-test-contract")
	deliveries := queueOn(t, ch, exchange, "topic", "#")
	p := newPublisher(t, destination(exchange), nil)
	var seen []publishtest.Delivery
	return publishtest.Target{
		Publisher: p,
		Close:     p.Close,
		Received: func(t *testing.T, n int) []publishtest.Delivery {
			t.Helper()
			sentinel := message("sentinel")
			publish(t, p, sentinel)
			for {
				got := receive(t, deliveries)
				if got.MessageId == sentinel.ID {
					break
				}
				seen = append(seen, publishtest.Delivery{ID: got.MessageId, Body: got.Body})
			}
			if len(seen) < n {
				t.Fatalf("%d messages arrived, want %d", len(seen), n)
			}
			return append([]publishtest.Delivery(nil), seen...)
		},
	}
}

// silentPeer is a listener that accepts TCP connections and never answers, as a broker that
// hangs would; it returns its address and a channel signalled when it accepted a connection.
func silentPeer(t *testing.T) (string, <-chan struct{}) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	accepted := make(chan struct{}, 1)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			select {
			case accepted <- struct{}{}:
			default:
			}
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return ln.Addr().String(), accepted
}
