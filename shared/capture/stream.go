package capture

import (
	"context"
	"errors"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/alternayte/queuebox/shared/redact"
	"github.com/alternayte/queuebox/shared/store/changes"
)

// stream reads the stream until ctx is done or the connection fails. It wakes on every
// commit that inserted into the outbox table, and confirms the handled position at least
// once per StandbyInterval and when the server asks.
func (c *Connector) stream(ctx context.Context, sess changes.Session) error {
	var inTx bool
	var txOutbox, txInbox int // the transaction's inserts into the outbox and the inbox table
	var txBegan time.Time     // when the transaction's begin arrived, for its span
	nextStandby := time.Now().Add(c.cfg.StandbyInterval)
	for {
		if !time.Now().Before(nextStandby) {
			if err := c.confirm(ctx, sess); err != nil {
				return err
			}
			nextStandby = time.Now().Add(c.cfg.StandbyInterval)
		}
		recvCtx, cancel := context.WithDeadline(ctx, nextStandby)
		ev, err := sess.Receive(recvCtx)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				// Stopping: record and confirm what was handled.
				stopCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				if err := c.confirm(stopCtx, sess); err != nil {
					c.cfg.Logger.Warn("capture could not confirm its position at shutdown", "error", redact.Error(err))
				}
				return nil
			}
			if errors.Is(err, changes.ErrReceiveTimeout) {
				continue
			}
			return err
		}
		switch ev.Kind {
		case changes.EventKeepalive:
			if !inTx {
				c.advance(ev.Position)
			}
			if ev.ReplyRequested {
				nextStandby = time.Time{}
			}
		case changes.EventBegin:
			inTx, txOutbox, txInbox, txBegan = true, 0, 0, time.Now()
		case changes.EventInsert:
			switch c.classify(ev.Schema, ev.Table) {
			case outboxTable:
				txOutbox++
				c.inserts.Add(1)
			case inboxTable:
				txInbox++
			}
		case changes.EventCommit:
			if txOutbox > 0 || txInbox > 0 {
				c.wakeCommitted(txBegan, ev.Position, txOutbox, txInbox)
			}
			inTx, txOutbox, txInbox = false, 0, 0
			c.advance(ev.Position)
		}
	}
}

// wakeCommitted wakes delivery for a committed transaction with outbox inserts, and the relay
// for one with inbox inserts, inside the transaction's "capture wake" span when tracing is on
// (its attributes queuebox.capture.outbox_inserts and queuebox.capture.inbox_inserts say
// which). The span starts when the transaction's begin arrived, so it lasts from the begin in
// the log to the wake; it is a root span, as the log carries no trace context.
func (c *Connector) wakeCommitted(began time.Time, pos changes.Position, outboxInserts, inboxInserts int) {
	var span trace.Span
	if c.cfg.Tracer != nil {
		if began.IsZero() { // inserts whose begin this session did not see
			began = time.Now()
		}
		_, span = c.cfg.Tracer.Start(context.Background(), "capture wake",
			trace.WithSpanKind(trace.SpanKindInternal), trace.WithTimestamp(began),
			trace.WithAttributes(
				attribute.String("queuebox.capture.identity", c.cfg.Identity),
				attribute.String("queuebox.capture.position", c.log.FormatPosition(pos)),
				attribute.Int("queuebox.capture.outbox_inserts", outboxInserts),
				attribute.Int("queuebox.capture.inbox_inserts", inboxInserts),
			))
	}
	if outboxInserts > 0 {
		c.wakes.Add(1)
		c.cfg.Waker.Wake()
	}
	if inboxInserts > 0 { // counted only when the connector has an InboxWaker (classify)
		c.inboxWakes.Add(1)
		c.cfg.InboxWaker.Wake()
	}
	if span != nil {
		span.End()
	}
}

// relation tells what a table of the stream is to capture.
type relation uint8

const (
	otherTable relation = iota
	outboxTable
	inboxTable
)

// classify tells whether a table is the outbox table, the inbox table, or another one.
func (c *Connector) classify(namespace, name string) relation {
	switch {
	case namespace != c.cfg.Schema:
		return otherTable
	case name == c.cfg.Table:
		return outboxTable
	case c.cfg.InboxTable != "" && c.cfg.InboxWaker != nil && name == c.cfg.InboxTable:
		return inboxTable
	}
	return otherTable
}

// advance records that every change up to pos is handled.
func (c *Connector) advance(pos changes.Position) {
	if pos > c.handledPosition() {
		c.handled.Store(pos)
	}
}

// confirm records the handled position in offsets.dat, then tells the server: the slot never
// moves past what the state directory holds.
func (c *Connector) confirm(ctx context.Context, sess changes.Session) error {
	pos := c.handledPosition()
	if pos == "" {
		return nil
	}
	if pos > c.written {
		if err := c.files.writeOffsets(pos, c.cfg.Slot, c.cfg.Publication); err != nil {
			return err
		}
		c.written = pos
	}
	return sess.Confirm(ctx, pos)
}
