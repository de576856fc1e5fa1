//go:build !queuebox_no_rabbitmq

package rabbitmq

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/alternayte/queuebox/shared/connect"
	"github.com/alternayte/queuebox/shared/inbox"
)

// A message whose header table the AMQP client cannot decode (nested too deep, too many
// entries) closes the client's connection as soon as the broker delivers it, before the
// source sees it; the broker returns it to the head of the queue, and every new connection
// fails the same way. The source gets past it in three steps:
//
//  1. A connection that closes with a frame error puts the source in careful mode: the next
//     session consumes with a prefetch of one, so that a second failure can only come from
//     the one delivery it holds, the message at the head of the queue.
//  2. When a careful session fails with a frame error, the next attempt first takes the head
//     message with the raw client (rawamqp.go), which keeps the header table as bytes, and
//     checks the table against the client's limits (fieldtable.go). A table that the client
//     cannot decode makes the message a dead row: its body, the table as base64: under
//     RawHeadersName, and a last_error naming the problem; the message is then acknowledged.
//     Any other message goes back to the queue.
//  3. A careful session that acknowledged PrefetchCount deliveries raises the prefetch again
//     (raisePrefetch).

// RawHeadersName is the name under which the dead row of a message whose header table the
// AMQP client cannot decode keeps that table: base64: and the Base64 text of the field table
// as the broker sent it (its four-byte length, then its entries).
const RawHeadersName = "x-queuebox-raw-headers"

// rescueTimeout bounds one raw take of the head message, from the dial to the close.
const rescueTimeout = 30 * time.Second

// undecodableText starts the last_error of a message whose headers the client cannot decode.
const undecodableText = "The AMQP client cannot decode the message headers: "

// recovery is the state of a source between its sessions, after a frame error.
type recovery struct {
	// careful makes the next session consume with a prefetch of one.
	careful bool
	// rescueDue makes the next attempt take the head message with the raw client first.
	rescueDue bool
	// decodableHeads counts the raw takes in a row that found a head message the client
	// can decode.
	decodableHeads int
}

// decodeFailures are the reasons with which the client closes its connection when it cannot
// decode a frame: a value it refuses (a field table nested too deep or with too many
// entries), a frame that does not end where it says, a length that runs past its frame. A
// connection cut in the middle of a frame reads as the last one too; a cut between frames
// ("EOF") does not.
var decodeFailures = []string{amqp.ErrSyntax.Error(), amqp.ErrFrame.Error(), io.ErrUnexpectedEOF.Error()}

// frameError returns the error with which the client closed its connection (closed is its
// NotifyClose channel) when it could not decode a frame, or nil.
func frameError(closed <-chan *amqp.Error) *amqp.Error {
	select {
	case e := <-closed:
		if e != nil && e.Code == amqp.FrameError && !e.Server && slices.Contains(decodeFailures, e.Reason) {
			return e
		}
	default:
	}
	return nil
}

// afterFrameError decides what follows a session that the client closed with a frame error:
// careful mode after a normal session, a raw take of the head message after a careful one.
func (rec *recovery) afterFrameError(log *slog.Logger, e *amqp.Error) {
	if rec.careful {
		rec.rescueDue = true
		log.Warn("rabbitmq source: the AMQP client could not read the message at the head of the queue; taking it without decoding its headers",
			slog.String("error", e.Error()))
		return
	}
	rec.careful = true
	log.Warn("rabbitmq source: the AMQP client could not read a frame; consuming one message at a time to find the message it cannot read",
		slog.String("error", e.Error()))
}

