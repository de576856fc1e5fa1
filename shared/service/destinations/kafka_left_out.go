//go:build queuebox_no_kafka

package destinations

import "github.com/alternayte/queuebox/shared/service"

// kafkaBrokers returns no destination: the build tag queuebox_no_kafka left the Kafka
// destination and its client out of this build.
func kafkaBrokers() []service.Broker { return nil }
