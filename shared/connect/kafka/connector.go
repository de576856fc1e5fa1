//go:build !queuebox_no_kafka

package kafka

import (
	"log/slog"

	"github.com/alternayte/queuebox/shared/config"
	"github.com/alternayte/queuebox/shared/connect"
	"github.com/alternayte/queuebox/shared/connect/kafka/kafkaconfig"
	"github.com/alternayte/queuebox/shared/inbox"
)

// Connector returns the Kafka connector: its kind, its publisher constructor and its source
// constructor, which map a destinations.<name> or sources.<name> entry of kind kafka
// (kafkaconfig) to this package's Config and SourceConfig, once. The build tag
// queuebox_no_kafka leaves every file of this package but left_out.go and type.go, and with them the Kafka
// client, out of a build; Connector then has no constructors.
func Connector() connect.Connector {
	return connect.Connector{Kind: kafkaconfig.Kind, Publisher: connect.PublisherFunc(ConfigOf, New), Source: connect.SourceFunc(SourceConfigOf, NewSource)}
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
