package config

import (
	"errors"
	"io/fs"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/alternayte/queuebox/shared/kind"
)

// The full example of spec/24-environment-variables.md: one HTTP destination, one route and
// one HTTP source, with no file.
var specEnvExample = map[string]string{
	"QUEUEBOX_DATABASE_URL":                      "jdbc:postgresql://db:5432/queuebox",
	"QUEUEBOX_DATABASE_USERNAME":                 "queuebox",
	"QUEUEBOX_DATABASE_PASSWORD":                 "secret",
	"QUEUEBOX_DESTINATIONS_WEBHOOK_TYPE":         "http",
	"QUEUEBOX_DESTINATIONS_WEBHOOK_BASEURL":      "https://api.example.com",
	"QUEUEBOX_ROUTES_0_TOPICPATTERN":             "order.*",
	"QUEUEBOX_ROUTES_0_DESTINATION":              "webhook",
	"QUEUEBOX_SOURCES_STRIPE_TYPE":               "http",
	"QUEUEBOX_SOURCES_STRIPE_PATH":               "/stripe",
	"QUEUEBOX_SOURCES_STRIPE_IDEMPOTENCYKEYPATH": "$.id",
	"QUEUEBOX_SOURCES_STRIPE_EVENTTYPEPATH":      "$.type",
}

// noFiles is a file system without any file.
var noFiles = memFiles{}

func TestLoadSpecEnvironmentExample(t *testing.T) {
	t.Parallel()
	cfg, warnings, err := Load(LoadOptions{Components: testComponents(), Env: specEnvExample, ReadFile: noFiles.read})
	require.NoError(t, err)
	assert.Empty(t, warnings)
	assert.False(t, cfg.Origin.Packaged)
	assert.Empty(t, cfg.Origin.File)
	assert.Len(t, cfg.Origin.Variables, len(specEnvExample))

	assert.Equal(t, "jdbc:postgresql://db:5432/queuebox", cfg.Database.URL.Reveal())
	assert.Equal(t, "queuebox", cfg.Database.Username)
	assert.Equal(t, "secret", cfg.Database.Password.Reveal())

	require.Contains(t, cfg.Destinations, "webhook")
	d := cfg.Destinations["webhook"]
	assert.Equal(t, "webhook", d.Name)
	assert.Equal(t, kind.HTTP, d.Kind)
	require.NotNil(t, d.HTTP)
	assert.Equal(t, "https://api.example.com", d.HTTP.BaseURL)
	assert.Equal(t, "/", d.HTTP.Path)
	assert.Equal(t, Milliseconds(30000), d.HTTP.TimeoutMs)

	assert.Equal(t, []Route{{TopicPattern: "order.*", Destination: "webhook"}}, cfg.Routes)

	require.Contains(t, cfg.Sources, "stripe")
	s := cfg.Sources["stripe"]
	assert.Equal(t, kind.HTTP, s.Kind)
	assert.Equal(t, "/stripe", s.HTTP.Path)
	assert.Equal(t, "$.id", s.IdempotencyKeyPath)
	assert.Equal(t, "$.type", s.EventTypePath)
	assert.Equal(t, "{{ eventType }}", s.Topic)
	assert.Equal(t, ConsumptionPush, s.Consumption)

	// Every other key keeps its default.
	want := Default()
	assert.Equal(t, want.Outbox, cfg.Outbox)
	assert.Equal(t, want.Server, cfg.Server)
	assert.Equal(t, want.Inbox, cfg.Inbox)
	assert.Equal(t, want.Retention, cfg.Retention)
}

