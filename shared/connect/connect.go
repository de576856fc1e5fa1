// Package connect is the home of QueueBox's external systems: each system has one folder
// below it that holds its destination (the outbox publisher), its source (an inbox consumer)
// where it has one, its connection, TLS and SASL settings, its tests, its Connector (the
// constructors, connector.go) and its configuration package (the kind's block of the
// configuration tree):
//
//	shared/connect/webhook   HTTP destinations (the built-in kind; its block is in shared/config)
//	shared/connect/rabbitmq  RabbitMQ (AMQP 0-9-1), rabbitmq/rabbitmqconfig
//	shared/connect/kafka     Kafka (franz-go), kafka/kafkaconfig
//	shared/connect/nats      NATS and JetStream, nats/natsconfig
//
// A folder's publisher and source take its own Config (with WithDefaults and a validation
// that its New runs); its Connector maps the kind's block of the tree to that Config, once.
// The configuration package defines the kind (kafkaconfig.Kind), the block's keys, defaults,
// checks and bounds (a config.ConnectorSpec) and links no client, so that every program
// checks the whole configuration. A broker's client library is imported by its own folder
// alone (connect_test.go checks it). The composition root lists each connector twice, a line
// each: its configuration in service.ConnectorSpecs, which every program links, and its
// Connector in shared/service/connectors (All), which only the programs that deliver outbox
// rows or consume a broker (queuebox serve, the poll function, the capture node) import and
// pass to service.Build. There is no registration by init(), so the other programs (the
// inbox, relay, retention and admin functions) do not link the broker clients.
//
// This package holds what the connectors share: Connector, PublisherParams, SourceParams and
// Consumer, and the health state of a source (SourceState). Every destination passes the
// behaviour suite of shared/connect/publishtest, every source that of
// shared/connect/consumetest.
package connect
