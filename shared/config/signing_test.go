package config

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/alternayte/queuebox/shared/connect/webhook"
)

// Two standard-webhooks secrets of 32-byte keys, one of 16 bytes (too short) and one of 65
// bytes (too long).
const (
	testSigningSecret1   = "whsec_AQIDBAUGBwgJCgsMDQ4PEBESExQVFhcYGRobHB0eHyA="
	testSigningSecret2   = "whsec_ZWZnaGlqa2xtbm9wcXJzdHV2d3h5ent8fX5/gIGCg4Q="
	testSigningShortKey  = "whsec_AQIDBAUGBwgJCgsMDQ4PEA=="
	testSigningLongerKey = "whsec_AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8gISIjJCUmJygpKissLS4vMDEyMzQ1Njc4OTo7PD0+P0A="
)

// signingYAML is a configuration whose destination web has the signing block body.
func signingYAML(body string) string {
	return minimalDatabase + "destinations:\n  web:\n    baseUrl: https://example.com\n    signing:\n" + indent(body, 6)
}

func TestSigningLoadsBothKinds(t *testing.T) {
	t.Parallel()
	cfg := mustLoad(t, signingYAML("type: standard-webhooks\nsecrets:\n  - "+testSigningSecret1+"\n  - "+testSigningSecret2+"\n"), nil)
	s := cfg.Destinations["web"].Signing
	require.NotNil(t, s)
	assert.Equal(t, SigningStandardWebhooks, s.Kind)
	require.NotNil(t, s.StandardWebhooks)
	require.Len(t, s.StandardWebhooks.Secrets, 2)
	assert.Equal(t, testSigningSecret2, s.StandardWebhooks.Secrets[1].Reveal())

	// Without a type, secrets selects standard-webhooks and secret selects hmac.
	cfg = mustLoad(t, signingYAML("secrets: ["+testSigningSecret1+"]\n"), nil)
	assert.Equal(t, SigningStandardWebhooks, cfg.Destinations["web"].Signing.Kind)

	cfg = mustLoad(t, signingYAML("type: hmac\nsecret: s3cr3t\n"), nil)
	s = cfg.Destinations["web"].Signing
	assert.Equal(t, SigningHMAC, s.Kind)
	// The defaults are those of the inbound hmac auth.
	assert.Equal(t, &HMACSigning{Secret: NewSecret("s3cr3t"), HeaderName: "X-Signature", Algorithm: HmacSHA256, SignaturePrefix: "sha256="}, s.HMAC)
	assert.Equal(t, NewSigning(SigningHMAC).HMAC.HeaderName, "X-Signature")

	cfg = mustLoad(t, signingYAML("secret: s\nheaderName: X-Hub-Signature-256\nalgorithm: HmacSHA512\nsignaturePrefix: \"\"\n"), nil)
	s = cfg.Destinations["web"].Signing
	assert.Equal(t, &HMACSigning{Secret: NewSecret("s"), HeaderName: "X-Hub-Signature-256", Algorithm: HmacSHA512}, s.HMAC)
}

// TestSigningFromVariables sets a whole block through QUEUEBOX_ variables, a list of secrets
// one index each, as spec/24-environment-variables.md describes a list.
func TestSigningFromVariables(t *testing.T) {
	t.Parallel()
	cfg := mustLoad(t, minimalDatabase+"destinations:\n  web:\n    baseUrl: https://example.com\n", map[string]string{
		"QUEUEBOX_DESTINATIONS_WEB_SIGNING_TYPE":      "standard-webhooks",
		"QUEUEBOX_DESTINATIONS_WEB_SIGNING_SECRETS_0": testSigningSecret1,
		"QUEUEBOX_DESTINATIONS_WEB_SIGNING_SECRETS_1": testSigningSecret2,
	})
	s := cfg.Destinations["web"].Signing
	require.NotNil(t, s)
	require.NotNil(t, s.StandardWebhooks)
	require.Len(t, s.StandardWebhooks.Secrets, 2)
	assert.Equal(t, testSigningSecret1, s.StandardWebhooks.Secrets[0].Reveal())

	cfg = mustLoad(t, minimalDatabase+"destinations:\n  web:\n    baseUrl: https://example.com\n", map[string]string{
		"QUEUEBOX_DESTINATIONS_WEB_SIGNING_SECRET":     "s",
		"QUEUEBOX_DESTINATIONS_WEB_SIGNING_HEADERNAME": "X-Hub-Signature-256",
	})
	require.NotNil(t, cfg.Destinations["web"].Signing.HMAC)
	assert.Equal(t, "X-Hub-Signature-256", cfg.Destinations["web"].Signing.HMAC.HeaderName)
}

