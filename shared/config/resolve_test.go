package config

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestExpandPlaceholders(t *testing.T) {
	t.Parallel()
	env := map[string]string{"A": "alpha", "EMPTY": "", "B_2": "beta", "dotted.name": "d"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	tests := []struct {
		name, in, want string
		wantErr        string
	}{
		{name: "no placeholder", in: "plain $ text {}", want: "plain $ text {}"},
		{name: "whole value", in: "${A}", want: "alpha"},
		{name: "inside text", in: "Bearer ${A}-${B_2}!", want: "Bearer alpha-beta!"},
		{name: "fallback unused", in: "${A:-x}", want: "alpha"},
		{name: "fallback for unset", in: "${NOPE:-fall back}", want: "fall back"},
		{name: "fallback for empty", in: "${EMPTY:-x}", want: "x"},
		{name: "empty fallback", in: "${NOPE:-}", want: ""},
		{name: "set but empty without fallback", in: "[${EMPTY}]", want: "[]"},
		{name: "nested fallback", in: "${NOPE:-${A}}", want: "alpha"},
		{name: "dotted name", in: "${dotted.name}", want: "d"},
		{name: "unclosed stays literal", in: "a ${A", want: "a ${A"},
		{name: "not a name stays literal", in: `{"x": "${ 1 }"} ${A}`, want: `{"x": "${ 1 }"} alpha`},
		{name: "unset", in: "x ${DB_PASSWORD} y", wantErr: "reads the placeholder ${DB_PASSWORD}, but the environment variable DB_PASSWORD is not set (write ${DB_PASSWORD:-fallback} for a default)"},
		{name: "unset inside a fallback", in: "${NOPE:-${ALSO_NOPE}}", wantErr: "reads the placeholder ${ALSO_NOPE}, but the environment variable ALSO_NOPE is not set (write ${ALSO_NOPE:-fallback} for a default)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := expandPlaceholders(tt.in, lookup)
			if tt.wantErr != "" {
				assert.EqualError(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestLoadResolvesPlaceholdersInAnyValue(t *testing.T) {
	t.Parallel()
	file := `database:
  url: jdbc:postgresql://${DB_HOST:-localhost}:${DB_PORT}/queuebox
  username: ${DB_USER:-queuebox}
  password: ${DB_PASSWORD}
outbox:
  batchSize: ${BATCH}
destinations:
  static-api:
    baseUrl: https://static.example.com
    auth:
      headerValue: "Bearer ${STATIC_TOKEN}"
`
	cfg, _, err := loadYAML(t, file, map[string]string{
		"DB_PORT": "6543", "DB_PASSWORD": "pw", "BATCH": "42", "STATIC_TOKEN": "tok",
		"QUEUEBOX_OUTBOX_CONCURRENCY": "${CONC:-3}",
	}, nil)
	require.NoError(t, err)
	assert.Equal(t, "jdbc:postgresql://localhost:6543/queuebox", cfg.Database.URL.Reveal())
	assert.Equal(t, "queuebox", cfg.Database.Username)
	assert.Equal(t, "pw", cfg.Database.Password.Reveal())
	assert.Equal(t, 42, cfg.Outbox.BatchSize)
	assert.Equal(t, 3, cfg.Outbox.Concurrency, "a variable's value resolves its placeholders too")
	assert.Equal(t, "Bearer tok", cfg.Destinations["static-api"].HTTP.Auth.Header.HeaderValue.Reveal())
}

func TestLoadUnsetPlaceholderNamesTheKeyAndTheVariable(t *testing.T) {
	t.Parallel()
	_, _, err := loadYAML(t, minimalDatabase+"admin:\n  enabled: true\n  auth:\n    token: ${ADMIN_TOKEN}\n", nil, nil)
	assert.Equal(t, []string{
		"admin.auth.token (QUEUEBOX_ADMIN_AUTH_TOKEN) reads the placeholder ${ADMIN_TOKEN}, but the environment variable ADMIN_TOKEN is not set (write ${ADMIN_TOKEN:-fallback} for a default) (/etc/queuebox/queuebox.yml line 8)",
	}, problemStrings(t, err))
}

func TestLoadPlaceholderInAnUnknownKeyIsNoError(t *testing.T) {
	t.Parallel()
	_, warnings, err := loadYAML(t, minimalDatabase+"extra:\n  token: ${NOT_SET}\n", nil, nil)
	require.NoError(t, err)
	assert.Len(t, warnings, 1)
}

func TestLoadFileSecrets(t *testing.T) {
	t.Parallel()
	secrets := memFiles{
		"/run/secrets/db":      "db-pass\n",
		"/run/secrets/crlf":    "crlf-pass\r\n",
		"/run/secrets/two":     "two-lines\n\n",
		"/run/secrets/none":    "no-newline",
		"/run/secrets/spaces":  "  spaced  \n",
		"/run/secrets/admin":   "admin-token\n",
		"/run/secrets/hmac":    "whsec_1\n",
		"/run/secrets/oauth":   "client-secret\n",
		"/run/secrets/capture": "capture-pass\n",
	}
	file := `database:
  url: jdbc:postgresql://db:5432/queuebox
  username: queuebox
  password: file:/run/secrets/db
outbox:
  capture:
    connection:
      password: file:/run/secrets/${CAPTURE_FILE}
admin:
  enabled: true
  auth:
    type: bearer
    token: file:/run/secrets/admin
destinations:
  crlf:
    baseUrl: https://a.example.com
    auth:
      username: u
      password: file:/run/secrets/crlf
  two:
    baseUrl: https://a.example.com
    auth:
      headerValue: file:/run/secrets/two
  none:
    baseUrl: https://a.example.com
    auth:
      clientId: c
      clientSecret: file:/run/secrets/none
      tokenUrl: https://auth.example.com/token
  spaces:
    bootstrapServers: k:9092
    topic: t
    securityProtocol: SASL_SSL
    saslMechanism: PLAIN
    saslUsername: u
    saslPassword: file:/run/secrets/spaces
sources:
  stripe:
    path: /stripe
    idempotencyKeyPath: $.id
    eventTypePath: $.type
    auth:
      secret: file:/run/secrets/hmac
`
	cfg, _, err := loadYAML(t, file, map[string]string{"CAPTURE_FILE": "capture"}, secrets)
	require.NoError(t, err)
	assert.Equal(t, "db-pass", cfg.Database.Password.Reveal())
	assert.Equal(t, "capture-pass", cfg.Outbox.Capture.Connection.Password.Reveal(), "placeholders resolve before file:")
	assert.Equal(t, "admin-token", cfg.Admin.Auth.Bearer.Token.Reveal())
	assert.Equal(t, "crlf-pass", cfg.Destinations["crlf"].HTTP.Auth.Basic.Password.Reveal())
	assert.Equal(t, "two-lines\n", cfg.Destinations["two"].HTTP.Auth.Header.HeaderValue.Reveal(), "one newline goes")
	assert.Equal(t, "no-newline", cfg.Destinations["none"].HTTP.Auth.OAuth2.ClientSecret.Reveal())
	assert.Equal(t, "  spaced  ", blockKey(t, cfg.Destinations["spaces"].Block, "saslPassword").(Secret).Reveal())
	assert.Equal(t, "whsec_1", cfg.Sources["stripe"].HTTP.Auth.HMAC.Secret.Reveal())

	t.Run("a variable takes file: as well", func(t *testing.T) {
		t.Parallel()
		cfg, _, err := loadYAML(t, minimalDatabase, map[string]string{"QUEUEBOX_DATABASE_PASSWORD": "file:/run/secrets/db"}, secrets)
		require.NoError(t, err)
		assert.Equal(t, "db-pass", cfg.Database.Password.Reveal())
	})
}

func TestLoadUnreadableSecretFile(t *testing.T) {
	t.Parallel()
	_, _, err := loadYAML(t, minimalDatabase+"sources:\n  stripe:\n    path: /s\n    idempotencyKeyPath: $.id\n    eventTypePath: $.type\n    auth:\n      secret: file:/run/secrets/missing\n",
		map[string]string{"QUEUEBOX_DATABASE_PASSWORD": "file:/run/secrets/gone", "QUEUEBOX_ADMIN_AUTH_TOKEN": "file:"}, nil)
	assert.Equal(t, []string{
		"database.password (QUEUEBOX_DATABASE_PASSWORD) names the secret file /run/secrets/gone, which cannot be read: open /run/secrets/gone: file does not exist",
		"sources.stripe.auth.secret (QUEUEBOX_SOURCES_STRIPE_AUTH_SECRET) names the secret file /run/secrets/missing, which cannot be read: open /run/secrets/missing: file does not exist (/etc/queuebox/queuebox.yml line 11)",
		"admin.auth.token (QUEUEBOX_ADMIN_AUTH_TOKEN) names no file after file:",
	}, problemStrings(t, err))
}

func TestLoadFileIsLiteralOnURLs(t *testing.T) {
	t.Parallel()
	secrets := memFiles{"/run/secrets/url": "jdbc:postgresql://db:5432/queuebox\n", "/run/secrets/amqp": "amqp://rabbitmq\n"}
	file := `database:
  url: file:/run/secrets/url
  username: queuebox
  password: secret
destinations:
  events:
    url: file:/run/secrets/amqp
    exchange: events
sources:
  queue:
    queueName: q
    connectionUrl: file:/run/secrets/amqp
`
	_, _, err := loadYAML(t, file, nil, secrets)
	assert.Equal(t, []string{
		`database.url (QUEUEBOX_DATABASE_URL) must start with jdbc:postgresql:// or jdbc:sqlserver:// (or be a native postgres:// or sqlserver:// URL), not "file:/run/secrets/url" (database.url takes no file: reference; supply the URL through QUEUEBOX_DATABASE_URL)`,
		`destinations.events.url (QUEUEBOX_DESTINATIONS_EVENTS_URL) must be an amqp:// or amqps:// URI with a host, not "file:/run/secrets/amqp" (a file: reference is read literally here; supply the URI through its variable)`,
		`sources.queue.connectionUrl (QUEUEBOX_SOURCES_QUEUE_CONNECTIONURL) must be an amqp:// or amqps:// URI with a host, not "file:/run/secrets/amqp" (a file: reference is read literally here; supply the URI through its variable)`,
	}, problemStrings(t, err))
}
