//go:build queuebox_no_rabbitmq

package rabbitmq

import (
	"github.com/alternayte/queuebox/shared/connect"
	"github.com/alternayte/queuebox/shared/connect/rabbitmq/rabbitmqconfig"
)

// Connector returns the RabbitMQ connector of a build that the tag queuebox_no_rabbitmq made
// without the AMQP client: its kind and no constructor, so that a destination of kind rabbitmq
// has no publisher (its rows go dead, as the start's warning says) and a source of kind rabbitmq
// stops the start.
func Connector() connect.Connector { return connect.Connector{Kind: rabbitmqconfig.Kind} }