func TestLoadFilterVariablesWithTwoListLevels(t *testing.T) {
	t.Parallel()
	env := map[string]string{
		"QUEUEBOX_SOURCES_ORDERS_FILTER_REQUIRE_0_HEADER": "x-region",
		"QUEUEBOX_SOURCES_ORDERS_FILTER_REQUIRE_0_IN_0":   "eu",
		"QUEUEBOX_SOURCES_ORDERS_FILTER_REQUIRE_0_IN_1":   "uk",
		"QUEUEBOX_SOURCES_ORDERS_FILTER_EXCLUDE_0_HEADER": "x-test",
		"QUEUEBOX_SOURCES_ORDERS_FILTER_EXCLUDE_0_EXISTS": "true",
	}
	file := minimalDatabase + `sources:
  orders:
    type: rabbitmq
    queueName: incoming-orders
    connectionUrl: amqp://rabbitmq:5672
    filter:
      require:
        - header: x-tenant
          equals: acme
        - header: x-other
          exists: true
`
	cfg, warnings, err := loadYAML(t, file, env, nil)
	require.NoError(t, err)
	assert.Empty(t, warnings)
	f := cfg.Sources["orders"].Filter
	exists := true
	assert.Equal(t, []FilterRule{{Header: "x-region", In: []string{"eu", "uk"}}}, f.Require, "the variables replace the file's list whole")
	assert.Equal(t, []FilterRule{{Header: "x-test", Exists: &exists}}, f.Exclude)
}

func TestLoadDoubleUnderscoreIsALiteralUnderscore(t *testing.T) {
	t.Parallel()
	env := map[string]string{
		"QUEUEBOX_DESTINATIONS_MY__API_BASEURL": "https://api.example.com",
		"QUEUEBOX_ROUTES_0_TOPICPATTERN":        "**",
		"QUEUEBOX_ROUTES_0_DESTINATION":         "my_api",
	}
	cfg, warnings, err := loadYAML(t, minimalDatabase, env, nil)
	require.NoError(t, err)
	assert.Empty(t, warnings)
	require.Contains(t, cfg.Destinations, "my_api")
	assert.Equal(t, "https://api.example.com", cfg.Destinations["my_api"].HTTP.BaseURL)
}

func TestLoadVariableMergesIntoAMapKeyByKey(t *testing.T) {
	t.Parallel()
	file := minimalDatabase + `destinations:
  orders:
    type: http
    baseUrl: https://orders.example.com
    path: /events
    timeoutMs: 30000
    headers:
      X-Team: orders
`
	cfg, _, err := loadYAML(t, file, map[string]string{
		"QUEUEBOX_DESTINATIONS_ORDERS_TIMEOUTMS":     "5000",
		"QUEUEBOX_DESTINATIONS_ORDERS_HEADERS_XTEAM": "billing",
	}, nil)
	require.NoError(t, err)
	d := cfg.Destinations["orders"].HTTP
	assert.Equal(t, Milliseconds(5000), d.TimeoutMs)
	assert.Equal(t, "https://orders.example.com", d.BaseURL)
	assert.Equal(t, "/events", d.Path)
	assert.Equal(t, map[string]string{"X-Team": "orders", "xteam": "billing"}, cfg.Destinations["orders"].Headers,
		"a map key that a variable sets is lower case")
}

