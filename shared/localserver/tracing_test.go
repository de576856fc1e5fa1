package localserver

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/alternayte/queuebox/shared/store/postgres/dbtest"
	"github.com/alternayte/queuebox/shared/tracing/tracingtest"
)

// traceparentReceiver is an HTTP destination that records the traceparent of each delivery
// by the id member of the JSON body, and signals every delivery.
type traceparentReceiver struct {
	mu   sync.Mutex
	got  map[string]string
	cond chan struct{}
}

func newTraceparentReceiver(t *testing.T) (*traceparentReceiver, *httptest.Server) {
	t.Helper()
	rc := &traceparentReceiver{got: map[string]string{}, cond: make(chan struct{})}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct{ ID string }
		_ = json.NewDecoder(r.Body).Decode(&body)
		rc.mu.Lock()
		rc.got[body.ID] = r.Header.Get("traceparent")
		close(rc.cond)
		rc.cond = make(chan struct{})
		rc.mu.Unlock()
	}))
	t.Cleanup(srv.Close)
	return rc, srv
}

// wait returns the traceparent of the delivery of id, waiting up to 30 s for it.
func (rc *traceparentReceiver) wait(t *testing.T, id string) string {
	t.Helper()
	deadline := time.NewTimer(30 * time.Second)
	defer deadline.Stop()
	for {
		rc.mu.Lock()
		tp, ok := rc.got[id]
		cond := rc.cond
		rc.mu.Unlock()
		if ok {
			return tp
		}
		select {
		case <-cond:
		case <-deadline.C:
			t.Fatalf("no delivery of %s reached the receiver within 30 s", id)
		}
	}
}

// notifyBuffer is a log output that the process writes while the test reads; it signals
// every write, so that a test waits for a line without polling.
type notifyBuffer struct {
	syncBuffer
	mu   sync.Mutex
	cond chan struct{}
}

func newNotifyBuffer() *notifyBuffer { return &notifyBuffer{cond: make(chan struct{})} }

func (b *notifyBuffer) Write(p []byte) (int, error) {
	n, err := b.syncBuffer.Write(p)
	b.mu.Lock()
	close(b.cond)
	b.cond = make(chan struct{})
	b.mu.Unlock()
	return n, err
}

// waitLines returns the JSON lines whose msg is msg once there is at least one, waiting up to
// 30 s.
func (b *notifyBuffer) waitLines(t *testing.T, msg string) []map[string]any {
	t.Helper()
	deadline := time.NewTimer(30 * time.Second)
	defer deadline.Stop()
	for {
		b.mu.Lock()
		cond := b.cond
		b.mu.Unlock()
		if lines := logLines(t, b, msg); len(lines) > 0 {
			return lines
		}
		select {
		case <-cond:
		case <-deadline.C:
			t.Fatalf("no log line %q within 30 s", msg)
		}
	}
}

// logLines returns the JSON log lines of b whose msg is msg.
func logLines(t *testing.T, b *notifyBuffer, msg string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(b.String(), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &m), line)
		if m["msg"] == msg {
			out = append(out, m)
		}
	}
	return out
}

