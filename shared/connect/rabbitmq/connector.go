//go:build !queuebox_no_rabbitmq

package rabbitmq

import (
	"log/slog"

	"github.com/alternayte/queuebox/shared/config"
	"github.com/alternayte/queuebox/shared/connect"
	"github.com/alternayte/queuebox/shared/connect/rabbitmq/rabbitmqconfig"
	"github.com/alternayte/queuebox/shared/inbox"
)

// Connector returns the RabbitMQ connector: its kind, its publisher constructor and its
// source constructor, which map a destinations.<name> or sources.<name> entry of kind rabbitmq
// (rabbitmqconfig) to this package's Config and SourceConfig, once. The build tag
// queuebox_no_rabbitmq leaves every file of this package but left_out.go and type.go, and with them the
// AMQP client, out of a build; Connector then has no constructors.
func Connector() connect.Connector {
	return connect.Connector{Kind: rabbitmqconfig.Kind, Publisher: connect.PublisherFunc(ConfigOf, New), Source: connect.SourceFunc(SourceConfigOf, NewSource)}
}

// ConfigOf maps a destination of kind rabbitmq to the publisher's settings.
func ConfigOf(d *config.Destination) Config {
	r := rabbitmqconfig.DestinationOf(d)
	return Config{
		URL:                r.URL.Reveal(),
		Exchange:           r.Exchange,
		ExchangeFrom:       string(r.ExchangeFrom),
		ExchangeType:       ExchangeType(r.ExchangeType),
		RoutingKeyTemplate: r.RoutingKeyTemplate,
		DeliveryMode:       DeliveryMode(r.DeliveryMode),
		Headers:            d.Headers,
	}
}

// SourceConfigOf maps a source of kind rabbitmq to the consumer's settings.
func SourceConfigOf(s *config.Source, in inbox.BrokerSource, o inbox.IntakeOptions, log *slog.Logger) SourceConfig {
	r := rabbitmqconfig.SourceOf(s)
	return SourceConfig{
		URL: r.ConnectionURL.Reveal(), Queue: r.QueueName, PrefetchCount: r.PrefetchCount, DeclareQueue: r.DeclareQueue,
		Intake: in, IntakeOptions: o, Logger: log,
	}
}