func TestLoadVariableReplacesTheFilesRoutesWhole(t *testing.T) {
	t.Parallel()
	file := minimalDatabase + `destinations:
  a:
    baseUrl: https://a.example.com
  b:
    baseUrl: https://b.example.com
routes:
  - topicPattern: "order.*"
    destination: a
    routingKeyMissingFieldDefault: none
  - topicPattern: "**"
    destination: b
`
	tests := []struct {
		name    string
		env     map[string]string
		want    []Route
		wantErr []string
	}{
		{
			name: "every key of every element",
			env:  map[string]string{"QUEUEBOX_ROUTES_0_TOPICPATTERN": "invoice.*", "QUEUEBOX_ROUTES_0_DESTINATION": "b"},
			want: []Route{{TopicPattern: "invoice.*", Destination: "b"}},
		},
		{
			name: "one key of one element drops the rest of the list",
			env:  map[string]string{"QUEUEBOX_ROUTES_1_DESTINATION": "a"},
			wantErr: []string{
				"routes[0] (QUEUEBOX_ROUTES_0) is not set, but a later index is: the variables of a list must number its elements from 0 without a gap",
				"routes[1].topicPattern (QUEUEBOX_ROUTES_1_TOPICPATTERN) is required",
			},
		},
		{
			name: "no variable keeps the file's list",
			env:  map[string]string{},
			want: []Route{{TopicPattern: "order.*", Destination: "a", RoutingKeyMissingFieldDefault: "none"}, {TopicPattern: "**", Destination: "b"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg, _, err := loadYAML(t, file, tt.env, nil)
			if tt.wantErr != nil {
				assert.Equal(t, tt.wantErr, problemStrings(t, err))
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, cfg.Routes)
		})
	}
}

func TestLoadMatchesKeysInAnyLetterCase(t *testing.T) {
	t.Parallel()
	file := `DATABASE:
  URL: jdbc:postgresql://db:5432/queuebox
  UserName: queuebox
  PASSWORD: secret
Outbox:
  POLLINTERVALMS: 250
  pollintervalms_typo: 1
sources:
  Stripe:
    Type: http
    PATH: /stripe
    IdempotencyKeyPath: $.id
    eventtypepath: $.type
`
	cfg, warnings, err := loadYAML(t, file, map[string]string{
		"QUEUEBOX_SOURCES_STRIPE_IDEMPOTENCYKEYPATH": "$.key",
		"QUEUEBOX_OUTBOX_BATCHSIZE":                  "7",
	}, nil)
	require.NoError(t, err)
	assert.Equal(t, Milliseconds(250), cfg.Outbox.PollIntervalMs)
	assert.Equal(t, 7, cfg.Outbox.BatchSize)
	assert.Equal(t, "queuebox", cfg.Database.Username)
	require.Contains(t, cfg.Sources, "Stripe", "the variable merged into the file's entry")
	assert.Len(t, cfg.Sources, 1)
	assert.Equal(t, "$.key", cfg.Sources["Stripe"].IdempotencyKeyPath, "sources.stripe.idempotencykeypath sets idempotencyKeyPath")
	assert.Equal(t, "$.type", cfg.Sources["Stripe"].EventTypePath)
	assert.Equal(t, []string{"unknown key outbox.pollintervalms_typo (/etc/queuebox/queuebox.yml line 7): it has no effect"}, warningStrings(warnings))
}

func TestLoadKeySetTwiceInDifferentCase(t *testing.T) {
	t.Parallel()
	_, _, err := loadYAML(t, minimalDatabase+"outbox:\n  batchSize: 5\n  BatchSize: 6\n", nil, nil)
	assert.Equal(t, []string{
		"outbox.batchSize (QUEUEBOX_OUTBOX_BATCHSIZE) is set twice, as batchSize and as BatchSize (/etc/queuebox/queuebox.yml line 7)",
	}, problemStrings(t, err))
}

func TestLoadUnknownVariablesAreWarningsNotErrors(t *testing.T) {
	t.Parallel()
	cfg, warnings, err := loadYAML(t, minimalDatabase, map[string]string{
		"QUEUEBOX_OUTBOX_POLL_INTERVAL_MS": "5",
		"QUEUEBOX_OUTBOX_POLLINTERVALMS":   "200",
		"QUEUEBOX_NOSUCHSECTION":           "x",
		"QUEUEBOX_DATABASE_URL_EXTRA":      "x",
		"QUEUEBOX_SERVER_HTTPPORT_X_Y":     "1",
		"QUEUEBOX_ROUTES_X":                "1",
		"QUEUEBOX_CONFIG_FILE":             DefaultConfigFile,
	}, nil)
	require.NoError(t, err)
	assert.Equal(t, Milliseconds(200), cfg.Outbox.PollIntervalMs, "the variable with the extra underscore has no effect")
	assert.ElementsMatch(t, []string{
		"unknown key outbox.poll.interval.ms set by QUEUEBOX_OUTBOX_POLL_INTERVAL_MS: it has no effect",
		"unknown key nosuchsection set by QUEUEBOX_NOSUCHSECTION: it has no effect",
		"QUEUEBOX_DATABASE_URL_EXTRA sets database.url.extra, which is inside the value of url, not a map or a list; it has no effect",
		"unknown key server.httpPort.x.y set by QUEUEBOX_SERVER_HTTPPORT_X_Y: it has no effect",
		"unknown key routes.x set by QUEUEBOX_ROUTES_X: it has no effect",
	}, warningStrings(warnings))
}

func TestLoadPackagedDefault(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name         string
		env          map[string]string
		files        memFiles
		wantPackaged bool
		wantErr      []string
	}{
		{name: "no file and no variable reads the packaged default", env: nil, files: noFiles, wantPackaged: true},
		{name: "a variable alone keeps the packaged default out", env: map[string]string{"QUEUEBOX_SERVER_HTTPPORT": "9000"}, files: noFiles,
			wantErr: []string{
				"database.url (QUEUEBOX_DATABASE_URL) is required: QUEUEBOX_ variables are set and the configuration file " +
					DefaultConfigFile + " does not exist, so the packaged default queuebox.yml is not read (it is read only " +
					"when no QUEUEBOX_ variable is set); set QUEUEBOX_DATABASE_URL or name a file with QUEUEBOX_CONFIG_FILE",
				"database.username (QUEUEBOX_DATABASE_USERNAME) is required",
				"database.password (QUEUEBOX_DATABASE_PASSWORD) is required",
			}},
		{name: "a file keeps the packaged default out", files: memFiles{DefaultConfigFile: "server:\n  httpPort: 9000\n"},
			wantErr: []string{
				"database.url (QUEUEBOX_DATABASE_URL) is required",
				"database.username (QUEUEBOX_DATABASE_USERNAME) is required",
				"database.password (QUEUEBOX_DATABASE_PASSWORD) is required",
			}},
		{name: "the file named by QUEUEBOX_CONFIG_FILE keeps it out", env: map[string]string{ConfigFileVariable: "/cfg/q.yml"},
			files: memFiles{"/cfg/q.yml": minimalDatabase}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg, _, err := Load(LoadOptions{Components: testComponents(), Env: tt.env, ReadFile: tt.files.read})
			if tt.wantErr != nil {
				assert.Equal(t, tt.wantErr, problemStrings(t, err))
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.wantPackaged, cfg.Origin.Packaged)
			if tt.wantPackaged {
				assert.Equal(t, "jdbc:postgresql://localhost:5432/queuebox", cfg.Database.URL.Reveal())
				assert.Equal(t, "queuebox", cfg.Database.Username)
				assert.Equal(t, "queuebox", cfg.Database.Password.Reveal())
				assert.Empty(t, cfg.Routes)
				assert.Empty(t, cfg.Destinations)
				assert.Empty(t, cfg.Sources)
			}
		})
	}
}

