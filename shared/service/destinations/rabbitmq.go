//go:build !queuebox_no_rabbitmq

package destinations

import (
	"github.com/alternayte/queuebox/shared/config"
	"github.com/alternayte/queuebox/shared/connect/rabbitmq"
	"github.com/alternayte/queuebox/shared/outbox"
	"github.com/alternayte/queuebox/shared/service"
)

// rabbitMQBrokers returns the RabbitMQ destination. The build tag queuebox_no_rabbitmq leaves
// this file, and with it the RabbitMQ client, out of the build (rabbitmq_left_out.go).
func rabbitMQBrokers() []service.Broker { return []service.Broker{RabbitMQ()} }

// RabbitMQ is the broker destination of kind rabbitmq.
func RabbitMQ() service.Broker {
	return service.Broker{Kind: config.DestinationRabbitMQ, New: func(name string, d *config.Destination) (outbox.Publisher, func(), error) {
		p, err := rabbitmq.New(name, rabbitMQConfig(d))
		if err != nil {
			return nil, nil, err
		}
		return p, func() { _ = p.Close() }, nil
	}}
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
