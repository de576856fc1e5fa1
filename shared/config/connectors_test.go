package config_test

import (
	"github.com/alternayte/queuebox/shared/config"
	"github.com/alternayte/queuebox/shared/connect/kafka/kafkaconfig"
	"github.com/alternayte/queuebox/shared/connect/nats/natsconfig"
	"github.com/alternayte/queuebox/shared/connect/rabbitmq/rabbitmqconfig"
)

// The tests of this package load with the real connector kinds, which its own test files
// cannot import (each imports this package): they are set here, before any test runs, in the
// order of service.ConnectorSpecs.
func init() {
	config.SetTestConnectors([]config.ConnectorSpec{rabbitmqconfig.Spec(), kafkaconfig.Spec(), natsconfig.Spec()})
}
