// Package publishtest is the behaviour suite that every destination of shared/connect
// passes: the contract of outbox.Publisher, stated once. A destination's test calls Run with
// the Features it has and a constructor of fresh targets on its real system (an httptest
// server, the machine's RabbitMQ and NATS JetStream, kfake for Kafka):
//
//	func TestPublisherContract(t *testing.T) {
//		publishtest.Run(t, publishtest.Features{Type: "rabbitmq", ErrClosed: rabbitmq.ErrClosed, ...}, newTarget)
//	}
//
// The cases are: the publisher reports its destination_type label; concurrent publishes
// each arrive once with their body; a publish with a done context fails with the context's
// error and delivers nothing; a publish whose peer never answers returns when its context is
// cancelled or its deadline passes; Publish after Close fails with ErrClosed; an error holds
// no credential; after a lost connection the publisher dials again. A case whose Features
// field is empty is not run (the destination makes no such promise or cannot stage it), and
// is reported as skipped with the reason.
//
// The cases of one system alone (its headers, addresses, TLS and SASL, refusals) stay in the
// system's folder.
package publishtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alternayte/queuebox/shared/outbox"
)

// WaitLimit bounds every wait of the suite for a condition, so that a lost message or a
// publish that never returns fails the test instead of hanging it. It is no speed assertion.
const WaitLimit = 30 * time.Second

// Delivery is one message as the destination's system received it.
type Delivery struct {
	// ID is the message id the system received (x-message-id, or the AMQP message-id).
	ID string
	// Body is the message body the system received.
	Body []byte
}

// Target is one destination under test, on resources of its own (an exchange, a topic, a
// stream, a server).
type Target struct {
	// Publisher is the publisher under test.
	Publisher outbox.Publisher
	// Close closes Publisher.
	Close func() error
	// Received waits, up to its own bound, until the system holds n messages of the target,
	// and returns every message it holds for the target, in any order; it fails t when they
	// do not arrive. When the system can tell, it returns more than n when more arrived.
	Received func(t *testing.T, n int) []Delivery
}

// Constructor builds a new target; it registers the release of its resources with
// t.Cleanup.
type Constructor func(t *testing.T) Target

// Stall is a publisher whose publish cannot complete: its peer accepts the connection and
// never speaks, or takes the message and never acknowledges it.
type Stall struct {
	// Name names the stall in the subtest.
	Name string
	// Publisher is the stalled publisher; the suite does not close it (its constructor
	// registers that with t.Cleanup).
	Publisher outbox.Publisher
	// Reached, when not nil, is signalled once the peer holds the publish: the suite cancels
	// the publish then. When nil, the suite cancels the publish in flight at once.
	Reached <-chan struct{}
}

// Features says which cases of the contract a destination runs, and carries what they need.
type Features struct {
	// Type is the destination_type label that Publisher.Type returns. Required.
	Type string
	// Message, when not nil, adapts the suite's message to the target (a key its address
	// template needs, for example). The suite sets ID and Payload after it.
	Message func(m *outbox.Message)
	// ErrClosed is the error that Publish after Close wraps. Nil: the destination makes no
	// promise after Close (Publish must not be called then) and the case is not run.
	ErrClosed error
	// DoneContextMayDeliver says that a publish whose context is already done may still
	// reach the system, and may fail the publishes buffered with it (Kafka: the client
	// buffers the record and fails its batch with the context of the batch's first record;
	// at-least-once delivery allows both). The done-context case then checks the error of
	// the publish, retries the next publish as a row would, and wants that one to arrive,
	// not to arrive alone.
	DoneContextMayDeliver bool
	// Stalls builds the stalled publishers of the context cases; nil skips them.
	Stalls func(t *testing.T) []Stall
	// CheckCancelled, when not nil, makes the system's own assertions on the error of a
	// cancelled publish.
	CheckCancelled func(t *testing.T, err error)
	// WithSecret builds publishers that hold secret among their credentials and whose
	// publish fails (a wrong password, a refused dial); nil skips the case.
	WithSecret func(t *testing.T, secret string) []outbox.Publisher
	// ErrorNames, when not empty, is a text every error of a WithSecret publisher holds
	// (the destination's name).
	ErrorNames string
	// Break cuts the connection of tg's publisher, as a broker restart or a network failure
	// would; nil skips the reconnect case. It returns up, which brings the system back (nil
	// when the system is back at once and the next publish must dial again), and check, run
	// after a publish went through again, for the system's own evidence of the reconnect
	// (nil for none).
	Break func(t *testing.T, tg Target) (up func(), check func())
	// RetryAfterBreak lets the publishes after Break fail until WaitLimit, as a row retries:
	// the system's client may need a few publishes to find the restarted broker. When false
	// the first publish after Break must succeed.
	RetryAfterBreak bool
}

