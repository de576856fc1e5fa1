package config

import (
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestEnvVarName(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, path, want string
	}{
		{name: "level", path: "database.url", want: "QUEUEBOX_DATABASE_URL"},
		{name: "camel case", path: "server.httpPort", want: "QUEUEBOX_SERVER_HTTPPORT"},
		{name: "map key", path: "sources.stripe.path", want: "QUEUEBOX_SOURCES_STRIPE_PATH"},
		{name: "underscore in a map key", path: "destinations.my_api.baseUrl", want: "QUEUEBOX_DESTINATIONS_MY__API_BASEURL"},
		{name: "dash in a map key", path: "destinations.orders-api.timeoutMs", want: "QUEUEBOX_DESTINATIONS_ORDERS-API_TIMEOUTMS"},
		{name: "list index", path: "routes[0].topicPattern", want: "QUEUEBOX_ROUTES_0_TOPICPATTERN"},
		{name: "list index with a dot", path: "routes.0.topicPattern", want: "QUEUEBOX_ROUTES_0_TOPICPATTERN"},
		{name: "list of values", path: "sources.orders.topics[0]", want: "QUEUEBOX_SOURCES_ORDERS_TOPICS_0"},
		{name: "two list levels", path: "sources.orders.filter.require[0].in[1]", want: "QUEUEBOX_SOURCES_ORDERS_FILTER_REQUIRE_0_IN_1"},
		{name: "column mapping", path: "database.columnMapping.outbox.leaseExpiresAt", want: "QUEUEBOX_DATABASE_COLUMNMAPPING_OUTBOX_LEASEEXPIRESAT"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tt.want, EnvVarName(tt.path))
		})
	}
}

func TestEnvKeyPath(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, variable, want string
		wantOK               bool
	}{
		{name: "level", variable: "QUEUEBOX_DATABASE_URL", want: "database.url", wantOK: true},
		{name: "camel case in lower case", variable: "QUEUEBOX_OUTBOX_POLLINTERVALMS", want: "outbox.pollintervalms", wantOK: true},
		{name: "double underscore", variable: "QUEUEBOX_DESTINATIONS_MY__API_BASEURL", want: "destinations.my_api.baseurl", wantOK: true},
		{name: "extra underscore", variable: "QUEUEBOX_OUTBOX_POLL_INTERVAL_MS", want: "outbox.poll.interval.ms", wantOK: true},
		{name: "list index", variable: "QUEUEBOX_ROUTES_0_TOPICPATTERN", want: "routes[0].topicpattern", wantOK: true},
		{name: "two list levels", variable: "QUEUEBOX_SOURCES_ORDERS_FILTER_REQUIRE_0_IN_1", want: "sources.orders.filter.require[0].in[1]", wantOK: true},
		{name: "config file is not a key", variable: "QUEUEBOX_CONFIG_FILE", wantOK: false},
		{name: "other prefix", variable: "DATABASE_URL", wantOK: false},
		{name: "empty level", variable: "QUEUEBOX_OUTBOX_", wantOK: false},
		{name: "prefix alone", variable: "QUEUEBOX_", wantOK: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, ok := EnvKeyPath(tt.variable)
			assert.Equal(t, tt.wantOK, ok)
			assert.Equal(t, tt.want, got)
		})
	}
}

// specRow is one row of a variable table of spec/24-environment-variables.md.
type specRow struct{ key, variable string }

var specRowPattern = regexp.MustCompile("^\\| `([^`]+)` +\\| `(QUEUEBOX_[A-Z0-9_-]+)` +\\|$")

// specVariableRows reads the tables of "Every variable" from the copy of
// spec/24-environment-variables.md. The flattened page lost the placeholders of the map keys
// and list indexes; the page says they are orders and 0, and the two map-valued keys use the
// names that their variables show (XTEAM, AUDIENCE).
func specVariableRows(t *testing.T) []specRow {
	t.Helper()
	data, err := os.ReadFile("testdata/24-environment-variables.md")
	require.NoError(t, err)
	_, tables, ok := strings.Cut(string(data), "## Every variable")
	require.True(t, ok)
	restore := strings.NewReplacer(
		"destinations..", "destinations.orders.",
		"sources..", "sources.orders.",
		"routes..", "routes[0].",
		"require..", "require[0].",
		"exclude..", "exclude[0].",
	)
	var rows []specRow
	for _, line := range strings.Split(tables, "\n") {
		m := specRowPattern.FindStringSubmatch(strings.TrimSpace(line))
		if m == nil {
			continue
		}
		key := restore.Replace(m[1])
		switch {
		case strings.HasSuffix(key, ".in."), strings.HasSuffix(key, ".topics."):
			key = strings.TrimSuffix(key, ".") + "[0]"
		case strings.HasSuffix(key, ".headers."):
			key += "xteam"
		case strings.HasSuffix(key, ".extraParams."):
			key += "audience"
		}
		rows = append(rows, specRow{key: key, variable: m[2]})
	}
	return rows
}

func TestEnvVarNameMatchesEverySpecTable(t *testing.T) {
	t.Parallel()
	rows := specVariableRows(t)
	require.Greater(t, len(rows), 180, "the tables of spec/24 list every variable")
	for _, r := range rows {
		assert.Equal(t, r.variable, EnvVarName(r.key), r.key)
		back, ok := EnvKeyPath(r.variable)
		assert.True(t, ok, r.variable)
		assert.Equal(t, strings.ToLower(r.key), back, r.variable)
		assert.True(t, schemaHasKey(reflect.TypeFor[Config](), parseKeyPath(r.key)), "the model has no key %s", r.key)
	}
}

// schemaHasKey reports whether a key path names a key of the model, looking into every kind of
// a destination, a source and an auth block.
func schemaHasKey(t reflect.Type, p keyPath) bool {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if len(p) == 0 {
		return true
	}
	switch t.Kind() {
	case reflect.Map:
		return schemaHasKey(t.Elem(), p[1:])
	case reflect.Slice:
		return isIndexSegment(p[0]) && schemaHasKey(t.Elem(), p[1:])
	case reflect.Struct:
		types := []reflect.Type{t}
		if k, ok := reflect.New(t).Interface().(kinded); ok {
			specs, _ := k.kinds(testComponents())
			for _, s := range specs {
				types = append(types, s.typ)
			}
		}
		for _, typ := range types {
			for _, f := range fieldsOf(typ) {
				if strings.EqualFold(f.name, p[0]) && schemaHasKey(typ.FieldByIndex(f.index).Type, p[1:]) {
					return true
				}
			}
		}
	}
	return false
}
