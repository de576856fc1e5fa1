//go:build !queuebox_no_nats

package nats

import (
	"log/slog"

	"github.com/alternayte/queuebox/shared/config"
	"github.com/alternayte/queuebox/shared/connect"
	"github.com/alternayte/queuebox/shared/connect/nats/natsconfig"
	"github.com/alternayte/queuebox/shared/inbox"
)

// Connector returns the NATS connector: its kind, its publisher constructor and its source
// constructor, which map a destinations.<name> or sources.<name> entry of kind nats
// (natsconfig) to this package's Config and SourceConfig, once. The build tag queuebox_no_nats
// leaves every file of this package but left_out.go and type.go, and with them the NATS client, out of a
// build; Connector then has no constructors.
func Connector() connect.Connector {
	return connect.Connector{Kind: natsconfig.Kind, Publisher: connect.PublisherFunc(ConfigOf, New), Source: connect.SourceFunc(SourceConfigOf, NewSource)}
}

// ConfigOf maps a destination of kind nats to the publisher's settings.
func ConfigOf(d *config.Destination) Config {
	n := natsconfig.DestinationOf(d)
	mode := ModeCore
	if n.JetStream {
		mode = ModeJetStream
	}
	return Config{
		Servers:     n.ServerList(),
		Subject:     n.Subject,
		SubjectFrom: string(n.SubjectFrom),
		Mode:        mode,
		Timeout:     n.TimeoutMs.Duration(),
		Username:    n.Username,
		Password:    n.Password.Reveal(),
		Token:       n.Token.Reveal(),
		Headers:     d.Headers,
	}
}

// SourceConfigOf maps a source of kind nats to the consumer's settings.
func SourceConfigOf(s *config.Source, in inbox.BrokerSource, o inbox.IntakeOptions, log *slog.Logger) SourceConfig {
	n := natsconfig.SourceOf(s)
	return SourceConfig{
		Servers: n.ServerList(), Stream: n.Stream, Durable: n.Durable, FilterSubject: n.FilterSubject,
		AckWait: n.AckWaitMs.Duration(), BatchSize: n.BatchSize,
		Username: n.Username, Password: n.Password.Reveal(), Token: n.Token.Reveal(),
		Intake: in, IntakeOptions: o, Logger: log,
	}
}
