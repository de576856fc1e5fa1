package capturenode

import (
	"context"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/alternayte/queuebox/shared/service"
)

func load(t *testing.T, extra map[string]string) *service.Config {
	t.Helper()
	env := map[string]string{
		"QUEUEBOX_DATABASE_URL":      "jdbc:postgresql://127.0.0.1:1/queuebox",
		"QUEUEBOX_DATABASE_USERNAME": "queuebox",
		"QUEUEBOX_DATABASE_PASSWORD": "secret",
	}
	for k, v := range extra {
		env[k] = v
	}
	cfg, err := service.LoadEnv(env)
	require.NoError(t, err)
	return cfg
}

// The poll function is required with capture, and only then.
func TestParseSettingsNeedsThePollFunctionOnlyWithCapture(t *testing.T) {
	t.Parallel()
	_, err := ParseSettings(map[string]string{}, true)
	require.EqualError(t, err, "CAPTURE_POLL_FUNCTION is not set; it names the poll function that capture wakes")
	s, err := ParseSettings(map[string]string{RelayFunctionVariable: "queuebox-relay"}, false)
	require.NoError(t, err)
	assert.Empty(t, s.PollFunction)
	assert.Equal(t, "queuebox-relay", s.RelayFunction)
	_, err = ParseSettings(map[string]string{WakeIntervalVariable: "0"}, false)
	assert.ErrorContains(t, err, "CAPTURE_WAKE_INTERVAL_MS is \"0\"", "the other settings are checked either way")
}

// HasBrokerSources counts the RabbitMQ, Kafka and NATS sources, not the HTTP ones.
func TestHasBrokerSources(t *testing.T) {
	t.Parallel()
	assert.False(t, HasBrokerSources(load(t, nil)))
	assert.False(t, HasBrokerSources(load(t, map[string]string{
		"QUEUEBOX_SOURCES_HOOK_TYPE": "http", "QUEUEBOX_SOURCES_HOOK_PATH": "/hook", "QUEUEBOX_SOURCES_HOOK_IDEMPOTENCYKEYPATH": "$.id", "QUEUEBOX_SOURCES_HOOK_TOPIC": "hook.received",
	})), "an HTTP source is served by the inbox, not by the node")
	assert.True(t, HasBrokerSources(load(t, map[string]string{
		"QUEUEBOX_SOURCES_ORDERS_TYPE": "rabbitmq", "QUEUEBOX_SOURCES_ORDERS_QUEUENAME": "orders",
		"QUEUEBOX_SOURCES_ORDERS_CONNECTIONURL": "amqp://127.0.0.1:1/", "QUEUEBOX_SOURCES_ORDERS_TOPIC": "order.received",
	})))
}

// A node with neither capture nor a broker source is refused before it connects anywhere,
// with a reason that names both; so is capture without the poll function to wake.
func TestNewRefusesANodeWithNothingToRun(t *testing.T) {
	t.Parallel()
	log := slog.New(slog.DiscardHandler)
	_, err := New(context.Background(), load(t, map[string]string{
		"QUEUEBOX_SOURCES_HOOK_TYPE": "http", "QUEUEBOX_SOURCES_HOOK_PATH": "/hook", "QUEUEBOX_SOURCES_HOOK_IDEMPOTENCYKEYPATH": "$.id", "QUEUEBOX_SOURCES_HOOK_TOPIC": "hook.received",
	}), Settings{PollFunction: "queuebox-poll"}, Options{}, log)
	var se *service.StartError
	require.ErrorAs(t, err, &se)
	assert.Equal(t, "QueueBox could not start the capture node. Reason: "+errNothingToRun.Error(), err.Error())
	assert.Contains(t, err.Error(), "outbox.capture.enabled")
	assert.Contains(t, err.Error(), "broker source")

	_, err = New(context.Background(), load(t, map[string]string{
		"QUEUEBOX_OUTBOX_CAPTURE_ENABLED": "true", "QUEUEBOX_OUTBOX_CAPTURE_MODE": "postgres-logical",
		"QUEUEBOX_OUTBOX_CAPTURE_STATEDIRECTORY": t.TempDir(),
	}), Settings{}, Options{}, log)
	require.ErrorAs(t, err, &se)
	assert.Equal(t, "QueueBox could not start capture. Reason: CAPTURE_POLL_FUNCTION is not set; it names the poll function that capture wakes", err.Error())
}