func TestSigningValidation(t *testing.T) {
	t.Parallel()
	many := "secrets:\n"
	for range webhook.MaxSigningSecrets + 1 {
		many += "  - " + testSigningSecret1 + "\n"
	}
	tests := []struct {
		name string
		yaml string
		want []string
	}{
		{name: "no prefix", yaml: "secrets: [AQIDBAUGBwgJCgsMDQ4PEBESExQVFhcYGRobHB0eHyA=]\n",
			want: []string{"destinations.web.signing.secrets[0] (QUEUEBOX_DESTINATIONS_WEB_SIGNING_SECRETS_0) must start with whsec_, followed by the standard base64 of the key"}},
		{name: "not base64", yaml: "secrets: [" + testSigningSecret1 + ", whsec_not*base64]\n",
			want: []string{"destinations.web.signing.secrets[1] (QUEUEBOX_DESTINATIONS_WEB_SIGNING_SECRETS_1) must be whsec_ followed by standard base64: the text after whsec_ does not decode"}},
		{name: "short key", yaml: "secrets: [" + testSigningShortKey + "]\n",
			want: []string{"destinations.web.signing.secrets[0] (QUEUEBOX_DESTINATIONS_WEB_SIGNING_SECRETS_0) must hold a key of 24 to 64 bytes, not 16 bytes"}},
		{name: "long key", yaml: "secrets: [" + testSigningLongerKey + "]\n",
			want: []string{"destinations.web.signing.secrets[0] (QUEUEBOX_DESTINATIONS_WEB_SIGNING_SECRETS_0) must hold a key of 24 to 64 bytes, not 65 bytes"}},
		{name: "too many", yaml: many,
			want: []string{"destinations.web.signing.secrets (QUEUEBOX_DESTINATIONS_WEB_SIGNING_SECRETS) must hold at most 10 secrets, not 11"}},
		{name: "empty list", yaml: "type: standard-webhooks\nsecrets: []\n",
			want: []string{"destinations.web.signing.secrets (QUEUEBOX_DESTINATIONS_WEB_SIGNING_SECRETS) is required: at least one whsec_ secret"}},
		{name: "type without secrets", yaml: "type: standard-webhooks\n",
			want: []string{"destinations.web.signing.secrets (QUEUEBOX_DESTINATIONS_WEB_SIGNING_SECRETS) is required: at least one whsec_ secret"}},
		{name: "unknown type", yaml: "type: jwt\nsecret: s\n",
			want: []string{"destinations.web.signing.type (QUEUEBOX_DESTINATIONS_WEB_SIGNING_TYPE) must be standard-webhooks or hmac, not \"jwt\""}},
		{name: "hmac without secret", yaml: "type: hmac\nheaderName: X-Sig\n",
			want: []string{"destinations.web.signing.secret (QUEUEBOX_DESTINATIONS_WEB_SIGNING_SECRET) is required"}},
		{name: "hmac algorithm", yaml: "secret: s\nalgorithm: sha1\n",
			want: []string{"destinations.web.signing.algorithm (QUEUEBOX_DESTINATIONS_WEB_SIGNING_ALGORITHM) must be HmacSHA256 or HmacSHA512, in this letter case, not \"sha1\""}},
		{name: "hmac header name", yaml: "secret: s\nheaderName: \"X Sig\"\n",
			want: []string{"destinations.web.signing.headerName (QUEUEBOX_DESTINATIONS_WEB_SIGNING_HEADERNAME) must be a valid header name, not \"X Sig\""}},
		{name: "hmac empty header name", yaml: "secret: s\nheaderName: \"\"\n",
			want: []string{"destinations.web.signing.headerName (QUEUEBOX_DESTINATIONS_WEB_SIGNING_HEADERNAME) is required"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, _, err := loadYAML(t, signingYAML(tt.yaml), nil, nil)
			require.Error(t, err)
			problems := problemStrings(t, err)
			assert.Equal(t, tt.want, problems)
			for _, p := range problems {
				assert.NotContains(t, p, "AQIDBAUGBwgJ", "a problem never quotes a secret")
			}
		})
	}
}