// Run runs the contract cases that f switches on against targets of newTarget.
func Run(t *testing.T, f Features, newTarget Constructor) {
	t.Helper()
	if f.Type == "" {
		t.Fatal("publishtest: Features.Type is required")
	}
	t.Run("Type", func(t *testing.T) {
		if got := newTarget(t).Publisher.Type(); got != f.Type {
			t.Fatalf("Type() = %q, want %q", got, f.Type)
		}
	})
	t.Run("ConcurrentPublishesArriveOnce", func(t *testing.T) { concurrent(t, f, newTarget) })
	t.Run("DoneContextDeliversNothing", func(t *testing.T) { doneContext(t, f, newTarget) })
	t.Run("StalledPublishHonoursContext", func(t *testing.T) { stalled(t, f) })
	t.Run("PublishAfterClose", func(t *testing.T) { afterClose(t, f, newTarget) })
	t.Run("ErrorsHoldNoSecret", func(t *testing.T) { noSecret(t, f) })
	t.Run("ReconnectAfterLostConnection", func(t *testing.T) { reconnect(t, f, newTarget) })
}

// NewMessage returns the suite's message i with id: a body that names id, so that a
// delivery shows whose body it carries.
func NewMessage(f Features, id string, i int) outbox.Message {
	m := outbox.Message{
		Topic:         "order.created",
		Key:           fmt.Sprintf("k%d", i%7),
		AggregateType: "order",
		CreatedAt:     time.Now(),
	}
	if f.Message != nil {
		f.Message(&m)
	}
	m.ID = id
	m.Payload = json.RawMessage(`{"id":"` + id + `"}`)
	return m
}

func publish(ctx context.Context, p outbox.Publisher, m outbox.Message) error {
	ctx, cancel := context.WithTimeout(ctx, WaitLimit)
	defer cancel()
	return p.Publish(ctx, m)
}

func mustPublish(t *testing.T, p outbox.Publisher, m outbox.Message) {
	t.Helper()
	if err := publish(context.Background(), p, m); err != nil {
		t.Fatalf("Publish %s: %v", m.ID, err)
	}
}

// concurrent publishes total messages from workers goroutines and wants each to arrive once,
// with its own body.
func concurrent(t *testing.T, f Features, newTarget Constructor) {
	const workers, total = 16, 200
	tg := newTarget(t)
	ids := make(chan int)
	errs := make(chan error, total)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range ids {
				m := NewMessage(f, fmt.Sprintf("conc-%03d", i), i)
				if err := publish(context.Background(), tg.Publisher, m); err != nil {
					errs <- fmt.Errorf("publish %s: %w", m.ID, err)
				}
			}
		}()
	}
	for i := range total {
		ids <- i
	}
	close(ids)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		return
	}
	counts := map[string]int{}
	for _, d := range tg.Received(t, total) {
		counts[d.ID]++
		if want := `{"id":"` + d.ID + `"}`; string(d.Body) != want {
			t.Errorf("message %s has body %s, want %s", d.ID, d.Body, want)
		}
	}
	if len(counts) != total {
		t.Errorf("%d distinct messages arrived, want %d", len(counts), total)
	}
	for i := range total {
		if id := fmt.Sprintf("conc-%03d", i); counts[id] != 1 {
			t.Errorf("message %s arrived %d times, want once", id, counts[id])
		}
	}
}

// doneContext publishes with a cancelled context, wants context.Canceled, and then checks
// that only the next message, published normally, arrived.
func doneContext(t *testing.T, f Features, newTarget Constructor) {
	tg := newTarget(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := tg.Publisher.Publish(ctx, NewMessage(f, "done-ctx", 0))
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Publish with a cancelled context = %v, want context.Canceled", err)
	}
	if f.CheckCancelled != nil {
		f.CheckCancelled(t, err)
	}
	next := NewMessage(f, "after-done-ctx", 1)
	if f.DoneContextMayDeliver {
		if err := retry(tg.Publisher, next); err != nil {
			t.Fatalf("Publish after a publish with a done context: %v", err)
		}
		for _, d := range tg.Received(t, 1) {
			if d.ID == next.ID {
				return
			}
		}
		t.Fatalf("%s did not arrive", next.ID)
	}
	mustPublish(t, tg.Publisher, next)
	got := tg.Received(t, 1)
	if len(got) != 1 || got[0].ID != next.ID {
		t.Fatalf("the system received %v, want only %s", ids(got), next.ID)
	}
}

