//go:build queuebox_no_rabbitmq

package destinations

import "github.com/alternayte/queuebox/shared/service"

// rabbitMQBrokers returns no destination: the build tag queuebox_no_rabbitmq left the RabbitMQ
// destination and its client out of this build.
func rabbitMQBrokers() []service.Broker { return nil }
