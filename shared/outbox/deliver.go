package outbox

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/alternayte/queuebox/shared/lease"
	"github.com/alternayte/queuebox/shared/redact"
	"github.com/alternayte/queuebox/shared/store"
	"github.com/alternayte/queuebox/shared/tracing"
	"github.com/alternayte/queuebox/shared/transform"
)

// Delivering: a publisher takes a claimed row from the queue, routes it, transforms its
// payload and publishes it to its destination.

// publisher takes claimed rows from the queue and publishes them, one at a time, until the
// queue is closed. Concurrency publishers run, so at most Concurrency publishes are in flight.
func (r *run) publisher() {
	defer r.publishers.Done()
	for f := range r.queue {
		r.mu.Lock()
		r.queued--
		hungry := r.queued < r.lowWater
		r.mu.Unlock()
		if hungry {
			select {
			case r.hungry <- struct{}{}:
			default:
			}
		}
		var res result
		if f.lease.Ended() {
			// Claimed ahead, it waited in the queue past its lease's local deadline, or a
			// renewal lost its claim meanwhile.
			res = result{f: f, expired: true}
		} else {
			res = r.p.deliver(f.ctx, f)
		}
		r.mu.Lock()
		f.finishing = true
		r.finishing++
		r.mu.Unlock()
		r.results <- res
	}
}

// deliver routes and publishes one row. With tracing on, the delivery has its span: the child
// of the row's trace context (its traceparent header) or the root of a new trace, linked to
// the claim's span; the message carries that span's traceparent.
func (p *Poller) deliver(ctx context.Context, f *flight) result {
	if p.tracer == nil {
		return p.deliverRow(ctx, f, nil)
	}
	// One attribute slice and one option slice, each allocated once at its final size.
	attrs := make([]attribute.KeyValue, 3, 4)
	attrs[0] = attribute.String("queuebox.message_id", f.row.ID)
	attrs[1] = attribute.String("queuebox.topic", f.row.Topic)
	attrs[2] = attribute.Int("queuebox.attempt", f.row.Attempt)
	if f.row.Key != "" {
		attrs = append(attrs, attribute.String("queuebox.key", f.row.Key))
	}
	opts := make([]trace.SpanStartOption, 2, 3)
	opts[0] = trace.WithSpanKind(trace.SpanKindProducer)
	opts[1] = trace.WithAttributes(attrs...)
	if f.claimSpan.IsValid() {
		opts = append(opts, trace.WithLinks(trace.Link{SpanContext: f.claimSpan}))
	}
	ctx, span := p.tracer.Start(tracing.ContextFromJSON(ctx, f.row.Headers), "outbox deliver", opts...)
	defer span.End()
	res := p.deliverRow(ctx, f, span)
	res.sc = span.SpanContext()
	var outcome string
	switch {
	case res.expired:
		var cause error
		outcome, cause = "lease_expired", lease.ErrDeadline
		if lost := f.lease.Lost(); lost != nil {
			outcome, cause = "claim_lost", lost
		}
		span.SetStatus(codes.Error, cause.Error())
	case res.deferBy > 0:
		outcome = "deferred"
		span.SetAttributes(attribute.String("queuebox.defer_reason", res.reason))
	case res.err == nil:
		outcome = "sent"
	default:
		pl := res.plan
		if pl == nil {
			pl = p.defPlan
		}
		outcome = "retry"
		if res.dead || isTerminal(res.err) || pl.retry.exhausted(f.row.Attempt, f.row.MaxAttempts) {
			outcome = "dead"
		}
		span.SetStatus(codes.Error, redact.Error(res.err))
	}
	span.SetAttributes(attribute.String("queuebox.result", outcome))
	return res
}

// deliverRow routes and publishes one row; span is the delivery's span, nil when tracing is
// off. Its steps: the route and the destination (routeRow), the headers that the
// destination can carry (fitHeaders), the admission of the destination's controls, the
// transforms (transformPayload), then the publish (publish). A row whose lease ended at any
// step is not published.
func (p *Poller) deliverRow(ctx context.Context, f *flight, span trace.Span) result {
	msg := messageOf(f.row, p)
	dest, res, ok := p.routeRow(ctx, f, &msg, span)
	if !ok {
		return res
	}
	pl := p.plans[dest.Name]
	if res, stop := p.fitHeaders(ctx, f, dest, pl, &msg, span); stop {
		return res // an application row with a header that dest cannot carry (headers.go)
	}
	adm := p.ctl.admit(ctx, pl)
	if f.lease.Ended() {
		// The admission (a rate-limit slot) waited past the lease's local deadline.
		p.ctl.endTrial(pl, adm.trial)
		return result{f: f, plan: pl, expired: true}
	}
	if adm.deferBy > 0 {
		return result{f: f, plan: pl, deferBy: adm.deferBy, reason: adm.reason}
	}
	if res, stop := p.transformPayload(ctx, f, dest, pl, &msg); stop {
		p.ctl.endTrial(pl, adm.trial)
		return res
	}
	if f.lease.Ended() {
		p.ctl.endTrial(pl, adm.trial)
		return result{f: f, plan: pl, expired: true}
	}
	return p.publish(ctx, f, dest, pl, adm, msg, span)
}

