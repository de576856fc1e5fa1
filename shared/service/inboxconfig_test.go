package service

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/alternayte/queuebox/shared/config"
	"github.com/alternayte/queuebox/shared/filter"
	"github.com/alternayte/queuebox/shared/inboundauth"
	"github.com/alternayte/queuebox/shared/inbox"
	"github.com/alternayte/queuebox/shared/kind"
	"github.com/alternayte/queuebox/shared/transform"
)

// loadYAML loads a configuration file (with the database keys that every file needs prepended)
// and the environment, as the local process does, with the transform compile hook.
func loadYAML(t *testing.T, file string, env map[string]string) *config.Config {
	t.Helper()
	file = "database:\n  url: jdbc:postgresql://db:5432/queuebox\n  username: queuebox\n  password: secret\n" + file
	if env == nil {
		env = map[string]string{}
	}
	cfg, _, err := Load(LoadOptions{Env: env, CompileTransform: newEngine().Check, ReadFile: func(name string) ([]byte, error) {
		if name == config.DefaultConfigFile {
			return []byte(file), nil
		}
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	}})
	require.NoError(t, err)
	return cfg
}

// TestInboxOptionsMapsEveryKey sets every inbox.* key and every key of an HTTP source that the
// inbox handler reads (spec/23-configuration.md, "inbox", "sources", "filter", "transform") and
// checks that each reaches the handler's options.
func TestInboxOptionsMapsEveryKey(t *testing.T) {
	t.Parallel()
	cfg := loadYAML(t, `inbox:
  basePath: /hooks
  maxBodyBytes: 2048
sources:
  orders:
    type: http
    path: /orders
    consumption: pull
    idempotencyKeyPath: $.id
    aggregateIdPath: $.customer
    eventTypePath: $.type
    rateLimit:
      requestsPerMinute: 600
    auth:
      type: api-key
      key: ${ORDERS_KEY}
      headerName: X-Partner-Key
    transform:
      expression: '{ "order": $ }'
      timeoutMs: 25000
      maxDepth: 40
      onError: Skip
    filter:
      require:
        - header: X-Env
          equals: prod
        - header: X-Region
          in: [eu, us]
      exclude:
        - header: X-Event
          matches: "order.test.*"
        - header: X-Test
          exists: true
  plain:
    type: http
    path: /plain
    idempotencyKeyPath: $.key
    eventTypePath: $.type
  bridge:
    type: rabbitmq
    queueName: q
    connectionUrl: amqp://guest:guest@localhost:5672/
    eventTypePath: $.type
`, map[string]string{"ORDERS_KEY": "partner-key-0123456789"})

	opts, err := InboxOptions(cfg, newEngine())
	require.NoError(t, err)
	assert.Equal(t, "/hooks", opts.BasePath)
	assert.EqualValues(t, 2048, opts.MaxBodyBytes)
	require.Len(t, opts.Sources, 2, "the rabbitmq source is left out")
	got := opts.Sources[0]
	assert.Equal(t, "orders", got.Name, "sorted by name")
	assert.Equal(t, "plain", opts.Sources[1].Name)
	assert.Equal(t, "/orders", got.Path)
	assert.Equal(t, "pull", got.Consumption)
	assert.Equal(t, "$.id", got.IdempotencyKeyPath)
	assert.Equal(t, "$.customer", got.AggregateIDPath)
	assert.Equal(t, "$.type", got.EventTypePath)
	assert.Equal(t, 600, got.RequestsPerMinute)
	assert.Equal(t, filter.Config{
		Require: []filter.Rule{{Header: "X-Env", Equals: new("prod")}, {Header: "X-Region", In: []string{"eu", "us"}}},
		Exclude: []filter.Rule{{Header: "X-Event", Matches: new("order.test.*")}, {Header: "X-Test", Exists: new(true)}},
	}, got.Filter)

	require.NotNil(t, got.Verifier)
	assert.Equal(t, []string{"X-Partner-Key"}, got.Verifier.CredentialHeaders())
	assert.NoError(t, got.Verifier.Verify(http.Header{"X-Partner-Key": {"partner-key-0123456789"}}, nil, time.Now()))
	assert.Error(t, got.Verifier.Verify(http.Header{"X-Partner-Key": {"other"}}, nil, time.Now()))

	assert.Equal(t, inbox.OnErrorSkip, got.OnError)
	st, ok := got.Transform.(inbox.SourceTransform)
	require.True(t, ok, "the source transform: %T", got.Transform)
	assert.Equal(t, `{ "order": $ }`, st.Expression().Source())
	// The source's timeoutMs reaches the expression; it is seconds so that the evaluation below,
	// which must succeed, is not cut off on a loaded machine.
	assert.Equal(t, transform.Limits{Timeout: 25 * time.Second, MaxDepth: 40}, st.Expression().Limits())
	out, err := got.Transform.Transform(context.Background(), inbox.TransformInput{Payload: json.RawMessage(`{"id":"a"}`)})
	require.NoError(t, err)
	assert.JSONEq(t, `{"order":{"id":"a"}}`, string(out))

	plain := opts.Sources[1]
	assert.Nil(t, plain.Verifier)
	assert.Nil(t, plain.Transform)
	assert.Empty(t, plain.OnError)
	assert.True(t, plain.Filter.IsZero())
	assert.Zero(t, plain.RequestsPerMinute)
	assert.Equal(t, "push", plain.Consumption, "the default consumption")

	defaults, err := InboxOptions(config.Default(), newEngine())
	require.NoError(t, err)
	assert.Equal(t, "/inbox", defaults.BasePath)
	assert.EqualValues(t, 1048576, defaults.MaxBodyBytes)
	assert.Empty(t, defaults.Sources)
}

