package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"
)

func TestSecretPrintsAMask(t *testing.T) {
	t.Parallel()
	const value = "hunter2-the-real-value"
	tests := []struct {
		name   string
		secret Secret
		want   string
	}{
		{name: "set", secret: NewSecret(value), want: "Secret(***)"},
		{name: "empty", secret: NewSecret(""), want: "Secret(empty)"},
		{name: "zero", secret: Secret{}, want: "Secret(empty)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := tt.secret
			for _, verb := range []string{"%v", "%s", "%+v", "%#v", "%x", "%d"} {
				assert.Equal(t, tt.want, fmt.Sprintf(verb, s), verb)
				assert.Equal(t, tt.want, fmt.Sprintf(verb, &s), verb+" of a pointer")
			}
			assert.Equal(t, `"`+tt.want+`"`, fmt.Sprintf("%q", s))
			assert.Equal(t, tt.want, s.String())
			assert.Equal(t, tt.want, s.GoString())

			j, err := json.Marshal(map[string]any{"password": s})
			require.NoError(t, err)
			assert.Equal(t, `{"password":"`+tt.want+`"}`, string(j))

			y, err := yaml.Marshal(map[string]any{"password": s})
			require.NoError(t, err)
			assert.Equal(t, "password: "+tt.want+"\n", string(y))

			var buf bytes.Buffer
			slog.New(slog.NewJSONHandler(&buf, nil)).Info("start", "password", s)
			assert.Contains(t, buf.String(), `"password":"`+tt.want+`"`)
			buf.Reset()
			slog.New(slog.NewTextHandler(&buf, nil)).Info("start", "password", s)
			assert.Contains(t, buf.String(), "password="+tt.want)
		})
	}
}

func TestSecretInsideStructsPrintsNoValue(t *testing.T) {
	t.Parallel()
	const value = "hunter2-the-real-value"
	type exported struct {
		Name     string
		Password Secret
	}
	type unexported struct {
		name     string
		password Secret
	}
	outputs := []string{
		fmt.Sprintf("%v", exported{"a", NewSecret(value)}),
		fmt.Sprintf("%+v", exported{"a", NewSecret(value)}),
		fmt.Sprintf("%#v", exported{"a", NewSecret(value)}),
		fmt.Sprintf("%v", unexported{"a", NewSecret(value)}),
		fmt.Sprintf("%+v", unexported{"a", NewSecret(value)}),
		fmt.Sprintf("%#v", unexported{"a", NewSecret(value)}),
	}
	for _, out := range outputs {
		assert.NotContains(t, out, value)
	}
	assert.Contains(t, outputs[1], "Password:Secret(***)")

	cfg := Default()
	cfg.Database.Password = NewSecret(value)
	cfg.Database.URL = NewConnectionURL("jdbc:postgresql://db:5432/q?user=u&password=" + value)
	for _, verb := range []string{"%v", "%+v", "%#v"} {
		assert.NotContains(t, fmt.Sprintf(verb, cfg.Database), value, verb)
		assert.NotContains(t, fmt.Sprintf(verb, *cfg), value, verb)
	}
	j, err := json.Marshal(cfg)
	require.NoError(t, err)
	assert.NotContains(t, string(j), value)
}

func TestSecretReveal(t *testing.T) {
	t.Parallel()
	assert.Equal(t, "v", NewSecret("v").Reveal())
	assert.Equal(t, "", Secret{}.Reveal())
	assert.True(t, Secret{}.IsEmpty())
	assert.False(t, NewSecret("v").IsEmpty())
}

