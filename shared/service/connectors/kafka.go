//go:build !queuebox_no_kafka

package connectors

import (
	"context"
	"log/slog"

	"github.com/alternayte/queuebox/shared/config"
	"github.com/alternayte/queuebox/shared/connect/kafka"
	"github.com/alternayte/queuebox/shared/connect/kind"
	"github.com/alternayte/queuebox/shared/inbox"
	"github.com/alternayte/queuebox/shared/outbox"
	"github.com/alternayte/queuebox/shared/service"
)

// kafkaConnectors returns the Kafka connector: its line in the registry. The build tag
// queuebox_no_kafka leaves this file, and with it the Kafka client, out of the build
// (kafka_left_out.go).
func kafkaConnectors() []service.Connector {
	return []service.Connector{{Kind: kind.Kafka, Publisher: newKafkaPublisher, Source: newKafkaSource}}
}

// newKafkaPublisher builds the publisher of a destination of kind kafka.
func newKafkaPublisher(_ context.Context, p service.PublisherParams) (outbox.Publisher, func(), error) {
	pub, err := kafka.New(p.Name, kafkaConfig(p.Destination))
	if err != nil {
		return nil, nil, err
	}
	return pub, func() { _ = pub.Close() }, nil
}

// kafkaConfig maps a destination of kind kafka to the publisher's settings.
func kafkaConfig(d *config.Destination) kafka.Config {
	k := d.Kafka
	return kafka.Config{
		Brokers:          k.Brokers(),
		Topic:            k.Topic,
		TopicFrom:        string(k.TopicFrom),
		KeyTemplate:      k.KeyTemplate,
		Timeout:          k.TimeoutMs.Duration(),
		SecurityProtocol: kafka.SecurityProtocol(k.SecurityProtocol),
		SASLMechanism:    k.SASLMechanism,
		SASLUsername:     k.SASLUsername,
		SASLPassword:     k.SASLPassword.Reveal(),
		Headers:          d.Headers,
	}
}

// newKafkaSource builds the consumer of a source of kind kafka.
func newKafkaSource(p service.SourceParams) (service.Consumer, error) {
	s, err := kafka.NewSource(KafkaSourceConfig(p.Source, p.Intake, p.IntakeOptions, p.Logger))
	if err != nil {
		return nil, err
	}
	return s, nil
}

// KafkaSourceConfig maps a Kafka source.
func KafkaSourceConfig(s *config.Source, in inbox.BrokerSource, o inbox.IntakeOptions, log *slog.Logger) kafka.SourceConfig {
	k := s.Kafka
	return kafka.SourceConfig{
		Brokers: k.Brokers(), Topics: k.Topics, GroupID: k.GroupID, AutoOffsetReset: string(k.AutoOffsetReset),
		MaxPollRecords: k.MaxPollRecords, SkipTombstones: k.SkipTombstones,
		SecurityProtocol: kafka.SecurityProtocol(k.SecurityProtocol), SASLMechanism: k.SASLMechanism,
		SASLUsername: k.SASLUsername, SASLPassword: k.SASLPassword.Reveal(),
		Intake: in, IntakeOptions: o, Logger: log,
	}
}