// stalled cancels, and separately lets the deadline of, a publish that cannot complete, and
// wants it to return with the context's error.
func stalled(t *testing.T, f Features) {
	if f.Stalls == nil {
		t.Skip("the destination stages no stalled peer (Features.Stalls)")
	}
	for _, variant := range []struct {
		name string
		want error
	}{{"cancel", context.Canceled}, {"deadline", context.DeadlineExceeded}} {
		t.Run(variant.name, func(t *testing.T) {
			for _, s := range f.Stalls(t) {
				var ctx context.Context
				var cancel context.CancelFunc
				if variant.want == context.Canceled {
					ctx, cancel = context.WithCancel(context.Background())
				} else {
					ctx, cancel = context.WithTimeout(context.Background(), 200*time.Millisecond)
				}
				done := make(chan error, 1)
				go func() { done <- s.Publisher.Publish(ctx, NewMessage(f, "stalled-"+s.Name, 0)) }()
				if variant.want == context.Canceled {
					if s.Reached != nil {
						select {
						case <-s.Reached:
						case <-time.After(WaitLimit):
							cancel()
							t.Fatalf("%s: the publish never reached the peer", s.Name)
						}
					}
					cancel()
				}
				select {
				case err := <-done:
					if !errors.Is(err, variant.want) {
						t.Errorf("%s: Publish = %v, want %v", s.Name, err, variant.want)
					}
					if variant.want == context.Canceled && f.CheckCancelled != nil {
						f.CheckCancelled(t, err)
					}
				case <-time.After(WaitLimit):
					t.Errorf("%s: Publish did not return after its context ended", s.Name)
				}
				cancel()
			}
		})
	}
}

// afterClose wants ErrClosed from a publisher closed before any publish and from one closed
// after a publish.
func afterClose(t *testing.T, f Features, newTarget Constructor) {
	if f.ErrClosed == nil {
		t.Skip("the destination makes no promise for Publish after Close (Features.ErrClosed)")
	}
	fresh := newTarget(t)
	if err := fresh.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := publish(context.Background(), fresh.Publisher, NewMessage(f, "close-0", 0)); !errors.Is(err, f.ErrClosed) {
		t.Fatalf("Publish after Close (no publish before) = %v, want %v", err, f.ErrClosed)
	}
	used := newTarget(t)
	mustPublish(t, used.Publisher, NewMessage(f, "close-1", 1))
	if err := used.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := publish(context.Background(), used.Publisher, NewMessage(f, "close-2", 2)); !errors.Is(err, f.ErrClosed) {
		t.Fatalf("Publish after Close = %v, want %v", err, f.ErrClosed)
	}
}

// noSecret wants every failed publish of a WithSecret publisher to hold no trace of the secret.
func noSecret(t *testing.T, f Features) {
	if f.WithSecret == nil {
		t.Skip("the destination stages no failing credentials (Features.WithSecret)")
	}
	const secret = "s3cr3t-pa55-qb"
	pubs := f.WithSecret(t, secret)
	if len(pubs) == 0 {
		t.Fatal("Features.WithSecret built no publisher")
	}
	for i, p := range pubs {
		err := publish(context.Background(), p, NewMessage(f, fmt.Sprintf("secret-%d", i), i))
		if err == nil {
			t.Fatalf("publisher %d: Publish with failing credentials succeeded", i)
		}
		for _, text := range []string{err.Error(), fmt.Sprintf("%+v", err)} {
			if strings.Contains(text, secret) {
				t.Fatalf("publisher %d: error %q holds the secret", i, text)
			}
		}
		if f.ErrorNames != "" && !strings.Contains(err.Error(), f.ErrorNames) {
			t.Errorf("publisher %d: error %q does not name %q", i, err, f.ErrorNames)
		}
	}
}

// reconnect publishes, breaks the connection, and wants a later publish to arrive.
func reconnect(t *testing.T, f Features, newTarget Constructor) {
	if f.Break == nil {
		t.Skip("the destination stages no lost connection (Features.Break)")
	}
	tg := newTarget(t)
	mustPublish(t, tg.Publisher, NewMessage(f, "re-1", 1))
	tg.Received(t, 1)
	up, check := f.Break(t, tg)
	if up != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		err := tg.Publisher.Publish(ctx, NewMessage(f, "while-down", 2))
		cancel()
		if err == nil {
			t.Fatal("Publish succeeded while the system was down")
		}
		up()
	}
	m := NewMessage(f, "re-2", 3)
	var err error
	if f.RetryAfterBreak {
		// A row retries until the client has reconnected; a bounded loop waits for that.
		err = retry(tg.Publisher, m)
	} else {
		err = publish(context.Background(), tg.Publisher, m)
	}
	if err != nil {
		t.Fatalf("Publish after the connection was lost: %v", err)
	}
	if check != nil {
		check()
	}
	found := false
	for _, d := range tg.Received(t, 2) {
		found = found || d.ID == m.ID
	}
	if !found {
		t.Fatalf("the message published after the reconnect did not arrive")
	}
}

// retry publishes m until a publish succeeds, as the outbox retries a row, for WaitLimit at
// most, and returns the last error.
func retry(p outbox.Publisher, m outbox.Message) error {
	deadline := time.Now().Add(WaitLimit)
	var err error
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err = p.Publish(ctx, m)
		cancel()
		if err == nil {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return err
}

func ids(ds []Delivery) []string {
	out := make([]string, 0, len(ds))
	for _, d := range ds {
		out = append(out, d.ID)
	}
	return out
}
