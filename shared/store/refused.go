package store

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/alternayte/queuebox/shared/redact"
)

// RefusedError is the error of a dialect's Open when the database answered and refused the
// connection for a reason that waiting does not change: the login (an unknown user, a wrong
// password) or a database that does not exist. Open stops at the first such answer instead of
// retrying for database.startupTimeoutMs.
type RefusedError struct {
	// What says what the database refused, with the driver's code: "the database refused the
	// login (SQLSTATE 28P01)".
	What string
	// Fix names the settings to correct.
	Fix string
	// Cause is the redacted text of the driver's error, on one line.
	Cause string
}

// Error reads "<What>: <Cause>; this does not pass by waiting, so QueueBox stops: <Fix>".
func (e *RefusedError) Error() string {
	return fmt.Sprintf("%s: %s; this does not pass by waiting, so QueueBox stops: %s", e.What, e.Cause, e.Fix)
}

// NewRefusedError returns a RefusedError whose Cause is the redacted text of err.
func NewRefusedError(what, fix string, err error) *RefusedError {
	return &RefusedError{What: what, Fix: fix, Cause: redact.String(strings.Join(strings.Fields(err.Error()), " "))}
}

// WaitFunc is the wait of OpenConfig.WaitForDatabase.
type WaitFunc func(ctx context.Context, connect func(context.Context) error, timeout time.Duration) error

// WaitUnlessRefused runs wait over connect, and ends it at the first error of connect that
// refused classifies as a refusal (a non-nil *RefusedError), returning that refusal. Any other
// error is left to wait, which retries it until timeout.
func WaitUnlessRefused(ctx context.Context, wait WaitFunc, connect func(context.Context) error, timeout time.Duration, refused func(error) *RefusedError) error {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		mu      sync.Mutex
		refusal *RefusedError
	)
	err := wait(wctx, func(c context.Context) error {
		err := connect(c)
		if err != nil {
			if r := refused(err); r != nil {
				mu.Lock()
				if refusal == nil {
					refusal = r
				}
				mu.Unlock()
				cancel()
			}
		}
		return err
	}, timeout)
	mu.Lock()
	defer mu.Unlock()
	if refusal != nil {
		return refusal
	}
	return err
}
