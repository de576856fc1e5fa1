//go:build !queuebox_no_rabbitmq

package connectors

import (
	"context"
	"log/slog"

	"github.com/alternayte/queuebox/shared/config"
	"github.com/alternayte/queuebox/shared/connect/kind"
	"github.com/alternayte/queuebox/shared/connect/rabbitmq"
	"github.com/alternayte/queuebox/shared/inbox"
	"github.com/alternayte/queuebox/shared/outbox"
	"github.com/alternayte/queuebox/shared/service"
)

// rabbitMQConnectors returns the RabbitMQ connector: its line in the registry. The build tag
// queuebox_no_rabbitmq leaves this file, and with it the RabbitMQ client, out of the build
// (rabbitmq_left_out.go).
func rabbitMQConnectors() []service.Connector {
	return []service.Connector{{Kind: kind.RabbitMQ, Publisher: newRabbitMQPublisher, Source: newRabbitMQSource}}
}

// newRabbitMQPublisher builds the publisher of a destination of kind rabbitmq.
func newRabbitMQPublisher(_ context.Context, p service.PublisherParams) (outbox.Publisher, func(), error) {
	pub, err := rabbitmq.New(p.Name, rabbitMQConfig(p.Destination))
	if err != nil {
		return nil, nil, err
	}
	return pub, func() { _ = pub.Close() }, nil
}

// rabbitMQConfig maps a destination of kind rabbitmq to the publisher's settings.
func rabbitMQConfig(d *config.Destination) rabbitmq.Config {
	r := d.RabbitMQ
	return rabbitmq.Config{
		URL:                r.URL.Reveal(),
		Exchange:           r.Exchange,
		ExchangeFrom:       string(r.ExchangeFrom),
		ExchangeType:       rabbitmq.ExchangeType(r.ExchangeType),
		RoutingKeyTemplate: r.RoutingKeyTemplate,
		DeliveryMode:       rabbitmq.DeliveryMode(r.DeliveryMode),
		Headers:            d.Headers,
	}
}

// newRabbitMQSource builds the consumer of a source of kind rabbitmq.
func newRabbitMQSource(p service.SourceParams) (service.Consumer, error) {
	s, err := rabbitmq.NewSource(RabbitMQSourceConfig(p.Source, p.Intake, p.IntakeOptions, p.Logger))
	if err != nil {
		return nil, err
	}
	return s, nil
}

// RabbitMQSourceConfig maps a RabbitMQ source.
func RabbitMQSourceConfig(s *config.Source, in inbox.BrokerSource, o inbox.IntakeOptions, log *slog.Logger) rabbitmq.SourceConfig {
	r := s.RabbitMQ
	return rabbitmq.SourceConfig{
		URL: r.ConnectionURL.Reveal(), Queue: r.QueueName, PrefetchCount: r.PrefetchCount, DeclareQueue: r.DeclareQueue,
		Intake: in, IntakeOptions: o, Logger: log,
	}
}