// TestInboxSourcesErrors checks the error texts of a source whose auth or transform does not
// build, and that the secret stays out of them.
func TestInboxSourcesErrors(t *testing.T) {
	t.Parallel()
	cfg := config.Default()
	orders := config.NewSource("orders", kind.HTTP)
	orders.HTTP.Path = "/orders"
	orders.IdempotencyKeyPath = "$.id"
	orders.HTTP.Auth = config.NewInboundAuth(config.AuthHMAC)
	orders.HTTP.Auth.HMAC.Secret = config.NewSecret("hmac-secret-0123456789")
	orders.HTTP.Auth.HMAC.Algorithm = "sha1"
	cfg.Sources = map[string]*config.Source{"orders": orders}
	_, err := InboxSources(cfg, newEngine())
	require.Error(t, err)
	assert.Equal(t, `building the auth of source orders: building the hmac auth verifier: algorithm must be HmacSHA256 or HmacSHA512, not "sha1"`, err.Error())
	assert.NotContains(t, err.Error(), "hmac-secret-0123456789")

	orders.HTTP.Auth = nil
	tr := config.DefaultTransform()
	tr.Expression = `$bad(`
	orders.Transform = &tr
	_, err = InboxSources(cfg, newEngine())
	require.Error(t, err)
	assert.True(t, strings.HasPrefix(err.Error(), "building the transform of source orders: "), err.Error())
	assert.ErrorIs(t, err, transform.ErrCompile)
}

func TestFilterConfig(t *testing.T) {
	t.Parallel()
	assert.Equal(t, filter.Config{}, FilterConfig(config.Filter{}))
	assert.True(t, FilterConfig(config.Filter{}).IsZero())
	in := config.Filter{
		Require: []config.FilterRule{{Header: "a", Equals: new("1")}, {Header: "b", In: []string{}}},
		Exclude: []config.FilterRule{{Header: "c", Matches: new("x.*")}, {Header: "d", Exists: new(false)}},
	}
	assert.Equal(t, filter.Config{
		Require: []filter.Rule{{Header: "a", Equals: new("1")}, {Header: "b", In: []string{}}},
		Exclude: []filter.Rule{{Header: "c", Matches: new("x.*")}, {Header: "d", Exists: new(false)}},
	}, FilterConfig(in), "an empty in list and exists: false reach the filter, which refuses them")
}

