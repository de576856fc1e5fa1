// Package lambdawaker is the waker of a delivery cycle that runs as an AWS Lambda function: an
// asynchronous invoke (InvocationType Event) of the poll or relay function, debounced. Only
// the capture node, which wakes the functions from outside, links it and the AWS SDK; the
// functions themselves and queuebox serve do not.
package lambdawaker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/lambda/types"

	"github.com/alternayte/queuebox/shared/redact"
	"github.com/alternayte/queuebox/shared/waker"
)

// DefaultInterval is the debounce interval of a Waker when Config.Interval is 0.
const DefaultInterval = time.Second

// DefaultInvokeTimeout bounds one Invoke call when Config.Timeout is 0.
const DefaultInvokeTimeout = 10 * time.Second

// DefaultPayload is the event of a wake when Config.Payload is empty. The poll and relay
// handlers ignore their event; this one names its sender in the function's log.
const DefaultPayload = `{"source":"queuebox.waker"}`

// Invoker is the call of the Lambda API that a Waker makes; *lambda.Client
// implements it. It must be safe for concurrent use.
type Invoker interface {
	Invoke(ctx context.Context, params *lambda.InvokeInput, optFns ...func(*lambda.Options)) (*lambda.InvokeOutput, error)
}

var _ Invoker = (*lambda.Client)(nil)

// Config is the configuration of a Waker.
type Config struct {
	// FunctionName is the function to invoke: its name, its ARN, or a partial ARN. Required.
	FunctionName string
	// Qualifier is the version or alias to invoke. Empty invokes $LATEST.
	Qualifier string
	// Interval is the debounce interval: at most one invoke starts per interval. Default 1 s
	// (DefaultInterval).
	Interval time.Duration
	// Timeout bounds one Invoke call, retries included. Default 10 s (DefaultInvokeTimeout).
	Timeout time.Duration
	// Payload is the event that the function receives, a JSON document. Default
	// {"source":"queuebox.waker"} (DefaultPayload).
	Payload []byte
	// Client makes the calls. Nil builds a *lambda.Client from the default AWS configuration
	// chain (environment, shared files, container or instance role) with Region and
	// Endpoint.
	Client Invoker
	// Region is the AWS region of the function when Client is nil. Empty takes the region of
	// the default chain (AWS_REGION).
	Region string
	// Endpoint replaces the Lambda endpoint when Client is nil, for example
	// http://127.0.0.1:9001 in a test or a VPC interface endpoint's URL. Empty uses the
	// region's endpoint.
	Endpoint string
	// Logger receives a warning for every failed invoke. Nil means slog.Default().
	Logger *slog.Logger
}

// WithDefaults returns the configuration with the zero values replaced by their defaults.
func (c Config) WithDefaults() Config {
	if c.Interval == 0 {
		c.Interval = DefaultInterval
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultInvokeTimeout
	}
	if len(c.Payload) == 0 {
		c.Payload = []byte(DefaultPayload)
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

func (c Config) validate() error {
	var problems []error
	if c.FunctionName == "" {
		problems = append(problems, errors.New("FunctionName is empty"))
	}
	if c.Interval < 0 {
		problems = append(problems, fmt.Errorf("Interval is %s; it must not be negative", c.Interval))
	}
	if c.Timeout < 0 {
		problems = append(problems, fmt.Errorf("Timeout is %s; it must not be negative", c.Timeout))
	}
	if !json.Valid(c.Payload) {
		problems = append(problems, errors.New("Payload is not a JSON document"))
	}
	return errors.Join(problems...)
}

// Stats counts what a Waker did since it was created.
type Stats struct {
	// Wakes counts the calls of Wake.
	Wakes uint64
	// Invokes counts the Invoke calls that Lambda accepted.
	Invokes uint64
	// Failures counts the Invoke calls that failed (after the client's retries).
	Failures uint64
	// Reconciles counts the calls of Reconcile, and SkippedReconciles the reconciliations
	// that made no invoke because one had started within Interval.
	Reconciles, SkippedReconciles uint64
}

// Waker is a Waker that invokes a Lambda function asynchronously
// (InvocationType Event): Lambda queues the event and answers at once, and runs the function
// with it. It debounces on the leading edge with one trailing invoke:
//
//   - a wake after a quiet interval invokes at once;
//   - the wakes that arrive within Interval of the start of an invoke, however many, cause
//     exactly one more invoke, when the interval ends;
//
// so a burst of wakes costs at most two invokes, then at most one per interval while it
// lasts, and the last wake of a burst is always followed by an invoke that starts after it:
// no wake is left without an invoke that sees its row. A failed invoke is logged and
// dropped; the function's schedule still finds the rows.
//
// The wakes of a reconciliation timer (Reconcile) are weaker: one invokes only when no
// invoke started within Interval before it, and its invoke opens no interval, so that a Wake
// after it invokes at once. Without that, a timer that wakes once per Interval (the capture
// node's reconciliation at its 1 s default and the default 1 s Interval) would keep every
// interval busy and hold each new row's invoke back until its interval ended: up to a whole
// Interval of latency. A reconciliation costs at most one invoke per Interval.
//
// One goroutine makes the calls, one at a time; Close stops it. Wake never blocks.
type Waker struct {
	cfg     Config
	client  Invoker
	pending chan struct{} // capacity 1: a wake that the loop has not served yet
	timer   chan struct{} // capacity 1: a reconciliation that the loop has not served yet
	stop    chan struct{}
	ctx     context.Context // cancelled by Close, ends an Invoke in flight
	cancel  context.CancelFunc
	once    sync.Once
	wg      sync.WaitGroup

	wakes, invokes, failures, reconciles, skipped atomic.Uint64
}

// New validates cfg, builds the Lambda client when cfg.Client is nil, and
// starts the invoker's goroutine. ctx is used only to load the AWS configuration. Call Close
// to stop the invoker.
func New(ctx context.Context, cfg Config) (*Waker, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("checking the Lambda waker configuration: %w", err)
	}
	client := cfg.Client
	if client == nil {
		var err error
		client, err = newClient(ctx, cfg)
		if err != nil {
			return nil, err
		}
	}
	runCtx, cancel := context.WithCancel(context.Background())
	l := &Waker{
		cfg: cfg, client: client,
		pending: make(chan struct{}, 1), timer: make(chan struct{}, 1), stop: make(chan struct{}),
		ctx: runCtx, cancel: cancel,
	}
	l.wg.Add(1)
	go l.run()
	return l, nil
}

// newClient builds a Lambda client from the default configuration chain.
func newClient(ctx context.Context, cfg Config) (*lambda.Client, error) {
	var opts []func(*awsconfig.LoadOptions) error
	if cfg.Region != "" {
		opts = append(opts, awsconfig.WithRegion(cfg.Region))
	}
	awsCfg, err := awsconfig.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("loading the AWS configuration: %w", err)
	}
	if awsCfg.Region == "" {
		return nil, errors.New("loading the AWS configuration: no region; set AWS_REGION or Config.Region")
	}
	return lambda.NewFromConfig(awsCfg, func(o *lambda.Options) {
		if cfg.Endpoint != "" {
			o.BaseEndpoint = aws.String(cfg.Endpoint)
		}
	}), nil
}