// spec/24: a missing file that QUEUEBOX_CONFIG_FILE names, with QUEUEBOX_ variables set, leaves
// the variables alone to configure QueueBox (not the packaged default), and Load warns which it
// did.
func TestLoadMissingNamedFileWithVariablesUsesTheVariablesAlone(t *testing.T) {
	t.Parallel()
	env := map[string]string{
		ConfigFileVariable:           "/cfg/missing.yml",
		"QUEUEBOX_DATABASE_URL":      "jdbc:postgresql://db.example:5432/app",
		"QUEUEBOX_DATABASE_USERNAME": "app",
		"QUEUEBOX_DATABASE_PASSWORD": "s3cret",
		"QUEUEBOX_SERVER_HTTPPORT":   "9000",
	}
	cfg, warnings, err := Load(LoadOptions{Components: testComponents(), Env: env, ReadFile: noFiles.read})
	require.NoError(t, err)
	assert.Equal(t, 9000, cfg.Server.HTTPPort)
	assert.Equal(t, "jdbc:postgresql://db.example:5432/app", cfg.Database.URL.Reveal())
	assert.False(t, cfg.Origin.Packaged)
	assert.Empty(t, cfg.Origin.File)
	assert.Equal(t, "/cfg/missing.yml", cfg.Origin.MissingFile)
	assert.Equal(t, "4 QUEUEBOX_ variables (the file /cfg/missing.yml named by QUEUEBOX_CONFIG_FILE does not exist)", cfg.Origin.String())
	assert.Contains(t, cfg.Summary(), "from 4 QUEUEBOX_ variables (the file /cfg/missing.yml named by QUEUEBOX_CONFIG_FILE does not exist)")
	var texts []string
	for _, w := range warnings {
		texts = append(texts, w.String())
	}
	assert.Contains(t, texts, "the configuration file /cfg/missing.yml, named by QUEUEBOX_CONFIG_FILE, does not exist: "+
		"the 4 QUEUEBOX_ variable(s) alone configure QueueBox, without the packaged default")
	for _, text := range texts {
		assert.NotContains(t, text, "s3cret")
	}

	// Variables that leave a required key unset fail on that key, not on the missing file.
	_, _, err = Load(LoadOptions{Components: testComponents(), Env: map[string]string{ConfigFileVariable: "/cfg/missing.yml", "QUEUEBOX_SERVER_HTTPPORT": "9000"}, ReadFile: noFiles.read})
	assert.Equal(t, []string{
		"database.url (QUEUEBOX_DATABASE_URL) is required: QUEUEBOX_ variables are set and the configuration file " +
			"/cfg/missing.yml does not exist, so the packaged default queuebox.yml is not read (it is read only " +
			"when no QUEUEBOX_ variable is set); set QUEUEBOX_DATABASE_URL or name a file with QUEUEBOX_CONFIG_FILE",
		"database.username (QUEUEBOX_DATABASE_USERNAME) is required",
		"database.password (QUEUEBOX_DATABASE_PASSWORD) is required",
	}, problemStrings(t, err))
}

