package queuebox

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// fields returns the log fields of c, with err when it is not nil.
func (c *claimed) fields(err error) map[string]any {
	f := map[string]any{
		"source": c.msg.Source, "id": c.msg.ID, "idempotency_key": c.msg.IdempotencyKey,
		"attempt": c.msg.Attempt,
	}
	if c.msg.CorrelationID != "" {
		f["correlation_id"] = c.msg.CorrelationID
	}
	if err != nil {
		f["error"] = err
	}
	return f
}

// handle runs the handler for c in a new transaction and completes the row in it, or fails the
// row through the retry policy. Nothing of it goes on past the row's local deadline: the
// handler does not start, its context ends, and the transaction is not committed.
func (w *InboxWorker) handle(c *claimed, handler Handler) {
	defer c.release()
	if c.readErr != nil {
		c.stopRenewal()
		w.fail(c, c.readErr)
		return
	}
	// The handler's context carries its span; it ends when c.ctx ends.
	hctx, span := w.startHandlerSpan(c.ctx, c.msg)
	// The transaction is bound to the handler's context: database/sql rolls it back when the
	// lease is lost, the local deadline passes or the grace runs out.
	tx, err := w.db.BeginTx(hctx, nil)
	if err == nil && !c.live() {
		_ = tx.Rollback()
		err = context.Cause(c.ctx)
	}
	if err != nil {
		c.stopRenewal()
		if c.ctx.Err() != nil {
			span.end(resultCancelled, context.Cause(c.ctx))
			w.log.warn("handler cancelled before it started; the row is not completed, spends no attempt, and its lease expires", c.fields(context.Cause(c.ctx)))
			return
		}
		span.end(resultError, err)
		w.log.error("beginning the handler transaction; the row is not completed and its lease expires", c.fields(err))
		return
	}
	herr := callHandler(hctx, handler, c.msg, tx)
	if !c.live() {
		w.cancelled(c, tx, span, "handler cancelled; its writes are rolled back, the row is not completed, spends no attempt, and its lease expires")
		return
	}
	if herr != nil {
		_ = tx.Rollback()
		c.stopRenewal()
		span.end(resultFailed, herr)
		w.fail(c, herr)
		return
	}
	c.stopRenewal()
	args, err := w.stmts.complete.args(map[string]any{"id": c.msg.ID, "token": c.token})
	if err != nil {
		_ = tx.Rollback()
		span.end(resultError, err)
		w.log.error("completing a row", c.fields(err))
		return
	}
	res, err := tx.ExecContext(hctx, w.stmts.complete.text, args...)
	if err != nil {
		if !c.live() {
			w.cancelled(c, tx, span, "handler cancelled during the completion; its writes are rolled back, the row is not completed and its lease expires")
			return
		}
		_ = tx.Rollback()
		span.end(resultError, err)
		w.log.error("completing a row; its writes are rolled back and its lease expires", c.fields(err))
		return
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		_ = tx.Rollback()
		span.end(resultLost, errLeaseLost)
		w.log.warn("lost the lease before the completion: another worker owns the row; the handler's writes are rolled back", c.fields(err))
		return
	}
	// The last moment to stop: the commit is sent only before the local deadline.
	if !c.live() {
		w.cancelled(c, tx, span, "the lease's local deadline passed before the commit; the handler's writes and the completion are rolled back, and the row runs again after its lease")
		return
	}
	if err := tx.Commit(); err != nil {
		span.end(resultError, err)
		w.log.error("committing a completed row; if the commit did not reach the database, the row runs again after its lease", c.fields(err))
		return
	}
	span.end(resultCompleted, nil)
}

// cancelled ends the run of a handler whose context ended: it rolls the transaction back and
// writes nothing to the row, so no attempt is spent and the lease expires.
func (w *InboxWorker) cancelled(c *claimed, tx *sql.Tx, span handlerSpan, msg string) {
	_ = tx.Rollback()
	c.stopRenewal()
	span.end(resultCancelled, context.Cause(c.ctx))
	w.log.warn(msg, c.fields(context.Cause(c.ctx)))
}

// callHandler runs the handler and turns a panic into an error.
func callHandler(ctx context.Context, handler Handler, msg Message, tx *sql.Tx) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("handler panicked: %v", r)
		}
	}()
	return handler(ctx, msg, tx)
}

