package config

import (
	"bytes"
	"log/slog"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"
)

// secretValues are values that must never show in a rendering of the configuration.
var secretValues = []string{"db-pass", "admin-token", "orders-secret", "stripe-secret", "guest-pw", "url-pw", "sasl-pw", "nats-token"}

func loadSecretHeavyExample(t *testing.T) *Config {
	t.Helper()
	env := map[string]string{
		"QUEUEBOX_DATABASE_URL":                               "jdbc:postgresql://db:5432/queuebox?user=queuebox&password=url-pw",
		"QUEUEBOX_DESTINATIONS_EVENTS-EXCHANGE_URL":           "amqp://guest:guest-pw@rabbitmq:5672",
		"QUEUEBOX_SOURCES_ORDERS-QUEUE_CONNECTIONURL":         "amqps://guest:guest-pw@rabbitmq:5671",
		"QUEUEBOX_DESTINATIONS_EVENTS-TOPIC_SECURITYPROTOCOL": "SASL_SSL",
		"QUEUEBOX_DESTINATIONS_EVENTS-TOPIC_SASLMECHANISM":    "PLAIN",
		"QUEUEBOX_DESTINATIONS_EVENTS-TOPIC_SASLUSERNAME":     "u",
		"QUEUEBOX_DESTINATIONS_EVENTS-TOPIC_SASLPASSWORD":     "sasl-pw",
		"QUEUEBOX_DESTINATIONS_EVENTS-SUBJECT_TOKEN":          "nats-token",
	}
	for k, v := range exampleEnv {
		env[k] = v
	}
	cfg, _, err := Load(LoadOptions{Components: testComponents(), Env: env, ReadFile: os.ReadFile})
	require.NoError(t, err)
	return cfg
}

func TestMaskedYAMLShowsNoSecret(t *testing.T) {
	t.Parallel()
	cfg := loadSecretHeavyExample(t)
	out, err := cfg.MaskedYAML()
	require.NoError(t, err)
	text := string(out)
	for _, v := range secretValues {
		assert.NotContains(t, text, v)
	}
	for _, want := range []string{
		"  password: Secret(***)\n",
		"  url: jdbc:postgresql://db:5432/queuebox?user=queuebox&password=***\n",
		"    url: amqp://guest:***@rabbitmq:5672\n",
		"    connectionUrl: amqps://guest:***@rabbitmq:5671\n",
		"    saslPassword: Secret(***)\n",
		"    token: Secret(***)\n",
		"      clientSecret: Secret(***)\n",
		"      secret: Secret(***)\n",
		"    type: http\n",
		"    type: kafka\n",
		"      signaturePayloadFormat: BODY\n",
		"    maxAge: 7d\n",
	} {
		assert.Contains(t, text, want)
	}

	// The rendering is YAML that a reader, or the loader, reads back.
	var back map[string]any
	require.NoError(t, yaml.Unmarshal(out, &back))
	assert.Equal(t, 9090, back["server"].(map[string]any)["managementPort"])
}

func TestMaskedYAMLOfTheDefaults(t *testing.T) {
	t.Parallel()
	cfg, _, err := Load(LoadOptions{Components: testComponents(), ReadFile: noFiles.read})
	require.NoError(t, err)
	out, err := cfg.MaskedYAML()
	require.NoError(t, err)
	assert.NotContains(t, string(out), "password: queuebox")
	assert.Contains(t, string(out), "maxAttempts: 5\n")
	assert.NotContains(t, string(out), "destinations:")
	assert.NotContains(t, string(out), "managementPort")

	// The rendered defaults load again to the same configuration, but for the masked password.
	again, _, err := loadYAML(t, string(out), map[string]string{"QUEUEBOX_DATABASE_PASSWORD": "queuebox"}, nil)
	require.NoError(t, err)
	again.Origin, cfg.Origin = Origin{}, Origin{}
	assert.Equal(t, cfg.Database.Password.Reveal(), again.Database.Password.Reveal())
	again.Database.Password, cfg.Database.Password = Secret{}, Secret{}
	assert.Equal(t, cfg.Database.URL.Reveal(), again.Database.URL.Reveal())
	again.Database.URL, cfg.Database.URL = ConnectionURL{}, ConnectionURL{}
	assert.Equal(t, cfg, again)
}

func TestSummaryAndLogValueShowNoSecret(t *testing.T) {
	t.Parallel()
	cfg := loadSecretHeavyExample(t)
	summary := cfg.Summary()
	assert.Equal(t, "database postgresql db:5432/queuebox as queuebox (password Secret(***)); capture polling; "+
		"destinations events-exchange (rabbitmq), events-subject (nats), events-topic (kafka), orders-api (http); 2 routes; "+
		"sources orders (http, pull), orders-log (kafka, push), orders-queue (rabbitmq, push), orders-stream (nats, push), stripe (http, push); "+
		"admin on (bearer); retention on; from testdata/example-queuebox.yml and 8 QUEUEBOX_ variables", summary)

	var buf bytes.Buffer
	slog.New(slog.NewJSONHandler(&buf, nil)).Info("configuration loaded", "config", cfg)
	for _, v := range secretValues {
		assert.NotContains(t, buf.String(), v)
	}
	assert.Contains(t, buf.String(), `"database":"db:5432/queuebox"`)
	assert.Contains(t, buf.String(), `"routes":2`)
}