func TestTransformConfig(t *testing.T) {
	t.Parallel()
	assert.Nil(t, TransformConfig(nil))
	assert.Equal(t, &transform.Config{Expression: "$", Timeout: 250 * time.Millisecond, MaxDepth: 7, OnError: transform.OnErrorDead},
		TransformConfig(&config.Transform{Expression: "$", TimeoutMs: 250, MaxDepth: 7, OnError: config.OnErrorDead}))
	def := config.DefaultTransform()
	assert.Equal(t, transform.Config{}.WithDefaults(), *TransformConfig(&def), "the defaults agree")
	for _, o := range []config.OnError{config.OnErrorFail, config.OnErrorSkip, config.OnErrorDead} {
		assert.EqualValues(t, o, TransformConfig(&config.Transform{OnError: o}).OnError)
		assert.EqualValues(t, o, inbox.OnError(o), "the inbox spells the strategies alike")
	}
	assert.EqualValues(t, config.OnErrorFail, transform.OnErrorFail)
	assert.EqualValues(t, config.OnErrorSkip, inbox.OnErrorSkip)
	assert.EqualValues(t, config.OnErrorDead, inbox.OnErrorDead)
}

// TestInboundAuthConfigMapsEveryKey sets every key of each auth kind to a value other than its
// default (spec/23-configuration.md, "Source auth") and checks the verifier's block.
func TestInboundAuthConfigMapsEveryKey(t *testing.T) {
	t.Parallel()
	assert.Nil(t, InboundAuthConfig(nil))
	for _, tc := range []struct {
		name   string
		in     func(a *config.InboundAuth)
		kind   config.InboundAuthKind
		secret string
		want   *inboundauth.Config
	}{
		{name: "bearer", kind: config.AuthBearer, secret: "tok-secret-1",
			in:   func(a *config.InboundAuth) { a.Bearer.Token = config.NewSecret("tok-secret-1") },
			want: &inboundauth.Config{Kind: inboundauth.KindBearer, Bearer: &inboundauth.Bearer{Token: inboundauth.NewSecret("tok-secret-1")}}},
		{name: "api-key", kind: config.AuthAPIKey, secret: "key-secret-2",
			in: func(a *config.InboundAuth) {
				a.APIKey.Key = config.NewSecret("key-secret-2")
				a.APIKey.HeaderName = "X-Key"
			},
			want: &inboundauth.Config{Kind: inboundauth.KindAPIKey, APIKey: &inboundauth.APIKey{Key: inboundauth.NewSecret("key-secret-2"), HeaderName: "X-Key"}}},
		{name: "hmac", kind: config.AuthHMAC, secret: "hmac-secret-3",
			in: func(a *config.InboundAuth) {
				h := a.HMAC
				h.Secret = config.NewSecret("hmac-secret-3")
				h.HeaderName = "X-Sig"
				h.Algorithm = config.HmacSHA512
				h.SignaturePrefix = "v1="
				h.TimestampHeader = "X-Ts"
				h.TimestampTolerance = 1234
				h.SignaturePayloadFormat = config.PayloadTimestampDotBody
			},
			want: &inboundauth.Config{Kind: inboundauth.KindHMAC, HMAC: &inboundauth.HMAC{
				Secret: inboundauth.NewSecret("hmac-secret-3"), HeaderName: "X-Sig", Algorithm: inboundauth.HmacSHA512, SignaturePrefix: "v1=",
				TimestampHeader: "X-Ts", TimestampToleranceMs: 1234, SignaturePayloadFormat: inboundauth.PayloadTimestampDotBody}}},
		{name: "stripe", kind: config.AuthStripe, secret: "whsec_stripe4",
			in: func(a *config.InboundAuth) {
				a.Stripe.Secret = config.NewSecret("whsec_stripe4")
				a.Stripe.TimestampTolerance = 600000
			},
			want: &inboundauth.Config{Kind: inboundauth.KindStripe, Stripe: &inboundauth.Stripe{Secret: inboundauth.NewSecret("whsec_stripe4"), TimestampToleranceMs: 600000}}},
		{name: "standard-webhooks", kind: config.AuthStandardWebhooks, secret: "c2VjcmV0LXN3LTU=",
			in: func(a *config.InboundAuth) {
				a.StandardWebhooks.Secret = config.NewSecret("whsec_c2VjcmV0LXN3LTU=")
				a.StandardWebhooks.TimestampTolerance = 5
			},
			want: &inboundauth.Config{Kind: inboundauth.KindStandardWebhooks, StandardWebhooks: &inboundauth.StandardWebhooks{Secret: inboundauth.NewSecret("whsec_c2VjcmV0LXN3LTU="), TimestampToleranceMs: 5}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, inboundauth.NewConfig(inboundauth.Kind(tc.kind)), InboundAuthConfig(config.NewInboundAuth(tc.kind)),
				"the defaults of config.NewInboundAuth and inboundauth.NewConfig agree")
			a := config.NewInboundAuth(tc.kind)
			tc.in(a)
			got := InboundAuthConfig(a)
			assert.Equal(t, tc.want, got)
			assert.NotContains(t, fmtAll(got), tc.secret, "the secret stays masked")

			v, err := inboundauth.New(got)
			require.NoError(t, err)
			assert.True(t, strings.EqualFold(a.CredentialHeader(), v.CredentialHeaders()[0]),
				"config and the verifier agree on the credential header: %s, %v", a.CredentialHeader(), v.CredentialHeaders())
		})
	}
}

