//go:build !queuebox_no_nats

package nats_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	qbnats "github.com/alternayte/queuebox/shared/connect/nats"
	"github.com/alternayte/queuebox/shared/outbox"
	"github.com/alternayte/queuebox/shared/route"
	"github.com/alternayte/queuebox/shared/template"
)

const natsURL = "nats://127.0.0.1:4222"

const startHint = "start it with: make services (scripts/ensure-services.sh), or: start-stop-daemon --start --oknodo --background --exec /usr/sbin/nats-server -- " +
	"-a 127.0.0.1 -p 4222 -js -sd /var/lib/nats-server -l /var/log/nats-server.log"

// waitLimit bounds every wait of a test for a condition; it is no timing assertion.
const waitLimit = 20 * time.Second

// broker connects the test to the machine's NATS JetStream, and fails (never skips) when it
// is not reachable.
func broker(t *testing.T) (*natsgo.Conn, jetstream.JetStream) {
	t.Helper()
	nc, err := natsgo.Connect(natsURL, natsgo.Timeout(5*time.Second))
	if err != nil {
		t.Fatalf("NATS JetStream is not reachable at %s (%v); %s", natsURL, err, startHint)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatalf("jetstream: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := js.AccountInfo(ctx); err != nil {
		t.Fatalf("NATS at %s has no JetStream (%v); %s", natsURL, err, startHint)
	}
	return nc, js
}

func unique(t *testing.T) string {
	t.Helper()
	b := make([]byte, 6)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// fixture is a stream of its own that covers the subjects under prefix.
type fixture struct {
	nc     *natsgo.Conn
	js     jetstream.JetStream
	stream jetstream.Stream
	prefix string
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	nc, js := broker(t)
	id := unique(t)
	prefix := "qbtest." + id
	name := "QBTEST_" + strings.ToUpper(id)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := js.CreateStream(ctx, jetstream.StreamConfig{
		Name:       name,
		Subjects:   []string{prefix + ".>"},
		Storage:    jetstream.MemoryStorage,
		Duplicates: 2 * time.Minute,
	})
	if err != nil {
		t.Fatalf("creating stream %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := js.DeleteStream(ctx, name); err != nil {
			t.Errorf("deleting stream %s: %v", name, err)
		}
	})
	return &fixture{nc: nc, js: js, stream: s, prefix: prefix}
}

// msgs returns the messages of the stream, in order, after checking that it holds want.
func (f *fixture) msgs(t *testing.T, want int) []*jetstream.RawStreamMsg {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	info, err := f.stream.Info(ctx)
	if err != nil {
		t.Fatalf("stream info: %v", err)
	}
	if int(info.State.Msgs) != want {
		t.Fatalf("the stream holds %d messages, want %d", info.State.Msgs, want)
	}
	out := make([]*jetstream.RawStreamMsg, 0, want)
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && want > 0; seq++ {
		m, err := f.stream.GetMsg(ctx, seq)
		if err != nil {
			t.Fatalf("get message %d: %v", seq, err)
		}
		out = append(out, m)
	}
	return out
}

func newPublisher(t *testing.T, d qbnats.Config) *qbnats.Publisher {
	t.Helper()
	return newPublisherWithHeaders(t, d, nil)
}

// newPublisherWithHeaders returns a publisher of d with the destination's static headers.
func newPublisherWithHeaders(t *testing.T, d qbnats.Config, static map[string]string) *qbnats.Publisher {
	t.Helper()
	if len(d.Servers) == 0 {
		d.Servers = []string{natsURL}
	}
	d.Headers = static
	p, err := qbnats.New("test-nats", d)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

func publish(t *testing.T, p *qbnats.Publisher, m outbox.Message) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	return p.Publish(ctx, m)
}

func message(id string) outbox.Message {
	return outbox.Message{
		ID:            id,
		Topic:         "order.created",
		Key:           "customer-7",
		AggregateType: "order",
		Payload:       json.RawMessage(`{"id":"o-1","region":"eu","n":1.50}`),
		Attempt:       3,
		CreatedAt:     time.Now(),
	}
}

func TestType(t *testing.T) {
	p, err := qbnats.New("x", qbnats.Config{Servers: []string{natsURL}, Subject: "a"})
	if err != nil {
		t.Fatal(err)
	}
	var _ outbox.Publisher = p
	if p.Type() != "nats" {
		t.Fatalf("Type = %q", p.Type())
	}
}

func TestJetStreamBodyHeadersAndSubject(t *testing.T) {
	f := newFixture(t)
	p := newPublisher(t, qbnats.Config{Subject: f.prefix + ".{{ aggregateType }}.{{ topic }}", Timeout: 30 * time.Second})

	m := message("0b7f9a4e-1111-4c3a-9d55-000000000001")
	m.Headers = map[string]string{"traceparent": "00-abc-def-01", "x-topic": "row-topic", "Tenant-ID": "acme"}
	if err := publish(t, p, m); err != nil {
		t.Fatalf("Publish: %v", err)
	}
	noKey := message("0b7f9a4e-1111-4c3a-9d55-000000000002")
	noKey.Key = ""
	noKey.Attempt = 0
	if err := publish(t, p, noKey); err != nil {
		t.Fatalf("Publish without key: %v", err)
	}

	got := f.msgs(t, 2)
	first, second := got[0], got[1]
	if want := f.prefix + ".order.order.created"; first.Subject != want {
		t.Errorf("subject = %q, want %q", first.Subject, want)
	}
	if string(first.Data) != string(m.Payload) {
		t.Errorf("body = %q, want the payload bytes %q", first.Data, m.Payload)
	}
	wantHeaders := map[string][]string{
		"x-message-id":  {m.ID},
		"x-topic":       {"order.created", "row-topic"}, // a row header of a standard name is a second value
		"x-attempt":     {"3"},
		"x-message-key": {"customer-7"},
		"Nats-Msg-Id":   {m.ID},
		"traceparent":   {"00-abc-def-01"},
		"Tenant-ID":     {"acme"},
	}
	assertHeaders(t, first.Header, wantHeaders)

	wantHeaders = map[string][]string{
		"x-message-id": {noKey.ID},
		"x-topic":      {"order.created"},
		"x-attempt":    {"0"},
		"Nats-Msg-Id":  {noKey.ID},
	}
	assertHeaders(t, second.Header, wantHeaders)
}

func assertHeaders(t *testing.T, got natsgo.Header, want map[string][]string) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("headers = %v, want %v", got, want)
	}
	for name, values := range want {
		if g := got[name]; strings.Join(g, "\x00") != strings.Join(values, "\x00") {
			t.Errorf("header %q = %q, want %q (all: %v)", name, g, values, got)
		}
	}
}

