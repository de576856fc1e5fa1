//go:build !queuebox_no_nats

package connectors

import (
	"context"
	"log/slog"

	"github.com/alternayte/queuebox/shared/config"
	"github.com/alternayte/queuebox/shared/connect/kind"
	"github.com/alternayte/queuebox/shared/connect/nats"
	"github.com/alternayte/queuebox/shared/inbox"
	"github.com/alternayte/queuebox/shared/outbox"
	"github.com/alternayte/queuebox/shared/service"
)

// natsConnectors returns the NATS connector: its line in the registry. The build tag
// queuebox_no_nats leaves this file, and with it the NATS client, out of the build
// (nats_left_out.go).
func natsConnectors() []service.Connector {
	return []service.Connector{{Kind: kind.NATS, Publisher: newNATSPublisher, Source: newNATSSource}}
}

// newNATSPublisher builds the publisher of a destination of kind nats.
func newNATSPublisher(_ context.Context, p service.PublisherParams) (outbox.Publisher, func(), error) {
	pub, err := nats.New(p.Name, natsConfig(p.Destination))
	if err != nil {
		return nil, nil, err
	}
	return pub, func() { _ = pub.Close() }, nil
}

// natsConfig maps a destination of kind nats to the publisher's settings.
func natsConfig(d *config.Destination) nats.Config {
	n := d.NATS
	mode := nats.ModeCore
	if n.JetStream {
		mode = nats.ModeJetStream
	}
	return nats.Config{
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

// newNATSSource builds the consumer of a source of kind nats.
func newNATSSource(p service.SourceParams) (service.Consumer, error) {
	s, err := nats.NewSource(NATSSourceConfig(p.Source, p.Intake, p.IntakeOptions, p.Logger))
	if err != nil {
		return nil, err
	}
	return s, nil
}

// NATSSourceConfig maps a NATS source.
func NATSSourceConfig(s *config.Source, in inbox.BrokerSource, o inbox.IntakeOptions, log *slog.Logger) nats.SourceConfig {
	n := s.NATS
	return nats.SourceConfig{
		Servers: n.ServerList(), Stream: n.Stream, Durable: n.Durable, FilterSubject: n.FilterSubject,
		AckWait: n.AckWaitMs.Duration(), BatchSize: n.BatchSize,
		Username: n.Username, Password: n.Password.Reveal(), Token: n.Token.Reveal(),
		Intake: in, IntakeOptions: o, Logger: log,
	}
}
