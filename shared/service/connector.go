package service

import (
	"context"
	"log/slog"

	"github.com/alternayte/queuebox/shared/config"
	"github.com/alternayte/queuebox/shared/connect/kind"
	"github.com/alternayte/queuebox/shared/connect/webhook"
	"github.com/alternayte/queuebox/shared/inbox"
	"github.com/alternayte/queuebox/shared/outbox"
)

// Connector is one external system in the connector registry: the kind of destination and
// source that it serves (shared/connect/kind), the constructor of its publisher, the
// constructor of its consumer where the system has a source, and the rules of its
// configuration that only it knows.
//
// HTTP is built in (httpConnector): this package links its publisher, shared/connect/webhook,
// anyway. The registry of the other systems is shared/service/connectors (connectors.All),
// which only the programs that deliver outbox rows or consume a broker import and pass to
// Build (AppOptions.Brokers) or Publishers; this package names none of them, so a program
// that passes none links no broker client.
type Connector struct {
	// Kind is the kind of destination (destinations.<name>) and of source (sources.<name>)
	// that the connector serves.
	Kind config.DestinationKind
	// Publisher builds the publisher of one destination of Kind and the function that
	// closes it. It makes no connection: the publisher connects on its first publish, so a
	// system that is down at start makes rows retry instead of failing the start. An error
	// names the destination's key.
	Publisher func(ctx context.Context, p PublisherParams) (outbox.Publisher, func(), error)
	// Source builds the consumer of one source of Kind; it makes no connection. Nil when the
	// system has no source that a connector consumes (an HTTP source is a route of the inbox).
	Source func(p SourceParams) (Consumer, error)
	// Rules are what the validation of the configuration asks of the connector
	// (config.DestinationRules). Components reads those of the built-in connectors
	// (builtinRules), which every program links: a program checks the whole configuration
	// even when it passes no broker connector.
	Rules config.DestinationRules
}

// PublisherParams are the inputs of a connector's publisher constructor.
type PublisherParams struct {
	// Name is the destination name, the key of destinations.
	Name string
	// Destination is the entry of the configuration tree.
	Destination *config.Destination
	// Config is the whole configuration, for the settings that every destination of a kind
	// shares (http.*).
	Config *config.Config
	// Metrics receives the HTTP response classes (the webhook publisher's measurements); nil
	// records nothing.
	Metrics webhook.Metrics
}

// SourceParams are the inputs of a connector's source constructor.
type SourceParams struct {
	// Name is the source name, the key of sources.
	Name string
	// Source is the entry of the configuration tree.
	Source *config.Source
	// Intake is the mapping of the keys that every broker source shares to the inbox
	// intake's rules.
	Intake inbox.BrokerSource
	// IntakeOptions are what every source of the program shares: metrics, waker, tracer,
	// key length.
	IntakeOptions inbox.IntakeOptions
	// Logger receives the consumer's log lines.
	Logger *slog.Logger
}

// Consumer is the consumer of one broker source, which stores what it receives through the
// sink that it runs with.
type Consumer interface {
	// Name is the source name.
	Name() string
	// Check is the probe of its health component.
	Check(ctx context.Context) error
	// Run consumes until ctx ends.
	Run(ctx context.Context, sink inbox.Inserter) error
}

// builtinConnectors are the connectors that this package holds: HTTP.
func builtinConnectors() []Connector { return []Connector{httpConnector()} }

// builtinRules are the Rules of builtinConnectors by kind, read without the connectors, so
// that the validation of a configuration links no publisher constructor.
func builtinRules() map[config.DestinationKind]config.DestinationRules {
	return map[config.DestinationKind]config.DestinationRules{kind.HTTP: httpRules}
}