func TestRouteRoutingKeyTemplateDoesNotChangeSubject(t *testing.T) {
	f := newFixture(t)
	p := newPublisher(t, qbnats.Config{Subject: f.prefix + ".fixed", Timeout: 30 * time.Second})
	m := message("rk-1")
	m.Route = route.Route{Destination: "test-nats", RoutingKeyTemplate: f.prefix + ".{{ payload.region }}", RoutingKeyMissingFieldDefault: "x"}
	if err := publish(t, p, m); err != nil {
		t.Fatalf("Publish: %v", err)
	}
	if got := f.msgs(t, 1)[0].Subject; got != f.prefix+".fixed" {
		t.Fatalf("subject = %q, want the destination subject %q (spec/07: a routingKeyTemplate does not change the subject)", got, f.prefix+".fixed")
	}
}

func TestSubjectFromColumn(t *testing.T) {
	f := newFixture(t)
	p := newPublisher(t, qbnats.Config{Subject: "ignored.subject", SubjectFrom: "key", Timeout: 30 * time.Second})
	m := message("col-1")
	m.Key = f.prefix + ".by-key"
	if err := publish(t, p, m); err != nil {
		t.Fatalf("Publish: %v", err)
	}
	if got := f.msgs(t, 1)[0].Subject; got != m.Key {
		t.Fatalf("subject = %q, want the key column %q", got, m.Key)
	}
}

func TestSubjectFromPayloadTemplate(t *testing.T) {
	f := newFixture(t)
	p := newPublisher(t, qbnats.Config{Subject: f.prefix + ".{{ payload.region }}", Timeout: 30 * time.Second})
	if err := publish(t, p, message("pl-1")); err != nil {
		t.Fatalf("Publish: %v", err)
	}
	if got := f.msgs(t, 1)[0].Subject; got != f.prefix+".eu" {
		t.Fatalf("subject = %q, want %q", got, f.prefix+".eu")
	}
}

