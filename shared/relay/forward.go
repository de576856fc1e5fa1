package relay

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/alternayte/queuebox/shared/redact"
	"github.com/alternayte/queuebox/shared/store"
	"github.com/alternayte/queuebox/shared/tracing"
)

// rowSpan returns the forward span of a held row, starting it on first use as the child of
// the row's trace context (its traceparent header) or as the root of a new trace. It returns
// nil when tracing is off or the row is not held.
func (rn *run) rowSpan(row store.InboxMessage) trace.Span {
	r := rn.r
	if r.tracer == nil {
		return nil
	}
	rn.mu.Lock()
	defer rn.mu.Unlock()
	h := rn.held[row.ID]
	if h == nil {
		return nil
	}
	if h.span == nil {
		_, h.span = r.tracer.Start(tracing.ContextFromJSON(rn.work, row.Headers), "relay forward",
			trace.WithSpanKind(trace.SpanKindInternal),
			trace.WithAttributes(
				attribute.String("queuebox.message_id", row.ID),
				attribute.String("queuebox.source", row.Source),
				attribute.Int("queuebox.attempt", row.Attempt)))
	}
	return h.span
}

// spanResult records the outcome of a held row's forward on its span.
func (rn *run) spanResult(row store.InboxMessage, result string) {
	if rn.r.tracer == nil {
		return
	}
	rn.mu.Lock()
	if h := rn.held[row.ID]; h != nil {
		h.result = result
	}
	rn.mu.Unlock()
}

// endSpan ends the forward span of a finished row with its outcome; a row that was neither
// forwarded nor marked dead ends with an error status.
func endSpan(h *heldRow, fallback string) {
	if h == nil || h.span == nil {
		return
	}
	result := h.result
	if result == "" {
		result = fallback
	}
	h.span.SetAttributes(attribute.String("queuebox.result", result))
	if result != "forwarded" {
		h.span.SetStatus(codes.Error, "the row was not forwarded: "+result)
	}
	h.span.End()
}

// forward forwards the held rows of one claim, in one transaction where the store can (a
// store.InboxBatchForwarder), else row by row. A batch that forwarded a row wakes the outbox
// waker once, after its last row.
func (rn *run) forward(rows []store.InboxMessage) {
	if len(rows) == 0 {
		return
	}
	r := rn.r
	before := rn.sum
	defer func() {
		if rn.sum.Forwarded > before.Forwarded {
			r.outboxWaker.Wake()
		}
		rn.judge(before, len(rows))
	}()
	if bf, ok := r.store.(store.InboxBatchForwarder); ok && len(rows) > 1 {
		rn.handleBatch(bf, rows)
		return
	}
	rn.forwardEach(rows)
}

// forwardEach forwards the claimed rows one by one, and leaves the rest to lease expiry when
// the run stops.
func (rn *run) forwardEach(rows []store.InboxMessage) {
	for i, row := range rows {
		if rn.work.Err() != nil {
			rn.abandon(rows[i:])
			return
		}
		rn.handle(row)
		rn.release(row)
	}
}

// handleBatch forwards the claimed rows with one transaction (a store.InboxBatchForwarder):
// each row is prepared as handle prepares it (a lost claim, a row with no topic and a row
// whose headers cannot be built are settled on their own), then every prepared row is
// forwarded at once, in one attempt. A batch that fails is forwarded again row by row
// through handle, which retries, dead-letters a row that the outbox refuses and counts the
// failures of the others; nothing of a failed batch was written. The claim took at most one
// row per aggregate, so the rows of a batch keep every aggregate's order whichever way they
// are written. A store that is no batch forwarder (SQL Server) forwards row by row.
func (rn *run) handleBatch(bf store.InboxBatchForwarder, rows []store.InboxMessage) {
	r := rn.r
	if rn.work.Err() != nil {
		rn.abandon(rows)
		return
	}
	var ready []store.InboxMessage
	var params []store.InboxForwardParams
	for _, row := range rows {
		p, ok := rn.prepare(row)
		if !ok {
			rn.release(row)
			continue
		}
		ready, params = append(ready, row), append(params, p)
	}
	if len(ready) == 0 {
		return
	}
	// One attempt: the row-by-row path after a failure retries, and dead-letters a refused
	// row, as it does without batches. The forward ends at the first local lease deadline of
	// its rows; the row-by-row path then leaves the expired rows to their leases.
	ctx, stop := rn.batchContext(ready)
	forwarded, err := bf.InboxRelayForwardBatch(ctx, params)
	ended := leaseEnded(context.Cause(ctx))
	stop()
	if err != nil {
		if ended {
			ready = rn.abandonExpired(ready)
		} else {
			r.log.Warn("inbox relay: forwarding a batch failed; forwarding its rows one by one", "rows", len(ready), "error", redact.Error(err))
		}
		rn.forwardEach(ready)
		return
	}
	rn.writer.Succeeded()
	for i, row := range ready {
		if forwarded[i] {
			rn.forwarded(row, params[i].Outbox.Topic)
		} else {
			rn.claimLost(rn.rowLog(row), "forward the message")
		}
		rn.release(row)
	}
}

