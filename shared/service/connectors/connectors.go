// Package connectors is the connector registry of the composition root: one line per broker
// system, each a service.Connector with its kind, its publisher constructor and its source
// constructor, which map a destinations.<name> or sources.<name> entry of the configuration
// tree to the system's own Config, once. Each system has one file (rabbitmq.go, kafka.go,
// nats.go) with its line, its mappings and its constructors; sources.go builds and runs the
// broker sources through the registry. HTTP is the built-in connector of shared/service.
//
// Only the programs that deliver outbox rows or consume a broker import this package:
// queuebox serve (shared/localserver) passes All to service.Build (AppOptions.Brokers) and
// Build as the source builder, the poll function passes All, and the capture node passes
// Build. shared/service itself does not import it, so the other programs (the inbox, relay,
// retention and admin functions) link no broker client (shared/connect/connect_test.go
// checks it).
//
// A build tag leaves one system out of a build, client and all: queuebox_no_rabbitmq,
// queuebox_no_kafka, queuebox_no_nats (`make lambda LAMBDA_DESTINATIONS=...` sets them for the
// poll function; deploy/README.md). All then returns the others, and a destination of a kind
// that the build left out has no publisher: its rows go dead, as the start's warning says.
//
// Adding a destination is one folder under shared/connect (its publisher and its own Config;
// its source, if it has one), its kind in shared/connect/kind and its block in the
// configuration tree (shared/config), and one file here with its line, its mappings and its
// build tag, called from All.
package connectors

import (
	"slices"

	"github.com/alternayte/queuebox/shared/service"
)

// All returns the connectors of the broker systems that this build holds, in this order:
// RabbitMQ, Kafka and NATS (all three unless a build tag left one out).
func All() []service.Connector {
	return slices.Concat(rabbitMQConnectors(), kafkaConnectors(), natsConnectors())
}
