//go:build queuebox_no_kafka

package connectors

import "github.com/alternayte/queuebox/shared/service"

// kafkaConnectors returns no connector: the build tag queuebox_no_kafka left the Kafka connector and
// its client out of this build.
func kafkaConnectors() []service.Connector { return nil }
