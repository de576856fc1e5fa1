package config

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// controlsYAML sets every delivery control key: outbox.retry in full, a destination that
// overrides two of its keys, one that sets none, and one with defaults only.
const controlsYAML = minimalDatabase + `outbox:
  retry:
    maxDelayMs: 120000
    jitter: false
    scheduleMs: [1000, 5000, 30000]
    honorRetryAfter: true
destinations:
  orders-api:
    type: http
    baseUrl: https://orders.example.com
    retry:
      scheduleMs: [5000, 30000, 120000, 600000, 3600000, 21600000]
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
  defaults:
    baseUrl: https://defaults.example.com
    circuitBreaker: {}
    rateLimit:
      requestsPerSecond: 5
  empty-breaker:
    baseUrl: https://empty.example.com
    circuitBreaker:
sources:
  hooks:
    path: /hooks
    idempotencyKeyPath: $.id
    topic: hook.open
    rateLimit:
      requestsPerMinute: 600
`

func ms(n int64) *Milliseconds { m := Milliseconds(n); return &m }

func TestDeliveryControlsLoad(t *testing.T) {
	t.Parallel()
	cfg, warnings, err := loadYAML(t, controlsYAML, nil, nil)
	require.NoError(t, err)
	assert.Equal(t, []string{"destinations.orders-api.retry.scheduleMs has delays above the cap outbox.retry.maxDelayMs (120000 ms): " +
		"600000, 3600000, 21600000 wait 120000 ms each; raise the cap, or set it on the same block as the schedule"}, warningStrings(warnings),
		"the destination's schedule takes outbox.retry's cap")

	assert.Equal(t, Retry{MaxDelayMs: ms(120000), Jitter: ptr(false), ScheduleMs: []Milliseconds{1000, 5000, 30000}, HonorRetryAfter: ptr(true)}, cfg.Outbox.Retry)

	api := cfg.Destinations["orders-api"]
	assert.Equal(t, []int{410, 422}, api.TerminalStatuses)
	assert.Equal(t, &CircuitBreaker{FailureThreshold: 3, WindowMs: 10000, CoolDownMs: 5000}, api.CircuitBreaker)
	assert.Equal(t, &DestinationRateLimit{RequestsPerSecond: 50, Burst: 10}, api.RateLimit)
	assert.True(t, api.HasState())
	// Key by key: the schedule and jitter are the destination's, the cap and Retry-After
	// outbox.retry's.
	assert.Equal(t, EffectiveRetry{
		MaxDelayMs: 120000, Jitter: true, HonorRetryAfter: true,
		ScheduleMs: []Milliseconds{5000, 30000, 120000, 600000, 3600000, 21600000},
	}, cfg.EffectiveRetry(api))

	plain := cfg.Destinations["plain"]
	assert.Equal(t, DeliveryControls{}, plain.DeliveryControls)
	assert.False(t, plain.HasState())
	assert.Equal(t, cfg.EffectiveRetry(nil), cfg.EffectiveRetry(plain), "a destination without retry keys has outbox.retry's")

	def := cfg.Destinations["defaults"]
	assert.Equal(t, &CircuitBreaker{FailureThreshold: 5, WindowMs: 60000, CoolDownMs: 30000}, def.CircuitBreaker)
	assert.Equal(t, &DestinationRateLimit{RequestsPerSecond: 5, Burst: 1}, def.RateLimit)
	assert.Equal(t, &CircuitBreaker{FailureThreshold: 5, WindowMs: 60000, CoolDownMs: 30000}, cfg.Destinations["empty-breaker"].CircuitBreaker,
		"a present circuitBreaker key, even empty, turns the breaker on")

	assert.Equal(t, []string{"defaults", "empty-breaker", "orders-api"}, cfg.StatefulDestinations())
	assert.Equal(t, &RateLimit{RequestsPerMinute: 600}, cfg.Sources["hooks"].RateLimit, "a source's rateLimit stays its own")
}

