package queuebox_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	queuebox "github.com/alternayte/queuebox/clients/go"
)

// TestHandlerSpanContinuesTheRowsTrace: a pull row whose headers hold a traceparent (as the
// inbox stores a webhook's, in the letter case it arrived in) is handled under a span of that
// trace, the child of the stored span; the handler's context carries the span; a failed
// handler's span has an error status; a row without a traceparent starts a trace of its own.
func TestHandlerSpanContinuesTheRowsTrace(t *testing.T) {
	t.Parallel()
	f := newPGFixture(t)
	const (
		traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
		spanID  = "00f067aa0ba902b7"
	)
	for key, headers := range map[string]string{
		"traced": `{"Traceparent":"00-` + traceID + `-` + spanID + `-01","X-Other":"1"}`,
		"fails":  `{"traceparent":"00-` + traceID + `-` + spanID + `-01"}`,
		"plain":  `{}`,
	} {
		if _, err := f.db.Exec(`INSERT INTO inbox (source, idempotency_key, payload, headers, consumption, event_type)
			VALUES ('orders', $1, '{}', CAST($2 AS jsonb), 'pull', 'order.paid')`, key, headers); err != nil {
			t.Fatal(err)
		}
	}
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	w, err := queuebox.NewInboxWorker(f.db, queuebox.Options{
		Source: "orders", PollInterval: 20 * time.Millisecond, TracerProvider: tp,
		// The failed row waits an hour, so that each row runs once.
		RetryPolicy: queuebox.NewDefaultRetryPolicy(5, time.Hour, time.Hour, 0),
	})
	if err != nil {
		t.Fatal(err)
	}
	seen := make(chan trace.SpanContext, 3)
	stop := running(t, w, func(ctx context.Context, m queuebox.Message, tx *sql.Tx) error {
		seen <- trace.SpanContextFromContext(ctx)
		if m.IdempotencyKey == "fails" {
			return errors.New("boom password=hunter2")
		}
		return nil
	})
	waitUntil(t, "three handler spans ended", time.Minute, func() bool { return len(rec.Ended()) == 3 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if r := f.row("fails"); r.state == "processed" || !strings.HasPrefix(r.lastError.String, "boom") {
		t.Fatalf("the failing row is %+v, want it failed with boom", r)
	}

	byKey := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range rec.Ended() {
		for _, a := range s.Attributes() {
			if a.Key == "messaging.message.id" {
				var key string
				if err := f.db.QueryRow(`SELECT idempotency_key FROM inbox WHERE id = CAST($1 AS UUID)`, a.Value.AsString()).Scan(&key); err != nil {
					t.Fatal(err)
				}
				byKey[key] = s
			}
		}
	}
	attr := func(s sdktrace.ReadOnlySpan, k attribute.Key) string {
		for _, a := range s.Attributes() {
			if a.Key == k {
				return a.Value.Emit()
			}
		}
		return ""
	}
	for _, key := range []string{"traced", "fails"} {
		s := byKey[key]
		if s == nil {
			t.Fatalf("no span for row %s", key)
		}
		if s.SpanContext().TraceID().String() != traceID || s.Parent().SpanID().String() != spanID || !s.Parent().IsRemote() {
			t.Errorf("span of %s: trace %s parent %s, want trace %s and the stored parent %s",
				key, s.SpanContext().TraceID(), s.Parent().SpanID(), traceID, spanID)
		}
		if s.SpanKind() != trace.SpanKindConsumer || s.Name() != "queuebox inbox handle orders" ||
			attr(s, "queuebox.source") != "orders" || attr(s, "queuebox.attempt") != "0" || attr(s, "queuebox.event_type") != "order.paid" {
			t.Errorf("span of %s: kind %v name %q attributes %v", key, s.SpanKind(), s.Name(), s.Attributes())
		}
	}
	if s := byKey["traced"]; attr(s, "queuebox.result") != "completed" || s.Status().Code == codes.Error {
		t.Errorf("completed span: result %q status %v", attr(s, "queuebox.result"), s.Status())
	}
	if s := byKey["fails"]; attr(s, "queuebox.result") != "failed" || s.Status().Code != codes.Error || len(s.Events()) == 0 {
		t.Errorf("failed span: result %q status %v events %v", attr(s, "queuebox.result"), s.Status(), s.Events())
	} else if ev := fmt.Sprint(s.Events()); !strings.Contains(ev, "boom") || strings.Contains(ev, "hunter2") {
		t.Errorf("the failed span's exception %s: want the error with its secret redacted, as last_error", ev)
	}
	if s := byKey["plain"]; s == nil || s.Parent().IsValid() || s.SpanContext().TraceID().String() == traceID {
		t.Errorf("a row without a traceparent: span %v, want a new root trace", s)
	}
	close(seen)
	for sc := range seen {
		found := false
		for _, s := range rec.Ended() {
			found = found || s.SpanContext().SpanID() == sc.SpanID()
		}
		if !sc.IsValid() || !found {
			t.Errorf("a handler's context carries span %v, which is not one of the recorded spans", sc)
		}
	}
}
