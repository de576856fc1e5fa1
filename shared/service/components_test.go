package service

import (
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/alternayte/queuebox/shared/config"
	"github.com/alternayte/queuebox/shared/kind"
)

// Components holds the dialects of the dialect table and the rules of the built-in
// connectors, and Load checks with them when the options name none: a configuration that
// needs a dialect's grammar or a connector's rule is refused with the component's text,
// whichever program loads it.
func TestLoadChecksWithTheComponents(t *testing.T) {
	t.Parallel()
	c := Components()
	var names []string
	for _, d := range c.Dialects {
		names = append(names, string(d.Name)+"/"+string(d.CaptureMode))
	}
	assert.Equal(t, []string{"postgresql/postgres-logical", "sqlserver/sqlserver-cdc"}, names)
	require.NotNil(t, c.Destinations[kind.HTTP].SigningKey)

	env := map[string]string{
		"QUEUEBOX_DATABASE_URL": "jdbc:mysql://db/q", "QUEUEBOX_DATABASE_USERNAME": "queuebox", "QUEUEBOX_DATABASE_PASSWORD": "secret",
		"QUEUEBOX_DESTINATIONS_WEB_BASEURL":           "https://example.com",
		"QUEUEBOX_DESTINATIONS_WEB_SIGNING_SECRETS_0": "whsec_AQIDBAUGBwgJCgsMDQ4PEA==",
	}
	noFile := func(string) ([]byte, error) { return nil, os.ErrNotExist }
	_, _, err := Load(LoadOptions{Env: env, ReadFile: noFile})
	var verr *config.ValidationError
	require.ErrorAs(t, err, &verr)
	var got []string
	for _, p := range verr.Problems {
		got = append(got, p.String())
	}
	assert.Equal(t, []string{
		`database.url (QUEUEBOX_DATABASE_URL) must start with jdbc:postgresql:// or jdbc:sqlserver:// (or be a native postgres:// or sqlserver:// URL), not "jdbc:mysql://db/q"`,
		"destinations.web.signing.secrets[0] (QUEUEBOX_DESTINATIONS_WEB_SIGNING_SECRETS_0) must hold a key of 24 to 64 bytes, not 16 bytes",
	}, got)

	_, _, err = config.Load(config.LoadOptions{Env: env, ReadFile: noFile})
	assert.ErrorContains(t, err, "LoadOptions.Components is not set", "config.Load refuses to check without the components")
}