// rescue takes the message at the head of the queue with the raw client. When the AMQP
// client cannot decode its header table, it stores it as a dead row and acknowledges it;
// otherwise it returns it to the queue. An error leaves the message in the queue.
func (s *Source) rescue(ctx context.Context, intake *inbox.Intake, log *slog.Logger, rec *recovery) error {
	rctx, cancel := context.WithTimeout(ctx, rescueTimeout)
	defer cancel()
	rc, err := dialRaw(rctx, s.cfg.URL, "queuebox source "+s.Name()+" (undecodable message)", dialTimeout)
	if err != nil {
		return fmt.Errorf("source %s: connecting to take the message the AMQP client cannot read: %s", s.Name(), uriError(err, s.cfg.URL))
	}
	fail := func(what string, err error) error {
		_ = rc.conn.Close()
		return fmt.Errorf("source %s: %s: %s", s.Name(), what, uriError(err, s.cfg.URL))
	}
	msg, err := rc.get(s.cfg.Queue)
	if err != nil {
		return fail("taking the head message of queue "+s.cfg.Queue, err)
	}
	if msg == nil {
		rec.rescueDue = false
		return rc.close()
	}
	var problem error
	if msg.headers != nil {
		problem = tableProblem(msg.headers)
	}
	if problem == nil {
		rec.rescueDue = false
		rec.decodableHeads++
		if rec.decodableHeads >= 3 {
			log.Error("rabbitmq source: the AMQP client keeps failing, but the message at the head of the queue has headers it can decode; the cause is not a message QueueBox can set aside",
				slog.Int("attempts", rec.decodableHeads))
		}
		if err := rc.requeue(msg.tag); err != nil {
			return fail("returning the head message to the queue", err)
		}
		return rc.close()
	}
	d := inbox.Delivery{
		Body:          msg.body,
		Headers:       map[string]string{RawHeadersName: "base64:" + base64.StdEncoding.EncodeToString(msg.headers)},
		BrokerKey:     msg.messageID,
		CorrelationID: msg.correlationID,
		Refused:       &inbox.Refusal{Cause: inbox.RefusedUndecodable, Text: undecodableText + problem.Error()},
	}
	batch := intake.NewBatch(1)
	batch.Add(context.WithoutCancel(ctx), &d)
	sctx, scancel := connect.StoreContext(ctx)
	out, err := batch.Write(sctx)
	scancel()
	if err != nil {
		_ = rc.requeue(msg.tag)
		return fail("storing the message the AMQP client cannot read", err)
	}
	if err := rc.ack(msg.tag); err != nil {
		// The row is stored: the broker delivers the message again and the store finds it a
		// duplicate.
		return fail("acknowledging the message the AMQP client cannot read", err)
	}
	if err := rc.close(); err != nil {
		return fmt.Errorf("source %s: closing after taking the message the AMQP client cannot read: %s", s.Name(), uriError(err, s.cfg.URL))
	}
	rec.rescueDue, rec.decodableHeads = false, 0
	attrs := []any{slog.String("queue", s.cfg.Queue), slog.String("status", out[0].Status.String()),
		slog.String("amqp_message_id", msg.messageID), slog.String("reason", problem.Error()), slog.Int("body_bytes", len(msg.body))}
	if out[0].ID != "" {
		attrs = append(attrs, slog.String("message_id", out[0].ID))
	}
	log.Warn("rabbitmq source: stored a message whose headers the AMQP client cannot decode as a dead row, and acknowledged it", attrs...)
	return nil
}

// raisePrefetch brings the consumer tag on ch, careful with a prefetch of one, back to the
// source's prefetch count and returns the deliveries of its successor. The broker applies a
// basic.qos to the consumers started after it only, so the consumer is cancelled and started
// again. The deliveries that the cancelled consumer still held are returned (held): they stay
// unacknowledged on ch, which remains open, and the caller stores and acknowledges them
// before any delivery of the new consumer, so none is delivered twice and the order holds.
func (s *Source) raisePrefetch(ch *amqp.Channel, tag string, old <-chan amqp.Delivery) (deliveries <-chan amqp.Delivery, held []amqp.Delivery, err error) {
	if err := ch.Qos(s.cfg.PrefetchCount, 0, false); err != nil {
		return nil, nil, fmt.Errorf("source %s: setting the prefetch count: %w", s.Name(), err)
	}
	if err := ch.Cancel(tag, false); err != nil {
		return nil, nil, fmt.Errorf("source %s: cancelling the consumer to raise its prefetch count: %w", s.Name(), err)
	}
	// After basic.cancel-ok the broker sends the consumer nothing more, and the client closes
	// old once it has handed over what it had received.
	for d := range old {
		held = append(held, d)
	}
	deliveries, err = ch.Consume(s.cfg.Queue, tag, false, false, false, false, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("source %s: consuming queue %q again: %w", s.Name(), s.cfg.Queue, err)
	}
	return deliveries, held, nil
}
