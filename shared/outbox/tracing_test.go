package outbox_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/alternayte/queuebox/shared/connect/webhook"
	"github.com/alternayte/queuebox/shared/outbox"
	"github.com/alternayte/queuebox/shared/route"
	"github.com/alternayte/queuebox/shared/store"
	"github.com/alternayte/queuebox/shared/tracing"
	"github.com/alternayte/queuebox/shared/tracing/otlp"
	"github.com/alternayte/queuebox/shared/tracing/tracingtest"
)

// TestEachDeliveryAttemptIsASpanOfTheRowsTrace fails a row with its own traceparent twice and
// then delivers it, with tracing on: each attempt is an "outbox deliver" span, the child of the
// row's context, the failed ones with an error status and the result retry, the last sent; the
// receiver got each attempt's own traceparent; and the retry lines name the failed spans.
func TestEachDeliveryAttemptIsASpanOfTheRowsTrace(t *testing.T) {
	t.Parallel()
	fx := newFixture(t)
	rcv := tracingtest.NewReceiver(t)
	tp, err := otlp.New(context.Background(), tracing.Config{Endpoint: rcv.Endpoint()})
	require.NoError(t, err)
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })

	var mu sync.Mutex
	var got []string // the traceparent of each request, in order
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Header.Get("traceparent"))
		n := len(got)
		mu.Unlock()
		if n <= 2 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(srv.Close)
	pub, err := webhook.New(webhook.Config{Name: "receiver", BaseURL: srv.URL, Path: "/events", Timeout: 5 * time.Second}, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = pub.Close() })
	out := &lockedBuffer{}
	p, err := outbox.New(outbox.Options{
		Store:        fx.store,
		Config:       outbox.Config{PollInterval: 10 * time.Millisecond, RetryBaseDelay: 10 * time.Millisecond},
		Routes:       route.NewTable([]route.Route{{Pattern: route.MustCompile("order.**"), Destination: "receiver"}}),
		Destinations: []outbox.Destination{{Name: "receiver", Publisher: pub}},
		Logger:       slog.New(slog.NewJSONHandler(out, nil)),
		Tracer:       tp.Tracer(),
	})
	require.NoError(t, err)

	const rowTrace, rowSpan = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"
	id := insert(t, fx.store, store.OutboxInsertParams{
		Topic: "order.paid", Key: "order-42", Payload: json.RawMessage(`{"amount":10}`),
		Headers: json.RawMessage(`{"TRACEPARENT":"00-` + rowTrace + `-` + rowSpan + `-01"}`), MaxAttempts: 5,
	})
	runPoller(t, p)

	spans := rcv.WaitFor(t, 30*time.Second, func(spans []tracingtest.Span) bool {
		n := 0
		for _, s := range tracingtest.ByName(spans, "outbox deliver") {
			if s.TraceID == rowTrace {
				n++
			}
		}
		return n == 3
	})
	var deliveries []tracingtest.Span
	for _, s := range tracingtest.ByName(spans, "outbox deliver") {
		if s.TraceID == rowTrace {
			deliveries = append(deliveries, s)
		}
	}
	sort.Slice(deliveries, func(i, j int) bool {
		return deliveries[i].Attributes["queuebox.attempt"] < deliveries[j].Attributes["queuebox.attempt"]
	})
	mu.Lock()
	sent := append([]string(nil), got...)
	mu.Unlock()
	require.Len(t, sent, 3)
	for i, d := range deliveries {
		assert.Equal(t, rowSpan, d.ParentSpanID, "attempt %d", i)
		assert.Equal(t, id, d.Attributes["queuebox.message_id"])
		assert.Equal(t, "order-42", d.Attributes["queuebox.key"])
		assert.Equal(t, "receiver", d.Attributes["queuebox.destination"])
		assert.Equal(t, "00-"+rowTrace+"-"+d.SpanID+"-01", sent[i], "attempt %d carries its own span", i)
	}
	assert.Equal(t, []string{"0", "1", "2"}, []string{deliveries[0].Attributes["queuebox.attempt"],
		deliveries[1].Attributes["queuebox.attempt"], deliveries[2].Attributes["queuebox.attempt"]})
	for _, d := range deliveries[:2] {
		assert.True(t, d.Error)
		assert.Equal(t, "retry", d.Attributes["queuebox.result"])
		assert.Contains(t, d.StatusMessage, "503")
	}
	assert.False(t, deliveries[2].Error)
	assert.Equal(t, "sent", deliveries[2].Attributes["queuebox.result"])

	// The finisher is one goroutine: once it marked the row sent, it has written the lines of
	// both retries before.
	waitFor(t, 20*time.Second, "the row to be marked sent", func() bool { return readRow(t, fx.pool, id).State == "sent" })
	retried := map[string]bool{}
	for _, line := range out.lines() {
		var rec map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &rec), line)
		if rec["msg"] != "outbox delivery failed; retrying later" || rec["message_id"] != id {
			continue
		}
		assert.Equal(t, rowTrace, rec["trace_id"], line)
		retried[rec["span_id"].(string)] = true
	}
	assert.Equal(t, map[string]bool{deliveries[0].SpanID: true, deliveries[1].SpanID: true}, retried,
		"each retry line names its failed delivery span; the log:\n%s", strings.Join(out.lines(), "\n"))
}
