package queuebox

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"
)

// Options configures an InboxWorker. A zero field takes the default that its comment states.
type Options struct {
	// Source is the source whose rows the worker takes: a key of the sources map in
	// queuebox.yml whose consumption is pull. Required.
	Source string
	// BatchSize is the largest number of rows in one claim. Default 10.
	BatchSize int
	// LeaseMS is the lease duration in milliseconds, from 3 to 2^31-1. The worker renews the
	// lease of every row it holds every LeaseMS/3 milliseconds. A handler's context ends at the
	// row's local deadline: the time the claim or the last successful renewal was sent, plus
	// LeaseMS, minus a fifth of LeaseMS (at most 10 seconds). Default 30000.
	LeaseMS int
	// MaxConcurrency is the largest number of handlers that run at one time. Default 1.
	MaxConcurrency int
	// PollInterval is the wait after a claim that returned nothing. Default 1 second.
	PollInterval time.Duration
	// ShutdownGrace is how long a stop waits for running handlers before it cancels them.
	// Default 30 seconds.
	ShutdownGrace time.Duration
	// Dialect is the database dialect. Default DialectPostgreSQL.
	Dialect Dialect
	// Schema holds the table and column names for a mapped inbox table. Default: the names of
	// DefaultSchema.
	Schema *Schema
	// RetryPolicy decides what happens to a row whose handler failed. Default:
	// NewDefaultRetryPolicy(5, time.Second, 5*time.Minute, 0.2).
	RetryPolicy RetryPolicy
	// Logger receives the worker's log lines, sanitized. Default: none, the worker prints
	// nothing.
	Logger Logger
	// TracerProvider makes the span of each handler run, a child of the W3C trace context
	// (traceparent, tracestate) in the row's headers. Default: the global provider of the
	// OpenTelemetry API (otel.GetTracerProvider), which records nothing until the application
	// installs an SDK.
	TracerProvider trace.TracerProvider
}

// Defaults of Options.
const (
	defaultBatchSize      = 10
	defaultLeaseMS        = 30_000
	defaultMaxConcurrency = 1
	defaultPollInterval   = time.Second
	defaultShutdownGrace  = 30 * time.Second
)

const (
	// claimTimeout bounds one claim call. On SQL Server it must stay at 30 seconds or more, so
	// that the server gives up on the per-source lock (after 10 seconds, Msg 51000) before the
	// driver abandons the call and leaves the lock held until the connection resets.
	claimTimeout = 35 * time.Second
	// statementTimeout bounds the retry and dead statements.
	statementTimeout = 30 * time.Second
	// maxBackoff is the longest wait after claims that keep failing.
	maxBackoff = 30 * time.Second
	// maxDelayMS is the largest delay_ms and lease_ms that the statements accept (an INT on
	// SQL Server).
	maxDelayMS = math.MaxInt32
	// claimLockBusy is the error number that the SQL Server claim raises when it did not get
	// the per-source application lock within 10 seconds.
	claimLockBusy = 51000
)

var (
	// errLeaseLost is the cause of a handler's cancellation when a renewal found that another
	// worker owns the row, or that the lease ran out.
	errLeaseLost = errors.New("queuebox: the lease was lost")
	// errGraceOver is the cause of a handler's cancellation when a shutdown ran out of grace.
	errGraceOver = errors.New("queuebox: the shutdown grace ran out")
)

// withDefaults returns the options with every zero field set to its default.
func (o Options) withDefaults() Options {
	if o.BatchSize == 0 {
		o.BatchSize = defaultBatchSize
	}
	if o.LeaseMS == 0 {
		o.LeaseMS = defaultLeaseMS
	}
	if o.MaxConcurrency == 0 {
		o.MaxConcurrency = defaultMaxConcurrency
	}
	if o.PollInterval == 0 {
		o.PollInterval = defaultPollInterval
	}
	if o.ShutdownGrace == 0 {
		o.ShutdownGrace = defaultShutdownGrace
	}
	if o.Dialect == "" {
		o.Dialect = DialectPostgreSQL
	}
	if o.RetryPolicy == nil {
		o.RetryPolicy = NewDefaultRetryPolicy(defaultMaxAttempts, defaultBaseDelay, defaultMaxDelay, defaultJitter)
	}
	return o
}

