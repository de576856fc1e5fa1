package service

import (
	"context"

	"github.com/alternayte/queuebox/shared/store"
)

// Part is one step of the assembly that BuildParts runs: PollerPart, RelayPart,
// RetentionPart, AdminPart or InboxPart.
type Part struct {
	build func(ctx context.Context, a *App, st store.Store) error
}

// BuildParts is Build for a program that runs some parts alone, each Lambda function one:
// it runs the steps of parts in the order given, which must be Build's (poller, relay,
// retention, admin, inbox), each building its part exactly as Build does when o asks for it
// (the same step over the same options), and no other step: no health pool, capture
// connector, remote wakers or broker sources, whatever o asks. The tracer provider is made
// as Build makes it: o.Tracing, else o.NewTracing, else none once the settings pass
// tracing.Check.
//
// A program that calls BuildParts and never Build links the constructors of the parts it
// passes and of no other. The admin function gains most: the console's html/template
// evaluates templates by reflection, so the Go linker keeps every exported method of every
// type that the program links, used or not.
func BuildParts(ctx context.Context, cfg *Config, o AppOptions, parts ...Part) (*App, error) {
	a := newApp(cfg, o)
	if err := a.startTracing(ctx); err != nil {
		return nil, err
	}
	st := a.bindStore()
	for _, p := range parts {
		if err := p.build(ctx, a, st); err != nil {
			a.Close()
			return nil, err
		}
	}
	return a, nil
}

// PollerPart builds the outbox poller and its publishers (AppOptions.Poller and Brokers), as
// in a program without capture.
func PollerPart() Part {
	return Part{build: func(ctx context.Context, a *App, st store.Store) error { return a.buildOutbox(ctx, st, false) }}
}

// RelayPart builds the inbox relay (AppOptions.Relay).
func RelayPart() Part {
	return Part{build: func(_ context.Context, a *App, st store.Store) error { return a.buildRelay(st) }}
}

// RetentionPart builds the retention cleanup (AppOptions.Retention).
func RetentionPart() Part {
	return Part{build: func(_ context.Context, a *App, st store.Store) error { return a.buildRetention(st) }}
}

// AdminPart builds the admin routes and the web console (AppOptions.Admin).
func AdminPart() Part {
	return Part{build: func(_ context.Context, a *App, st store.Store) error { return a.buildAdmin(st) }}
}

// InboxPart builds the HTTP inbox (AppOptions.Inbox and Draining).
func InboxPart() Part {
	return Part{build: func(_ context.Context, a *App, st store.Store) error { return a.buildInbox(st) }}
}
