//go:build !queuebox_no_nats

package nats_test

import (
	"net"
	"sync"
	"testing"
	"time"

	"github.com/alternayte/queuebox/shared/connect/connecttest"
	qbnats "github.com/alternayte/queuebox/shared/connect/nats"
	"github.com/alternayte/queuebox/shared/connect/publishtest"
	"github.com/alternayte/queuebox/shared/outbox"
)

// proxies holds the loopback proxy that each contract target's publisher goes through, so
// that Break can cut its connection.
var proxies sync.Map // *qbnats.Publisher -> *proxy

// The NATS destination passes the publisher contract on the machine's NATS JetStream.
func TestPublisherContract(t *testing.T) {
	publishtest.Run(t, publishtest.Features{
		Type:      qbnats.Type,
		ErrClosed: qbnats.ErrClosed,
		Stalls: func(t *testing.T) []publishtest.Stall {
			return []publishtest.Stall{ackNeverComes(t), silentServer(t)}
		},
		WithSecret: func(t *testing.T, secret string) []outbox.Publisher {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			addr := ln.Addr().String()
			_ = ln.Close() // nothing listens there now: the dial is refused
			var out []outbox.Publisher
			for _, d := range []qbnats.Config{
				{Servers: []string{"nats://urluser:" + secret + "@" + addr}, Subject: "a", Timeout: 5 * time.Second},
				{Servers: []string{"nats://" + addr}, Subject: "a", Timeout: 5 * time.Second, Username: "bob", Password: secret},
				{Servers: []string{"nats://" + addr}, Subject: "a", Timeout: 5 * time.Second, Token: secret},
			} {
				out = append(out, newPublisher(t, d))
			}
			return out
		},
		ErrorNames: "test-nats",
		Break: func(t *testing.T, tg publishtest.Target) (func(), func()) {
			v, ok := proxies.Load(tg.Publisher)
			if !ok {
				t.Fatal("the target has no proxy")
			}
			px := v.(*connecttest.Proxy)
			px.Cut()
			return nil, func() {
				if px.Accepted() < 2 {
					t.Fatalf("the proxy saw %d connections, want a reconnect", px.Accepted())
				}
			}
		},
		RetryAfterBreak: true,
	}, newTarget)
}

// newTarget is a JetStream publisher, through a loopback proxy, on a stream of its own whose
// subject is the message key under the stream's prefix. Received checks the subject of each
// message and that the stream holds n messages exactly.
func newTarget(t *testing.T) publishtest.Target {
	f := newFixture(t)
	px := connecttest.Listen(t, "127.0.0.1:4222")
	p := newPublisher(t, qbnats.Config{Servers: []string{"nats://" + px.Addr()}, Subject: f.prefix + ".{{ key }}", Timeout: 30 * time.Second})
	proxies.Store(p, px)
	t.Cleanup(func() { proxies.Delete(p) })
	return publishtest.Target{
		Publisher: p,
		Close:     p.Close,
		Received: func(t *testing.T, n int) []publishtest.Delivery {
			t.Helper()
			var out []publishtest.Delivery
			for _, m := range f.msgs(t, n) {
				if want := f.prefix + "." + m.Header.Get("x-message-key"); m.Subject != want {
					t.Errorf("subject %q, want %q", m.Subject, want)
				}
				out = append(out, publishtest.Delivery{ID: m.Header.Get("x-message-id"), Body: m.Data})
			}
			return out
		},
	}
}

// ackNeverComes is a JetStream publish to a subject that a plain subscriber takes and never
// acknowledges; Reached is signalled when the subscriber holds the publish.
func ackNeverComes(t *testing.T) publishtest.Stall {
	nc, _ := broker(t)
	subject := "qbtest-noack." + unique(t)
	sub, err := nc.SubscribeSync(subject)
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	reached := make(chan struct{})
	go func() {
		if _, err := sub.NextMsg(publishtest.WaitLimit); err == nil {
			close(reached)
		}
	}()
	p := newPublisher(t, qbnats.Config{Subject: subject, Timeout: 10 * time.Minute})
	return publishtest.Stall{Name: "no acknowledgement", Publisher: p, Reached: reached}
}

// silentServer is a publisher on a listener that accepts and never speaks NATS, which keeps
// the dial waiting; Reached is signalled when the listener accepted the connection.
func silentServer(t *testing.T) publishtest.Stall {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var conns sync.WaitGroup
	var held []net.Conn
	var mu sync.Mutex
	accepted := make(chan struct{}, 1)
	conns.Add(1)
	go func() {
		defer conns.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, c)
			mu.Unlock()
			select {
			case accepted <- struct{}{}:
			default:
			}
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		conns.Wait()
		mu.Lock()
		for _, c := range held {
			_ = c.Close()
		}
		mu.Unlock()
	})
	p := newPublisher(t, qbnats.Config{Servers: []string{"nats://" + ln.Addr().String()}, Subject: "a", Timeout: 10 * time.Minute})
	return publishtest.Stall{Name: "silent server", Publisher: p, Reached: accepted}
}