// validate names every field of o that cannot work.
func (o Options) validate() error {
	var bad []string
	if strings.TrimSpace(o.Source) == "" {
		bad = append(bad, "Source is required")
	}
	if o.BatchSize < 1 {
		bad = append(bad, fmt.Sprintf("BatchSize %d must be 1 or more", o.BatchSize))
	}
	if o.LeaseMS < 3 || o.LeaseMS > maxDelayMS {
		bad = append(bad, fmt.Sprintf("LeaseMS %d must be from 3 to %d", o.LeaseMS, maxDelayMS))
	}
	if o.MaxConcurrency < 1 {
		bad = append(bad, fmt.Sprintf("MaxConcurrency %d must be 1 or more", o.MaxConcurrency))
	}
	if o.PollInterval < 0 {
		bad = append(bad, fmt.Sprintf("PollInterval %s must not be negative", o.PollInterval))
	}
	if o.ShutdownGrace < 0 {
		bad = append(bad, fmt.Sprintf("ShutdownGrace %s must not be negative", o.ShutdownGrace))
	}
	if o.Dialect != DialectPostgreSQL && o.Dialect != DialectSQLServer {
		bad = append(bad, fmt.Sprintf("Dialect %q must be %q or %q", o.Dialect, DialectPostgreSQL, DialectSQLServer))
	}
	if len(bad) > 0 {
		return fmt.Errorf("queuebox: invalid options: %s", strings.Join(bad, "; "))
	}
	return nil
}

// InboxWorker claims the pull rows of one source and runs a Handler for each, in a transaction
// that also completes the row. Build it with NewInboxWorker and start it with Run. Several
// workers, in one process or many, can share a source: the claim never gives two of them rows
// of one aggregate at the same time.
type InboxWorker struct {
	db     *sql.DB
	opts   Options
	stmts  statements
	claims claimTexts // the claim with its limits in the text, per batch size
	// leaseSpan is the lease minus its margin: a claim or a renewal counts for this long from
	// when it was sent.
	leaseSpan time.Duration
	log       safeLogger
	tracer    trace.Tracer
	running   atomic.Bool
}

// NewInboxWorker builds a worker on db, whose driver the application has registered (pgx for
// PostgreSQL, go-mssqldb for SQL Server). It fills the defaults of options and returns an
// error for a setting that cannot work: no Source, a negative size or duration, an unknown
// Dialect, or a Schema name that is not a SQL identifier. It does not touch the database.
func NewInboxWorker(db *sql.DB, options Options) (*InboxWorker, error) {
	if db == nil {
		return nil, errors.New("queuebox: NewInboxWorker needs a *sql.DB")
	}
	opts := options.withDefaults()
	if err := opts.validate(); err != nil {
		return nil, err
	}
	schema := DefaultSchema()
	if opts.Schema != nil {
		schema = *opts.Schema
	}
	schema, err := schema.resolve()
	if err != nil {
		return nil, fmt.Errorf("queuebox: invalid options: %w", err)
	}
	opts.Schema = &schema
	stmts, err := loadStatements(opts.Dialect, schema)
	if err != nil {
		return nil, fmt.Errorf("queuebox: %w", err)
	}
	lease := time.Duration(opts.LeaseMS) * time.Millisecond
	return &InboxWorker{
		db: db, opts: opts, stmts: stmts, log: safeLogger{opts.Logger}, tracer: newTracer(opts.TracerProvider),
		leaseSpan: lease - leaseMargin(lease),
	}, nil
}

