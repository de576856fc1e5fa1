package kafka

import (
	"github.com/alternayte/queuebox/shared/config"
	"github.com/alternayte/queuebox/shared/connect"
	"github.com/alternayte/queuebox/shared/outbox"
)

// Destination is the Kafka destination for a program's composition root to pass to
// service.NewOutbox, which builds the publisher of every destination of kind
// kafka with it.
func Destination() connect.Destination {
	return connect.Destination{Kind: config.DestinationKafka, New: newDestination}
}

func newDestination(name string, d *config.Destination) (outbox.Publisher, func(), error) {
	p, err := New(name, *d.Kafka, d.Headers)
	if err != nil {
		return nil, nil, err
	}
	return p, func() { _ = p.Close() }, nil
}
