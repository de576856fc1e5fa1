package kafka

import "github.com/alternayte/queuebox/shared/connect/kafka/kafkaconfig"

// Type is the destination type of every Kafka destination, the destination_type label.
const Type = string(kafkaconfig.Kind)
