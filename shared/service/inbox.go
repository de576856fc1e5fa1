package service

import (
	"log/slog"
	"slices"

	"go.opentelemetry.io/otel/trace"

	"github.com/alternayte/queuebox/shared/admin"
	"github.com/alternayte/queuebox/shared/config"
	"github.com/alternayte/queuebox/shared/inboundauth"
	"github.com/alternayte/queuebox/shared/inbox"
	"github.com/alternayte/queuebox/shared/relay"
	"github.com/alternayte/queuebox/shared/store"
	"github.com/alternayte/queuebox/shared/transform"
	"github.com/alternayte/queuebox/shared/waker"
)

// InboxMetrics is what the inbox handler and the relay report to.
type InboxMetrics interface {
	inbox.Metrics
	relay.Metrics
}

// newInboxHandler builds the HTTP inbox of the configured HTTP sources, their transforms
// compiled on engine. waker is called after a new push row is stored (nil: nothing to wake);
// draining reports the shutdown.
func newInboxHandler(cfg *config.Config, st store.InboxStore, m inbox.Metrics, waker inbox.Waker, draining func() bool, engine transform.Compiler, log *slog.Logger, tracer trace.Tracer) (*inbox.Handler, error) {
	opts, err := InboxOptions(cfg, engine)
	if err != nil {
		return nil, startError("build the inbox sources", err)
	}
	opts.Store = st
	opts.Metrics = m
	opts.Logger = log
	opts.Waker = waker
	opts.Draining = draining
	opts.Tracer = tracer
	h, err := inbox.New(opts)
	if err != nil {
		return nil, startError("build the inbox sources", err)
	}
	return h, nil
}

// RelayConfig maps inbox.relay.* to the relay's settings.
func RelayConfig(cfg *config.Config) relay.Config {
	r := cfg.Inbox.Relay
	return relay.Config{
		PollInterval:         r.PollIntervalMs.Duration(),
		BatchSize:            r.BatchSize,
		ClaimTimeout:         r.ClaimTimeoutMs.Duration(),
		PendingGaugeInterval: r.PendingGaugeIntervalMs.Duration(),
		MaxAttempts:          r.MaxAttempts,
		ShutdownTimeout:      cfg.Outbox.ShutdownTimeoutMs.Duration(),
	}.WithDefaults()
}

// newRelay builds the relay with the topic template of every configured source (push and
// pull: a source switched to pull still has push rows stored earlier). outboxWaker is woken
// after every relay cycle that forwarded a row into the outbox: the outbox poller of the same
// process (nil: nothing to wake, the poller finds the rows at its next poll).
func newRelay(cfg *config.Config, st store.InboxStore, m relay.Metrics, outboxWaker waker.Waker, log *slog.Logger, tracer trace.Tracer) (*relay.Relay, error) {
	sources := make(map[string]relay.Source, len(cfg.Sources))
	for name, s := range cfg.Sources {
		if s == nil {
			continue
		}
		sources[name] = relay.Source{Kind: s.Kind, Topic: s.Topic, ForwardHeaders: s.ForwardHeaders}
	}
	r, err := relay.New(relay.Options{Store: st, Config: RelayConfig(cfg), Sources: sources, Metrics: m, Logger: log, OutboxWaker: outboxWaker, Tracer: tracer})
	if err != nil {
		return nil, startError("build the inbox relay", err)
	}
	return r, nil
}

// AdminStore is what the admin routes need of the store: the replay's outbox statements and
// the destination state of the pause and resume routes.
type AdminStore interface {
	admin.Store
	store.DestinationStateStore
}

// DestinationNames returns the names of the configured destinations, sorted.
func DestinationNames(cfg *config.Config) []string {
	names := make([]string, 0, len(cfg.Destinations))
	for name, d := range cfg.Destinations {
		if d != nil {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names
}

// newAdmin builds the admin routes: the credential check of admin.auth (none with
// admin.insecure), the transform test on engine, the replay over the routes, and the
// destination routes over the configured destinations.
func newAdmin(cfg *config.Config, st AdminStore, engine transform.Compiler, log *slog.Logger) (*admin.Handler, error) {
	verifier, err := inboundauth.New(InboundAuthConfig(cfg.Admin.Auth))
	if err != nil {
		return nil, startError("build the admin routes", err)
	}
	routes, err := Routes(cfg)
	if err != nil {
		return nil, startError("build the routes", err)
	}
	h, err := admin.New(admin.Options{
		Verifier:            verifier,
		Engine:              engine,
		Store:               st,
		States:              st,
		Destinations:        DestinationNames(cfg),
		Routes:              routes,
		MaxTransformTimeout: cfg.Admin.MaxTransformTimeoutMs.Duration(),
		MaxPayloadBytes:     cfg.Admin.MaxPayloadBytes,
		Logger:              log,
	})
	if err != nil {
		return nil, startError("build the admin routes", err)
	}
	return h, nil
}