// Run claims rows of the source and handles them until ctx is cancelled, then stops: it
// claims nothing more and does not start the rows it holds but has not started (their leases
// expire), waits up to ShutdownGrace for the running handlers, then cancels the handlers that
// are still running. For a cancelled handler the worker completes nothing and spends no
// attempt: the lease expires and another worker takes the row. Run returns nil after such a
// stop, once every handler has returned.
//
// Database errors while claiming are logged and retried with a growing wait, so Run keeps
// going while the database is away. Only what cannot recover by waiting ends Run: when
// PostgreSQL refuses the login (SQLSTATE 28000, 28P01) or does not know the database (3D000),
// Run stops as it does for a cancelled ctx and returns that error, which wraps the driver's
// (pgx's *pgconn.PgError, for example). Run also returns an error for a nil
// handler, or when the worker is already running. One worker runs one Run at a time.
func (w *InboxWorker) Run(ctx context.Context, handler Handler) error {
	if handler == nil {
		return errors.New("queuebox: Run needs a handler")
	}
	if !w.running.CompareAndSwap(false, true) {
		return errors.New("queuebox: the worker is already running")
	}
	defer w.running.Store(false)

	// Handlers and renewals outlive ctx by the shutdown grace; hard ends them. The claims and
	// the start of handlers end with run: with ctx, or when a claim finds an error that cannot
	// recover.
	hard, endHard := context.WithCancelCause(context.WithoutCancel(ctx))
	defer endHard(nil)
	ctx, endRun := context.WithCancel(ctx)
	defer endRun()
	// The grace runs from the stop, even when a SQL Server claim in flight delays the claimer.
	var stoppedAt atomic.Int64
	defer context.AfterFunc(ctx, func() { stoppedAt.Store(time.Now().UnixNano()) })()

	w.log.info("inbox pull worker started", map[string]any{
		"source": w.opts.Source, "batch_size": w.opts.BatchSize, "lease_ms": w.opts.LeaseMS,
		"max_concurrency": w.opts.MaxConcurrency,
	})

	// The claimer (this goroutine) puts claimed rows on queue; MaxConcurrency runner goroutines
	// take them one at a time and run a handler for each. A worker holds at most
	// BatchSize + MaxConcurrency - 1 rows, running or waiting, as many as it would hold if it
	// claimed BatchSize rows whenever a handler came free. Within that bound it claims again as
	// soon as no more than MaxConcurrency rows wait, so that the next rows are there when the
	// running handlers finish, and a claim in flight leaves no runner idle. It claims no earlier:
	// on a busy database every claim costs a commit, a plan and a walk over the index entries of
	// the rows claimed since the last vacuum, so fewer, larger claims go further. One goroutine
	// renews the leases of all the rows that the worker holds.
	t := &tracker{
		queue: make(chan *claimed, w.opts.BatchSize+w.opts.MaxConcurrency),
		wake:  make(chan struct{}, 1),
		renew: newRenewals(w.renewInterval()),
	}
	renewQuit, renewDone := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(renewDone)
		w.renewLoop(hard, t.renew, renewQuit)
	}()
	// The renewals end after every handler has returned, before Run returns.
	defer func() {
		close(renewQuit)
		<-renewDone
	}()
	done := w.startRunners(ctx, t, handler)
	fatal := w.claimLoop(ctx, hard, t)
	endRun()
	close(t.queue)
	// The rows that wait have not started and never will: leave them to their leases.
	var dropped []*claimed
	for c := range t.queue {
		dropped = append(dropped, c)
	}
	w.drop(dropped)

	w.awaitHandlers(done, &stoppedAt, endHard)
	w.log.info("inbox pull worker stopped", map[string]any{"source": w.opts.Source})
	return fatal
}

// startRunners starts MaxConcurrency goroutines that take claimed rows from t's queue and run
// handler for each; the channel it returns is closed when all of them have returned.
func (w *InboxWorker) startRunners(ctx context.Context, t *tracker, handler Handler) <-chan struct{} {
	done := make(chan struct{})
	var runners sync.WaitGroup
	for range w.opts.MaxConcurrency {
		runners.Add(1)
		go func() {
			defer runners.Done()
			w.runHandlers(ctx, t, handler)
		}()
	}
	go func() {
		runners.Wait()
		close(done)
	}()
	return done
}

// awaitHandlers waits for the running handlers (done) up to what is left of ShutdownGrace
// since the stop (stoppedAt, in Unix nanoseconds, zero when not yet stopped); when the grace
// runs out it cancels them with endHard and waits for them to return.
func (w *InboxWorker) awaitHandlers(done <-chan struct{}, stoppedAt *atomic.Int64, endHard context.CancelCauseFunc) {
	select {
	case <-done:
		return
	default:
	}
	w.log.info("stopping: waiting for the running handlers", map[string]any{
		"source": w.opts.Source, "shutdown_grace_ms": w.opts.ShutdownGrace.Milliseconds(),
	})
	remaining := w.opts.ShutdownGrace
	if at := stoppedAt.Load(); at != 0 {
		remaining -= time.Since(time.Unix(0, at))
	}
	grace := time.NewTimer(max(remaining, 0))
	select {
	case <-done:
		grace.Stop()
	case <-grace.C:
		w.log.warn("the shutdown grace ran out: cancelling the running handlers; their rows are not completed, spend no attempt, and their leases expire", map[string]any{"source": w.opts.Source})
		endHard(errGraceOver)
		<-done
	}
}

// tracker holds the state that the claimer and the runners of a Run share.
type tracker struct {
	queue chan *claimed // claimed rows that wait for a runner
	wake  chan struct{} // signalled when a row leaves the queue or a handler ends
	held  atomic.Int64  // rows claimed and not finished: waiting or running
	renew *renewals     // the leases that the worker renews
}

// signal wakes the claimer, without waiting.
func (t *tracker) signal() {
	select {
	case t.wake <- struct{}{}:
	default:
	}
}

