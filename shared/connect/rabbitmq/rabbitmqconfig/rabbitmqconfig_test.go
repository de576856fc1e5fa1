package rabbitmqconfig_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/alternayte/queuebox/shared/config"
	"github.com/alternayte/queuebox/shared/connect/rabbitmq/rabbitmqconfig"
)

// The constructors carry every default of the kind, as the loader builds an entry before it
// reads its keys, and Normalize stores the enumerations in lower case.
func TestConstructorsCarryTheDefaults(t *testing.T) {
	t.Parallel()
	d := rabbitmqconfig.NewDestination("bus")
	assert.Equal(t, rabbitmqconfig.Kind, d.Kind)
	r := rabbitmqconfig.DestinationOf(d)
	require.NotNil(t, r)
	assert.Equal(t, rabbitmqconfig.ExchangeTopic, r.ExchangeType)
	assert.Equal(t, rabbitmqconfig.DeliveryPersistent, r.DeliveryMode)
	assert.Equal(t, "{{ topic }}", r.RoutingKeyTemplate)
	r.ExchangeType, r.DeliveryMode = "FANOUT", "Transient"
	r.Normalize()
	assert.Equal(t, rabbitmqconfig.ExchangeFanout, r.ExchangeType)
	assert.Equal(t, rabbitmqconfig.DeliveryTransient, r.DeliveryMode)

	s := rabbitmqconfig.NewSource("queue")
	assert.Equal(t, config.ConsumptionPush, s.Consumption)
	assert.Equal(t, "{{ source }}", s.Topic)
	assert.Equal(t, "$.id", s.IdempotencyKeyPath)
	src := rabbitmqconfig.SourceOf(s)
	require.NotNil(t, src)
	assert.Equal(t, 10, src.PrefetchCount)
	assert.False(t, src.DeclareQueue)
	assert.Equal(t, config.DefaultAttributeHeaders(), s.Broker().AttributeHeaders)
}