// TestSigningOnlyOnHTTPDestinations: a broker destination refuses a signing block.
func TestSigningOnlyOnHTTPDestinations(t *testing.T) {
	t.Parallel()
	_, _, err := loadYAML(t, minimalDatabase+"destinations:\n  nat:\n    servers: nats://n:4222\n    subject: s\n    signing:\n      secrets: ["+testSigningSecret1+"]\n", nil, nil)
	require.Error(t, err)
	assert.Equal(t, []string{"destinations.nat.signing (QUEUEBOX_DESTINATIONS_NAT_SIGNING) is set on a nats destination: only an http destination signs its requests"},
		problemStrings(t, err))
}

// TestSigningWarnsAboutAKeyOfTheOtherKind: secret under type standard-webhooks has no effect.
func TestSigningWarnsAboutAKeyOfTheOtherKind(t *testing.T) {
	t.Parallel()
	_, warnings, err := loadYAML(t, signingYAML("type: standard-webhooks\nsecrets: ["+testSigningSecret1+"]\nheaderName: X-Sig\n"), nil, nil)
	require.NoError(t, err)
	assert.Contains(t, strings.Join(warningStrings(warnings), "\n"),
		"destinations.web.signing.headerName is a key of the hmac kind, but destinations.web.signing is of the standard-webhooks kind: it has no effect")
}

// TestSigningPrintsNoSecret: config check shows the block, its kind and masks for the secrets.
func TestSigningPrintsNoSecret(t *testing.T) {
	t.Parallel()
	cfg := mustLoad(t, signingYAML("secrets:\n  - "+testSigningSecret1+"\n  - "+testSigningSecret2+"\n"), nil)
	out, err := cfg.MaskedYAML()
	require.NoError(t, err)
	text := string(out)
	assert.Contains(t, text, "    signing:\n      type: standard-webhooks\n      secrets:\n        - Secret(***)\n        - Secret(***)\n")
	assert.NotContains(t, text, "whsec_")

	cfg = mustLoad(t, signingYAML("secret: hmac-key-value\nheaderName: X-Hub-Signature-256\n"), nil)
	out, err = cfg.MaskedYAML()
	require.NoError(t, err)
	text = string(out)
	assert.Contains(t, text, "    signing:\n      type: hmac\n      secret: Secret(***)\n      headerName: X-Hub-Signature-256\n      algorithm: HmacSHA256\n      signaturePrefix: sha256=\n")
	assert.NotContains(t, text, "hmac-key-value")
}

// TestSigningBoundsAreDocumented: docs/configuration-bounds.md gives the signing bounds.
func TestSigningBoundsAreDocumented(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../../docs/configuration-bounds.md")
	require.NoError(t, err)
	text := string(doc)
	assert.Contains(t, text, fmt.Sprintf("takes at most **%d** secrets", webhook.MaxSigningSecrets))
	assert.Contains(t, text, fmt.Sprintf("a key of **%d to %d\nbytes**", webhook.MinSigningKeyBytes, webhook.MaxSigningKeyBytes))
}