func TestLoadPackagedDefaultFromOptions(t *testing.T) {
	t.Parallel()
	cfg, _, err := Load(LoadOptions{Components: testComponents(), ReadFile: noFiles.read, Packaged: []byte(minimalDatabase + "server:\n  httpPort: 8181\n")})
	require.NoError(t, err)
	assert.Equal(t, 8181, cfg.Server.HTTPPort)
	assert.Contains(t, string(PackagedConfig()), "jdbc:postgresql://localhost:5432/queuebox")
}

func TestLoadErrorsOfTheSources(t *testing.T) {
	t.Parallel()
	permission := func(string) ([]byte, error) {
		return nil, &fs.PathError{Op: "open", Path: DefaultConfigFile, Err: fs.ErrPermission}
	}
	tests := []struct {
		name     string
		opts     LoadOptions
		wantIs   error
		wantText string
	}{
		{
			name:     "no source at all",
			opts:     LoadOptions{Components: testComponents(), ReadFile: noFiles.read, NoPackaged: true},
			wantIs:   ErrNoConfiguration,
			wantText: "no configuration: QueueBox found none of its three sources: no QUEUEBOX_ environment variable is set, the configuration file /etc/queuebox/queuebox.yml (named by QUEUEBOX_CONFIG_FILE) does not exist, and there is no packaged queuebox.yml",
		},
		{
			name:     "missing file named by QUEUEBOX_CONFIG_FILE and no variable",
			opts:     LoadOptions{Components: testComponents(), Env: map[string]string{ConfigFileVariable: "/cfg/missing.yml"}, ReadFile: noFiles.read},
			wantIs:   fs.ErrNotExist,
			wantText: "configuration file /cfg/missing.yml, named by QUEUEBOX_CONFIG_FILE, does not exist and no QUEUEBOX_ variable is set: open /cfg/missing.yml: file does not exist",
		},
		{
			name:     "unreadable file",
			opts:     LoadOptions{Components: testComponents(), ReadFile: permission},
			wantIs:   ErrConfigFile,
			wantText: "configuration file /etc/queuebox/queuebox.yml: reading: open /etc/queuebox/queuebox.yml: permission denied",
		},
		{
			name:     "broken YAML names the line",
			opts:     LoadOptions{Components: testComponents(), ReadFile: memFiles{DefaultConfigFile: "database:\n  url: x\n  username: [a\noutbox:\n  batchSize: 1\n"}.read},
			wantIs:   ErrConfigFile,
			wantText: "configuration file /etc/queuebox/queuebox.yml: parsing YAML: line 3: did not find expected ',' or ']'",
		},
		{
			name:     "bad indentation names the line",
			opts:     LoadOptions{Components: testComponents(), ReadFile: memFiles{DefaultConfigFile: "outbox:\n  batchSize: 1\n pollIntervalMs: 2\n"}.read},
			wantIs:   ErrConfigFile,
			wantText: "configuration file /etc/queuebox/queuebox.yml: parsing YAML: line 3: did not find expected key",
		},
		{
			name:     "a top level that is not a map",
			opts:     LoadOptions{Components: testComponents(), ReadFile: memFiles{DefaultConfigFile: "- a\n- b\n"}.read},
			wantIs:   ErrConfigFile,
			wantText: "configuration file /etc/queuebox/queuebox.yml: parsing YAML: line 1: the top level must be a map of sections, not a list",
		},
		{
			name:     "a key written twice",
			opts:     LoadOptions{Components: testComponents(), ReadFile: memFiles{DefaultConfigFile: "outbox:\n  batchSize: 1\n  batchSize: 2\n"}.read},
			wantIs:   ErrConfigFile,
			wantText: "configuration file /etc/queuebox/queuebox.yml: parsing YAML: line 3: key \"batchSize\" is set twice",
		},
		{
			name:     "broken packaged default",
			opts:     LoadOptions{Components: testComponents(), ReadFile: noFiles.read, Packaged: []byte("a: [")},
			wantText: "parsing the packaged queuebox.yml: yaml: line 1: did not find expected node content",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg, _, err := Load(tt.opts)
			require.Error(t, err)
			assert.Nil(t, cfg)
			assert.Equal(t, tt.wantText, err.Error())
			if tt.wantIs != nil {
				assert.ErrorIs(t, err, tt.wantIs)
			}
		})
	}
}

