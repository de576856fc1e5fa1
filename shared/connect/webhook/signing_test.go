package webhook_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/alternayte/queuebox/shared/connect/webhook"
	"github.com/alternayte/queuebox/shared/forwarded"
	"github.com/alternayte/queuebox/shared/inboundauth"
)

// Two secrets of 32-byte keys, and a third that signs nothing here.
const (
	signingSecret1 = "whsec_AQIDBAUGBwgJCgsMDQ4PEBESExQVFhcYGRobHB0eHyA="
	signingSecret2 = "whsec_ZWZnaGlqa2xtbm9wcXJzdHV2d3h5ent8fX5/gIGCg4Q="
	otherSecret    = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
)

// inboundStandardWebhooks is the project's own inbound verifier of one secret.
func inboundStandardWebhooks(t *testing.T, secret string) inboundauth.Verifier {
	t.Helper()
	v, err := inboundauth.New(&inboundauth.Config{StandardWebhooks: &inboundauth.StandardWebhooks{
		Secret: inboundauth.NewSecret(secret), TimestampToleranceMs: 300000,
	}})
	require.NoError(t, err)
	return v
}

// verifyStandardWebhooks checks one received request with the official Standard Webhooks Go
// library and with shared/inboundauth, for each secret alone, and that another secret fails.
func verifyStandardWebhooks(t *testing.T, got received, secrets ...string) {
	t.Helper()
	for _, secret := range secrets {
		wh, err := standardwebhooks.NewWebhook(secret)
		require.NoError(t, err)
		assert.NoError(t, wh.Verify(got.Body, got.Header), "the official library verifies with one secret alone")
		assert.NoError(t, inboundStandardWebhooks(t, secret).Verify(got.Header, got.Body, time.Now()), "inboundauth verifies with one secret alone")
	}
	wh, err := standardwebhooks.NewWebhook(otherSecret)
	require.NoError(t, err)
	assert.ErrorIs(t, wh.Verify(got.Body, got.Header), standardwebhooks.ErrNoMatchingSignature)
	assert.Error(t, inboundStandardWebhooks(t, otherSecret).Verify(got.Header, got.Body, time.Now()))

	// A changed body no longer verifies.
	tampered := append([]byte(nil), got.Body...)
	tampered[0] = ' '
	wh, err = standardwebhooks.NewWebhook(secrets[0])
	require.NoError(t, err)
	assert.ErrorIs(t, wh.Verify(tampered, got.Header), standardwebhooks.ErrNoMatchingSignature)
}

// TestStandardWebhooksSignaturesVerifyAcrossARetry: a destination with two secrets answers 500,
// then 200. Both requests carry the same webhook-id, the row id, a webhook-timestamp of the
// attempt and one v1 signature per secret; the official library and inboundauth verify each
// with either secret alone.
func TestStandardWebhooksSignaturesVerifyAcrossARetry(t *testing.T) {
	t.Parallel()
	rc := newReceiver(t, func(_ *http.Request, n int) (int, string) {
		if n == 1 {
			return http.StatusInternalServerError, "down"
		}
		return http.StatusOK, ""
	})
	p := newPublisher(t, webhook.Config{BaseURL: rc.srv.URL, Path: "/events", Signing: webhook.Signing{
		Kind: webhook.SigningStandardWebhooks, Secrets: []string{signingSecret1, signingSecret2},
	}}, nil)

	m := message()
	before := time.Now().Unix()
	var se *webhook.StatusError
	require.ErrorAs(t, p.Publish(context.Background(), m), &se)
	assert.Equal(t, http.StatusInternalServerError, se.StatusCode)
	m.Attempt = 1
	require.NoError(t, p.Publish(context.Background(), m))
	after := time.Now().Unix()

	reqs := rc.requests()
	require.Len(t, reqs, 2)
	for i, got := range reqs {
		assert.Equal(t, []string{m.ID}, got.Header.Values("webhook-id"), "request %d: the row id, on every attempt", i)
		ts := got.Header.Values("webhook-timestamp")
		require.Len(t, ts, 1)
		sec, err := strconv.ParseInt(ts[0], 10, 64)
		require.NoError(t, err)
		assert.True(t, sec >= before && sec <= after, "request %d: webhook-timestamp %d is the Unix second of the attempt (%d to %d)", i, sec, before, after)
		sig := got.Header.Values("webhook-signature")
		require.Len(t, sig, 1)
		entries := strings.Split(sig[0], " ")
		require.Len(t, entries, 2, "one signature per secret, separated by one space")
		for _, e := range entries {
			assert.True(t, strings.HasPrefix(e, "v1,"), e)
			assert.Len(t, e, len("v1,")+44)
		}
		verifyStandardWebhooks(t, got, signingSecret1, signingSecret2)
	}
}

