// Package relay forwards stored push inbox rows into the outbox (spec/04, "The relay").
//
// A cycle claims up to BatchSize pending push rows through the store, which takes the relay
// lock and returns at most one row per aggregate in created_at order. For each row the relay
// renders the topic template of the row's source and builds the outbox row (key =
// aggregate_id, the stored payload, the inbox headers plus the four relay headers); it then
// forwards the batch, which inserts the outbox rows and marks the inbox rows processed through
// the claim fence in one transaction (InboxRelayForwardBatch; row by row through
// InboxRelayForward where the store has no batch forward, or after a batch failed). A fence
// that fails writes no outbox row for that row, so a relay that lost its claim forwards
// nothing. The relay reads nothing of the payload and runs no transform. While Run forwards a
// batch it already claims the next one (see run.loop).
//
// While a batch is being forwarded, the leases of its claimed and not yet finished rows are
// renewed every third of the lease. A row is never forwarded past its claim's local lease
// deadline (shared/lease: the time the claim or the last successful renewal was sent, plus the
// lease, minus a margin), and a forward under way is abandoned there; a renewal that fails
// loses the claim at once, as one that updates zero rows does; see leasedeadline.go.
// Expired relay leases return to pending at most once per ClaimTimeout/5, and the
// oldest-pending gauge is refreshed at most once per PendingGaugeInterval.
//
// The local process runs a Relay in a loop (woken at once by a stored push message); the relay
// Lambda function runs it until the invocation deadline. Both call Run with different options.
package relay

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/alternayte/queuebox/shared/every"
	"github.com/alternayte/queuebox/shared/health"
	"github.com/alternayte/queuebox/shared/lease"
	"github.com/alternayte/queuebox/shared/redact"
	"github.com/alternayte/queuebox/shared/store"
	"github.com/alternayte/queuebox/shared/tracing"
	"github.com/alternayte/queuebox/shared/waker"
)

// Config holds the relay settings of the configuration (inbox.relay.*).
type Config struct {
	// PollInterval is the wait after a claim that found nothing. Default 100 ms.
	PollInterval time.Duration
	// BatchSize is the largest number of rows that one claim takes. Default 100.
	BatchSize int
	// ClaimTimeout is the lease of a relay claim. Default 300 s.
	ClaimTimeout time.Duration
	// PendingGaugeInterval is the shortest interval between two queries for the oldest
	// pending inbox row. Default 5 s.
	PendingGaugeInterval time.Duration
	// MaxAttempts is written into max_attempts of every outbox row the relay creates
	// (inbox.relay.maxAttempts, else outbox.maxAttempts). Default 5.
	MaxAttempts int
	// ShutdownTimeout is the longest time a run keeps forwarding the rows it already claimed
	// after its context is done. Default 30 s.
	ShutdownTimeout time.Duration
}

// WithDefaults returns the config with every zero or negative value replaced by its default.
func (c Config) WithDefaults() Config {
	if c.PollInterval <= 0 {
		c.PollInterval = 100 * time.Millisecond
	}
	if c.BatchSize <= 0 {
		c.BatchSize = 100
	}
	if c.ClaimTimeout <= 0 {
		c.ClaimTimeout = 300 * time.Second
	}
	if c.PendingGaugeInterval <= 0 {
		c.PendingGaugeInterval = 5 * time.Second
	}
	if c.MaxAttempts <= 0 {
		c.MaxAttempts = 5
	}
	if c.ShutdownTimeout <= 0 {
		c.ShutdownTimeout = 30 * time.Second
	}
	return c
}

// The source kinds, as config.SourceKind spells them.
const (
	KindHTTP     = "http"
	KindRabbitMQ = "rabbitmq"
	KindKafka    = "kafka"
	KindNATS     = "nats"
)

