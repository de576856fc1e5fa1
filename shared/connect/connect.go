// Package connect is the home of QueueBox's external systems: each system has one folder
// below it that holds its destination (the outbox publisher), its connection, TLS and SASL
// settings, its system-specific tests, and the place where its source (an inbox consumer)
// will live:
//
//	shared/connect/webhook   HTTP destinations
//	shared/connect/rabbitmq  RabbitMQ (AMQP 0-9-1)
//	shared/connect/kafka     Kafka (franz-go)
//	shared/connect/nats      NATS and JetStream
//
// A broker's client library is imported by its own folder alone (connect_test.go checks
// it). A program wires the systems it delivers to in its composition root, by passing their
// Destination values to service.NewOutbox; there is no registration by init(), so the
// programs that do not deliver (the inbox, relay, retention and admin functions, the capture
// node) do not link the broker clients.
//
// Every destination passes the behaviour suite of shared/connect/publishtest; the sources
// will pass that of shared/connect/consumetest.
package connect

import (
	"github.com/alternayte/queuebox/shared/config"
	"github.com/alternayte/queuebox/shared/outbox"
)

// Destination is the destination of one external system as a composition root registers
// it: Kind is the destination kind of the configuration it serves, New builds the publisher
// of one destination of that kind and the function that closes it.
type Destination struct {
	// Kind is the configuration's destination kind (destinations.<name>.kind).
	Kind config.DestinationKind
	// New builds the publisher of the destination name. It makes no connection: the
	// publisher connects on its first publish, so a system that is down at start makes rows
	// retry instead of failing the start.
	New func(name string, d *config.Destination) (outbox.Publisher, func(), error)
}
