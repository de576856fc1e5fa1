//go:build queuebox_no_nats

package nats

import (
	"github.com/alternayte/queuebox/shared/connect"
	"github.com/alternayte/queuebox/shared/connect/nats/natsconfig"
)

// Connector returns the NATS connector of a build that the tag queuebox_no_nats made
// without the NATS client: its kind and no constructor, so that a destination of kind nats
// has no publisher (its rows go dead, as the start's warning says) and a source of kind nats
// stops the start.
func Connector() connect.Connector { return connect.Connector{Kind: natsconfig.Kind} }
