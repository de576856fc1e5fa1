// Package brokers gives a program the RabbitMQ, Kafka and NATS destination publishers: its
// import registers New with shared/service (as a database/sql driver registers itself), so
// that service.Publishers builds those destinations. The programs that deliver outbox rows
// import it; the others leave the broker clients out of their binaries.
//
//	import _ "github.com/alternayte/queuebox/shared/connect/brokers"
package brokers

import (
	"fmt"

	"github.com/alternayte/queuebox/shared/config"
	"github.com/alternayte/queuebox/shared/connect/kafka"
	qbnats "github.com/alternayte/queuebox/shared/connect/nats"
	"github.com/alternayte/queuebox/shared/connect/rabbitmq"
	"github.com/alternayte/queuebox/shared/outbox"
	"github.com/alternayte/queuebox/shared/service"
)

func init() { service.RegisterBrokerPublisher(New) }

// New builds the publisher of a RabbitMQ, Kafka or NATS destination and the function that
// closes it. It makes no connection: each publisher connects on its first publish, so a
// broker that is down at start makes rows retry instead of failing the start.
func New(name string, d *config.Destination) (outbox.Publisher, func(), error) {
	switch d.Kind {
	case config.DestinationRabbitMQ:
		p, err := rabbitmq.New(name, *d.RabbitMQ, d.Headers)
		if err != nil {
			return nil, nil, err
		}
		return p, func() { _ = p.Close() }, nil
	case config.DestinationKafka:
		p, err := kafka.New(name, *d.Kafka, d.Headers)
		if err != nil {
			return nil, nil, err
		}
		return p, func() { _ = p.Close() }, nil
	case config.DestinationNATS:
		p, err := qbnats.New(name, *d.NATS, d.Headers)
		if err != nil {
			return nil, nil, err
		}
		return p, func() { _ = p.Close() }, nil
	}
	return nil, nil, fmt.Errorf("destinations.%s: %s is not a broker destination", name, d.Kind)
}
