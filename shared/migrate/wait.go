package migrate

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/alternayte/queuebox/shared/redact"
)

// DefaultStartupTimeout is the default of database.startupTimeoutMs.
const DefaultStartupTimeout = 60 * time.Second

const (
	firstRetryDelay = 100 * time.Millisecond
	maxRetryDelay   = 5 * time.Second
)

// StartupTimeoutError is the error of WaitForDatabase when the database did not answer in time.
// It matches ErrStartupTimeout with errors.Is. It keeps only the redacted text of the last
// error, so that no form of it can print a password.
type StartupTimeoutError struct {
	// Timeout is database.startupTimeoutMs.
	Timeout time.Duration
	// Attempts is the number of connection attempts.
	Attempts int
	// Cause is the redacted text of the last error of connect.
	Cause string
}

// Error reads "the database did not answer within database.startupTimeoutMs (60000 ms): <cause>".
func (e *StartupTimeoutError) Error() string {
	return fmt.Sprintf("the database did not answer within database.startupTimeoutMs (%d ms): %s",
		e.Timeout.Milliseconds(), e.Cause)
}

// Is reports whether target is ErrStartupTimeout.
func (e *StartupTimeoutError) Is(target error) bool { return target == ErrStartupTimeout }

// WaitForDatabase calls connect until it returns nil, waiting 100 ms after the first failure and
// twice as long after each next one, up to 5 s, for at most timeout (database.startupTimeoutMs;
// zero or less means DefaultStartupTimeout). Each call of connect gets a context that ends at
// the deadline. When the time is up it returns a *StartupTimeoutError that names
// database.startupTimeoutMs and the redacted text of the last error. When ctx ends first it
// returns ctx's error, with the redacted text of the last error.
func WaitForDatabase(ctx context.Context, connect func(context.Context) error, timeout time.Duration) error {
	if timeout <= 0 {
		timeout = DefaultStartupTimeout
	}
	deadline := time.Now().Add(timeout)
	wctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()

	delay := firstRetryDelay
	var cause error
	stop := func(attempt int) error {
		if ctx.Err() != nil {
			return fmt.Errorf("waiting for the database: %w (last error: %s)", ctx.Err(), causeText(cause))
		}
		return &StartupTimeoutError{Timeout: timeout, Attempts: attempt, Cause: causeText(cause)}
	}
	for attempt := 1; ; attempt++ {
		err := connect(wctx)
		if err == nil {
			return nil
		}
		// An attempt that the deadline cut short says less than the one before it.
		if cause == nil || (wctx.Err() == nil && time.Now().Before(deadline)) {
			cause = err
		}
		left := time.Until(deadline)
		if ctx.Err() != nil || left <= 0 {
			return stop(attempt)
		}
		t := time.NewTimer(min(delay, left))
		select {
		case <-wctx.Done():
			t.Stop()
			return stop(attempt)
		case <-t.C:
		}
		if !time.Now().Before(deadline) {
			return stop(attempt)
		}
		delay = min(2*delay, maxRetryDelay)
	}
}

// causeText is the text of err on one line, with every secret removed.
func causeText(err error) string {
	return redact.String(strings.Join(strings.Fields(err.Error()), " "))
}

// waitReportEvery is how often LoggedWait repeats its "waiting for the database" line.
const waitReportEvery = 5 * time.Second

// LoggedWait returns WaitForDatabase that also logs "waiting for the database" on log, with
// target (the masked database.url), after the first failed attempt and then every 5 s while
// the database does not answer, so that a start that waits says what it waits for. target
// must not hold a password: pass config.MaskURL of the URL. The reason is redacted as well.
func LoggedWait(log *slog.Logger, target string) func(ctx context.Context, connect func(context.Context) error, timeout time.Duration) error {
	return func(ctx context.Context, connect func(context.Context) error, timeout time.Duration) error {
		if timeout <= 0 {
			timeout = DefaultStartupTimeout
		}
		start := time.Now()
		var last time.Time
		logged := func(ctx context.Context) error {
			err := connect(ctx)
			if err == nil || log == nil || ctx.Err() != nil {
				return err
			}
			if now := time.Now(); last.IsZero() || now.Sub(last) >= waitReportEvery {
				last = now
				log.Info("waiting for the database to answer",
					"url", target,
					"waited", now.Sub(start).Round(time.Second).String(),
					"startupTimeout", timeout.String(),
					"reason", causeText(err))
			}
			return err
		}
		err := WaitForDatabase(ctx, logged, timeout)
		if err == nil && !last.IsZero() && log != nil {
			log.Info("the database answered", "url", target, "waited", time.Since(start).Round(time.Millisecond).String())
		}
		return err
	}
}