func TestEmptySubjectFails(t *testing.T) {
	f := newFixture(t)
	for _, tc := range []struct {
		name string
		d    qbnats.Config
	}{
		{"template", qbnats.Config{Subject: "{{ payload.missing }}", Timeout: 30 * time.Second}},
		{"column", qbnats.Config{Subject: "x", SubjectFrom: "aggregate_type", Timeout: 30 * time.Second}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newPublisher(t, tc.d)
			m := message("empty-1")
			m.AggregateType = ""
			err := publish(t, p, m)
			if !errors.Is(err, template.ErrEmptyAddress) {
				t.Fatalf("Publish = %v, want an error wrapping template.ErrEmptyAddress", err)
			}
			if !strings.Contains(err.Error(), "test-nats") {
				t.Errorf("error %q does not name the destination", err)
			}
		})
	}
	f.msgs(t, 0)
}

func TestJetStreamWithoutStreamFails(t *testing.T) {
	broker(t)
	p := newPublisher(t, qbnats.Config{Subject: "qbtest-nostream." + unique(t), Timeout: 30 * time.Second})
	err := publish(t, p, message("ns-1"))
	if err == nil {
		t.Fatal("Publish to a subject that no stream holds succeeded, want an error")
	}
	if !errors.Is(err, jetstream.ErrNoStreamResponse) {
		t.Fatalf("Publish = %v, want jetstream.ErrNoStreamResponse", err)
	}
}

func TestDuplicateIDIsStoredOnce(t *testing.T) {
	f := newFixture(t)
	p := newPublisher(t, qbnats.Config{Subject: f.prefix + ".dup", Timeout: 30 * time.Second})
	m := message("dup-1")
	for i := 0; i < 2; i++ {
		m.Attempt = i
		if err := publish(t, p, m); err != nil {
			t.Fatalf("Publish %d: %v", i, err)
		}
	}
	got := f.msgs(t, 1)
	if got[0].Header.Get("x-attempt") != "0" {
		t.Fatalf("stored attempt %q, want the first publish", got[0].Header.Get("x-attempt"))
	}
}

func TestCoreNATS(t *testing.T) {
	nc, _ := broker(t)
	subject := "qbtest-core." + unique(t)
	sub, err := nc.SubscribeSync(subject)
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	p := newPublisher(t, qbnats.Config{Subject: subject, Mode: qbnats.ModeCore, Timeout: 30 * time.Second})
	m := message("core-1")
	if err := publish(t, p, m); err != nil {
		t.Fatalf("Publish: %v", err)
	}
	got, err := sub.NextMsg(waitLimit)
	if err != nil {
		t.Fatalf("no message arrived: %v", err)
	}
	if got.Subject != subject || string(got.Data) != string(m.Payload) {
		t.Fatalf("got %q %q", got.Subject, got.Data)
	}
	assertHeaders(t, got.Header, map[string][]string{
		"x-message-id":  {m.ID},
		"x-topic":       {m.Topic},
		"x-attempt":     {"3"},
		"x-message-key": {m.Key},
	})
}

// TestAReplayedRowHasItsOwnNatsMsgId: after the n-th replay of a row, a JetStream publish sets
// Nats-Msg-Id to "<row id>:<n>" (outbox.Message.DedupID), so that the stream's duplicate window
// does not drop it; x-message-id stays the row id. On core NATS no Nats-Msg-Id is sent and the
// publisher uses no deduplication id.
func TestAReplayedRowHasItsOwnNatsMsgId(t *testing.T) {
	f := newFixture(t)
	p := newPublisher(t, qbnats.Config{Subject: f.prefix + ".replayed", Timeout: 30 * time.Second})
	if !p.UsesDedupID() {
		t.Fatal("a JetStream publisher must use the deduplication id")
	}
	m := message("0b7f9a4e-1111-4c3a-9d55-000000000003")
	m.ReplayGeneration = 2
	if err := publish(t, p, m); err != nil {
		t.Fatalf("Publish: %v", err)
	}
	got := f.msgs(t, 1)[0]
	if id := got.Header.Get("Nats-Msg-Id"); id != m.ID+":2" {
		t.Errorf("Nats-Msg-Id = %q, want %q", id, m.ID+":2")
	}
	if id := got.Header.Get("x-message-id"); id != m.ID {
		t.Errorf("x-message-id = %q, want the row id %q", id, m.ID)
	}
	core := newPublisher(t, qbnats.Config{Subject: f.prefix + ".core", Mode: qbnats.ModeCore, Timeout: 30 * time.Second})
	if core.UsesDedupID() {
		t.Error("a core NATS publisher sends no deduplication id")
	}
}