// Without any control key, the configuration is spec/'s: the outbox retry is the doubling
// backoff with jitter, capped at 60 s, and no destination has a control.
func TestDeliveryControlsDefaults(t *testing.T) {
	t.Parallel()
	cfg := mustLoad(t, minimalDatabase+"destinations:\n  web:\n    baseUrl: https://example.com\n", nil)
	want := EffectiveRetry{Jitter: true}
	assert.Equal(t, want, cfg.EffectiveRetry(nil))
	assert.Equal(t, want, cfg.EffectiveRetry(cfg.Destinations["web"]))
	assert.Equal(t, Milliseconds(60000), want.Cap())
	assert.Equal(t, DeliveryControls{}, cfg.Destinations["web"].DeliveryControls)
	assert.Empty(t, cfg.StatefulDestinations())

	assert.Equal(t, Milliseconds(21600000), EffectiveRetry{ScheduleMs: []Milliseconds{5000, 21600000, 60000}}.Cap(),
		"with a schedule and no maxDelayMs the cap is the largest entry")
	assert.Equal(t, Milliseconds(1000), EffectiveRetry{MaxDelayMs: 1000, ScheduleMs: []Milliseconds{5000}}.Cap())
}

// Every key has its QUEUEBOX_ variable, named by the usual mapping.
func TestDeliveryControlsFromVariables(t *testing.T) {
	t.Parallel()
	cfg, warnings, err := loadYAML(t, minimalDatabase+"destinations:\n  web:\n    baseUrl: https://example.com\n  bus:\n    url: amqp://r:5672\n    exchange: x\n", map[string]string{
		"QUEUEBOX_OUTBOX_RETRY_MAXDELAYMS":                          "300000",
		"QUEUEBOX_OUTBOX_RETRY_JITTER":                              "false",
		"QUEUEBOX_OUTBOX_RETRY_SCHEDULEMS_0":                        "1000",
		"QUEUEBOX_OUTBOX_RETRY_SCHEDULEMS_1":                        "2000",
		"QUEUEBOX_OUTBOX_RETRY_HONORRETRYAFTER":                     "true",
		"QUEUEBOX_DESTINATIONS_WEB_RETRY_MAXDELAYMS":                "7000",
		"QUEUEBOX_DESTINATIONS_WEB_RETRY_JITTER":                    "true",
		"QUEUEBOX_DESTINATIONS_WEB_RETRY_SCHEDULEMS_0":              "3000",
		"QUEUEBOX_DESTINATIONS_WEB_RETRY_HONORRETRYAFTER":           "false",
		"QUEUEBOX_DESTINATIONS_WEB_TERMINALSTATUSES_0":              "410",
		"QUEUEBOX_DESTINATIONS_WEB_CIRCUITBREAKER_FAILURETHRESHOLD": "2",
		"QUEUEBOX_DESTINATIONS_WEB_CIRCUITBREAKER_WINDOWMS":         "1000",
		"QUEUEBOX_DESTINATIONS_WEB_CIRCUITBREAKER_COOLDOWNMS":       "2000",
		"QUEUEBOX_DESTINATIONS_WEB_RATELIMIT_REQUESTSPERSECOND":     "20",
		"QUEUEBOX_DESTINATIONS_WEB_RATELIMIT_BURST":                 "4",
		"QUEUEBOX_DESTINATIONS_BUS_RATELIMIT_REQUESTSPERSECOND":     "3",
	}, nil)
	require.NoError(t, err)
	assert.Empty(t, warnings)
	assert.Equal(t, EffectiveRetry{MaxDelayMs: 300000, ScheduleMs: []Milliseconds{1000, 2000}, HonorRetryAfter: true}, cfg.EffectiveRetry(nil))
	web := cfg.Destinations["web"]
	assert.Equal(t, EffectiveRetry{MaxDelayMs: 7000, Jitter: true, ScheduleMs: []Milliseconds{3000}}, cfg.EffectiveRetry(web))
	assert.Equal(t, []int{410}, web.TerminalStatuses)
	assert.Equal(t, &CircuitBreaker{FailureThreshold: 2, WindowMs: 1000, CoolDownMs: 2000}, web.CircuitBreaker)
	assert.Equal(t, &DestinationRateLimit{RequestsPerSecond: 20, Burst: 4}, web.RateLimit)
	assert.Equal(t, &DestinationRateLimit{RequestsPerSecond: 3, Burst: 1}, cfg.Destinations["bus"].RateLimit,
		"a rate limit and a breaker work on every kind of destination")

	for key, variable := range map[string]string{
		"outbox.retry.scheduleMs[0]":                      "QUEUEBOX_OUTBOX_RETRY_SCHEDULEMS_0",
		"destinations.web.terminalStatuses[0]":            "QUEUEBOX_DESTINATIONS_WEB_TERMINALSTATUSES_0",
		"destinations.web.circuitBreaker.coolDownMs":      "QUEUEBOX_DESTINATIONS_WEB_CIRCUITBREAKER_COOLDOWNMS",
		"destinations.web.rateLimit.requestsPerSecond":    "QUEUEBOX_DESTINATIONS_WEB_RATELIMIT_REQUESTSPERSECOND",
		"destinations.web.retry.honorRetryAfter":          "QUEUEBOX_DESTINATIONS_WEB_RETRY_HONORRETRYAFTER",
		"destinations.orders_api.circuitBreaker.windowMs": "QUEUEBOX_DESTINATIONS_ORDERS__API_CIRCUITBREAKER_WINDOWMS",
	} {
		assert.Equal(t, variable, EnvVarName(key), key)
	}
}