func TestLoadWrongTypesNameTheKeyAndTheType(t *testing.T) {
	t.Parallel()
	file := minimalDatabase + `  poolSize: ten
  migrate: maybe
outbox:
  batchSize: 1.5
  capture: polling
routes: order.*
sources:
  orders:
    path: /orders
    eventTypePath: $.type
    idempotencyKeyPath: [a, b]
destinations:
  a:
    baseUrl: https://a.example.com
    headers: [x]
retention:
  outbox:
    maxAge: 7 days
`
	_, _, err := loadYAML(t, file, map[string]string{"QUEUEBOX_SERVER_HTTPPORT": "eighty"}, nil)
	assert.Equal(t, []string{
		"database.poolSize (QUEUEBOX_DATABASE_POOLSIZE) must be a whole number, not \"ten\" (/etc/queuebox/queuebox.yml line 5)",
		"database.migrate (QUEUEBOX_DATABASE_MIGRATE) must be true or false, not \"maybe\" (/etc/queuebox/queuebox.yml line 6)",
		"outbox.batchSize (QUEUEBOX_OUTBOX_BATCHSIZE) must be a whole number, not \"1.5\" (/etc/queuebox/queuebox.yml line 8)",
		"outbox.capture (QUEUEBOX_OUTBOX_CAPTURE) must be a map of keys, not a value (/etc/queuebox/queuebox.yml line 9)",
		"routes (QUEUEBOX_ROUTES) must be a list, not a value (a variable sets one element: QUEUEBOX_ROUTES_0) (/etc/queuebox/queuebox.yml line 10)",
		"sources.orders.idempotencyKeyPath (QUEUEBOX_SOURCES_ORDERS_IDEMPOTENCYKEYPATH) must be a single value, not a list (/etc/queuebox/queuebox.yml line 15)",
		"destinations.a.headers (QUEUEBOX_DESTINATIONS_A_HEADERS) must be a map, not a list (/etc/queuebox/queuebox.yml line 19)",
		"retention.outbox.maxAge (QUEUEBOX_RETENTION_OUTBOX_MAXAGE) must be a whole number and one suffix s, m, h or d, for example 7d, not \"7 days\" (/etc/queuebox/queuebox.yml line 22)",
		"server.httpPort (QUEUEBOX_SERVER_HTTPPORT) must be a whole number, not \"eighty\"",
	}, problemStrings(t, err))
}

func TestLoadNullKeepsTheDefault(t *testing.T) {
	t.Parallel()
	cfg := mustLoad(t, minimalDatabase+"outbox:\n  batchSize:\n  capture: ~\nadmin:\n  auth: null\n", nil)
	assert.Equal(t, 100, cfg.Outbox.BatchSize)
	assert.Equal(t, CapturePolling, cfg.Outbox.Capture.Mode)
	assert.Nil(t, cfg.Admin.Auth)
}

