//go:build queuebox_no_rabbitmq

package connectors

import "github.com/alternayte/queuebox/shared/service"

// rabbitMQConnectors returns no connector: the build tag queuebox_no_rabbitmq left the RabbitMQ connector and
// its client out of this build.
func rabbitMQConnectors() []service.Connector { return nil }