// Every rule of the controls refuses its key, with the key path and the variable, in the
// error style of every other key; config check and serve load alike, so both refuse.
func TestDeliveryControlsProblems(t *testing.T) {
	t.Parallel()
	long := strings.TrimSuffix(strings.Repeat("1000, ", 1001), ", ")
	tests := []struct {
		name, yaml string
		want       []string
	}{
		{name: "terminal statuses on a broker destination",
			yaml: "destinations:\n  bus:\n    url: amqp://r:5672\n    exchange: x\n    terminalStatuses: [410]\n",
			want: []string{"destinations.bus.terminalStatuses (QUEUEBOX_DESTINATIONS_BUS_TERMINALSTATUSES) is a key of http destinations only, but destinations.bus is of the rabbitmq kind: remove it"}},
		{name: "a 2xx terminal status",
			yaml: "destinations:\n  web:\n    baseUrl: https://e.com\n    terminalStatuses: [410, 200, 302, 600]\n",
			want: []string{
				"destinations.web.terminalStatuses[1] (QUEUEBOX_DESTINATIONS_WEB_TERMINALSTATUSES_1) must be an HTTP status from 400 to 599, not 200",
				"destinations.web.terminalStatuses[2] (QUEUEBOX_DESTINATIONS_WEB_TERMINALSTATUSES_2) must be an HTTP status from 400 to 599, not 302",
				"destinations.web.terminalStatuses[3] (QUEUEBOX_DESTINATIONS_WEB_TERMINALSTATUSES_3) must be an HTTP status from 400 to 599, not 600",
			}},
		{name: "a zero cap and a zero entry",
			yaml: "outbox:\n  retry:\n    maxDelayMs: 0\n    scheduleMs: [1000, 0]\n",
			want: []string{
				"outbox.retry.maxDelayMs (QUEUEBOX_OUTBOX_RETRY_MAXDELAYMS) must be above 0",
				"outbox.retry.scheduleMs[1] (QUEUEBOX_OUTBOX_RETRY_SCHEDULEMS_1) must be above 0",
			}},
		{name: "an empty schedule",
			yaml: "destinations:\n  web:\n    baseUrl: https://e.com\n    retry:\n      scheduleMs: []\n",
			want: []string{"destinations.web.retry.scheduleMs (QUEUEBOX_DESTINATIONS_WEB_RETRY_SCHEDULEMS) must hold at least one delay; leave the key out for the doubling backoff"}},
		{name: "a schedule too long",
			yaml: "outbox:\n  retry:\n    scheduleMs: [" + long + "]\n",
			want: []string{"outbox.retry.scheduleMs (QUEUEBOX_OUTBOX_RETRY_SCHEDULEMS) must hold at most 1000 delays, not 1001"}},
		{name: "an entry beyond the bound",
			yaml: "destinations:\n  web:\n    baseUrl: https://e.com\n    retry:\n      scheduleMs: [2147483648]\n",
			want: []string{"destinations.web.retry.scheduleMs[0] (QUEUEBOX_DESTINATIONS_WEB_RETRY_SCHEDULEMS_0) must be at most 2147483647, not 2147483648"}},
		{name: "a jitter that is not a bool",
			yaml: "outbox:\n  retry:\n    jitter: maybe\n",
			want: []string{`outbox.retry.jitter (QUEUEBOX_OUTBOX_RETRY_JITTER) must be true or false, not "maybe" (/etc/queuebox/queuebox.yml line 7)`}},
		{name: "a breaker of zeros",
			yaml: "destinations:\n  web:\n    baseUrl: https://e.com\n    circuitBreaker:\n      failureThreshold: 0\n      windowMs: -1\n      coolDownMs: 0\n",
			want: []string{
				"destinations.web.circuitBreaker.failureThreshold (QUEUEBOX_DESTINATIONS_WEB_CIRCUITBREAKER_FAILURETHRESHOLD) must be above 0",
				"destinations.web.circuitBreaker.windowMs (QUEUEBOX_DESTINATIONS_WEB_CIRCUITBREAKER_WINDOWMS) must be above 0",
				"destinations.web.circuitBreaker.coolDownMs (QUEUEBOX_DESTINATIONS_WEB_CIRCUITBREAKER_COOLDOWNMS) must be above 0",
			}},
		{name: "a breaker threshold beyond the bound",
			yaml: "destinations:\n  web:\n    baseUrl: https://e.com\n    circuitBreaker:\n      failureThreshold: 1000001\n",
			want: []string{"destinations.web.circuitBreaker.failureThreshold (QUEUEBOX_DESTINATIONS_WEB_CIRCUITBREAKER_FAILURETHRESHOLD) must be at most 1000000, not 1000001"}},
		{name: "a rate limit without its rate",
			yaml: "destinations:\n  web:\n    baseUrl: https://e.com\n    rateLimit:\n      burst: 0\n",
			want: []string{
				"destinations.web.rateLimit.requestsPerSecond (QUEUEBOX_DESTINATIONS_WEB_RATELIMIT_REQUESTSPERSECOND) is required when destinations.web.rateLimit is set: from 1 to 100000",
				"destinations.web.rateLimit.burst (QUEUEBOX_DESTINATIONS_WEB_RATELIMIT_BURST) must be above 0",
			}},
		{name: "a rate beyond the bound",
			yaml: "destinations:\n  web:\n    baseUrl: https://e.com\n    rateLimit:\n      requestsPerSecond: 100001\n      burst: 100001\n",
			want: []string{
				"destinations.web.rateLimit.requestsPerSecond (QUEUEBOX_DESTINATIONS_WEB_RATELIMIT_REQUESTSPERSECOND) must be at most 100000, not 100001",
				"destinations.web.rateLimit.burst (QUEUEBOX_DESTINATIONS_WEB_RATELIMIT_BURST) must be at most 100000, not 100001",
			}},
		{name: "a negative rate",
			yaml: "destinations:\n  web:\n    baseUrl: https://e.com\n    rateLimit:\n      requestsPerSecond: -5\n",
			want: []string{"destinations.web.rateLimit.requestsPerSecond (QUEUEBOX_DESTINATIONS_WEB_RATELIMIT_REQUESTSPERSECOND) must be above 0"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, _, err := loadYAML(t, minimalDatabase+tt.yaml, nil, nil)
			require.Error(t, err)
			assert.Equal(t, tt.want, problemStrings(t, err))
		})
	}
}

