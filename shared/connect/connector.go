package connect

import (
	"context"
	"log/slog"

	"github.com/alternayte/queuebox/shared/config"
	"github.com/alternayte/queuebox/shared/connect/webhook"
	"github.com/alternayte/queuebox/shared/inbox"
	"github.com/alternayte/queuebox/shared/outbox"
)

// Connector is one external system in the connector registry: the kind of destination and
// source that it serves (shared/kind), the constructor of its publisher, the
// constructor of its consumer where the system has a source, and the rules of its
// configuration that only it knows.
//
// Each connector folder returns its own (rabbitmq.Connector, kafka.Connector,
// nats.Connector); HTTP is built into the composition root, shared/service, which links its
// publisher, shared/connect/webhook, anyway. The registry of the other systems is
// shared/service/connectors (connectors.All), which only the programs that deliver outbox rows
// or consume a broker import and pass to service.Build (AppOptions.Brokers); shared/service
// names none of them, so a program that passes none links no broker client.
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
	// (config.DestinationRules). Components reads them from the built-in connectors, which
	// every program links: a program checks the whole configuration even when it passes no
	// broker connector.
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

// PublisherFunc returns a Connector.Publisher from a connector's two parts: configOf maps the
// destination to the system's own Config, build builds the publisher from it. The function it
// returns closes the publisher.
func PublisherFunc[C any, P interface {
	outbox.Publisher
	Close() error
}](configOf func(*config.Destination) C, build func(name string, c C) (P, error)) func(context.Context, PublisherParams) (outbox.Publisher, func(), error) {
	return func(_ context.Context, p PublisherParams) (outbox.Publisher, func(), error) {
		pub, err := build(p.Name, configOf(p.Destination))
		if err != nil {
			return nil, nil, err
		}
		return pub, func() { _ = pub.Close() }, nil
	}
}

// SourceFunc returns a Connector.Source from a connector's two parts: configOf maps the source
// to the system's own SourceConfig, build builds the consumer from it.
func SourceFunc[C any, S Consumer](configOf func(*config.Source, inbox.BrokerSource, inbox.IntakeOptions, *slog.Logger) C, build func(C) (S, error)) func(SourceParams) (Consumer, error) {
	return func(p SourceParams) (Consumer, error) {
		s, err := build(configOf(p.Source, p.Intake, p.IntakeOptions, p.Logger))
		if err != nil {
			return nil, err
		}
		return s, nil
	}
}
