//go:build !queuebox_no_kafka

package destinations

import (
	"github.com/alternayte/queuebox/shared/config"
	"github.com/alternayte/queuebox/shared/connect/kafka"
	"github.com/alternayte/queuebox/shared/outbox"
	"github.com/alternayte/queuebox/shared/service"
)

// kafkaBrokers returns the Kafka destination. The build tag queuebox_no_kafka leaves this file,
// and with it the Kafka client, out of the build (kafka_left_out.go).
func kafkaBrokers() []service.Broker { return []service.Broker{Kafka()} }

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