// Source is one configured inbox source as the relay sees it.
type Source struct {
	// Kind is http, rabbitmq, kafka or nats. It picks the default template when Topic is blank.
	Kind string
	// Topic is the sources.<name>.topic template. Blank means the default of Kind.
	Topic string
	// ForwardHeaders is sources.<name>.forwardHeaders: when not nil, only the received headers
	// of these names, in any letter case, are copied onto the outbox row (the four relay
	// headers are always set). Nil copies every received header. A hop-by-hop or framing
	// header is never copied (docs/headers.md).
	ForwardHeaders []string
}

// Options build a Relay.
type Options struct {
	Store  store.InboxStore
	Config Config
	// Sources maps every configured source name to its source, push and pull alike: a row
	// stored as push while its source was push is forwarded even if the source is pull now.
	// A row whose source is not in the map is marked dead, see Relay.
	Sources map[string]Source
	// Metrics receives the measurements; nil means NopMetrics.
	Metrics Metrics
	// Logger receives the log lines; nil means slog.Default().
	Logger *slog.Logger
	// OutboxWaker is woken after every cycle that forwarded at least one row into the outbox,
	// once the rows are committed, so that a poller in the same process claims them at once
	// instead of after its poll interval (for example outbox.Poller.Wake through waker.Func).
	// Nil wakes nothing: the poller finds the rows at its next poll.
	OutboxWaker waker.Waker
	// Tracer creates the span of each forward (docs/tracing.md); nil, the default, means
	// tracing is off: no span is created and the trace headers of a row pass as any other
	// received header.
	Tracer trace.Tracer
}

// Relay claims push inbox rows and forwards them into the outbox. One Relay serves one
// process; Run may be called again after it returns (a warm Lambda container), but not
// concurrently. Any number of Relays, in any number of processes, may run on one database:
// the relay lock, the claim rule and the fence keep the order of every aggregate.
//
// A row whose topic renders empty, and a row whose source is no longer configured, is marked
// dead with a last_error that says why: such a row can reach no destination, and a dead row
// with a reason is visible and requeueable, while a row left pending would stall its
// aggregate with no sign. Add a new source to the configuration of every replica before it
// receives messages: a replica that does not know the source yet dead-letters its rows.
type Relay struct {
	store   store.InboxStore
	cfg     Config
	topics  map[string]TopicTemplate
	allow   map[string]map[string]bool // the forwardHeaders of each source that sets it, lower case
	metrics Metrics
	log     *slog.Logger
	tracer  trace.Tracer // nil when tracing is off
	wake    chan struct{}
	beat    health.Heartbeat
	// outboxWaker is Options.OutboxWaker, waker.Nop when it is nil.
	outboxWaker waker.Waker
	// leaseMetrics counts the forwards stopped at their lease's local deadline; nil when
	// Metrics does not implement lease.Metrics.
	leaseMetrics lease.Metrics

	reclaimGate every.Gate // the reclaim, at most once per ClaimTimeout / 5
	gaugeGate   every.Gate // the pending gauge, at most once per PendingGaugeInterval
}

