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
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/alternayte/queuebox/shared/every"
	"github.com/alternayte/queuebox/shared/health"
	"github.com/alternayte/queuebox/shared/kind"
	"github.com/alternayte/queuebox/shared/lease"
	"github.com/alternayte/queuebox/shared/store"
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

// Source is one configured inbox source as the relay sees it.
type Source struct {
	// Kind is the source's kind (shared/kind): http, rabbitmq, kafka or nats. It picks
	// the default template when Topic is blank.
	Kind kind.Kind
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
