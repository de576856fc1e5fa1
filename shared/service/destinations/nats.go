//go:build !queuebox_no_nats

package destinations

import (
	"github.com/alternayte/queuebox/shared/config"
	"github.com/alternayte/queuebox/shared/connect/nats"
	"github.com/alternayte/queuebox/shared/outbox"
	"github.com/alternayte/queuebox/shared/service"
)

// natsBrokers returns the NATS destination. The build tag queuebox_no_nats leaves this file,
// and with it the NATS client, out of the build (nats_left_out.go).
func natsBrokers() []service.Broker { return []service.Broker{NATS()} }

// NATS is the broker destination of kind nats.
func NATS() service.Broker {
	return service.Broker{Kind: config.DestinationNATS, New: func(name string, d *config.Destination) (outbox.Publisher, func(), error) {
		p, err := nats.New(name, natsConfig(d))
		if err != nil {
			return nil, nil, err
		}
		return p, func() { _ = p.Close() }, nil
	}}
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
