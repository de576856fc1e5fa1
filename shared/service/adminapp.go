package service

import "github.com/alternayte/queuebox/shared/tracing"

// BuildAdmin is Build for a program that serves the management routes and runs no other
// part: the admin Lambda function. It builds the admin routes and the web console as Build
// does when o.Admin asks for them (the same step, over the same options) and nothing else,
// whatever else o asks, so the App's checks are the database's alone. It makes no tracer
// provider, since neither part records a span, but refuses the tracing settings that Build
// refuses (tracing.Check).
//
// A program that calls BuildAdmin and never Build links none of the other parts'
// constructors (poller and publishers, relay, retention, inbox, capture, sources, wakers).
// That counts most in the admin function: the console's html/template evaluates templates
// by reflection, so the Go linker keeps every exported method of every type that the
// program links, used or not.
func BuildAdmin(cfg *Config, o AppOptions) (*App, error) {
	if o.Tracing == nil {
		if err := tracing.Check(TracingConfig(cfg)); err != nil {
			return nil, startError("start tracing", err)
		}
	}
	a := newApp(cfg, o)
	if err := a.buildAdmin(a.bindStore()); err != nil {
		a.Close()
		return nil, err
	}
	return a, nil
}