// config check prints the controls of a destination that sets them, and nothing of them for
// one that does not; outbox.retry shows its effective switches.
func TestDeliveryControlsInConfigCheck(t *testing.T) {
	t.Parallel()
	cfg := mustLoad(t, controlsYAML, nil)
	out, err := cfg.MaskedYAML()
	require.NoError(t, err)
	text := string(out)
	for _, want := range []string{
		"  retry:\n    maxDelayMs: 120000\n    jitter: false\n    scheduleMs:\n      - 1000\n      - 5000\n      - 30000\n    honorRetryAfter: true\n",
		"    terminalStatuses:\n      - 410\n      - 422\n    circuitBreaker:\n      failureThreshold: 3\n      windowMs: 10000\n      coolDownMs: 5000\n    rateLimit:\n      requestsPerSecond: 50\n      burst: 10\n",
		"  defaults:\n    type: http\n    baseUrl: https://defaults.example.com\n    path: /\n    timeoutMs: 30000\n    circuitBreaker:\n      failureThreshold: 5\n      windowMs: 60000\n      coolDownMs: 30000\n    rateLimit:\n      requestsPerSecond: 5\n      burst: 1\n",
	} {
		assert.Contains(t, text, want)
	}
	_, plain, ok := strings.Cut(text, "  plain:\n")
	require.True(t, ok)
	plain, _, _ = strings.Cut(plain, "\n  ")
	for _, key := range []string{"retry", "terminalStatuses", "circuitBreaker", "rateLimit"} {
		assert.NotContains(t, plain, key, "a destination without controls prints none")
	}

	def, err := mustLoad(t, minimalDatabase, nil).MaskedYAML()
	require.NoError(t, err)
	assert.NotContains(t, string(def), "retry:", "with no control set, config check prints what it printed before the controls existed")
}