// TestStandardWebhooksSignatureMatchesTheSpecificationExample signs the example of the official
// libraries' test suite (secret, id, timestamp and body) and gets its signature.
func TestStandardWebhooksSignatureMatchesTheSpecificationExample(t *testing.T) {
	t.Parallel()
	s, err := webhook.NewSigner(webhook.Signing{Kind: webhook.SigningStandardWebhooks, Secrets: []string{"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}})
	require.NoError(t, err)
	h := http.Header{}
	require.NoError(t, s.Sign(h, "msg_p5jXN8AQM9LWM0D4loKWxJek", []byte(`{"test": 2432232314}`), time.Unix(1614265330, 0)))
	assert.Equal(t, http.Header{
		"Webhook-Id":        {"msg_p5jXN8AQM9LWM0D4loKWxJek"},
		"Webhook-Timestamp": {"1614265330"},
		"Webhook-Signature": {"v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="},
	}, h)

	wh, err := standardwebhooks.NewWebhook("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	require.NoError(t, err)
	want, err := wh.Sign("msg_p5jXN8AQM9LWM0D4loKWxJek", time.Unix(1614265330, 0), []byte(`{"test": 2432232314}`))
	require.NoError(t, err)
	assert.Equal(t, want, h.Get("webhook-signature"), "the official library signs the same")

	// An id with a dot cannot be signed: the specification forbids it.
	assert.ErrorIs(t, s.Sign(http.Header{}, "a.b", nil, time.Now()), webhook.ErrUnsignable)
	assert.ErrorIs(t, s.Sign(http.Header{}, "", nil, time.Now()), webhook.ErrUnsignable)
}

// TestSignatureHeadersCannotBeForged: a row that carries webhook-id, webhook-timestamp and
// webhook-signature headers of its own, relayed or not, and a static header of the same name,
// still sends exactly the destination's signature.
func TestSignatureHeadersCannotBeForged(t *testing.T) {
	t.Parallel()
	for _, relayed := range []bool{false, true} {
		rc := newReceiver(t, nil)
		p := newPublisher(t, webhook.Config{BaseURL: rc.srv.URL, Headers: map[string]string{"webhook-signature": "static"},
			Signing: webhook.Signing{Kind: webhook.SigningStandardWebhooks, Secrets: []string{signingSecret1}}}, nil)
		m := message()
		m.Headers = map[string]string{"webhook-id": "forged", "Webhook-Timestamp": "1", "webhook-signature": "v1,forged"}
		if relayed {
			m.Headers[forwarded.MarkerSource] = "hooks"
			m.Headers[forwarded.MarkerInboxID] = "1"
		}
		require.NoError(t, p.Publish(context.Background(), m))
		reqs := rc.requests()
		require.Len(t, reqs, 1)
		got := reqs[0]
		assert.Equal(t, []string{m.ID}, got.Header.Values("webhook-id"), "relayed %v", relayed)
		assert.Len(t, got.Header.Values("webhook-timestamp"), 1)
		assert.Len(t, got.Header.Values("webhook-signature"), 1)
		verifyStandardWebhooks(t, got, signingSecret1)
	}
}

// TestHMACSignatureVerifiesWithInboundHMAC: the hmac type with a GitHub-style setting
// (X-Hub-Signature-256, sha256=, hexadecimal HMAC-SHA256 of the body) is verified by the
// inbound hmac auth configured the same way, and so is HmacSHA512.
func TestHMACSignatureVerifiesWithInboundHMAC(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		algorithm, header, prefix string
	}{
		{algorithm: "HmacSHA256", header: "X-Hub-Signature-256", prefix: "sha256="},
		{algorithm: "HmacSHA512", header: "X-Signature", prefix: "sha512="},
		{algorithm: "HmacSHA256", header: "X-Signature", prefix: ""},
	} {
		rc := newReceiver(t, nil)
		p := newPublisher(t, webhook.Config{BaseURL: rc.srv.URL, Signing: webhook.Signing{
			Kind: webhook.SigningHMAC, Secret: "It's a Secret to Everybody", HeaderName: tt.header, Algorithm: tt.algorithm, Prefix: tt.prefix,
		}}, nil)
		m := message()
		m.Payload = json.RawMessage(`{"zen":"Keep it logically awesome."}`)
		require.NoError(t, p.Publish(context.Background(), m))
		reqs := rc.requests()
		require.Len(t, reqs, 1)
		got := reqs[0]
		require.Len(t, got.Header.Values(tt.header), 1, tt.header)
		assert.True(t, strings.HasPrefix(got.Header.Get(tt.header), tt.prefix))
		assert.Empty(t, got.Header.Values("webhook-signature"), "hmac sends no Standard Webhooks header")

		v, err := inboundauth.New(&inboundauth.Config{HMAC: &inboundauth.HMAC{
			Secret: inboundauth.NewSecret("It's a Secret to Everybody"), HeaderName: tt.header,
			Algorithm: inboundauth.Algorithm(tt.algorithm), SignaturePrefix: tt.prefix, TimestampToleranceMs: 300000,
		}})
		require.NoError(t, err)
		assert.NoError(t, v.Verify(got.Header, got.Body, time.Now()), "%+v", tt)
		assert.Error(t, v.Verify(got.Header, append(got.Body, ' '), time.Now()), "a changed body fails")
	}

	// GitHub's documented example: this secret and "Hello, World!" give this signature.
	s, err := webhook.NewSigner(webhook.Signing{Kind: webhook.SigningHMAC, Secret: "It's a Secret to Everybody", HeaderName: "X-Hub-Signature-256", Prefix: "sha256="})
	require.NoError(t, err)
	h := http.Header{}
	require.NoError(t, s.Sign(h, "", []byte("Hello, World!"), time.Time{}))
	assert.Equal(t, http.Header{"X-Hub-Signature-256": {"sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"}}, h)
}

// TestSigningConfigIsValidated: New refuses a bad signing block with the key, never the secret.
func TestSigningConfigIsValidated(t *testing.T) {
	t.Parallel()
	many := make([]string, webhook.MaxSigningSecrets+1)
	for i := range many {
		many[i] = signingSecret1
	}
	for _, tt := range []struct {
		signing webhook.Signing
		want    string
	}{
		{webhook.Signing{Kind: webhook.SigningStandardWebhooks}, "destinations.orders-api.signing.secrets: at least one secret is required"},
		{webhook.Signing{Kind: webhook.SigningStandardWebhooks, Secrets: many}, "destinations.orders-api.signing.secrets: at most 10 secrets, not 11"},
		{webhook.Signing{Kind: webhook.SigningStandardWebhooks, Secrets: []string{signingSecret1, "AQIDBAUGBwgJCgsMDQ4PEBESExQVFhcYGRobHB0eHyA="}},
			"destinations.orders-api.signing.secrets[1]: must start with whsec_, followed by the standard base64 of the key"},
		{webhook.Signing{Kind: webhook.SigningStandardWebhooks, Secrets: []string{"whsec_%%%%"}},
			"destinations.orders-api.signing.secrets[0]: must be whsec_ followed by standard base64: the text after whsec_ does not decode"},
		{webhook.Signing{Kind: webhook.SigningStandardWebhooks, Secrets: []string{"whsec_AQIDBAUGBwgJCgsMDQ4PEA=="}},
			"destinations.orders-api.signing.secrets[0]: must hold a key of 24 to 64 bytes, not 16 bytes"},
		{webhook.Signing{Kind: webhook.SigningHMAC}, "destinations.orders-api.signing.secret: required"},
		{webhook.Signing{Kind: webhook.SigningHMAC, Secret: "s", HeaderName: "bad header"}, `destinations.orders-api.signing.headerName: "bad header" is not a valid header name`},
		{webhook.Signing{Kind: webhook.SigningHMAC, Secret: "s", Algorithm: "sha1"}, `destinations.orders-api.signing.algorithm: must be HmacSHA256 or HmacSHA512, in this letter case, not "sha1"`},
		{webhook.Signing{Kind: "jwt"}, `destinations.orders-api.signing.type: unknown kind "jwt" (want standard-webhooks or hmac)`},
	} {
		_, err := webhook.New(webhook.Config{Name: "orders-api", BaseURL: "https://example.com", Signing: tt.signing}, nil)
		require.Error(t, err)
		assert.Equal(t, tt.want, err.Error())
		assert.NotContains(t, err.Error(), "AQIDBAUGBwgJ")
	}
	// The block prints no secret.
	text := webhook.Signing{Kind: webhook.SigningStandardWebhooks, Secrets: []string{signingSecret1, ""}, Secret: "hmac-key"}.GoString()
	assert.Equal(t, `Signing{Kind: "standard-webhooks", Secrets: [Secret(***) Secret(empty)], Secret: Secret(***), HeaderName: "", Algorithm: "", Prefix: ""}`, text)
}

// TestSigningSecretEchoedInAnErrorIsRedacted: an endpoint that echoes a signing secret in its
// error body does not get it into the error (and so into last_error).
func TestSigningSecretEchoedInAnErrorIsRedacted(t *testing.T) {
	t.Parallel()
	rc := newReceiver(t, func(*http.Request, int) (int, string) {
		return http.StatusBadRequest, "bad secret " + signingSecret1
	})
	p := newPublisher(t, webhook.Config{BaseURL: rc.srv.URL, Signing: webhook.Signing{
		Kind: webhook.SigningStandardWebhooks, Secrets: []string{signingSecret1},
	}}, nil)
	err := p.Publish(context.Background(), message())
	var se *webhook.StatusError
	require.True(t, errors.As(err, &se))
	assert.Equal(t, "bad secret [REDACTED]", se.Body)
}
