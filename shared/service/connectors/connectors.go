// Package connectors is the connector registry of the composition root: one line per broker
// system (All), each the connect.Connector that the system's folder under shared/connect
// returns, with its kind, its publisher constructor and its source constructor; sources.go
// builds and runs the broker sources through it. HTTP is the built-in connector of
// shared/service. The configuration of each kind (its keys, defaults, checks and bounds) is
// registered beside it, in service.ConnectorSpecs, which every program links.
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
// poll function; deploy/README.md). The system's folder then holds only its left_out.go, whose
// connector has no constructors; All leaves it out, and a destination of a kind that the build
// left out has no publisher: its rows go dead, as the start's warning says.
//
// Adding a destination or a source is one folder under shared/connect (its connector, and its
// configuration package that the configuration tree decodes), its line in All and its line in
// service.ConnectorSpecs (docs/architecture.md, "How to add a destination or a dialect").
package connectors

import (
	"github.com/alternayte/queuebox/shared/connect"
	"github.com/alternayte/queuebox/shared/connect/kafka"
	"github.com/alternayte/queuebox/shared/connect/nats"
	"github.com/alternayte/queuebox/shared/connect/rabbitmq"
)

// All returns the connectors of the broker systems that this build holds, in this order:
// RabbitMQ, Kafka and NATS (all three unless a build tag left one out).
func All() []connect.Connector {
	var out []connect.Connector
	for _, c := range []connect.Connector{
		rabbitmq.Connector(),
		kafka.Connector(),
		nats.Connector(),
	} {
		if c.Publisher != nil || c.Source != nil {
			out = append(out, c)
		}
	}
	return out
}
