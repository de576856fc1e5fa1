//go:build queuebox_no_kafka

package kafka

import (
	"github.com/alternayte/queuebox/shared/connect"
	"github.com/alternayte/queuebox/shared/connect/kafka/kafkaconfig"
)

// Connector returns the Kafka connector of a build that the tag queuebox_no_kafka made
// without the Kafka client: its kind and no constructor, so that a destination of kind kafka
// has no publisher (its rows go dead, as the start's warning says) and a source of kind kafka
// stops the start.
func Connector() connect.Connector { return connect.Connector{Kind: kafkaconfig.Kind} }