// routeRow matches the row's topic to its route and the route to its destination's
// publisher, and sets msg.Route; with tracing on (span) it also writes the delivery's trace
// headers into msg. ok is false with the dead result of a row that no route or no publisher
// takes.
func (p *Poller) routeRow(ctx context.Context, f *flight, msg *Message, span trace.Span) (dest Destination, res result, ok bool) {
	rt, ok := p.routes.Match(msg.Topic)
	if !ok {
		return Destination{}, result{f: f, err: noRouteError(msg.Topic), dead: true}, false
	}
	msg.Route = rt
	if span != nil {
		span.SetAttributes(attribute.String("queuebox.destination", rt.Destination))
		if msg.Headers == nil {
			msg.Headers = make(map[string]string, 2)
		}
		tracing.SetHeaders(ctx, msg.Headers)
	}
	dest, ok = p.dests[rt.Destination]
	if !ok || dest.Publisher == nil {
		return Destination{}, result{f: f, err: fmt.Errorf("no publisher supports destination %s", rt.Destination), dead: true}, false
	}
	return dest, result{}, true
}

// transformPayload runs the route's and the destination's transforms over msg's payload and
// replaces it with their output. stop is true with the result of a row whose transform failed:
// a retry, or a dead row when the transform says so.
func (p *Poller) transformPayload(ctx context.Context, f *flight, dest Destination, pl *destPlan, msg *Message) (res result, stop bool) {
	routeStep, destStep := p.routeTx[msg.Route.Index], dest.Transform
	if routeStep == nil && destStep == nil {
		return result{}, false
	}
	vars := transform.DeliveryVars(msg.ID, msg.Topic, msg.Attempt, msg.CreatedAt)
	out, err := transform.RunDelivery(ctx, routeStep, destStep, msg.Payload, vars)
	if err != nil {
		return result{f: f, plan: pl, err: fmt.Errorf("transforming the payload: %w", err)}, true
	}
	if out.Failure != nil {
		p.metrics.TransformFailure(string(out.Failure.OnError))
	}
	switch out.Action {
	case transform.ActionRetry:
		return result{f: f, plan: pl, err: fmt.Errorf("%s transform failed: %w", out.Failure.Stage, out.Failure.Err)}, true
	case transform.ActionDead:
		return result{f: f, plan: pl, err: fmt.Errorf("%s transform failed: %w", out.Failure.Stage, out.Failure.Err), dead: true}, true
	}
	msg.Payload = out.Body
	return result{}, false
}

// publish hands msg to the destination's publisher and records the outcome: the publish
// duration, the destination's controls (the circuit breaker) and its outcome counter. A
// publish that failed because the lease's local deadline cancelled it is an expired row, which
// says nothing of the destination.
func (p *Poller) publish(ctx context.Context, f *flight, dest Destination, pl *destPlan, adm admission, msg Message, span trace.Span) result {
	start := time.Now()
	err := dest.Publisher.Publish(ctx, msg)
	took := time.Since(start)
	p.metrics.PublishDuration(dest.Publisher.Type(), took)
	// A publish that the lease's deadline cancelled says nothing of the destination: the
	// breaker does not count it (outcome skips a publish whose context ended).
	p.ctl.outcome(ctx, pl, adm, err)
	if err != nil && f.lease.Ended() {
		return result{f: f, plan: pl, expired: true, started: true}
	}
	if p.log.Enabled(ctx, slog.LevelDebug) {
		p.logDelivery(f, dest.Name, span, took, err)
	}
	if err != nil {
		p.metrics.DestinationOutcome(dest.Name, "failure")
		return result{f: f, plan: pl, err: err}
	}
	p.metrics.DestinationOutcome(dest.Name, "success")
	return result{f: f, plan: pl}
}

// logDelivery writes the debug line of a publish that returned.
func (p *Poller) logDelivery(f *flight, dest string, span trace.Span, took time.Duration, err error) {
	sc := trace.SpanContext{}
	if span != nil {
		sc = span.SpanContext()
	}
	if err != nil {
		p.rowLog(f.row, dest, sc).Debug("outbox delivery failed", "duration_ms", took.Milliseconds(), "error", redact.Error(err))
		return
	}
	p.rowLog(f.row, dest, sc).Debug("outbox delivery succeeded", "duration_ms", took.Milliseconds())
}

// messageOf turns a claimed row into the message a publisher sees.
func messageOf(row store.OutboxMessage, p *Poller) Message {
	m := Message{
		ID: row.ID, Topic: row.Topic, Key: row.Key, AggregateType: row.AggregateType,
		Payload: row.Payload, Attempt: row.Attempt, CreatedAt: row.CreatedAt,
		ReplayGeneration: row.ReplayGeneration,
	}
	if len(row.Headers) > 0 && string(row.Headers) != "{}" {
		var raw map[string]json.RawMessage
		if err := json.Unmarshal(row.Headers, &raw); err != nil {
			p.rowLog(row, p.destinationOf(row), trace.SpanContext{}).Warn("outbox row headers are not a JSON object; sending none", "error", err)
		} else if len(raw) > 0 {
			m.Headers = make(map[string]string, len(raw))
			for k, v := range raw {
				var s string
				if json.Unmarshal(v, &s) == nil {
					m.Headers[k] = s
				} else {
					m.Headers[k] = string(v)
				}
			}
		}
	}
	return m
}
