package service

import (
	"github.com/alternayte/queuebox/shared/config"
	"github.com/alternayte/queuebox/shared/outbox"
)

// Broker is the destination of one broker system as a program's composition root registers
// it with Build (AppOptions.Brokers) or Publishers: Kind is the destination kind of the
// configuration it serves, New maps one destination of that kind to the system's own Config and builds its
// publisher and the function that closes it. shared/service/destinations holds the broker
// destinations of RabbitMQ, Kafka and NATS; this package names none of them, so a program
// that passes none links no broker client.
type Broker struct {
	// Kind is the configuration's destination kind (destinations.<name>.kind).
	Kind config.DestinationKind
	// New builds the publisher of the destination name. It makes no connection: the
	// publisher connects on its first publish, so a system that is down at start makes rows
	// retry instead of failing the start.
	New func(name string, d *config.Destination) (outbox.Publisher, func(), error)
}