// fmtAll prints a block with every verb that a log line might use.
func fmtAll(c *inboundauth.Config) string {
	b, _ := json.Marshal(c)
	var s strings.Builder
	s.Write(b)
	for _, p := range []any{c.Bearer, c.APIKey, c.HMAC, c.Stripe, c.StandardWebhooks} {
		if p != nil {
			s.WriteString(strings.Join([]string{fmt.Sprintf("%v", p), fmt.Sprintf("%+v", p), fmt.Sprintf("%#v", p)}, " "))
		}
	}
	return s.String()
}

// TestCompileTransformIsTheConfigHook passes the Check of an engine (NewEngine) to the
// configuration loader: a transform that does not compile fails the load and names its key.
func TestCompileTransformIsTheConfigHook(t *testing.T) {
	t.Parallel()
	file := `database:
  url: jdbc:postgresql://db:5432/queuebox
  username: queuebox
  password: secret
destinations:
  a:
    baseUrl: https://a.example.com
    transform:
      expression: '{ "data": $, "topic": $topic }'
routes:
  - topicPattern: "order.*"
    destination: a
    transform:
      expression: '$sum(items.(price * qty)'
`
	read := func(name string) ([]byte, error) {
		if name == config.DefaultConfigFile {
			return []byte(file), nil
		}
		return nil, fs.ErrNotExist
	}
	var hook config.TransformCompiler = newEngine().Check
	_, _, err := Load(LoadOptions{Env: map[string]string{}, ReadFile: read, CompileTransform: hook})
	require.Error(t, err)
	assert.Contains(t, err.Error(), `routes[0].transform.expression (QUEUEBOX_ROUTES_0_TRANSFORM_EXPRESSION) does not compile: JSONata S0203 at position 24: Expected ")" before end of expression`)
	assert.NotContains(t, err.Error(), "destinations.a.transform")
}

// The test vectors of shared/inboundauth's tests: GitHub's documented example, a billing
// signature of the timestamp, a dot and the body (Python's hmac module), Stripe's scheme and the
// example of the Standard Webhooks specification.
const (
	githubSecret     = "It's a Secret to Everybody"
	githubBody       = "Hello, World!"
	githubSignature  = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
	billingSecret    = "billing-secret"
	billingBody      = `{"id":"inv-1","type":"invoice.paid"}`
	billingTS        = "1700000000000"
	billingTSDotBody = "dc283bfdd2491ecf3f7846873cc12d43ec58cd4a06e33122fc79dfe134dd9b30"
	stripeSecret     = "whsec_test_secret"
	stripeBody       = `{"id":"evt_1","type":"payment_intent.succeeded"}`
	stripeT          = "1700000000"
	stripeV1         = "22d8dc182f5c588077683bd378368e29765bfe5df2560112b4f28fef120f0e31"
	swSecret         = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	swID             = "msg_p5jXN8AQM9LWM0D4loKWxJek"
	swTimestamp      = "1614265330"
	swBody           = `{"test": 2432232314}`
	swSignature      = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
)

