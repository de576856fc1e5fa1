// Package destinations is the part of the composition root that registers the broker
// destinations: RabbitMQ (shared/connect/rabbitmq), Kafka (shared/connect/kafka) and NATS
// (shared/connect/nats). Each function returns the service.Broker of one system: its
// destination kind, and the constructor that maps one destinations.<name> entry of the
// configuration tree to that system's own Config, once, and builds its publisher.
//
// Only the programs that deliver outbox rows import this package (queuebox serve in
// shared/localserver and the poll function in functions/poll) and pass All to service.Build
// (AppOptions.Brokers). shared/service itself does not import it, so the other programs (the
// inbox, relay, retention and admin functions, the capture node) link no broker client
// (shared/connect/connect_test.go checks it).
package destinations

import (
	"github.com/alternayte/queuebox/shared/config"
	"github.com/alternayte/queuebox/shared/connect/kafka"
	"github.com/alternayte/queuebox/shared/connect/nats"
	"github.com/alternayte/queuebox/shared/connect/rabbitmq"
	"github.com/alternayte/queuebox/shared/outbox"
	"github.com/alternayte/queuebox/shared/service"
)

// All returns the broker destinations of every system: RabbitMQ, Kafka and NATS.
func All() []service.Broker {
	return []service.Broker{RabbitMQ(), Kafka(), NATS()}
}

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

// Kafka is the broker destination of kind kafka.
func Kafka() service.Broker {
	return service.Broker{Kind: config.DestinationKafka, New: func(name string, d *config.Destination) (outbox.Publisher, func(), error) {
		p, err := kafka.New(name, kafkaConfig(d))
		if err != nil {
			return nil, nil, err
		}
		return p, func() { _ = p.Close() }, nil
	}}
}

// NATS is the broker destination of kind nats.
func NATS() service.Broker {
	return service.Broker{Kind: config.DestinationNATS, New: func(name string, d *config.Destination) (outbox.Publisher, func(), error) {
		p, err := nats.New(name, natsConfig(d))
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

// kafkaConfig maps a destination of kind kafka to the publisher's settings.
func kafkaConfig(d *config.Destination) kafka.Config {
	k := d.Kafka
	return kafka.Config{
		Brokers:          k.Brokers(),
		Topic:            k.Topic,
		TopicFrom:        string(k.TopicFrom),
		KeyTemplate:      k.KeyTemplate,
		Timeout:          k.TimeoutMs.Duration(),
		SecurityProtocol: kafka.SecurityProtocol(k.SecurityProtocol),
		SASLMechanism:    k.SASLMechanism,
		SASLUsername:     k.SASLUsername,
		SASLPassword:     k.SASLPassword.Reveal(),
		Headers:          d.Headers,
	}
}

// natsConfig maps a destination of kind nats to the publisher's settings.
func natsConfig(d *config.Destination) nats.Config {
	n := d.NATS
	mode := nats.ModeCore
	if n.JetStream {
		mode = nats.ModeJetStream
	}
	return nats.Config{
		Servers:     n.ServerList(),
		Subject:     n.Subject,
		SubjectFrom: string(n.SubjectFrom),
		Mode:        mode,
		Timeout:     n.TimeoutMs.Duration(),
		Username:    n.Username,
		Password:    n.Password.Reveal(),
		Token:       n.Token.Reveal(),
		Headers:     d.Headers,
	}
}
