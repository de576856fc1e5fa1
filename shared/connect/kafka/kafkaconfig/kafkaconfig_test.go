package kafkaconfig_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/alternayte/queuebox/shared/config"
	"github.com/alternayte/queuebox/shared/connect/kafka/kafkaconfig"
)

// The constructors carry every default of the kind, as the loader builds an entry before it
// reads its keys, and Normalize stores the enumerations' canonical spelling.
func TestConstructorsCarryTheDefaults(t *testing.T) {
	t.Parallel()
	d := kafkaconfig.NewDestination("stream")
	assert.Equal(t, kafkaconfig.Kind, d.Kind)
	k := kafkaconfig.DestinationOf(d)
	require.NotNil(t, k)
	assert.Equal(t, config.Milliseconds(30000), k.TimeoutMs)
	assert.Equal(t, "{{ key }}", k.KeyTemplate)
	assert.Equal(t, kafkaconfig.SecurityPlaintext, k.SecurityProtocol)
	k.SecurityProtocol = "sasl_ssl"
	k.Normalize()
	assert.Equal(t, kafkaconfig.SecuritySASLSSL, k.SecurityProtocol)
	assert.True(t, k.SecurityProtocol.IsSASL())
	k.BootstrapServers = " a:1, ,b:2 "
	assert.Equal(t, []string{"a:1", "b:2"}, k.Brokers())

	s := kafkaconfig.NewSource("log")
	assert.Equal(t, config.ConsumptionPush, s.Consumption)
	assert.Equal(t, "{{ source }}", s.Topic)
	assert.Equal(t, "$.id", s.IdempotencyKeyPath)
	src := kafkaconfig.SourceOf(s)
	require.NotNil(t, src)
	assert.Equal(t, kafkaconfig.OffsetEarliest, src.AutoOffsetReset)
	assert.Equal(t, 100, src.MaxPollRecords)
	assert.Equal(t, config.DefaultAttributeHeaders(), s.Broker().AttributeHeaders)
	src.AutoOffsetReset = "LATEST"
	src.Normalize()
	assert.Equal(t, kafkaconfig.OffsetLatest, src.AutoOffsetReset)

	assert.Nil(t, kafkaconfig.DestinationOf(config.NewDestination("web", "http")), "another kind has no Kafka block")
}