// The clocks of the vectors.
var (
	billingNow = time.UnixMilli(1700000000000)
	stripeNow  = time.Unix(1700000000, 0)
	swNow      = time.Unix(1614265330, 0)
)

// headerPairs builds a header from name, value pairs.
func headerPairs(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	return h
}

// TestDocumentedAuthConfiguration loads the auth blocks of docs/inbound-auth.md through the
// configuration loader, maps them (InboundAuthConfig) and verifies a request against each.
func TestDocumentedAuthConfiguration(t *testing.T) {
	t.Parallel()
	const file = `database:
  url: jdbc:postgresql://db:5432/queuebox
  username: queuebox
  password: secret
sources:
  github:
    type: http
    path: /github
    idempotencyKeyPath: $.delivery
    eventTypePath: $.action
    auth:
      type: hmac
      secret: ${GITHUB_WEBHOOK_SECRET}
      headerName: X-Hub-Signature-256
      algorithm: HmacSHA256
      signaturePrefix: "sha256="
  billing:
    type: http
    path: /billing
    idempotencyKeyPath: $.id
    eventTypePath: $.type
    auth:
      type: hmac
      secret: ${BILLING_WEBHOOK_SECRET}
      headerName: X-Signature
      signaturePrefix: "sha256="
      timestampHeader: X-Timestamp
      timestampTolerance: 300000
  stripe:
    type: http
    path: /stripe
    idempotencyKeyPath: $.id
    eventTypePath: $.type
    auth:
      type: stripe
      secret: ${STRIPE_WEBHOOK_SECRET}
  svix:
    type: http
    path: /svix
    idempotencyKeyPath: $.id
    eventTypePath: $.type
    auth:
      type: standard-webhooks
      secret: ${SVIX_WEBHOOK_SECRET}
`
	env := map[string]string{"GITHUB_WEBHOOK_SECRET": githubSecret, "BILLING_WEBHOOK_SECRET": billingSecret,
		"STRIPE_WEBHOOK_SECRET": stripeSecret, "SVIX_WEBHOOK_SECRET": swSecret}
	cfg, warnings, err := Load(LoadOptions{Env: env, ReadFile: func(name string) ([]byte, error) {
		if name == config.DefaultConfigFile {
			return []byte(file), nil
		}
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	}})
	require.NoError(t, err)
	assert.Empty(t, warnings)
	for _, tc := range []struct {
		source string
		header http.Header
		body   string
		now    time.Time
	}{
		{source: "github", header: headerPairs("X-Hub-Signature-256", githubSignature), body: githubBody},
		{source: "billing", header: headerPairs("X-Timestamp", billingTS, "X-Signature", "sha256="+billingTSDotBody), body: billingBody, now: billingNow},
		{source: "stripe", header: headerPairs("Stripe-Signature", "t="+stripeT+",v1="+stripeV1), body: stripeBody, now: stripeNow},
		{source: "svix", header: headerPairs("webhook-id", swID, "webhook-timestamp", swTimestamp, "webhook-signature", swSignature), body: swBody, now: swNow},
	} {
		v, err := inboundauth.New(InboundAuthConfig(cfg.Sources[tc.source].HTTP.Auth))
		require.NoError(t, err, tc.source)
		assert.NoError(t, v.Verify(tc.header, []byte(tc.body), tc.now), tc.source)
		assert.Error(t, v.Verify(tc.header, []byte(tc.body+" "), tc.now), tc.source)
	}
}