// The bounds table has a row for each control's numbers.
func TestDeliveryControlBoundsAreRows(t *testing.T) {
	t.Parallel()
	for _, key := range []string{
		"outbox.retry.maxDelayMs", "outbox.retry.scheduleMs[*]",
		"destinations.*.retry.maxDelayMs", "destinations.*.retry.scheduleMs[*]", "destinations.*.terminalStatuses[*]",
		"destinations.*.circuitBreaker.failureThreshold", "destinations.*.circuitBreaker.windowMs", "destinations.*.circuitBreaker.coolDownMs",
		"destinations.*.rateLimit.requestsPerSecond", "destinations.*.rateLimit.burst",
	} {
		_, ok := boundOf()[key]
		assert.True(t, ok, fmt.Sprintf("no bound for %s", key))
	}
}

// A schedule with delays above the cap that applies to it loads, with a warning that names
// the schedule, the cap and what the delays become: a destination's schedule takes
// outbox.retry.maxDelayMs when it sets no cap of its own.
func TestRetryScheduleAboveItsCapWarns(t *testing.T) {
	t.Parallel()
	_, warnings, err := loadYAML(t, minimalDatabase+`outbox:
  retry:
    maxDelayMs: 300000
    scheduleMs: [1000, 600000]
destinations:
  orders:
    baseUrl: https://orders.example.com
    retry:
      scheduleMs: [5000, 3600000, 21600000]
  capped:
    baseUrl: https://capped.example.com
    retry:
      scheduleMs: [5000, 3600000]
      maxDelayMs: 3600000
  inherits:
    baseUrl: https://inherits.example.com
  lowcap:
    baseUrl: https://lowcap.example.com
    retry:
      maxDelayMs: 1000
`, nil, nil)
	require.NoError(t, err)
	assert.Equal(t, []string{
		"outbox.retry.scheduleMs has delays above the cap outbox.retry.maxDelayMs (300000 ms): 600000 wait 300000 ms each; raise the cap, or set it on the same block as the schedule",
		"outbox.retry.scheduleMs has delays above the cap destinations.lowcap.retry.maxDelayMs (1000 ms): 600000 wait 1000 ms each; raise the cap, or set it on the same block as the schedule",
		"destinations.orders.retry.scheduleMs has delays above the cap outbox.retry.maxDelayMs (300000 ms): 3600000, 21600000 wait 300000 ms each; raise the cap, or set it on the same block as the schedule",
	}, warningStrings(warnings))
}
