package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/alternayte/queuebox/shared/kind"
)

// exampleEnv gives the placeholders of spec/examples/queuebox.yml their values.
var exampleEnv = map[string]string{
	ConfigFileVariable:      "testdata/example-queuebox.yml",
	"DB_PASSWORD":           "db-pass",
	"ADMIN_TOKEN":           "admin-token",
	"ORDERS_CLIENT_SECRET":  "orders-secret",
	"STRIPE_WEBHOOK_SECRET": "stripe-secret",
}

func TestLoadTheCompleteExample(t *testing.T) {
	t.Parallel()
	cfg, warnings, err := Load(LoadOptions{Components: testComponents(), Env: exampleEnv, ReadFile: os.ReadFile})
	require.NoError(t, err)
	assert.Empty(t, warnings)
	assert.Equal(t, "testdata/example-queuebox.yml", cfg.Origin.File)

	assert.Equal(t, Server{HTTPPort: 8080, ManagementPort: 9090, ReadHeaderTimeoutMs: 10000, ReadBodyTimeoutMs: 60000}, cfg.Server)

	db := cfg.Database
	assert.Equal(t, PostgreSQL, db.Type)
	assert.Equal(t, "jdbc:postgresql://db:5432/queuebox", db.URL.Reveal())
	assert.Equal(t, "queuebox", db.Username)
	assert.Equal(t, "db-pass", db.Password.Reveal())
	assert.Equal(t, 10, db.PoolSize)
	assert.Equal(t, Milliseconds(30000), db.ConnectionTimeoutMs)
	assert.Equal(t, Milliseconds(60000), db.StartupTimeoutMs)
	assert.True(t, db.Migrate)
	assert.Equal(t, DefaultTables(), db.Tables())

	want := Default().Outbox
	assert.Equal(t, want, cfg.Outbox)

	assert.Equal(t, Inbox{BasePath: "/inbox", MaxBodyBytes: 1048576, Relay: Relay{
		Enabled: true, PollIntervalMs: 100, BatchSize: 100, ClaimTimeoutMs: 300000, PendingGaugeIntervalMs: 5000, MaxAttempts: 10,
	}}, cfg.Inbox)
	assert.Equal(t, HTTP{MaxErrorBodyBytes: 2048}, cfg.HTTP)

	assert.True(t, cfg.Admin.Enabled)
	require.NotNil(t, cfg.Admin.Auth)
	assert.Equal(t, AuthBearer, cfg.Admin.Auth.Kind)
	assert.Equal(t, "admin-token", cfg.Admin.Auth.Bearer.Token.Reveal())
	assert.Equal(t, Milliseconds(1000), cfg.Admin.MaxTransformTimeoutMs)
	assert.Equal(t, int64(65536), cfg.Admin.MaxPayloadBytes)

	require.Len(t, cfg.Destinations, 4)
	api := cfg.Destinations["orders-api"]
	assert.Equal(t, kind.HTTP, api.Kind)
	assert.Nil(t, api.Block)
	assert.Equal(t, &HTTPDestination{BaseURL: "https://orders.example.com", Path: "/events", TimeoutMs: 30000, Auth: api.HTTP.Auth}, api.HTTP)
	assert.Equal(t, map[string]string{"X-Team": "orders"}, api.Headers)
	assert.Equal(t, AuthOAuth2, api.HTTP.Auth.Kind)
	assert.Equal(t, "queuebox", api.HTTP.Auth.OAuth2.ClientID)
	assert.Equal(t, "orders-secret", api.HTTP.Auth.OAuth2.ClientSecret.Reveal())
	assert.Equal(t, "https://auth.example.com/oauth/token", api.HTTP.Auth.OAuth2.TokenURL)
	assert.Equal(t, &Transform{Expression: `{ "data": $, "topic": $topic }`, TimeoutMs: 100, MaxDepth: 100, OnError: OnErrorFail}, api.Transform)

	ex := cfg.Destinations["events-exchange"]
	assert.Equal(t, SourceKind("rabbitmq"), ex.Kind)
	assert.Equal(t, "amqp://rabbitmq:5672", blockKey(t, ex.Block, "url").(ConnectionURL).Reveal())
	assert.EqualValues(t, "events.{{ aggregateType }}", blockKey(t, ex.Block, "exchange"))
	assert.EqualValues(t, "topic", blockKey(t, ex.Block, "exchangeType"))
	assert.EqualValues(t, "{{ topic }}", blockKey(t, ex.Block, "routingKeyTemplate"))
	assert.EqualValues(t, "persistent", blockKey(t, ex.Block, "deliveryMode"))

	kt := cfg.Destinations["events-topic"]
	assert.Equal(t, SourceKind("kafka"), kt.Kind)
	assert.EqualValues(t, "kafka-1:9092,kafka-2:9092", blockKey(t, kt.Block, "bootstrapServers"))
	assert.EqualValues(t, "orders", blockKey(t, kt.Block, "topic"))
	assert.EqualValues(t, "{{ key }}", blockKey(t, kt.Block, "keyTemplate"))
	assert.EqualValues(t, "PLAINTEXT", blockKey(t, kt.Block, "securityProtocol"))

	ns := cfg.Destinations["events-subject"]
	assert.Equal(t, SourceKind("nats"), ns.Kind)
	assert.EqualValues(t, "nats://nats:4222", blockKey(t, ns.Block, "servers"))
	assert.EqualValues(t, "orders.{{ topic }}", blockKey(t, ns.Block, "subject"))
	assert.Equal(t, true, blockKey(t, ns.Block, "jetStream"))

	assert.Equal(t, []Route{
		{TopicPattern: "order.*", Destination: "orders-api"},
		{TopicPattern: "event.**", Destination: "events-exchange", RoutingKeyTemplate: "{{ payload.region }}.{{ topic }}", RoutingKeyMissingFieldDefault: "unknown"},
	}, cfg.Routes)

	require.Len(t, cfg.Sources, 5)
	stripe := cfg.Sources["stripe"]
	assert.Equal(t, kind.HTTP, stripe.Kind)
	assert.Equal(t, "/stripe", stripe.HTTP.Path)
	assert.Equal(t, "stripe.{{ eventType }}", stripe.Topic)
	assert.Equal(t, "$.data.object.customer", stripe.AggregateIDPath)
	assert.Equal(t, &RateLimit{RequestsPerMinute: 600}, stripe.RateLimit)
	h := stripe.HTTP.Auth.HMAC
	require.NotNil(t, h)
	assert.Equal(t, "stripe-secret", h.Secret.Reveal())
	assert.Equal(t, "Stripe-Signature", h.HeaderName)
	assert.Equal(t, "v1=", h.SignaturePrefix)
	assert.Equal(t, HmacSHA256, h.Algorithm)
	assert.Equal(t, PayloadBody, h.SignaturePayloadFormat)
	assert.Equal(t, Milliseconds(300000), h.TimestampTolerance)

	orders := cfg.Sources["orders"]
	assert.Equal(t, ConsumptionPull, orders.Consumption)
	assert.Equal(t, "{{ eventType }}", orders.Topic, "a pull source keeps the default topic without an event type")

	queue := cfg.Sources["orders-queue"]
	assert.Equal(t, SourceKind("rabbitmq"), queue.Kind)
	assert.EqualValues(t, "incoming-orders", blockKey(t, queue.Block, "queueName"))
	assert.EqualValues(t, 10, blockKey(t, queue.Block, "prefetchCount"))
	assert.EqualValues(t, DefaultAttributeHeaders(), blockKey(t, queue.Block, "attributeHeaders"))
	assert.Equal(t, "{{ source }}", queue.Topic)
	exists := true
	assert.Equal(t, Filter{Exclude: []FilterRule{{Header: "x-test", Exists: &exists}}}, queue.Filter)

	log := cfg.Sources["orders-log"]
	assert.Equal(t, SourceKind("kafka"), log.Kind)
	assert.EqualValues(t, []string{"orders"}, blockKey(t, log.Block, "topics"))
	assert.EqualValues(t, "queuebox-orders", blockKey(t, log.Block, "groupId"))
	assert.EqualValues(t, "earliest", blockKey(t, log.Block, "autoOffsetReset"))
	assert.EqualValues(t, 100, blockKey(t, log.Block, "maxPollRecords"))

	stream := cfg.Sources["orders-stream"]
	assert.Equal(t, SourceKind("nats"), stream.Kind)
	assert.EqualValues(t, "ORDERS", blockKey(t, stream.Block, "stream"))
	assert.EqualValues(t, "orders.>", blockKey(t, stream.Block, "filterSubject"))
	assert.Equal(t, "$.id", stream.IdempotencyKeyPath)
	assert.EqualValues(t, Milliseconds(30000), blockKey(t, stream.Block, "ackWaitMs"))

	assert.True(t, cfg.Retention.Enabled)
	assert.Equal(t, RetentionAge, cfg.Retention.Outbox.Policy)
	assert.Equal(t, "7d", cfg.Retention.Outbox.MaxAge.String())
	assert.Equal(t, 7*24*3600.0, cfg.Retention.Outbox.MaxAge.Duration().Seconds())
	assert.Equal(t, "1h", cfg.Retention.Outbox.CleanupInterval.String())
	assert.Equal(t, "30d", cfg.Retention.Inbox.MaxAge.String())
	assert.Equal(t, "6h", cfg.Retention.Inbox.CleanupInterval.String())
}

