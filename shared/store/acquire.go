package store

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// ErrPoolTimeout is the error of a statement that waited database.connectionTimeoutMs for a
// connection from the pool and got none: every connection stayed with another caller. The
// error that a store returns wraps it with the statement and the wait, for example "claiming
// outbox batch: store: timed out after 30000 ms waiting for a database connection from the
// pool (database.connectionTimeoutMs)". It does not wrap context.DeadlineExceeded: the
// caller's context had not ended.
var ErrPoolTimeout = errors.New("store: timed out waiting for a database connection from the pool")

// poolTimeoutError is ErrPoolTimeout with the wait that ran out.
type poolTimeoutError struct{ wait time.Duration }

func (e *poolTimeoutError) Error() string {
	return fmt.Sprintf("store: timed out after %d ms waiting for a database connection from the pool (database.connectionTimeoutMs)",
		e.wait.Milliseconds())
}

func (e *poolTimeoutError) Is(target error) bool { return target == ErrPoolTimeout }

// errAcquireBound is the cause of the context that AcquireWithin gives acquire.
var errAcquireBound = errors.New("store: acquire bound reached")

// AcquireWithin calls acquire, which waits for a connection from a pool, with a context that
// ends after timeout (database.connectionTimeoutMs) at the latest. When that bound ends the
// wait, and not ctx, the error is ErrPoolTimeout with the wait; any other error is acquire's
// as it returned it. A timeout of 0 or less leaves the wait to ctx alone.
//
// Only the wait is bounded: the caller runs its statement on the connection with ctx. Both
// dialects acquire through it (shared/store/postgres on its pgx pool,
// shared/store/sqlpool on database/sql).
func AcquireWithin[C any](ctx context.Context, timeout time.Duration, acquire func(context.Context) (C, error)) (C, error) {
	if timeout <= 0 {
		return acquire(ctx)
	}
	bounded, cancel := context.WithTimeoutCause(ctx, timeout, errAcquireBound)
	defer cancel()
	c, err := acquire(bounded)
	if err != nil && ctx.Err() == nil && errors.Is(context.Cause(bounded), errAcquireBound) &&
		errors.Is(err, context.DeadlineExceeded) {
		var zero C
		return zero, &poolTimeoutError{wait: timeout}
	}
	return c, err
}