// startTraced runs the local process with tracing to rcv (off when rcv is nil), an HTTP destination at receiverURL
// for the topics hook.*, and the source hooks; it returns the data port's base URL, the
// database URL and the process's log output.
func startTraced(t *testing.T, rcv *tracingtest.Receiver, receiverURL string) (base, dbURL string, logs *notifyBuffer) {
	t.Helper()
	dbURL = dbtest.NewDatabase(t)
	u, err := url.Parse(dbURL)
	require.NoError(t, err)
	tracingBlock := "" // rcv nil: tracing off
	if rcv != nil {
		tracingBlock = "tracing:\n  endpoint: " + rcv.Endpoint() + "\n  serviceName: queuebox-trace-test\n"
	}
	cfg := loadYAML(t, fmt.Sprintf(`
database:
  url: jdbc:postgresql://%s%s
  username: postgres
  password: trust-auth
  migrate: true
outbox:
  pollIntervalMs: 50
inbox:
  relay:
    pollIntervalMs: 50
destinations:
  hooks:
    type: http
    baseUrl: %s
    path: /hooks
routes:
  - topicPattern: "hook.*"
    destination: hooks
sources:
  hooks:
    path: /hooks
    idempotencyKeyPath: $.id
    topic: hook.open
logging:
  level: debug
%s`, u.Host, u.Path, receiverURL, tracingBlock))
	cfg.Server.HTTPPort = 0
	logs = newNotifyBuffer()
	l, err := New(context.Background(), cfg, slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	require.NoError(t, err)
	return runLocal(t, l), dbURL, logs
}

// parseTraceparent splits a version 00 traceparent into its trace id and span id.
func parseTraceparent(t *testing.T, tp string) (traceID, spanID string) {
	t.Helper()
	parts := strings.Split(tp, "-")
	require.Len(t, parts, 4, "traceparent %q", tp)
	require.Equal(t, "00", parts[0])
	return parts[1], parts[2]
}

// TestWebhookIsOneTraceFromInboxToDelivery posts two webhooks, one with the sender's own
// traceparent and one without, to the local process with tracing on. Each gives one trace
// whose spans are inbox receive -> relay forward -> outbox deliver, each the parent of the
// next; the first continues the sender's trace; the destination receives the traceparent of
// the delivery span; and the process's log lines about the row name the trace and the span.
func TestWebhookIsOneTraceFromInboxToDelivery(t *testing.T) {
	t.Parallel()
	rcv := tracingtest.NewReceiver(t)
	dest, destSrv := newTraceparentReceiver(t)
	base, _, logs := startTraced(t, rcv, destSrv.URL)

	const senderTrace, senderSpan = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	post := func(body, traceparent string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, base+"/inbox/hooks", strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		if traceparent != "" {
			req.Header.Set("traceparent", traceparent)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		require.Equal(t, http.StatusAccepted, resp.StatusCode)
	}
	post(`{"id":"evt-traced"}`, "00-"+senderTrace+"-"+senderSpan+"-01")
	post(`{"id":"evt-fresh"}`, "")

	for _, tt := range []struct {
		id          string
		wantTrace   string // empty: a new trace
		wantInboxOf string // the inbox span's parent, empty for a root
	}{
		{id: "evt-traced", wantTrace: senderTrace, wantInboxOf: senderSpan},
		{id: "evt-fresh"},
	} {
		delivered := dest.wait(t, tt.id)
		traceID, deliverySpan := parseTraceparent(t, delivered)
		if tt.wantTrace != "" {
			assert.Equal(t, tt.wantTrace, traceID, "%s: the delivery continues the sender's trace", tt.id)
		}
		spans := rcv.WaitFor(t, 30*time.Second, func(spans []tracingtest.Span) bool {
			return len(inTrace(spans, traceID, "outbox deliver")) == 1 && len(inTrace(spans, traceID, "relay forward")) == 1 &&
				len(inTrace(spans, traceID, "inbox receive")) == 1
		})
		in := inTrace(spans, traceID, "inbox receive")[0]
		rel := inTrace(spans, traceID, "relay forward")[0]
		del := inTrace(spans, traceID, "outbox deliver")[0]
		assert.Equal(t, tt.wantInboxOf, in.ParentSpanID, "%s: inbox span's parent", tt.id)
		assert.Equal(t, in.SpanID, rel.ParentSpanID, "%s: the relay span is the child of the inbox span", tt.id)
		assert.Equal(t, rel.SpanID, del.ParentSpanID, "%s: the delivery span is the child of the relay span", tt.id)
		assert.Equal(t, deliverySpan, del.SpanID, "%s: the destination got the delivery span's traceparent", tt.id)
		assert.Equal(t, "queuebox-trace-test", del.Service)
		assert.Equal(t, "hooks", in.Attributes["queuebox.source"])
		assert.Equal(t, "202", in.Attributes["http.response.status_code"])
		assert.Equal(t, "forwarded", rel.Attributes["queuebox.result"])
		assert.Equal(t, "hooks", del.Attributes["queuebox.destination"])
		assert.Equal(t, "hook.open", del.Attributes["queuebox.topic"])
		assert.Equal(t, "0", del.Attributes["queuebox.attempt"])
		assert.Equal(t, "sent", del.Attributes["queuebox.result"])
		assert.NotEmpty(t, del.Attributes["queuebox.message_id"])
		assert.False(t, del.Error)
		require.Len(t, del.Links, 1, "the delivery span links the claim that took the row")
		assert.Len(t, bySpanID(spans, del.Links[0], "outbox claim"), 1)

		// The debug line of the delivery names the row and its delivery span.
		var found bool
		for _, line := range logs.waitLines(t, "outbox delivery succeeded") {
			if line["message_id"] == del.Attributes["queuebox.message_id"] {
				found = true
				assert.Equal(t, traceID, line["trace_id"])
				assert.Equal(t, del.SpanID, line["span_id"])
				assert.Equal(t, "hooks", line["destination"])
			}
		}
		assert.True(t, found, "%s: no delivery line for the row", tt.id)

		// The relay's and the inbox's lines name their own spans in the same trace.
		found = false
		for _, line := range logs.waitLines(t, "inbox message forwarded") {
			if line["trace_id"] == traceID {
				found = true
				assert.Equal(t, rel.SpanID, line["span_id"])
			}
		}
		assert.True(t, found, "%s: no relay line in the trace", tt.id)
		found = false
		for _, line := range logs.waitLines(t, "inbox: message stored") {
			if line["trace_id"] == traceID {
				found = true
				assert.Equal(t, in.SpanID, line["span_id"])
			}
		}
		assert.True(t, found, "%s: no inbox line in the trace", tt.id)
	}
}

// TestApplicationRowTraceparentParentsItsDelivery inserts an outbox row directly, as an
// application does, with its own traceparent: the delivery span is the child of that context
// and the destination receives the delivery span's traceparent in the same trace.
func TestApplicationRowTraceparentParentsItsDelivery(t *testing.T) {
	t.Parallel()
	rcv := tracingtest.NewReceiver(t)
	dest, destSrv := newTraceparentReceiver(t)
	_, dbURL, _ := startTraced(t, rcv, destSrv.URL)

	const appTrace, appSpan = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"
	pool := dbtest.NewPool(t, dbURL)
	var rowID string
	require.NoError(t, pool.QueryRow(context.Background(),
		`INSERT INTO outbox (topic, payload, headers) VALUES ('hook.app', '{"id":"app-row"}', $1) RETURNING id::text`,
		`{"Traceparent":"00-`+appTrace+`-`+appSpan+`-01","X-Correlation-Id":"corr-7"}`).Scan(&rowID))

	traceID, deliverySpan := parseTraceparent(t, dest.wait(t, "app-row"))
	assert.Equal(t, appTrace, traceID)
	assert.NotEqual(t, appSpan, deliverySpan, "the destination gets QueueBox's delivery span, not the row's")
	spans := rcv.WaitFor(t, 30*time.Second, func(spans []tracingtest.Span) bool {
		return len(inTrace(spans, appTrace, "outbox deliver")) == 1
	})
	del := inTrace(spans, appTrace, "outbox deliver")[0]
	assert.Equal(t, appSpan, del.ParentSpanID)
	assert.Equal(t, deliverySpan, del.SpanID)
	assert.Equal(t, rowID, del.Attributes["queuebox.message_id"])
	assert.Equal(t, "PRODUCER", strings.TrimPrefix(del.Kind, "SPAN_KIND_"))
}

// inTrace returns the spans named name of the trace traceID.
func inTrace(spans []tracingtest.Span, traceID, name string) []tracingtest.Span {
	var out []tracingtest.Span
	for _, s := range tracingtest.ByName(spans, name) {
		if s.TraceID == traceID {
			out = append(out, s)
		}
	}
	return out
}

// bySpanID returns the spans named name whose id is id.
func bySpanID(spans []tracingtest.Span, id, name string) []tracingtest.Span {
	var out []tracingtest.Span
	for _, s := range tracingtest.ByName(spans, name) {
		if s.SpanID == id {
			out = append(out, s)
		}
	}
	return out
}

// TestDeliverySpanTraceparentReachesARabbitMQMessage: through a broker destination too, the
// message carries the traceparent of its delivery span, in the trace of the row's own
// traceparent.
func TestDeliverySpanTraceparentReachesARabbitMQMessage(t *testing.T) {
	t.Parallel()
	exchange, deliveries := rabbitExchange(t, "qb-local-tracing", "#")

	rcv := tracingtest.NewReceiver(t)
	dbURL := dbtest.NewDatabase(t)
	u, err := url.Parse(dbURL)
	require.NoError(t, err)
	cfg := loadYAML(t, fmt.Sprintf(`
database:
  url: jdbc:postgresql://%s%s
  username: postgres
  password: trust-auth
  migrate: true
outbox:
  pollIntervalMs: 50
destinations:
  broker:
    type: rabbitmq
    url: amqp://guest:guest@127.0.0.1:5672/
    exchange: %s
routes:
  - topicPattern: "order.*"
    destination: broker
tracing:
  endpoint: %s
`, u.Host, u.Path, exchange, rcv.Endpoint()))
	cfg.Server.HTTPPort = 0
	l, err := New(context.Background(), cfg, quietLog())
	require.NoError(t, err)
	runLocal(t, l)

	const appTrace, appSpan = "5bf92f3577b34da6a3ce929d0e0e4737", "10f067aa0ba902b8"
	pool := dbtest.NewPool(t, dbURL)
	_, err = pool.Exec(context.Background(),
		`INSERT INTO outbox (topic, payload, headers) VALUES ('order.placed', '{"id":"o-1"}', $1)`,
		`{"traceparent":"00-`+appTrace+`-`+appSpan+`-01","tracestate":"app=1"}`)
	require.NoError(t, err)

	var got amqp.Delivery
	select {
	case got = <-deliveries:
	case <-time.After(30 * time.Second):
		t.Fatal("no message reached the queue within 30 s")
	}
	tp, _ := got.Headers["traceparent"].(string)
	traceID, spanID := parseTraceparent(t, tp)
	assert.Equal(t, appTrace, traceID)
	assert.Equal(t, "app=1", got.Headers["tracestate"], "the row's tracestate travels with its trace")
	spans := rcv.WaitFor(t, 30*time.Second, func(spans []tracingtest.Span) bool {
		return len(inTrace(spans, appTrace, "outbox deliver")) == 1
	})
	del := inTrace(spans, appTrace, "outbox deliver")[0]
	assert.Equal(t, spanID, del.SpanID)
	assert.Equal(t, appSpan, del.ParentSpanID)
	assert.Equal(t, "broker", del.Attributes["queuebox.destination"])
}

// TestTracingOffLeavesTheRowsTraceparentAlone: with no endpoint, QueueBox neither reads nor
// writes trace context; an application row's traceparent is sent as any other row header,
// byte for byte, and the log lines hold no trace_id.
func TestTracingOffLeavesTheRowsTraceparentAlone(t *testing.T) {
	t.Parallel()
	dest, destSrv := newTraceparentReceiver(t)
	_, dbURL, logs := startTraced(t, nil, destSrv.URL)
	const rowTP = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	pool := dbtest.NewPool(t, dbURL)
	_, err := pool.Exec(context.Background(),
		`INSERT INTO outbox (topic, payload, headers) VALUES ('hook.app', '{"id":"off-row"}', $1)`, `{"traceparent":"`+rowTP+`"}`)
	require.NoError(t, err)
	assert.Equal(t, rowTP, dest.wait(t, "off-row"))
	lines := logs.waitLines(t, "outbox delivery succeeded")
	for _, line := range lines {
		assert.NotContains(t, line, "trace_id")
		assert.NotContains(t, line, "span_id")
	}
}