// Wake implements waker.Waker: it asks for an invoke and returns at once. After Close it does
// nothing.
func (l *Waker) Wake() {
	l.wakes.Add(1)
	select {
	case l.pending <- struct{}{}:
	default: // a wake is already pending; this one joins it
	}
}

// Reconcile implements waker.Reconciler: it asks for the invoke of a reconciliation, which the
// invoker skips when an invoke started within Interval, and returns at once.
func (l *Waker) Reconcile() {
	l.reconciles.Add(1)
	select {
	case l.timer <- struct{}{}:
	default: // a reconciliation is already pending; this one joins it
	}
}

// Stats returns the counts so far.
func (l *Waker) Stats() Stats {
	return Stats{Wakes: l.wakes.Load(), Invokes: l.invokes.Load(), Failures: l.failures.Load(),
		Reconciles: l.reconciles.Load(), SkippedReconciles: l.skipped.Load()}
}

// Close stops the invoker: it cancels an Invoke in flight, drops a pending wake, and waits
// for the goroutine to end. It is safe to call more than once and from several goroutines.
func (l *Waker) Close() {
	l.once.Do(func() {
		close(l.stop)
		l.cancel()
	})
	l.wg.Wait()
}

// run serves the wakes: it invokes on a pending wake, then lets the rest of the interval
// pass, during which new wakes coalesce into one pending wake and reconciliations are
// skipped; it invokes on a pending reconciliation when no invoke started within the
// interval, and then waits for nothing.
func (l *Waker) run() {
	defer l.wg.Done()
	var last time.Time // when the last invoke started
	for {
		select {
		case <-l.stop:
			return
		case <-l.timer:
			if !last.IsZero() && time.Since(last) < l.cfg.Interval {
				l.skipped.Add(1)
				continue
			}
			last = time.Now()
			l.invoke()
			continue
		case <-l.pending:
		}
		last = time.Now()
		l.invoke()
		quiet := time.NewTimer(l.cfg.Interval - time.Since(last))
	wait:
		for {
			select {
			case <-l.stop:
				quiet.Stop()
				return
			case <-l.timer:
				l.skipped.Add(1) // the invoke just made is the pass
			case <-quiet.C:
				break wait
			}
		}
	}
}

// invoke makes one asynchronous invoke and counts its result.
func (l *Waker) invoke() {
	ctx, cancel := context.WithTimeout(l.ctx, l.cfg.Timeout)
	defer cancel()
	in := &lambda.InvokeInput{
		FunctionName:   aws.String(l.cfg.FunctionName),
		InvocationType: types.InvocationTypeEvent,
		Payload:        l.cfg.Payload,
	}
	if l.cfg.Qualifier != "" {
		in.Qualifier = aws.String(l.cfg.Qualifier)
	}
	_, err := l.client.Invoke(ctx, in)
	if err == nil {
		l.invokes.Add(1)
		return
	}
	if l.ctx.Err() != nil {
		return // closing: not a failure
	}
	// Logged before it is counted: whoever sees the count can find the line.
	l.cfg.Logger.Warn("waking the Lambda function failed; its schedule still delivers the rows",
		"function", l.cfg.FunctionName, "error", redact.Error(err))
	l.failures.Add(1)
}

var _ waker.Reconciler = (*Waker)(nil)