// New returns a Relay.
func New(opts Options) (*Relay, error) {
	if opts.Store == nil {
		return nil, errors.New("relay: a store is required")
	}
	if opts.Metrics == nil {
		opts.Metrics = NopMetrics{}
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.OutboxWaker == nil {
		opts.OutboxWaker = waker.Nop{}
	}
	topics := make(map[string]TopicTemplate, len(opts.Sources))
	allow := map[string]map[string]bool{}
	for name, s := range opts.Sources {
		if s.ForwardHeaders != nil {
			set := make(map[string]bool, len(s.ForwardHeaders))
			for _, h := range s.ForwardHeaders {
				set[strings.ToLower(strings.TrimSpace(h))] = true
			}
			allow[name] = set
		}
		if strings.TrimSpace(name) == "" {
			return nil, errors.New("relay: a source name is blank")
		}
		text := s.Topic
		if strings.TrimSpace(text) == "" {
			def, ok := DefaultTopic(s.Kind)
			if !ok {
				return nil, fmt.Errorf("relay: source %s sets no topic and its kind %q has no default topic", name, s.Kind)
			}
			text = def
		}
		topics[name] = CompileTopic(text)
	}
	return &Relay{
		store:   opts.Store,
		cfg:     opts.Config.WithDefaults(),
		topics:  topics,
		allow:   allow,
		metrics: opts.Metrics,
		log:     opts.Logger.With("component", "relay"),
		tracer:  opts.Tracer,
		wake:    make(chan struct{}, 1),

		outboxWaker: opts.OutboxWaker,

		leaseMetrics: leaseMetricsOf(opts.Metrics),
	}, nil
}

// Wake makes a waiting run claim at once. It never blocks; a wake that finds the run busy is
// kept for its next wait. A lost wake costs latency, never a message.
func (r *Relay) Wake() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// RunOptions choose how a run ends.
type RunOptions struct {
	// StopWhenIdle ends the run as soon as a claim finds nothing (the drain mode of the Lambda
	// driver).
	StopWhenIdle bool
	// ClaimUntil, when not zero, is the time after which the run claims nothing more. The run
	// finishes the batch it holds and returns.
	ClaimUntil time.Time
}

// Summary counts what a run did.
type Summary struct {
	// Claimed counts the rows claimed.
	Claimed int `json:"claimed"`
	// Forwarded counts the rows written into the outbox and marked processed.
	Forwarded int `json:"forwarded"`
	// Dead counts the rows marked dead (empty topic, or a source that is not configured).
	Dead int `json:"dead"`
	// ClaimsLost counts the rows whose claim was lost before they finished: another replica
	// took it over, or a renewal of its lease failed (the row is then not forwarded and gets no
	// write).
	ClaimsLost int `json:"claimsLost"`
	// Reclaimed counts the expired relay claims that the run returned to pending.
	Reclaimed int `json:"reclaimed"`
	// Failed counts the rows whose forward or dead-letter write failed; they stay processing
	// and return to pending when their leases expire.
	Failed int `json:"failed"`
	// Abandoned counts the claimed rows left unfinished because the run stopped; they return to
	// pending when their leases expire.
	Abandoned int `json:"abandoned"`
	// LeaseExpired counts the claimed rows not forwarded because their claim reached its local
	// lease deadline (no renewal answered in time, or the forward outlived it); they return to
	// pending when their leases expire.
	LeaseExpired int `json:"leaseExpired,omitempty"`
}

// Run claims and forwards rows until ctx is done or the options end the run. While it forwards
// a batch it claims the next one (see run.loop); a claim that found nothing waits for
// PollInterval or a Wake. When ctx is done, the run stops claiming and keeps forwarding the
// rows it holds (the batch being forwarded and a claim under way) for up to ShutdownTimeout
// (never past ctx's deadline); a row left after that stays processing until its lease expires.
// Database errors are logged and counted, and the claim is retried after a pause; a run never
// ends because of them.
func (r *Relay) Run(ctx context.Context, opts RunOptions) Summary {
	r.beat.Start()
	defer r.beat.Stop()
	rn := r.newRun(ctx)
	defer rn.close()
	rn.loop(ctx, opts)
	return rn.sum
}

// Check is the inbox-relay health check: it fails when no run is active, when the loop has not
// turned for a minute (or three poll intervals, when longer), when its last cycle failed, or
// when every row of the last cycle that claimed rows failed to be written (the rows stay
// processing): a relay that forwards nothing is down. It is up again once a row is forwarded
// or marked dead. The reason is redacted, as a log line is.
func (r *Relay) Check(context.Context) error {
	return r.beat.Check(max(time.Minute, 3*r.cfg.PollInterval))
}

// RunOnce claims one batch and forwards it. Tests and tools use it.
func (r *Relay) RunOnce(ctx context.Context) Summary {
	rn := r.newRun(ctx)
	defer rn.close()
	if _, err := rn.cycle(); err != nil {
		r.cycleFailed(err)
	}
	return rn.sum
}

// run is the state of one Run call. sum and failing belong to the goroutine that calls Run;
// held is shared with the renewer.
type run struct {
	r *Relay
	// work bounds every database call of the run: not cancelled with the caller's context, but
	// ShutdownTimeout after it, and never past its deadline.
	work       context.Context
	cancelWork context.CancelFunc
	stop       chan struct{}
	helpers    sync.WaitGroup

	sum Summary
	// failing is true after a row whose writes failed even when retried; the next row is not
	// retried until one succeeds, so an outage costs one row's retries, not a batch's.
	failing bool
	// stuck says why the health check is down after a cycle that claimed rows and forwarded
	// or dead-lettered none of them because their writes failed; empty otherwise. It stays set
	// through the cycles that claim nothing (the failed rows wait for their leases) and clears
	// when a row is forwarded or marked dead. lastWriteErr is the redacted text of the last
	// failed write.
	stuck        string
	lastWriteErr string

	mu   sync.Mutex
	held map[string]*heldRow
}

// heldRow is a claimed row that is not finished yet.
type heldRow struct {
	claim store.Claim
	// ctx is the row's work context: cancelled at the claim's local lease deadline (lease)
	// and when the row is finished or the run's work ends.
	ctx   context.Context
	lease *lease.Local
	// lost is set when a renewal found the fence gone (a failed one calls lease.Lose).
	lost bool
	// span is the row's forward span while tracing is on, created by the first prepare;
	// result is its outcome so far (empty until the row is forwarded or marked dead).
	span   trace.Span
	result string
}

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

func (r *Relay) newRun(ctx context.Context) *run {
	base := context.WithoutCancel(ctx)
	cancelDeadline := context.CancelFunc(func() {})
	if deadline, ok := ctx.Deadline(); ok {
		base, cancelDeadline = context.WithDeadline(base, deadline)
	}
	work, cancel := context.WithCancel(base)
	rn := &run{
		r:          r,
		work:       work,
		cancelWork: func() { cancel(); cancelDeadline() },
		stop:       make(chan struct{}),
		held:       map[string]*heldRow{},
	}
	rn.helpers.Add(2)
	go rn.shutdownWatch(ctx)
	go rn.renewer()
	return rn
}

// shutdownWatch cancels the work context ShutdownTimeout after ctx is done.
func (rn *run) shutdownWatch(ctx context.Context) {
	defer rn.helpers.Done()
	select {
	case <-rn.stop:
		return
	case <-ctx.Done():
	}
	t := time.NewTimer(rn.r.cfg.ShutdownTimeout)
	defer t.Stop()
	select {
	case <-rn.stop:
	case <-t.C:
		rn.cancelWork()
	}
}

func (rn *run) close() {
	close(rn.stop)
	rn.cancelWork()
	rn.helpers.Wait()
}

// loop claims until ctx is done or the options end the run.
//
// While it forwards a batch, the loop already claims the next one on another connection, so
// that the claim's round trip and commit overlap the forward's. The claim skips every
// aggregate with a processing row, so the next batch holds no later row of an aggregate of
// the batch being forwarded, and batches are forwarded one after the other. A claim that
// comes back empty ran before the forwarded rows were committed, which may have held back
// the next rows of their aggregates: the loop claims again before it calls the relay idle.
// The rows of a claim that is under way when the run stops are forwarded like the rows of the
// batch it holds (within ShutdownTimeout), never left unclaimed. With a ClaimUntil the loop
// claims ahead only while more time is left before it than the last forward took
// (claimAhead).
func (rn *run) loop(ctx context.Context, opts RunOptions) {
	r := rn.r
	pause := time.NewTimer(time.Hour)
	pause.Stop()
	var next <-chan claimResult // the claim started while the last batch was forwarded
	defer func() {
		if next == nil {
			return
		}
		switch res := <-next; {
		case res.err == nil:
			rn.forward(rn.claimed(res))
		case rn.work.Err() == nil:
			r.cycleFailed(res.err)
		}
	}()
	claimUntilPassed := func() bool {
		return !opts.ClaimUntil.IsZero() && !time.Now().Before(opts.ClaimUntil)
	}
	var lastForward time.Duration // how long the last forward of rows took
	for ctx.Err() == nil {
		if claimUntilPassed() {
			return
		}
		var res claimResult
		if next != nil {
			res, next = <-next, nil
			if res.err == nil && len(res.rows) == 0 {
				res = rn.claim()
			}
		} else {
			res = rn.claim()
		}
		if res.err != nil {
			if rn.work.Err() != nil {
				return
			}
			r.cycleFailed(res.err)
			r.beat.Beat("the last relay cycle failed: " + redact.Error(res.err))
			rn.sleep(ctx, pause, max(r.cfg.PollInterval, time.Second))
			continue
		}
		rows := rn.claimed(res)
		if len(rows) > 0 && ctx.Err() == nil && claimAhead(opts.ClaimUntil, lastForward) {
			// An error of the maintenance steps leaves the next claim to the top of the loop,
			// which reports it.
			next, _ = rn.startClaim()
		}
		began := time.Now()
		rn.forward(rows)
		if len(rows) > 0 {
			lastForward = time.Since(began)
		}
		r.beat.Beat(rn.stuck)
		if len(rows) > 0 {
			continue
		}
		if opts.StopWhenIdle {
			return
		}
		rn.sleep(ctx, pause, r.cfg.PollInterval)
	}
}

func (r *Relay) cycleFailed(err error) {
	r.metrics.InboxRelayError()
	r.log.Error("inbox relay cycle failed; retrying after a pause", "error", redact.Error(err))
}

// sleep waits for d, a wake or ctx.
func (rn *run) sleep(ctx context.Context, t *time.Timer, d time.Duration) {
	t.Reset(d)
	select {
	case <-ctx.Done():
	case <-t.C:
		return
	case <-rn.r.wake:
	}
	t.Stop()
}

// claimAhead says whether the loop claims the next batch while it forwards one: always
// without a ClaimUntil; with one, only while the time left before it exceeds the last
// forward's, so that the next batch is forwarded from about ClaimUntil on at the latest, and a
// run ends within one forward after ClaimUntil, as a run that claims in turn does.
func claimAhead(claimUntil time.Time, lastForward time.Duration) bool {
	return claimUntil.IsZero() || time.Until(claimUntil) > lastForward
}

// claimResult is what one claim returned.
type claimResult struct {
	rows []store.InboxMessage
	err  error
	// sent is when the claim statement was sent: the rows' local lease deadlines count from it.
	sent time.Time
}

// startClaim runs the maintenance steps that are due and starts a claim on its own
// goroutine, whose result the returned channel delivers once. The claim sees every row
// committed before it, so a pending wake is spent.
func (rn *run) startClaim() (<-chan claimResult, error) {
	r := rn.r
	select {
	case <-r.wake:
	default:
	}
	if err := rn.maybeReclaim(); err != nil {
		return nil, err
	}
	r.maybeRefreshGauges(rn.work)
	out := make(chan claimResult, 1)
	go func() {
		sent := time.Now()
		rows, err := r.store.InboxRelayClaim(rn.work, store.InboxRelayClaimParams{Limit: r.cfg.BatchSize, Lease: r.cfg.ClaimTimeout})
		out <- claimResult{rows: rows, err: err, sent: sent}
	}()
	return out, nil
}

// claim runs the maintenance steps that are due and claims a batch.
func (rn *run) claim() claimResult {
	next, err := rn.startClaim()
	if err != nil {
		return claimResult{err: err}
	}
	return <-next
}

// claimed counts the claimed rows of a claim and holds them, so that the renewer renews their
// leases until they are finished, and starts their local lease deadlines.
func (rn *run) claimed(res claimResult) []store.InboxMessage {
	rows := res.rows
	rn.sum.Claimed += len(rows)
	if rn.r.log.Enabled(rn.work, slog.LevelDebug) {
		for _, row := range rows {
			rn.rowLog(row).Debug("inbox row claimed by the relay")
		}
	}
	rn.mu.Lock()
	for _, row := range rows {
		ctx, l := lease.Start(rn.work, res.sent, rn.r.cfg.ClaimTimeout)
		rn.held[row.ID] = &heldRow{claim: row.Claim(), ctx: ctx, lease: l}
	}
	rn.mu.Unlock()
	return rows
}

// cycle claims a batch and forwards it. It returns the number of rows claimed.
func (rn *run) cycle() (int, error) {
	res := rn.claim()
	if res.err != nil {
		return 0, res.err
	}
	rows := rn.claimed(res)
	rn.forward(rows)
	return len(rows), nil
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

// release forgets a row that is finished, so that the renewer stops renewing it.
func (rn *run) release(row store.InboxMessage) {
	rn.mu.Lock()
	h := rn.held[row.ID]
	delete(rn.held, row.ID)
	rn.mu.Unlock()
	if h != nil {
		h.lease.Stop()
	}
	endSpan(h, "not_forwarded")
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
	rn.failing = false
	for i, row := range ready {
		if forwarded[i] {
			rn.forwarded(row, params[i].Outbox.Topic)
		} else {
			rn.claimLost(rn.rowLog(row), "forward the message")
		}
		rn.release(row)
	}
}

// judge sets stuck after a cycle of claimed rows, from the summary before the rows were
// handled: down when rows failed and none was forwarded or marked dead, up again when one was.
// A cycle whose rows all lost their claims changes nothing.
func (rn *run) judge(before Summary, claimed int) {
	switch {
	case rn.sum.Forwarded > before.Forwarded || rn.sum.Dead > before.Dead:
		rn.stuck = ""
	case rn.sum.Failed > before.Failed:
		rn.stuck = fmt.Sprintf("the last relay cycle claimed %d rows and forwarded none: %d failed, the last with: %s",
			claimed, rn.sum.Failed-before.Failed, rn.lastWriteErr)
	}
}

// abandon leaves the rows of a stopped run to lease expiry.
func (rn *run) abandon(rows []store.InboxMessage) {
	rn.mu.Lock()
	for _, row := range rows {
		if h := rn.held[row.ID]; h != nil {
			h.lease.Stop()
		}
		endSpan(rn.held[row.ID], "abandoned")
		delete(rn.held, row.ID)
	}
	rn.mu.Unlock()
	rn.sum.Abandoned += len(rows)
	rn.r.log.Warn("inbox relay stopped with claimed rows; they return to pending when their leases expire",
		"rows", len(rows))
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

// deadLetter marks a row dead with reason as its last_error.
func (rn *run) deadLetter(log *slog.Logger, row store.InboxMessage, reason string) {
	r := rn.r
	reason = redact.String(reason)
	h := rn.heldRow(row)
	dead, err := rn.write(h.ctx, func(ctx context.Context) (bool, error) {
		return r.store.InboxRelayDead(ctx, row.Claim(), reason)
	})
	switch {
	case err != nil && h.lease.Ended():
		rn.leaseEnded(row, h, true)
	case err != nil:
		rn.writeFailed(log, "marking dead", err)
	case !dead:
		rn.claimLost(log, "mark the message dead")
	default:
		rn.sum.Dead++
		r.metrics.InboxRelayError()
		rn.spanResult(row, "dead")
		log.Error("inbox message is dead: it can reach no destination; fix the source configuration, then requeue the row",
			"last_error", reason)
	}
}

func (rn *run) claimLost(log *slog.Logger, action string) {
	rn.sum.ClaimsLost++
	rn.r.metrics.InboxClaimLost()
	log.Warn("inbox relay claim was lost, so the relay did not " + action + "; another replica owns the message. " +
		"Raise inbox.relay.claimTimeoutMs above the slowest relay cycle if this repeats")
}

// writeFailed records a row whose write failed. The row stays processing; the reclaim step
// returns it to pending when its lease expires.
func (rn *run) writeFailed(log *slog.Logger, what string, err error) {
	if rn.work.Err() != nil {
		rn.sum.Abandoned++
		log.Warn("inbox relay stopped while "+what+" a row; it returns to pending when its lease expires",
			"error", redact.Error(err))
		return
	}
	rn.sum.Failed++
	rn.lastWriteErr = what + " failed: " + redact.Error(err)
	rn.r.metrics.InboxRelayError()
	log.Error("inbox relay failed "+what+" a row; it returns to pending when its lease expires",
		"error", redact.Error(err))
}

// retryDelays are the pauses before the retries of a failed fenced write. A retry is safe: when
// an earlier attempt committed, the fence of the retry fails and the store writes nothing.
var retryDelays = []time.Duration{100 * time.Millisecond, 500 * time.Millisecond}

// write runs a fenced write under ctx (a row's context, which ends at its lease's local
// deadline), retrying a failure a few times unless the previous row's writes failed too.
func (rn *run) write(ctx context.Context, fn func(context.Context) (bool, error)) (bool, error) {
	ok, err := fn(ctx)
	if err == nil {
		rn.failing = false
		return ok, nil
	}
	if rn.failing || ctx.Err() != nil {
		return false, err
	}
	for _, d := range retryDelays {
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return false, err
		case <-t.C:
		}
		if ok, err = fn(ctx); err == nil {
			rn.failing = false
			return ok, nil
		}
	}
	rn.failing = true
	return false, err
}

// renewer extends the leases of the claimed rows that are not finished, every third of the
// lease, and marks a row whose fence is gone so that it is not forwarded; a renewal that
// fails loses the claim too (renewalFailed).
func (rn *run) renewer() {
	defer rn.helpers.Done()
	r := rn.r
	tick := time.NewTicker(max(r.cfg.ClaimTimeout/3, 10*time.Millisecond))
	defer tick.Stop()
	for {
		select {
		case <-rn.stop:
			return
		case <-tick.C:
		}
		rn.mu.Lock()
		rows := make([]*heldRow, 0, len(rn.held))
		for _, h := range rn.held {
			// A row past its lease's local deadline is not renewed: it is not forwarded,
			// whatever a renewal would say.
			if !h.lost && !h.lease.Ended() {
				rows = append(rows, h)
			}
		}
		rn.mu.Unlock()
		for _, h := range rows {
			ctx, cancel := context.WithTimeout(rn.work, max(r.cfg.ClaimTimeout/3, time.Second))
			// The renewed lease starts when the statement runs, after it was sent: the local
			// deadline counts from the send.
			sent := time.Now()
			ok, err := r.store.InboxRelayRenew(ctx, h.claim, r.cfg.ClaimTimeout)
			cancel()
			if err == nil && ok {
				h.lease.Extend(sent)
			}
			if err != nil {
				if rn.work.Err() == nil {
					rn.renewalFailed(h, err) // leasedeadline.go
				}
				continue
			}
			if !ok {
				// The row may have been finished a moment ago; the forward loop only reads the
				// mark of a row it has not finished yet.
				rn.mu.Lock()
				h.lost = true
				rn.mu.Unlock()
			}
		}
	}
}

// maybeReclaim returns expired relay claims to pending at most once per ClaimTimeout / 5.
func (rn *run) maybeReclaim() error {
	r := rn.r
	if !r.reclaimGate.Take(r.cfg.ClaimTimeout / 5) {
		return nil
	}
	n, err := r.store.InboxRelayReclaim(rn.work)
	if err != nil {
		r.reclaimGate.Forget()
		return err
	}
	if n > 0 {
		rn.sum.Reclaimed += int(n)
		r.log.Info("inbox relay claims reclaimed after their leases expired", "rows", n)
	}
	return nil
}

// maybeRefreshGauges queries the oldest pending inbox row at most once per
// PendingGaugeInterval.
func (r *Relay) maybeRefreshGauges(ctx context.Context) {
	if !r.gaugeGate.Take(r.cfg.PendingGaugeInterval) {
		return
	}
	stats, err := r.store.InboxStats(ctx)
	if err != nil {
		r.log.Warn("reading the inbox pending gauge failed", "error", redact.Error(err))
		return
	}
	r.metrics.InboxOldestPendingAge(stats.OldestPendingAge)
}