func TestTheExampleNeedsItsPlaceholders(t *testing.T) {
	t.Parallel()
	_, _, err := Load(LoadOptions{Components: testComponents(), Env: map[string]string{ConfigFileVariable: "testdata/example-queuebox.yml"}, ReadFile: os.ReadFile})
	problems := problemStrings(t, err)
	require.Len(t, problems, 4)
	for i, name := range []string{"DB_PASSWORD", "ADMIN_TOKEN", "ORDERS_CLIENT_SECRET", "STRIPE_WEBHOOK_SECRET"} {
		assert.Contains(t, problems[i], "${"+name+"}")
	}
}

// fragmentSecrets are the files that the file: references of the fragments read.
var fragmentSecrets = memFiles{
	"/var/run/secrets/queuebox/orders-token": "orders-token\n",
	"/run/secrets/queuebox-admin-token":      "admin-token\n",
	"/run/secrets/queuebox-db-password":      "db-password\n",
	"/run/secrets/stripe-webhook-secret":     "whsec_x\n",
}

// fragmentEnv gives every placeholder of the fragments a value.
var fragmentEnv = map[string]string{
	"DB_PASSWORD": "db-pass", "ADMIN_TOKEN": "admin", "ORDERS_WEBHOOK_TOKEN": "owt", "PARTNER_API_KEY": "pak",
	"GITHUB_WEBHOOK_SECRET": "ghs", "BILLING_WEBHOOK_SECRET": "bws", "CLIENT_SECRET": "cs",
	"LEGACY_API_PASSWORD": "lap", "STATIC_TOKEN": "st", "CAPTURE_PASSWORD": "cap",
}

