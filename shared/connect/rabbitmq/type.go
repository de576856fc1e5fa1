package rabbitmq

import "github.com/alternayte/queuebox/shared/connect/rabbitmq/rabbitmqconfig"

// Type is the destination type of every RabbitMQ destination, the destination_type label.
const Type = string(rabbitmqconfig.Kind)