func TestConnectionURLPrintsMaskedPassword(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, raw, want string
	}{
		{name: "amqp user info", raw: "amqp://guest:guest-pw@rabbitmq:5672/vhost", want: "amqp://guest:***@rabbitmq:5672/vhost"},
		{name: "jdbc postgres parameter", raw: "jdbc:postgresql://db:5432/q?user=app&password=pw1&ssl=true", want: "jdbc:postgresql://db:5432/q?user=app&password=***&ssl=true"},
		{name: "jdbc sqlserver property", raw: "jdbc:sqlserver://db:1433;databaseName=q;password=pw1;encrypt=true", want: "jdbc:sqlserver://db:1433;databaseName=q;password=***;encrypt=true"},
		{name: "jdbc sqlserver braced property", raw: "jdbc:sqlserver://db;password={a;b}};c};user=x", want: "jdbc:sqlserver://db;password=***;user=x"},
		{name: "postgres user info", raw: "postgres://app:p%40ss@db:5432/q", want: "postgres://app:***@db:5432/q"},
		{name: "no password", raw: "amqp://rabbitmq:5672", want: "amqp://rabbitmq:5672"},
		{name: "user without password", raw: "amqp://guest@rabbitmq", want: "amqp://guest@rabbitmq"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			u := NewConnectionURL(tt.raw)
			assert.Equal(t, tt.want, MaskURL(tt.raw))
			assert.Equal(t, tt.want, u.String())
			assert.Equal(t, tt.want, fmt.Sprintf("%v|%s|%+v|%#v", u, u, u, u)[:len(tt.want)])
			assert.Equal(t, tt.raw, u.Reveal())
			j, err := json.Marshal(u)
			require.NoError(t, err)
			assert.Equal(t, `"`+strings.ReplaceAll(tt.want, "&", `\u0026`)+`"`, string(j))
			y, err := yaml.Marshal(map[string]any{"url": u})
			require.NoError(t, err)
			assert.NotContains(t, string(y), "pw1")
			var buf bytes.Buffer
			slog.New(slog.NewJSONHandler(&buf, nil)).Info("x", "url", u)
			assert.NotContains(t, buf.String(), "pw1")
		})
	}
}

// TestSecretFileIsBounded loads file: secrets from the file system of the process (ReadFile
// nil, as a real process does): a regular file of at most 64 KiB loads, a larger one and a file
// that is not regular (/dev/zero, which read without end before) stop the load with the key
// path and its variable.
func TestSecretFileIsBounded(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	configFile := filepath.Join(dir, "queuebox.yml")
	require.NoError(t, os.WriteFile(configFile, []byte(minimalDatabase), 0o600))
	atBound := filepath.Join(dir, "at-bound")
	require.NoError(t, os.WriteFile(atBound, bytes.Repeat([]byte("a"), MaxSecretFileBytes), 0o600))
	overBound := filepath.Join(dir, "over-bound")
	require.NoError(t, os.WriteFile(overBound, bytes.Repeat([]byte("a"), MaxSecretFileBytes+1), 0o600))

	load := func(password string) (*Config, error) {
		type result struct {
			cfg *Config
			err error
		}
		done := make(chan result, 1)
		go func() {
			cfg, _, err := Load(LoadOptions{Components: testComponents(), Env: map[string]string{
				ConfigFileVariable: configFile, "QUEUEBOX_DATABASE_PASSWORD": password,
			}})
			done <- result{cfg, err}
		}()
		select {
		case r := <-done:
			return r.cfg, r.err
		case <-time.After(30 * time.Second):
			t.Fatalf("Load of the secret %s did not return within 30 s", password)
			return nil, nil
		}
	}

	cfg, err := load("file:" + atBound)
	require.NoError(t, err)
	assert.Len(t, cfg.Database.Password.Reveal(), MaxSecretFileBytes)

	_, err = load("file:" + overBound)
	assert.Equal(t, []string{"database.password (QUEUEBOX_DATABASE_PASSWORD) names the secret file " + overBound +
		", which is larger than 65536 bytes (64 KiB), the largest secret file"}, problemStrings(t, err))

	_, err = load("file:/dev/zero")
	assert.Equal(t, []string{"database.password (QUEUEBOX_DATABASE_PASSWORD) names the secret file /dev/zero, which is not a regular file"},
		problemStrings(t, err))

	_, err = load("file:" + dir)
	assert.Equal(t, []string{"database.password (QUEUEBOX_DATABASE_PASSWORD) names the secret file " + dir + ", which is not a regular file"},
		problemStrings(t, err))

	t.Run("through LoadOptions.ReadFile", func(t *testing.T) {
		t.Parallel()
		big := memFiles{"/run/secrets/big": strings.Repeat("a", MaxSecretFileBytes+1)}
		_, _, err := loadYAML(t, minimalDatabase, map[string]string{"QUEUEBOX_DATABASE_PASSWORD": "file:/run/secrets/big"}, big)
		assert.Equal(t, []string{"database.password (QUEUEBOX_DATABASE_PASSWORD) names the secret file /run/secrets/big, " +
			"which is larger than 65536 bytes (64 KiB), the largest secret file"}, problemStrings(t, err))
	})
}
