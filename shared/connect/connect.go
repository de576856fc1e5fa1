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
// it). The mapping of the broker destinations lives in shared/service/destinations, which
// only the programs that deliver outbox rows (queuebox serve and the poll function) import
// and pass to service.Build (AppOptions.Brokers); there is no registration by init(), so the
// programs that do not deliver (the inbox, relay, retention and admin functions, the capture
// node) do not link the broker clients.
//
// Every destination passes the behaviour suite of shared/connect/publishtest; the sources
// will pass that of shared/connect/consumetest.
package connect