// rowLog is the logger of one row's lines; it is built only for a line that is written.
func (rn *run) rowLog(row store.InboxMessage) *slog.Logger {
	// message_id and attempt name the row as the outbox's lines name theirs (docs/monitoring.md);
	// inbox_id stays for the readers of the earlier lines.
	log := rn.r.log.With("message_id", row.ID, "inbox_id", row.ID, "source", row.Source, "attempt", row.Attempt)
	if row.CorrelationID != "" {
		log = log.With("correlation_id", row.CorrelationID)
	}
	if rn.r.tracer != nil {
		rn.mu.Lock()
		var sc trace.SpanContext
		if h := rn.held[row.ID]; h != nil && h.span != nil {
			sc = h.span.SpanContext()
		}
		rn.mu.Unlock()
		if sc.IsValid() {
			log = log.With(tracing.SpanLogAttrs(sc)...)
		}
	}
	return log
}

// prepare builds the forward of one claimed row. It settles, and returns false for, a row
// whose claim the renewer found lost, a row that can reach no destination (marked dead) and
// a row whose outbox row cannot be built.
func (rn *run) prepare(row store.InboxMessage) (store.InboxForwardParams, bool) {
	r := rn.r
	rn.mu.Lock()
	h := rn.held[row.ID]
	lost := h.lost
	rn.mu.Unlock()
	if lost {
		rn.claimLost(rn.rowLog(row), "forward the message")
		return store.InboxForwardParams{}, false
	}
	if h.lease.Ended() {
		rn.leaseEnded(row, h, false)
		return store.InboxForwardParams{}, false
	}

	span := rn.rowSpan(row)
	tmpl, ok := r.topics[row.Source]
	if !ok {
		rn.deadLetter(rn.rowLog(row), row, fmt.Sprintf("Source %s is not configured, so the relay has no topic template for it", row.Source))
		return store.InboxForwardParams{}, false
	}
	topic := tmpl.Render(row.Source, row.EventType)
	if topic == "" {
		rn.deadLetter(rn.rowLog(row), row, fmt.Sprintf("Topic template %s of source %s rendered an empty topic", tmpl, row.Source))
		return store.InboxForwardParams{}, false
	}
	var traceHeaders map[string]string
	if span != nil {
		span.SetAttributes(attribute.String("queuebox.topic", topic))
		traceHeaders = make(map[string]string, 2)
		tracing.SetHeaders(trace.ContextWithSpan(rn.work, span), traceHeaders)
	}
	headers, dropped, err := outboxHeaders(row, r.allow[row.Source], traceHeaders)
	if err != nil {
		rn.writeFailed(rn.rowLog(row), "building the outbox row", err)
		return store.InboxForwardParams{}, false
	}
	if dropped {
		rn.rowLog(row).Warn("inbox row headers are not a JSON object; forwarding the relay headers only")
	}
	return store.InboxForwardParams{
		Claim: row.Claim(),
		Outbox: store.OutboxInsertParams{
			Topic:       topic,
			Key:         row.AggregateID,
			Payload:     row.Payload,
			Headers:     headers,
			MaxAttempts: r.cfg.MaxAttempts,
		},
	}, true
}

// handle forwards one claimed row, or marks it dead when it has no topic.
func (rn *run) handle(row store.InboxMessage) {
	r := rn.r
	params, ok := rn.prepare(row)
	if !ok {
		return
	}
	h := rn.heldRow(row)
	forwarded, err := rn.write(h.ctx, func(ctx context.Context) (bool, error) {
		return r.store.InboxRelayForward(ctx, params)
	})
	switch {
	case err != nil && h.lease.Ended():
		rn.leaseEnded(row, h, true)
	case errors.Is(err, store.ErrInvalidValue):
		// The outbox refuses the row (a topic longer than its column): it never will take it.
		rn.deadLetter(rn.rowLog(row), row, "The outbox cannot store the forwarded row: "+redact.Error(err))
	case err != nil:
		rn.writeFailed(rn.rowLog(row), "forwarding", err)
	case !forwarded:
		rn.claimLost(rn.rowLog(row), "forward the message")
	default:
		rn.forwarded(row, params.Outbox.Topic)
	}
}

// forwarded counts a forwarded row; its debug line is built only when debug lines are on.
func (rn *run) forwarded(row store.InboxMessage, topic string) {
	rn.sum.Forwarded++
	rn.r.metrics.InboxMessage("forwarded")
	rn.spanResult(row, "forwarded")
	if rn.r.log.Enabled(rn.work, slog.LevelDebug) {
		rn.rowLog(row).Debug("inbox message forwarded", "topic", topic)
	}
}
