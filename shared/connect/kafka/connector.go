//go:build !queuebox_no_kafka

package kafka

import (
	"context"
	"log/slog"

	"github.com/alternayte/queuebox/shared/config"
	"github.com/alternayte/queuebox/shared/connect"
	"github.com/alternayte/queuebox/shared/connect/kafka/kafkaconfig"
	"github.com/alternayte/queuebox/shared/inbox"
	"github.com/alternayte/queuebox/shared/outbox"
)

// Connector returns the Kafka connector: its kind, its publisher constructor and its source
// constructor, which map a destinations.<name> or sources.<name> entry of kind kafka
// (kafkaconfig) to this package's Config and SourceConfig, once. The build tag
// queuebox_no_kafka leaves every file of this package but left_out.go and type.go, and with them the Kafka
// client, out of a build; Connector then has no constructors.
func Connector() connect.Connector {
	return connect.Connector{Kind: kafkaconfig.Kind, Publisher: newConfiguredPublisher, Source: newConfiguredSource}
}

// newConfiguredPublisher builds the publisher of a destination of kind kafka.
func newConfiguredPublisher(_ context.Context, p connect.PublisherParams) (outbox.Publisher, func(), error) {
	pub, err := New(p.Name, ConfigOf(p.Destination))
	if err != nil {
		return nil, nil, err
	}
	return pub, func() { _ = pub.Close() }, nil
}

// ConfigOf maps a destination of kind kafka to the publisher's settings.
func ConfigOf(d *config.Destination) Config {
	k := kafkaconfig.DestinationOf(d)
	return Config{
		Brokers:          k.Brokers(),
		Topic:            k.Topic,
		TopicFrom:        string(k.TopicFrom),
		KeyTemplate:      k.KeyTemplate,
		Timeout:          k.TimeoutMs.Duration(),
		SecurityProtocol: SecurityProtocol(k.SecurityProtocol),
		SASLMechanism:    k.SASLMechanism,
		SASLUsername:     k.SASLUsername,
		SASLPassword:     k.SASLPassword.Reveal(),
		Headers:          d.Headers,
	}
}

// newConfiguredSource builds the consumer of a source of kind kafka.
func newConfiguredSource(p connect.SourceParams) (connect.Consumer, error) {
	s, err := NewSource(SourceConfigOf(p.Source, p.Intake, p.IntakeOptions, p.Logger))
	if err != nil {
		return nil, err
	}
	return s, nil
}

// SourceConfigOf maps a source of kind kafka to the consumer's settings.
func SourceConfigOf(s *config.Source, in inbox.BrokerSource, o inbox.IntakeOptions, log *slog.Logger) SourceConfig {
	k := kafkaconfig.SourceOf(s)
	return SourceConfig{
		Brokers: k.Brokers(), Topics: k.Topics, GroupID: k.GroupID, AutoOffsetReset: string(k.AutoOffsetReset),
		MaxPollRecords: k.MaxPollRecords, SkipTombstones: k.SkipTombstones,
		SecurityProtocol: SecurityProtocol(k.SecurityProtocol), SASLMechanism: k.SASLMechanism,
		SASLUsername: k.SASLUsername, SASLPassword: k.SASLPassword.Reveal(),
		Intake: in, IntakeOptions: o, Logger: log,
	}
}
