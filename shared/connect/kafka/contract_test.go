//go:build !queuebox_no_kafka

package kafka_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/alternayte/queuebox/shared/connect/kafka"
	"github.com/alternayte/queuebox/shared/connect/publishtest"
	"github.com/alternayte/queuebox/shared/outbox"
)

// restartable is the kfake broker of one contract target. It keeps its state in dir, as a
// real broker keeps its log and topic ids, so that Break can stop it and start it again on
// the same port.
type restartable struct {
	mu   sync.Mutex
	c    *kfake.Cluster
	dir  string
	port int
}

func (r *restartable) cluster() *kfake.Cluster {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.c
}

// brokers holds the broker of each contract target's publisher, for Break.
var brokers sync.Map // *kafka.Publisher -> *restartable

// The Kafka destination passes the publisher contract on kfake, franz-go's in-process
// Kafka-protocol broker.
func TestPublisherContract(t *testing.T) {
	publishtest.Run(t, publishtest.Features{
		Type: kafka.Type,
		// Publish documents that a record whose publish ended may still reach the broker.
		DoneContextMayDeliver: true,
		Stalls: func(t *testing.T) []publishtest.Stall {
			c := newCluster(t, 1, []string{"orders"})
			seen := make(chan struct{}, 1)
			// Every produce request is taken and never answered.
			c.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
				c.KeepControl()
				select {
				case seen <- struct{}{}:
				default:
				}
				return nil, nil, true
			})
			d := destination(c, "orders")
			d.Timeout = 60 * time.Second
			return []publishtest.Stall{{Name: "produce never answered", Publisher: newPublisher(t, d, nil), Reached: seen}}
		},
		WithSecret: func(t *testing.T, secret string) []outbox.Publisher {
			var out []outbox.Publisher
			for _, mech := range []string{"PLAIN", "SCRAM-SHA-512"} {
				c := newCluster(t, 1, []string{"secure"}, kfake.EnableSASL(), kfake.Superuser(mech, "qb", "s3cret-pass"))
				d := destination(c, "secure")
				d.SecurityProtocol = kafka.SecuritySASLPlaintext
				d.SASLMechanism = mech
				d.SASLUsername = "qb"
				d.SASLPassword = secret
				d.Timeout = 3 * time.Second
				out = append(out, newPublisher(t, d, nil))
			}
			return out
		},
		Break: func(t *testing.T, tg publishtest.Target) (func(), func()) {
			v, ok := brokers.Load(tg.Publisher)
			if !ok {
				t.Fatal("the target has no broker")
			}
			r := v.(*restartable)
			r.cluster().Close()
			return func() {
				c := newCluster(t, 1, nil, kfake.Ports(r.port), kfake.DataDir(r.dir), kfake.SyncWrites())
				r.mu.Lock()
				r.c = c
				r.mu.Unlock()
			}, nil
		},
		// The first publish after the restart may still fail while the client finds out (the
		// new broker does not know the old producer id).
		RetryAfterBreak: true,
	}, newTarget)
}

// newTarget is a publisher on a topic of four partitions of its own broker. Received consumes
// the topic from the start until n records arrived, and returns what the fetches held.
func newTarget(t *testing.T) publishtest.Target {
	dir := t.TempDir()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(4, "bulk"), kfake.DataDir(dir), kfake.SyncWrites())
	if err != nil {
		t.Fatalf("starting the in-process Kafka broker (kfake): %v", err)
	}
	r := &restartable{c: c, dir: dir}
	t.Cleanup(func() { r.cluster().Close() })
	addr := c.ListenAddrs()[0]
	if _, err := fmt.Sscanf(addr[strings.LastIndex(addr, ":")+1:], "%d", &r.port); err != nil {
		t.Fatal(err)
	}
	p := newPublisher(t, destination(c, "bulk"), nil)
	brokers.Store(p, r)
	t.Cleanup(func() { brokers.Delete(p) })
	return publishtest.Target{
		Publisher: p,
		Close:     p.Close,
		Received: func(t *testing.T, n int) []publishtest.Delivery {
			t.Helper()
			var out []publishtest.Delivery
			for _, rec := range consume(t, r.cluster(), "bulk", n) {
				if len(rec.Headers) == 0 || rec.Headers[0].Key != "x-message-id" {
					t.Fatalf("record %v does not start with x-message-id", rec.Headers)
				}
				out = append(out, publishtest.Delivery{ID: string(rec.Headers[0].Value), Body: rec.Value})
			}
			return out
		},
	}
}
