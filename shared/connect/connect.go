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
// Each folder takes its own Config (with WithDefaults and a validation that its New runs)
// and imports no shared/config: the composition root maps the configuration tree to it, once.
// A broker's client library is imported by its own folder alone (connect_test.go checks
// it). The name of each system is its kind, defined once in shared/connect/kind. The connector
// registry of the composition root, shared/service/connectors, holds one line per broker
// system (its kind, its publisher and its source constructor) and the mapping of the tree to
// each system's Config; only the programs that deliver outbox rows or consume a broker
// (queuebox serve, the poll function, the capture node) import it and pass it to
// service.Build. There is no registration by init(), so the other programs (the inbox,
// relay, retention and admin functions) do not link the broker clients. HTTP is the built-in
// connector of shared/service.
//
// Every destination passes the behaviour suite of shared/connect/publishtest; the sources
// will pass that of shared/connect/consumetest.
package connect