// databaseVariables are the three variables of spec/24 that are the minimum; they complete a
// fragment that has no database section, as a deployment that mounts it would.
var databaseVariables = map[string]string{
	"QUEUEBOX_DATABASE_URL":      "jdbc:postgresql://db:5432/queuebox",
	"QUEUEBOX_DATABASE_USERNAME": "queuebox",
	"QUEUEBOX_DATABASE_PASSWORD": "secret",
}

// TestEveryConfigurationFragmentOfTheSpecLoads loads each YAML block of ../shared/spec that is a
// QueueBox configuration (testdata/fragments, their indentation restored by hand), with the
// variables that a fragment needs to be complete.
func TestEveryConfigurationFragmentOfTheSpecLoads(t *testing.T) {
	t.Parallel()
	tests := []struct {
		file  string
		env   map[string]string
		unset []string
		check func(t *testing.T, c *Config)
	}{
		{file: "03-delivery-semantics-1.yml", check: func(t *testing.T, c *Config) {
			assert.Equal(t, ConsumptionPull, c.Sources["orders"].Consumption)
		}},
		{file: "04-how-queuebox-works-1.yml", check: func(t *testing.T, c *Config) {
			assert.Equal(t, Milliseconds(300000), c.Inbox.Relay.ClaimTimeoutMs)
			assert.Equal(t, 5, c.Inbox.Relay.MaxAttempts, "the relay inherits outbox.maxAttempts")
		}},
		{file: "05-ordering-1.yml", check: func(t *testing.T, c *Config) {
			assert.Equal(t, "$.orderId", c.Sources["orders"].AggregateIDPath)
		}},
		{file: "06-authenticate-requests-1.yml", check: func(t *testing.T, c *Config) {
			assert.Equal(t, "owt", c.Sources["orders"].HTTP.Auth.Bearer.Token.Reveal())
			assert.Equal(t, "Authorization", c.Sources["orders"].HTTP.Auth.CredentialHeader())
		}},
		{file: "06-authenticate-requests-2.yml", check: func(t *testing.T, c *Config) {
			a := c.Sources["partner"].HTTP.Auth
			assert.Equal(t, AuthAPIKey, a.Kind)
			assert.Equal(t, "X-API-Key", a.CredentialHeader())
			assert.Equal(t, "pak", a.APIKey.Key.Reveal())
		}},
		{file: "06-authenticate-requests-3.yml", check: func(t *testing.T, c *Config) {
			h := c.Sources["github"].HTTP.Auth.HMAC
			assert.Equal(t, "X-Hub-Signature-256", h.HeaderName)
			assert.Equal(t, PayloadBody, h.SignaturePayloadFormat)
		}},
		{file: "06-authenticate-requests-4.yml", check: func(t *testing.T, c *Config) {
			h := c.Sources["billing"].HTTP.Auth.HMAC
			assert.Equal(t, "X-Timestamp", h.TimestampHeader)
			assert.Equal(t, PayloadTimestampDotBody, h.SignaturePayloadFormat, "a timestamp header changes the default")
		}},
		{file: "06-authenticate-requests-5.yml", check: func(t *testing.T, c *Config) {
			assert.Equal(t, "admin", c.Admin.Auth.Bearer.Token.Reveal())
		}},
		{file: "06-authenticate-requests-6.yml", check: func(t *testing.T, c *Config) {
			o := c.Destinations["protected-api"].HTTP.Auth.OAuth2
			assert.Equal(t, "api:write", o.Scope)
			assert.Equal(t, map[string]string{"audience": "https://api.example.com"}, o.ExtraParams)
		}},
		{file: "06-authenticate-requests-7.yml", check: func(t *testing.T, c *Config) {
			b := c.Destinations["legacy-api"].HTTP.Auth.Basic
			assert.Equal(t, "queuebox", b.Username)
			assert.Equal(t, "lap", b.Password.Reveal())
		}},
		{file: "06-authenticate-requests-8.yml", check: func(t *testing.T, c *Config) {
			assert.Equal(t, "Bearer st", c.Destinations["static-api"].HTTP.Auth.Header.HeaderValue.Reveal())
		}},
		{file: "06-authenticate-requests-9.yml", env: map[string]string{
			"QUEUEBOX_SOURCES_ORDERS_PATH": "/orders", "QUEUEBOX_SOURCES_ORDERS_IDEMPOTENCYKEYPATH": "$.id", "QUEUEBOX_SOURCES_ORDERS_EVENTTYPEPATH": "$.type",
		}, check: func(t *testing.T, c *Config) {
			assert.Equal(t, "orders-token", c.Sources["orders"].HTTP.Auth.Bearer.Token.Reveal())
		}},
		{file: "07-bridge-a-broker-1.yml", check: func(t *testing.T, c *Config) {
			s := c.Sources["orders-queue"]
			assert.Equal(t, SourceKind("rabbitmq"), s.Kind)
			assert.Equal(t, "orders.{{ eventType }}", s.Topic)
			assert.Equal(t, "amqp://guest:***@rabbitmq:5672", blockKey(t, s.Block, "connectionUrl").(ConnectionURL).String())
		}},
		{file: "07-bridge-a-broker-2.yml", check: func(t *testing.T, c *Config) {
			assert.EqualValues(t, []string{"orders", "orders-retry"}, blockKey(t, c.Sources["orders-topic"].Block, "topics"))
		}},
		{file: "07-bridge-a-broker-3.yml", check: func(t *testing.T, c *Config) {
			assert.EqualValues(t, "orders.>", blockKey(t, c.Sources["orders-stream"].Block, "filterSubject"))
		}},
		{file: "07-bridge-a-broker-4.yml", check: func(t *testing.T, c *Config) {
			s := c.Sources["outbox-events"]
			assert.EqualValues(t, AttributeHeaders{IdempotencyKey: "id", AggregateID: "aggregateId", EventType: "eventType"}, blockKey(t, s.Block, "attributeHeaders"))
			assert.Equal(t, "$.id", s.IdempotencyKeyPath)
			assert.Equal(t, "{{ source }}", s.Topic)
		}},
		{file: "07-bridge-a-broker-5.yml", check: func(t *testing.T, c *Config) {
			acme := "acme"
			assert.Equal(t, []FilterRule{{Header: "x-tenant", Equals: &acme}}, c.Sources["orders"].Filter.Require)
		}},
		{file: "07-bridge-a-broker-6.yml", check: func(t *testing.T, c *Config) {
			assert.EqualValues(t, "queuebox-events", blockKey(t, c.Destinations["events-exchange"].Block, "exchange"))
		}},
		{file: "07-bridge-a-broker-7.yml", check: func(t *testing.T, c *Config) {
			assert.EqualValues(t, "orders-processed", blockKey(t, c.Destinations["orders-processed"].Block, "topic"))
		}},
		{file: "07-bridge-a-broker-8.yml", check: func(t *testing.T, c *Config) {
			assert.EqualValues(t, "processed.orders", blockKey(t, c.Destinations["orders-processed"].Block, "subject"))
		}},
		{file: "07-bridge-a-broker-9.yml", check: func(t *testing.T, c *Config) {
			assert.EqualValues(t, "public.{{ aggregateType }}.v1", blockKey(t, c.Destinations["domain-events"].Block, "topic"))
		}},
		// The schema and the capture connection of these three fragments, which the dialect
		// table gives, are checked in shared/service (TestCaptureOfTheSpecFragments).
		{file: "08-capture-changes-1.yml", check: func(t *testing.T, c *Config) {
			assert.Equal(t, CapturePostgresLogical, c.Outbox.Capture.Mode)
			assert.True(t, c.Outbox.Capture.Enabled)
			assert.Empty(t, c.Outbox.Capture.Schema)
		}},
		{file: "08-capture-changes-2.yml", check: func(t *testing.T, c *Config) {
			assert.Equal(t, SQLServer, c.Database.Type)
			assert.Equal(t, CaptureSQLServerCDC, c.Outbox.Capture.Mode)
			assert.Empty(t, c.Outbox.Capture.Schema)
		}},
		{file: "08-capture-changes-3.yml", check: func(t *testing.T, c *Config) {
			cc := c.Outbox.Capture.Connection
			assert.Equal(t, "replica.db.internal", cc.Hostname)
			assert.Equal(t, 5433, cc.Port)
			assert.Equal(t, "capture_user", cc.Username)
			assert.Equal(t, "cap", cc.Password.Reveal())
		}},
		{file: "09-consume-the-inbox-1.yml"},
		{file: "09-consume-the-inbox-2.yml"},
		{file: "09-consume-the-inbox-3.yml"},
		{file: "10-fan-out-over-http-1.yml", check: func(t *testing.T, c *Config) {
			assert.Equal(t, map[string]string{"X-Source": "queuebox"}, c.Destinations["analytics"].Headers)
		}},
		{file: "10-fan-out-over-http-2.yml", check: func(t *testing.T, c *Config) {
			assert.Len(t, c.Routes, 2)
		}},
		{file: "10-fan-out-over-http-3.yml"},
		{file: "10-fan-out-over-http-4.yml", check: func(t *testing.T, c *Config) {
			assert.True(t, c.HTTP.BlockPrivateAddresses)
		}},
		{file: "11-replay-dead-letters-1.yml", check: func(t *testing.T, c *Config) {
			assert.Equal(t, "admin-token", c.Admin.Auth.Bearer.Token.Reveal())
		}},
		{file: "12-transform-payloads-1.yml"},
		{file: "12-transform-payloads-2.yml", check: func(t *testing.T, c *Config) {
			tr := c.Routes[0].Transform
			require.NotNil(t, tr)
			assert.Contains(t, tr.Expression, "~> $sum()")
			assert.Equal(t, Milliseconds(150), tr.TimeoutMs)
		}},
		{file: "12-transform-payloads-3.yml", check: func(t *testing.T, c *Config) {
			assert.Equal(t, OnErrorSkip, c.Sources["github"].Transform.OnError)
		}},
		{file: "12-transform-payloads-4.yml"},
		{file: "15-use-custom-tables-1.yml"},
		{file: "15-use-custom-tables-2.yml", check: func(t *testing.T, c *Config) {
			tables := c.Database.Tables()
			assert.Equal(t, "qb_outbox", tables.Outbox)
			assert.Equal(t, "qb_inbox", tables.Inbox)
			assert.Equal(t, "body", tables.OutboxColumns.Payload)
			assert.Equal(t, "dedup_key", tables.InboxColumns.IdempotencyKey)
			assert.Equal(t, "topic", tables.OutboxColumns.Topic, "an omitted key keeps its default")
		}},
		{file: "21-runbook-1.yml", check: func(t *testing.T, c *Config) {
			assert.Equal(t, 20, c.Database.PoolSize)
			assert.Equal(t, 16, c.Outbox.Concurrency)
		}},
		{file: "22-security-2.yml"},
		{file: "22-security-3.yml", unset: []string{"QUEUEBOX_DATABASE_PASSWORD"}, check: func(t *testing.T, c *Config) {
			assert.Equal(t, "db-password", c.Database.Password.Reveal())
			assert.Equal(t, "whsec_x", c.Sources["stripe"].HTTP.Auth.HMAC.Secret.Reveal())
		}},
		{file: "22-security-5.yml"},
		{file: "32-deliver-your-first-outbox-message-1.yml"},
		{file: "33-receive-a-webhook-1.yml"},
	}
	files, err := filepath.Glob("testdata/fragments/*.yml")
	require.NoError(t, err)
	require.Len(t, tests, len(files), "every fragment file has a case")
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			t.Parallel()
			body, err := os.ReadFile(filepath.Join("testdata/fragments", tt.file))
			require.NoError(t, err)
			env := map[string]string{}
			for k, v := range fragmentEnv {
				env[k] = v
			}
			if !strings.Contains(string(body), "  url: jdbc:") {
				for k, v := range databaseVariables {
					env[k] = v
				}
			}
			for k, v := range tt.env {
				env[k] = v
			}
			for _, k := range tt.unset {
				delete(env, k)
			}
			cfg, warnings, err := loadYAML(t, string(body), env, fragmentSecrets)
			require.NoError(t, err)
			assert.Empty(t, warnings)
			if tt.check != nil {
				tt.check(t, cfg)
			}
		})
	}
}