// claimLoop claims rows and queues them until ctx ends. It returns at once when ctx ends,
// dropping the rows of a claim that returns after that. It returns an error only for a claim
// error that cannot recover by waiting (refusedConnection).
func (w *InboxWorker) claimLoop(ctx, hard context.Context, t *tracker) error {
	limit := w.opts.BatchSize + w.opts.MaxConcurrency - 1
	failures := 0
	for ctx.Err() == nil {
		room := limit - int(t.held.Load())
		if room < 1 || len(t.queue) > w.opts.MaxConcurrency {
			select {
			case <-t.wake:
			case <-ctx.Done():
			}
			continue
		}
		batch, err := w.claim(ctx, hard, min(room, w.opts.BatchSize))
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if refusedConnection(err) {
				w.log.error("the database refused the worker's login, or has no such database; stopping: check the address, the database name and the credentials", map[string]any{"source": w.opts.Source, "error": err})
				return fmt.Errorf("queuebox: the database refused the worker; waiting cannot fix this: %w", err)
			}
			failures++
			wait := backoff(w.opts.PollInterval, failures)
			fields := map[string]any{"source": w.opts.Source, "error": err, "retry_in_ms": wait.Milliseconds()}
			if isClaimLockBusy(err) {
				w.log.warn("the per-source claim lock is busy; waiting before the next claim", fields)
			} else {
				w.log.error("claiming inbox rows; waiting before the next claim", fields)
			}
			sleep(ctx, wait)
			continue
		}
		failures = 0
		if ctx.Err() != nil {
			w.drop(batch)
			return nil
		}
		if len(batch) == 0 {
			sleep(ctx, w.opts.PollInterval)
			continue
		}
		t.held.Add(int64(len(batch)))
		t.renew.add(batch)
		for _, c := range batch {
			t.queue <- c // never blocks: held rows never exceed the capacity
		}
	}
	return nil
}

// refusedSQLStates are the SQLSTATEs of a connection that PostgreSQL refuses for a reason that
// waiting cannot fix: an invalid authorization (28000: no such role, or pg_hba.conf has no
// entry), a wrong password (28P01), no such database (3D000).
var refusedSQLStates = map[string]bool{"28000": true, "28P01": true, "3D000": true}

// sqlServerLoginFailed is SQL Server's "Login failed for user" (an unknown login or a wrong
// password). Error 4060 ("Cannot open database") is left to the retries: SQL Server also
// answers it while a database recovers or fails over.
const sqlServerLoginFailed = 18456

// refusedConnection reports whether err carries one of refusedSQLStates, or SQL Server's
// failed login. The driver's error is recognised by its SQLState method (pgx's
// *pgconn.PgError, lib/pq's *pq.Error) or its SQLErrorNumber method (go-mssqldb's
// mssql.Error), never by its text.
func refusedConnection(err error) bool {
	var coded interface{ SQLState() string }
	if errors.As(err, &coded) && refusedSQLStates[coded.SQLState()] {
		return true
	}
	var numbered interface{ SQLErrorNumber() int32 }
	return errors.As(err, &numbered) && numbered.SQLErrorNumber() == sqlServerLoginFailed
}

// runHandlers takes queued rows one at a time and runs a handler for each, until the queue
// closes or ctx ends. It starts nothing after ctx ends: Run drops the rows that still wait.
func (w *InboxWorker) runHandlers(ctx context.Context, t *tracker, handler Handler) {
	for {
		var c *claimed
		select {
		case <-ctx.Done():
			return
		case next, ok := <-t.queue:
			if !ok {
				return
			}
			c = next
		}
		if ctx.Err() != nil {
			// The stop came while the row was taken: it does not start.
			t.held.Add(-1)
			w.drop([]*claimed{c})
			return
		}
		if !c.live() {
			// The lease was lost, or its local deadline passed, while the row waited for a
			// runner: it is not handed to the handler.
			c.stopRenewal()
			c.release()
			t.held.Add(-1)
			t.signal()
			w.log.warn("lost the lease of a row before its handler started", c.fields(nil))
			continue
		}
		t.signal()
		w.handle(c, handler)
		t.held.Add(-1)
		t.signal()
	}
}

// sleep waits for d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// backoff returns the wait after the n-th claim in a row that failed: the poll interval,
// doubled for each further failure, at most 30 seconds, and never below 100 ms.
func backoff(poll time.Duration, n int) time.Duration {
	d := max(poll, 100*time.Millisecond)
	for i := 1; i < n && d < maxBackoff; i++ {
		d *= 2
	}
	return min(d, maxBackoff)
}

// drop gives up rows that were claimed but not started: their renewal stops and their leases
// expire, so another worker takes them without an attempt spent.
func (w *InboxWorker) drop(batch []*claimed) {
	for _, c := range batch {
		c.stopRenewal()
		c.release()
	}
	if len(batch) > 0 {
		w.log.info("stopping: leaving claimed rows that did not start to their leases", map[string]any{
			"source": w.opts.Source, "rows": len(batch),
		})
	}
}
