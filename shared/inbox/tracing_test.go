package inbox_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/alternayte/queuebox/shared/filter"
	"github.com/alternayte/queuebox/shared/inbox"
	"github.com/alternayte/queuebox/shared/store"
	"github.com/alternayte/queuebox/shared/store/postgres"
	"github.com/alternayte/queuebox/shared/store/postgres/dbtest"
	"github.com/alternayte/queuebox/shared/tracing"
	"github.com/alternayte/queuebox/shared/tracing/otlp"
	"github.com/alternayte/queuebox/shared/tracing/tracingtest"
)

// With tracing on, each message that a broker source stores gets an "inbox store" span, the
// child of the message's traceparent, and the stored row carries that span's traceparent, so
// that the relay continues the trace. A filtered message's span says so; the delivery's own
// headers are left as received.
func TestBrokerIntakeStoresTheSpanOfEachMessageInItsRow(t *testing.T) {
	t.Parallel()
	rcv := tracingtest.NewReceiver(t)
	tp, err := otlp.New(context.Background(), tracing.Config{Endpoint: rcv.Endpoint()})
	require.NoError(t, err)
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })

	pool, _ := dbtest.Migrated(t)
	st, err := postgres.New(pool, store.DefaultNames())
	require.NoError(t, err)
	in, err := inbox.NewIntake(inbox.BrokerSource{
		Name:   "traced",
		Filter: filter.Config{Exclude: []filter.Rule{{Header: "x-drop", In: []string{"yes"}}}},
	}, st, inbox.IntakeOptions{Logger: slog.New(slog.DiscardHandler), Tracer: tp.Tracer()})
	require.NoError(t, err)

	const senderTrace, senderSpan = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	received := map[string]string{"Traceparent": "00-" + senderTrace + "-" + senderSpan + "-01"}
	out, err := in.Store(context.Background(), []inbox.Delivery{
		{Body: []byte(`{"id":"m1"}`), Headers: received},
		{Body: []byte(`{"id":"m2"}`), Headers: map[string]string{"x-drop": "yes"}},
	})
	require.NoError(t, err)
	require.Equal(t, inbox.Stored, out[0].Status)
	require.Equal(t, inbox.Filtered, out[1].Status)
	assert.Equal(t, map[string]string{"Traceparent": "00-" + senderTrace + "-" + senderSpan + "-01"}, received)

	require.NoError(t, tp.ForceFlush(context.Background()))
	stores := tracingtest.ByName(rcv.Spans(), "inbox store")
	require.Len(t, stores, 2)
	var stored tracingtest.Span
	for _, s := range stores {
		if s.Attributes["queuebox.result"] == "stored" {
			stored = s
		} else {
			assert.Equal(t, "filtered", s.Attributes["queuebox.result"])
		}
	}
	assert.Equal(t, senderTrace, stored.TraceID)
	assert.Equal(t, senderSpan, stored.ParentSpanID)
	assert.Equal(t, out[0].ID, stored.Attributes["queuebox.message_id"])

	rows := sourceRows(t, pool, "traced")
	require.Len(t, rows, 1)
	var headers map[string]string
	require.NoError(t, json.Unmarshal([]byte(rows[0].Headers), &headers))
	assert.Equal(t, "00-"+senderTrace+"-"+stored.SpanID+"-01", headers["traceparent"])
	_, kept := headers["Traceparent"]
	assert.False(t, kept, "the received traceparent is replaced in any letter case")
}
