package config

import (
	"errors"
	"io/fs"
	"maps"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/alternayte/queuebox/shared/connect/webhook"
	"github.com/alternayte/queuebox/shared/dburl"
	"github.com/alternayte/queuebox/shared/kind"
	"github.com/alternayte/queuebox/shared/store/dialect"
)

// testComponents returns the rules of the components as the composition root fills them
// (service.Components, which this package's tests cannot import): the dialect table and the
// HTTP connector's signing.
func testComponents() *Components {
	c := &Components{
		ParseDatabaseURL: dialect.ParseURL,
		Destinations: map[DestinationKind]DestinationRules{
			kind.HTTP: {SigningKey: webhook.SigningKey, MaxSigningSecrets: webhook.MaxSigningSecrets},
		},
	}
	c.Connectors = testConnectors
	for _, d := range dialect.All() {
		c.Dialects = append(c.Dialects, Dialect{Name: DatabaseType(d.Name), CaptureMode: CaptureMode(d.CaptureMode), ClaimLock: d.ClaimLock,
			UnsupportedParams: func(u dburl.URL) []string { _, dropped := d.Params(u); return dropped }})
	}
	return c
}

// memFiles is an in-memory file system for LoadOptions.ReadFile.
type memFiles map[string]string

func (m memFiles) read(name string) ([]byte, error) {
	if s, ok := m[name]; ok {
		return []byte(s), nil
	}
	return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
}

// minimalDatabase is the database section of a valid configuration.
const minimalDatabase = `database:
  url: jdbc:postgresql://db:5432/queuebox
  username: queuebox
  password: secret
`

// loadYAML loads body as the file at the default path, with the given environment and extra
// files.
func loadYAML(t *testing.T, body string, env map[string]string, extra memFiles) (*Config, []Warning, error) {
	t.Helper()
	files := memFiles{DefaultConfigFile: body}
	maps.Copy(files, extra)
	return Load(LoadOptions{Components: testComponents(), Env: env, ReadFile: files.read})
}

// mustLoad loads body and fails the test on an error.
func mustLoad(t *testing.T, body string, env map[string]string) *Config {
	t.Helper()
	cfg, _, err := loadYAML(t, body, env, nil)
	require.NoError(t, err)
	return cfg
}

// problemStrings returns the problems of a *ValidationError as they print.
func problemStrings(t *testing.T, err error) []string {
	t.Helper()
	var ve *ValidationError
	require.True(t, errors.As(err, &ve), "want a *ValidationError, got %v", err)
	out := make([]string, len(ve.Problems))
	for i, p := range ve.Problems {
		out[i] = p.String()
	}
	return out
}

// warningStrings returns the texts of the warnings.
func warningStrings(ws []Warning) []string {
	out := make([]string, len(ws))
	for i, w := range ws {
		out[i] = w.String()
	}
	return out
}

// indent indents every line of s by n spaces.
func indent(s string, n int) string {
	pad := strings.Repeat(" ", n)
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i, l := range lines {
		if l != "" {
			lines[i] = pad + l
		}
	}
	return strings.Join(lines, "\n") + "\n"
}

// testConnectors are the connector kinds of testComponents: the real ones, which
// connectors_test.go (an external test file, as this package's own cannot import them) sets
// before the tests run.
var testConnectors []ConnectorSpec

// blockKey returns the value of the key of a connector's block (Destination.Block,
// Source.Block), found by its name as the loader finds it.
func blockKey(t *testing.T, b Block, key string) any {
	t.Helper()
	require.NotNil(t, b)
	v := reflect.ValueOf(b).Elem()
	for _, f := range fieldsOf(v.Type()) {
		if f.name == key {
			return v.FieldByIndex(f.index).Interface()
		}
	}
	t.Fatalf("the block %T has no key %s", b, key)
	return nil
}
