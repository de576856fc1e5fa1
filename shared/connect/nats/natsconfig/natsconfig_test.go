package natsconfig_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/alternayte/queuebox/shared/config"
	"github.com/alternayte/queuebox/shared/connect/nats/natsconfig"
)

// The constructors carry every default of the kind, as the loader builds an entry before it
// reads its keys.
func TestConstructorsCarryTheDefaults(t *testing.T) {
	t.Parallel()
	d := natsconfig.NewDestination("subjects")
	assert.Equal(t, natsconfig.Kind, d.Kind)
	n := natsconfig.DestinationOf(d)
	require.NotNil(t, n)
	assert.True(t, n.JetStream)
	assert.Equal(t, config.Milliseconds(30000), n.TimeoutMs)
	n.Servers = "nats://a,nats://b"
	assert.Equal(t, []string{"nats://a", "nats://b"}, n.ServerList())

	s := natsconfig.NewSource("stream")
	assert.Equal(t, "{{ source }}", s.Topic)
	src := natsconfig.SourceOf(s)
	require.NotNil(t, src)
	assert.Equal(t, config.Milliseconds(30000), src.AckWaitMs)
	assert.Equal(t, 100, src.BatchSize)
	assert.Equal(t, config.DefaultAttributeHeaders(), s.Broker().AttributeHeaders)

	assert.Nil(t, natsconfig.SourceOf(config.NewSource("web", "http")), "another kind has no NATS block")
}