func TestOriginString(t *testing.T) {
	t.Parallel()
	assert.Equal(t, "defaults", Origin{}.String())
	assert.Equal(t, "the packaged queuebox.yml", Origin{Packaged: true}.String())
	assert.Equal(t, "/f.yml and 1 QUEUEBOX_ variable", Origin{File: "/f.yml", Variables: []string{"QUEUEBOX_A"}}.String())
	assert.True(t, strings.HasSuffix(Origin{Variables: []string{"A", "B"}}.String(), "2 QUEUEBOX_ variables"))
}

// TestMaskedYAMLMasksQueryValues prints the query values of a destination path, a baseUrl and
// a tokenUrl as *** with their names kept, in the printout of `config check` and in the
// problems of a configuration.
func TestMaskedYAMLMasksQueryValues(t *testing.T) {
	t.Parallel()
	cfg := mustLoad(t, minimalDatabase+`destinations:
  web:
    baseUrl: https://api.example.com
    path: /x?api_key=path-secret-1&v=2&flag
    auth:
      clientId: c
      clientSecret: s
      tokenUrl: https://auth.example.com/token?key=token-secret-2
`, nil)
	out, err := cfg.MaskedYAML()
	require.NoError(t, err)
	text := string(out)
	assert.Contains(t, text, "path: /x?api_key=***&v=***&flag\n")
	assert.Contains(t, text, "tokenUrl: https://auth.example.com/token?key=***\n")
	for _, secret := range []string{"path-secret-1", "token-secret-2"} {
		assert.NotContains(t, text, secret)
	}
	// The runtime keeps the value.
	assert.Equal(t, "/x?api_key=path-secret-1&v=2&flag", cfg.Destinations["web"].HTTP.Path)

	_, _, err = loadYAML(t, minimalDatabase+`destinations:
  web:
    baseUrl: https://api.example.com/a/../b?sig=url-secret-3
    path: /a/../x?api_key=path-secret-4
`, nil, nil)
	assert.Equal(t, []string{
		`destinations.web.baseUrl (QUEUEBOX_DESTINATIONS_WEB_BASEURL) must not hold a . or a .. path segment, not "https://api.example.com/a/../b?sig=***"`,
		`destinations.web.path (QUEUEBOX_DESTINATIONS_WEB_PATH) must not hold a . or a .. segment, not "/a/../x?api_key=***"`,
	}, problemStrings(t, err))
}

func TestMaskQuery(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"/x":                       "/x",
		"/x?":                      "/x?",
		"/x?a=1":                   "/x?a=***",
		"/x?a=&b=2":                "/x?a=&b=***",
		"/x?a=1#frag":              "/x?a=***#frag",
		"https://h/p?k=v=w&flag":   "https://h/p?k=***&flag",
		"https://h/p?api_key=%20x": "https://h/p?api_key=***",
	} {
		assert.Equal(t, want, MaskQuery(in), in)
	}
}

// TestMaskedYAMLMasksHeaderValuesAndExtraParams: the static headers of a destination and the
// extra parameters of an OAuth2 grant often carry a credential (an Authorization header, a
// client assertion), whether written in the file or taken from ${VAR}: config check prints
// their names and masks every value.
func TestMaskedYAMLMasksHeaderValuesAndExtraParams(t *testing.T) {
	t.Parallel()
	cfg := mustLoad(t, minimalDatabase+`
destinations:
  api:
    type: http
    baseUrl: https://api.example.com
    headers:
      Authorization: ${API_AUTHORIZATION}
      X-Team: literal-team-value
      X-Empty: ""
    auth:
      type: oauth2
      clientId: queuebox
      clientSecret: ${CLIENT_SECRET}
      tokenUrl: https://auth.example.com/token
      extraParams:
        client_assertion: ${ASSERTION}
        audience: literal-audience-value
routes:
  - topicPattern: "**"
    destination: api
`, map[string]string{"API_AUTHORIZATION": "Bearer hdr-secret-7f3a", "CLIENT_SECRET": "cs-8b1c", "ASSERTION": "assertion-9d2e"})
	out, err := cfg.MaskedYAML()
	require.NoError(t, err)
	text := string(out)
	for _, v := range []string{"hdr-secret-7f3a", "cs-8b1c", "assertion-9d2e", "literal-team-value", "literal-audience-value"} {
		assert.NotContains(t, text, v)
	}
	for _, want := range []string{
		"      Authorization: Secret(***)\n",
		"      X-Team: Secret(***)\n",
		"      X-Empty: Secret(empty)\n",
		"        client_assertion: Secret(***)\n",
		"        audience: Secret(***)\n",
	} {
		assert.Contains(t, text, want)
	}
	// The configuration itself keeps the values.
	assert.Equal(t, "Bearer hdr-secret-7f3a", cfg.Destinations["api"].Headers["Authorization"])
}