func TestLoadEmptyFileWithVariables(t *testing.T) {
	t.Parallel()
	cfg, _, err := loadYAML(t, "# nothing yet\n", map[string]string{
		"QUEUEBOX_DATABASE_URL": "jdbc:postgresql://db/q", "QUEUEBOX_DATABASE_USERNAME": "u", "QUEUEBOX_DATABASE_PASSWORD": "p",
	}, nil)
	require.NoError(t, err)
	assert.Equal(t, DefaultConfigFile, cfg.Origin.File)
}

func TestLoadYAMLAnchorsAndMergeKeys(t *testing.T) {
	t.Parallel()
	file := minimalDatabase + `x-http: &http
  type: http
  timeoutMs: 5000
destinations:
  a:
    <<: *http
    baseUrl: https://a.example.com
  b:
    <<: *http
    baseUrl: https://b.example.com
    timeoutMs: 7000
`
	cfg, warnings, err := loadYAML(t, file, nil, nil)
	require.NoError(t, err)
	assert.Equal(t, Milliseconds(5000), cfg.Destinations["a"].HTTP.TimeoutMs)
	assert.Equal(t, Milliseconds(7000), cfg.Destinations["b"].HTTP.TimeoutMs, "an explicit key wins over the merged one")
	assert.Equal(t, []string{"unknown key x-http (/etc/queuebox/queuebox.yml line 5): it has no effect"}, warningStrings(warnings))
}

func TestEnvMap(t *testing.T) {
	t.Parallel()
	assert.Equal(t, map[string]string{"A": "1", "B": "x=y", "C": ""}, EnvMap([]string{"A=0", "A=1", "B=x=y", "C=", "junk", "=v"}))
	opts := OSOptions()
	assert.Nil(t, opts.ReadFile, "nil: the file system of the process, with the bounded read of file: secrets")
	assert.NotNil(t, opts.Env)
}

func TestLoadReturnsWarningsWithErrors(t *testing.T) {
	t.Parallel()
	_, warnings, err := loadYAML(t, "outbox:\n  typo: 1\n", nil, nil)
	require.Error(t, err)
	var ve *ValidationError
	require.True(t, errors.As(err, &ve))
	assert.Len(t, warnings, 1)
}

func TestLoadRefusesAnAliasBomb(t *testing.T) {
	t.Parallel()
	bomb := "a: &a [x, x, x, x, x, x, x, x, x, x]\n"
	prev := "a"
	for _, name := range []string{"b", "c", "d", "e", "f", "g", "h"} {
		bomb += name + ": &" + name + " [" + strings.Repeat("*"+prev+", ", 9) + "*" + prev + "]\n"
		prev = name
	}
	_, _, err := Load(LoadOptions{Components: testComponents(), ReadFile: memFiles{DefaultConfigFile: bomb}.read})
	require.Error(t, err)
	assert.ErrorIs(t, err, ErrConfigFile)
	assert.Contains(t, err.Error(), "aliases expand the document to more than 1048576 nodes")
}

func TestLoadVariablesWithoutDatabaseURLSayThePackagedDefaultIsNotRead(t *testing.T) {
	t.Parallel()
	_, _, err := Load(LoadOptions{Components: testComponents(),
		Env:      map[string]string{"QUEUEBOX_SERVER_HTTPPORT": "8181"},
		ReadFile: noFiles.read,
		Packaged: []byte(minimalDatabase),
	})
	var ve *ValidationError
	require.ErrorAs(t, err, &ve)
	text := err.Error()
	assert.Contains(t, text, "database.url (QUEUEBOX_DATABASE_URL) is required: QUEUEBOX_ variables are set")
	assert.Contains(t, text, "the packaged default queuebox.yml is not read")
	assert.Contains(t, text, "set QUEUEBOX_DATABASE_URL or name a file with QUEUEBOX_CONFIG_FILE")
}

func TestLoadMissingDatabaseURLInAFileKeepsThePlainMessage(t *testing.T) {
	t.Parallel()
	files := memFiles{DefaultConfigFile: "server:\n  httpPort: 8181\n"}
	_, _, err := Load(LoadOptions{Components: testComponents(), Env: map[string]string{"QUEUEBOX_SERVER_HTTPPORT": "8182"}, ReadFile: files.read})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "database.url (QUEUEBOX_DATABASE_URL) is required")
	assert.NotContains(t, err.Error(), "packaged default")
}
