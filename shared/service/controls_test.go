package service

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/alternayte/queuebox/shared/connect"
	"github.com/alternayte/queuebox/shared/connect/rabbitmq/rabbitmqconfig"
	"github.com/alternayte/queuebox/shared/outbox"
)

// controlsFile sets every delivery control key (docs/delivery-controls.md, "Configuration").
const controlsFile = `outbox:
  retry:
    maxDelayMs: 120000
    jitter: false
    honorRetryAfter: true
destinations:
  orders-api:
    type: http
    baseUrl: https://orders.example.com
    retry:
      scheduleMs: [5000, 30000, 120000]
      jitter: true
    terminalStatuses: [410, 422]
    circuitBreaker:
      failureThreshold: 3
      windowMs: 10000
      coolDownMs: 5000
    rateLimit:
      requestsPerSecond: 50
      burst: 10
  plain:
    baseUrl: https://plain.example.com
  bus:
    url: amqp://rabbitmq:5672
    exchange: events
    circuitBreaker: {}
    rateLimit:
      requestsPerSecond: 5
`

// A loaded queuebox.yml reaches the poller's and the publishers' settings: outbox.retry the
// outbox.Config, each destination's controls its outbox.Destination (its retry keys over
// outbox.retry's, key by key), and terminalStatuses the webhook publisher.
func TestDeliveryControlsReachTheOutbox(t *testing.T) {
	t.Parallel()
	cfg := loadYAML(t, controlsFile, nil)

	oc := OutboxConfig(cfg)
	assert.Equal(t, outbox.RetryPolicy{MaxDelay: 2 * time.Minute, NoJitter: true, HonorRetryAfter: true}, oc.Retry)
	assert.Equal(t, 60*time.Second, oc.MaxRetryDelay, "the fixed cap of spec/ stays the poller's default")

	rabbit := connect.Connector{Kind: rabbitmqconfig.Kind, Publisher: func(context.Context, connect.PublisherParams) (outbox.Publisher, func(), error) {
		return namedPublisher{}, func() {}, nil
	}}
	dests, closeAll, err := Publishers(context.Background(), cfg, nil, newEngine(), slog.New(slog.DiscardHandler), rabbit)
	require.NoError(t, err)
	defer closeAll()
	byName := map[string]outbox.Destination{}
	for _, d := range dests {
		byName[d.Name] = d
	}
	require.Len(t, byName, 3)

	api := byName["orders-api"]
	assert.Equal(t, &outbox.RetryPolicy{
		MaxDelay: 2 * time.Minute, HonorRetryAfter: true,
		Schedule: []time.Duration{5 * time.Second, 30 * time.Second, 2 * time.Minute},
	}, api.Retry)
	assert.Equal(t, &outbox.BreakerPolicy{Threshold: 3, Window: 10 * time.Second, CoolDown: 5 * time.Second}, api.Breaker)
	assert.Equal(t, &outbox.RateLimit{RequestsPerSecond: 50, Burst: 10}, api.RateLimit)

	plain := byName["plain"]
	assert.Nil(t, plain.Retry, "a destination without retry keys takes the outbox's policy")
	assert.Nil(t, plain.Breaker)
	assert.Nil(t, plain.RateLimit)

	bus := byName["bus"]
	assert.Equal(t, &outbox.BreakerPolicy{Threshold: 5, Window: time.Minute, CoolDown: 30 * time.Second}, bus.Breaker)
	assert.Equal(t, &outbox.RateLimit{RequestsPerSecond: 5, Burst: 1}, bus.RateLimit)

	assert.Equal(t, []int{410, 422}, webhookConfig(cfg, cfg.Destinations["orders-api"]).TerminalStatuses)
	assert.Empty(t, webhookConfig(cfg, cfg.Destinations["plain"]).TerminalStatuses)
}

// Without a control key, the mapping is spec/'s: the zero retry policy (the doubling
// backoff with jitter, capped at 60 s) and no destination control.
func TestNoDeliveryControlKeepsTheDefaults(t *testing.T) {
	t.Parallel()
	cfg := loadYAML(t, "destinations:\n  web:\n    baseUrl: https://example.com\n", nil)
	assert.Equal(t, outbox.RetryPolicy{}, OutboxConfig(cfg).Retry)
	dests, closeAll, err := Publishers(context.Background(), cfg, nil, newEngine(), slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	defer closeAll()
	require.Len(t, dests, 1)
	assert.Nil(t, dests[0].Retry)
	assert.Nil(t, dests[0].Breaker)
	assert.Nil(t, dests[0].RateLimit)
}