// fail asks the retry policy about a failed row and runs the retry or dead statement in a
// transaction of its own, fenced on the claim token.
func (w *InboxWorker) fail(c *claimed, failure error) {
	action := w.decide(c, failure)
	text := SanitizeError(failure)
	stmt := w.stmts.retry
	values := map[string]any{"id": c.msg.ID, "token": c.token, "error": text}
	verb := "retrying"
	if action.IsDeadLetter() {
		stmt, verb = w.stmts.dead, "dead-lettering"
	} else {
		values["delay_ms"] = delayMS(action.Delay())
	}
	fields := c.fields(failure)
	if !action.IsDeadLetter() {
		fields["retry_in_ms"] = values["delay_ms"]
	}
	// The statement runs only before the local deadline: after it, another worker may own the
	// row, and the failure spends no attempt.
	ctx, cancel := context.WithTimeout(c.ctx, statementTimeout)
	defer cancel()
	err := context.Cause(c.ctx)
	if c.live() {
		err = w.fenced(ctx, stmt, values)
	}
	switch {
	case errors.Is(err, errLeaseLost), err != nil && errors.Is(context.Cause(c.ctx), errLeaseLost):
		w.log.warn("handler failed, and the lease was lost before "+verb+" the row (another worker may own it); nothing was written to the row", fields)
	case err != nil && errors.Is(context.Cause(c.ctx), errLeaseDeadline):
		w.log.warn("handler failed, and the lease's local deadline passed before "+verb+" the row; it spends no attempt, and its lease expires", fields)
	case err != nil && c.ctx.Err() != nil:
		w.log.warn("handler failed, and the shutdown grace ran out before "+verb+" the row; its lease expires", fields)
	case err != nil:
		fields["statement_error"] = err
		w.log.error("handler failed; "+verb+" the row did not reach the database, and its lease expires", fields)
	case action.IsDeadLetter():
		w.log.error("handler failed; the row is dead", fields)
	default:
		w.log.warn("handler failed; the row will be retried", fields)
	}
}

// decide asks the retry policy, and falls back to the default policy when it panics.
func (w *InboxWorker) decide(c *claimed, failure error) (action FailureAction) {
	defer func() {
		if r := recover(); r != nil {
			w.log.error("the retry policy panicked; using the default policy", c.fields(fmt.Errorf("retry policy panicked: %v", r)))
			action = NewDefaultRetryPolicy(defaultMaxAttempts, defaultBaseDelay, defaultMaxDelay, defaultJitter).Decide(c.msg, failure)
		}
	}()
	return w.opts.RetryPolicy.Decide(c.msg, failure)
}

// delayMS returns a retry delay in whole milliseconds, within [0, 2^31-1].
func delayMS(d time.Duration) int64 {
	ms := d.Milliseconds()
	if d > 0 && d%time.Millisecond != 0 {
		ms++ // round up, so that a retry never comes early
	}
	return min(max(ms, 0), maxDelayMS)
}

// fenced runs a retry or dead statement in a transaction of its own and commits it only when
// it changed exactly one row. Zero rows returns errLeaseLost.
func (w *InboxWorker) fenced(ctx context.Context, stmt statement, values map[string]any) error {
	args, err := stmt.args(values)
	if err != nil {
		return err
	}
	tx, err := w.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("beginning the %s transaction: %w", stmt.name, err)
	}
	res, err := tx.ExecContext(ctx, stmt.text, args...)
	if err != nil {
		_ = tx.Rollback()
		return fmt.Errorf("running the %s statement: %w", stmt.name, err)
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		_ = tx.Rollback()
		return errLeaseLost
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("committing the %s statement: %w", stmt.name, err)
	}
	return nil
}

// isClaimLockBusy reports whether err is Msg 51000 of the SQL Server claim: the per-source
// application lock was not acquired within 10 seconds. The driver's error is recognised by its
// error number (go-mssqldb's mssql.Error has SQLErrorNumber), never by its text.
func isClaimLockBusy(err error) bool {
	var numbered interface{ SQLErrorNumber() int32 }
	return errors.As(err, &numbered) && numbered.SQLErrorNumber() == claimLockBusy
}
