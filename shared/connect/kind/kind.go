// Package kind names the external systems that QueueBox connects to: the one definition of
// each kind, which a destination or a source of the configuration selects
// (destinations.<name>, sources.<name>), which the connector registry of the composition root
// (shared/service/connectors) keys its constructors by, and which each connector's publisher
// reports as its destination_type label (webhook.Type, rabbitmq.Type, kafka.Type, nats.Type).
//
// It imports nothing, so that shared/config, the connectors and the domain packages can all
// name a kind without linking one another.
package kind

// Kind is the kind of a destination or a source: the name of its external system.
type Kind string

// The kinds.
const (
	// HTTP is an HTTP destination (shared/connect/webhook) or an HTTP source (the inbox).
	HTTP Kind = "http"
	// RabbitMQ is RabbitMQ, AMQP 0-9-1 (shared/connect/rabbitmq).
	RabbitMQ Kind = "rabbitmq"
	// Kafka is Kafka (shared/connect/kafka).
	Kafka Kind = "kafka"
	// NATS is NATS and JetStream (shared/connect/nats).
	NATS Kind = "nats"
)
