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
//
// A build tag leaves one system out of a build, client and all: queuebox_no_rabbitmq,
// queuebox_no_kafka, queuebox_no_nats (`make lambda LAMBDA_DESTINATIONS=...` sets them for the
// poll function; deploy/README.md). All then returns the others, and a destination of a kind
// that the build left out has no publisher: its rows go dead, as the start's warning says.
package destinations

import (
	"slices"

	"github.com/alternayte/queuebox/shared/service"
)

// All returns the broker destinations of every system that this build holds, in this order:
// RabbitMQ, Kafka and NATS (all three unless a build tag left one out).
func All() []service.Broker {
	return slices.Concat(rabbitMQBrokers(), kafkaBrokers(), natsBrokers())
}
