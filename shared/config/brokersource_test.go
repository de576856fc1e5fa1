package config

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// kafkaSource is a valid Kafka source with extra keys (YAML, indented under the source).
func kafkaSource(extra string) string {
	return minimalDatabase + `sources:
  log:
    type: kafka
    bootstrapServers: b1:9092
    topics: [orders]
    groupId: g1
` + extra
}

func TestSkipTombstones(t *testing.T) {
	t.Parallel()
	assert.Equal(t, false, blockKey(t, mustLoad(t, kafkaSource(""), nil).Sources["log"].Block, "skipTombstones"), "the default")
	assert.Equal(t, true, blockKey(t, mustLoad(t, kafkaSource("    skipTombstones: true\n"), nil).Sources["log"].Block, "skipTombstones"))
	assert.Equal(t, true, blockKey(t, mustLoad(t, kafkaSource(""), map[string]string{"QUEUEBOX_SOURCES_LOG_SKIPTOMBSTONES": "true"}).Sources["log"].Block, "skipTombstones"))

	_, _, err := loadYAML(t, kafkaSource("    skipTombstones: sometimes\n"), nil, nil)
	require.Error(t, err)
	problems := problemStrings(t, err)
	require.Len(t, problems, 1)
	assert.Contains(t, problems[0], "sources.log.skipTombstones (QUEUEBOX_SOURCES_LOG_SKIPTOMBSTONES)")

	// Another kind of source has no tombstones: the key has no effect there, and says so.
	_, warnings, err := loadYAML(t, minimalDatabase+`sources:
  q:
    type: rabbitmq
    queueName: incoming
    connectionUrl: amqp://rabbit:5672/
    skipTombstones: true
`, nil, nil)
	require.NoError(t, err)
	assert.Contains(t, warningStrings(warnings), "sources.q.skipTombstones is a key of the kafka kind, but sources.q is of the rabbitmq kind: it has no effect")
}

func TestMaxBodyBytesOfABrokerSource(t *testing.T) {
	t.Parallel()
	assert.Nil(t, blockKey(t, mustLoad(t, kafkaSource(""), nil).Sources["log"].Block, "maxBodyBytes").(*int), "the default: no limit")
	cfg := mustLoad(t, kafkaSource("    maxBodyBytes: 1048576\n"), nil)
	require.NotNil(t, blockKey(t, cfg.Sources["log"].Block, "maxBodyBytes"))
	assert.Equal(t, 1048576, *blockKey(t, cfg.Sources["log"].Block, "maxBodyBytes").(*int))
	cfg = mustLoad(t, kafkaSource(""), map[string]string{"QUEUEBOX_SOURCES_LOG_MAXBODYBYTES": "4096"})
	require.NotNil(t, blockKey(t, cfg.Sources["log"].Block, "maxBodyBytes"))
	assert.Equal(t, 4096, *blockKey(t, cfg.Sources["log"].Block, "maxBodyBytes").(*int))
	out, err := mustLoad(t, kafkaSource(""), nil).MaskedYAML()
	require.NoError(t, err)
	_, sources, _ := strings.Cut(string(out), "\nsources:\n")
	assert.NotContains(t, sources, "maxBodyBytes", "config check shows no limit that is not set")

	for _, tc := range []struct{ value, want string }{
		{"0", "sources.log.maxBodyBytes (QUEUEBOX_SOURCES_LOG_MAXBODYBYTES) must be above 0"},
		{"-1", "sources.log.maxBodyBytes (QUEUEBOX_SOURCES_LOG_MAXBODYBYTES) must be above 0"},
		{"268435456", "sources.log.maxBodyBytes (QUEUEBOX_SOURCES_LOG_MAXBODYBYTES) must be at most 268435455, not 268435456"},
	} {
		_, _, err := loadYAML(t, kafkaSource("    maxBodyBytes: "+tc.value+"\n"), nil, nil)
		require.Error(t, err, tc.value)
		assert.Equal(t, []string{tc.want}, problemStrings(t, err), tc.value)
	}
	// Every broker kind takes it; an HTTP source has the data port's inbox.maxBodyBytes.
	cfg = mustLoad(t, minimalDatabase+`sources:
  q:
    type: rabbitmq
    queueName: incoming
    connectionUrl: amqp://rabbit:5672/
    maxBodyBytes: 10
  n:
    type: nats
    servers: nats://a:4222
    stream: S
    durable: d
    maxBodyBytes: 20
`, nil)
	assert.Equal(t, 10, *blockKey(t, cfg.Sources["q"].Block, "maxBodyBytes").(*int))
	assert.Equal(t, 20, *blockKey(t, cfg.Sources["n"].Block, "maxBodyBytes").(*int))
}
