package inboundauth_test

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/alternayte/queuebox/shared/inboundauth"
)

// The published test vectors, and vectors computed outside Go (Python's hmac module) for the
// other cases.
const (
	// GitHub's documented example (docs.github.com, "Validating webhook deliveries").
	githubSecret    = "It's a Secret to Everybody"
	githubBody      = "Hello, World!"
	githubSignature = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
	// HMAC-SHA512 of githubBody with githubSecret.
	githubSHA512 = "11ed355a617e98134e842012a7944ccf59c10256cb182357bd7e3a42013ff07c376f8c14cf5cc1923da20b51d64256b2fb8ebbf100aa67a61326f61fea8111bc"

	billingSecret = "billing-secret"
	billingBody   = `{"id":"inv-1","type":"invoice.paid"}`
	billingTS     = "1700000000000"
	// HMAC-SHA256 of billingTS + "." + billingBody.
	billingTSDotBody = "dc283bfdd2491ecf3f7846873cc12d43ec58cd4a06e33122fc79dfe134dd9b30"
	// HMAC-SHA256 of billingBody.
	billingBodyOnly = "84ab7d9961827c9beb429eedc969f01b38d6e6243cb40897b5d4fbbe0a540f0c"

	// Stripe's scheme: v1 = hex HMAC-SHA256(secret as written, t + "." + body).
	stripeSecret = "whsec_test_secret"
	stripeBody   = `{"id":"evt_1","type":"payment_intent.succeeded"}`
	stripeT      = "1700000000"
	stripeV1     = "22d8dc182f5c588077683bd378368e29765bfe5df2560112b4f28fef120f0e31"

	// The example of the Standard Webhooks specification (github.com/standard-webhooks).
	swSecret    = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	swID        = "msg_p5jXN8AQM9LWM0D4loKWxJek"
	swTimestamp = "1614265330"
	swBody      = `{"test": 2432232314}`
	swSignature = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="

	bearerToken = "orders-token-0123456789"
	apiKey      = "partner-key-0123456789"
)

// Clocks of the vectors.
var (
	billingNow = time.UnixMilli(1700000000000)
	stripeNow  = time.Unix(1700000000, 0)
	swNow      = time.Unix(1614265330, 0)
)

// sensitive lists every secret, token and signature of the tests: no error text may hold one.
var sensitive = []string{githubSecret, githubSignature, strings.TrimPrefix(githubSignature, "sha256="), githubSHA512,
	billingSecret, billingTSDotBody, billingBodyOnly, stripeSecret, stripeV1, swSecret, strings.TrimPrefix(swSecret, "whsec_"),
	swSignature, strings.TrimPrefix(swSignature, "v1,"), bearerToken, apiKey}

func bearer(token string) *inboundauth.Config {
	a := inboundauth.NewConfig(inboundauth.KindBearer)
	a.Bearer.Token = inboundauth.NewSecret(token)
	return a
}

func apiKeyAuth(header string) *inboundauth.Config {
	a := inboundauth.NewConfig(inboundauth.KindAPIKey)
	a.APIKey.Key = inboundauth.NewSecret(apiKey)
	if header != "" {
		a.APIKey.HeaderName = header
	}
	return a
}

func hmacAuth(secret string, set func(h *inboundauth.HMAC)) *inboundauth.Config {
	a := inboundauth.NewConfig(inboundauth.KindHMAC)
	a.HMAC.Secret = inboundauth.NewSecret(secret)
	if set != nil {
		set(a.HMAC)
	}
	return a
}

// github is the hmac block of the spec's GitHub example.
func github(set func(h *inboundauth.HMAC)) *inboundauth.Config {
	return hmacAuth(githubSecret, func(h *inboundauth.HMAC) {
		h.HeaderName = "X-Hub-Signature-256"
		h.SignaturePrefix = "sha256="
		if set != nil {
			set(h)
		}
	})
}

// billing is the hmac block of the spec's replay example: timestampHeader with the default
// payload format, which New resolves to TIMESTAMP_DOT_BODY.
func billing(set func(h *inboundauth.HMAC)) *inboundauth.Config {
	return hmacAuth(billingSecret, func(h *inboundauth.HMAC) {
		h.TimestampHeader = "X-Timestamp"
		h.SignaturePayloadFormat = ""
		if set != nil {
			set(h)
		}
	})
}

func stripe(set func(s *inboundauth.Stripe)) *inboundauth.Config {
	a := inboundauth.NewConfig(inboundauth.KindStripe)
	a.Stripe.Secret = inboundauth.NewSecret(stripeSecret)
	if set != nil {
		set(a.Stripe)
	}
	return a
}

func standardWebhooks(secret string) *inboundauth.Config {
	a := inboundauth.NewConfig(inboundauth.KindStandardWebhooks)
	a.StandardWebhooks.Secret = inboundauth.NewSecret(secret)
	return a
}

// headers builds a header from name, value pairs; a name may repeat.
func headers(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	return h
}

// flip changes the last character of a signature to another one of the same alphabet.
func flip(s string) string {
	last := s[len(s)-1]
	repl := byte('0')
	if last == '0' {
		repl = '1'
	}
	return s[:len(s)-1] + string(repl)
}

// flipAt changes the character at i of s.
func flipAt(s string, i int) string {
	c := byte('a')
	if s[i] == 'a' {
		c = 'b'
	}
	return s[:i] + string(c) + s[i+1:]
}

type verifyCase struct {
	name    string
	auth    *inboundauth.Config
	header  http.Header
	body    string
	now     time.Time
	wantErr string // "" accepts
}

func verifyCases() []verifyCase {
	githubHex := strings.TrimPrefix(githubSignature, "sha256=")
	ms := func(t time.Time) string { return strconv.FormatInt(t.UnixMilli(), 10) }
	billingHeaders := func(ts, sig string) http.Header {
		return headers("X-Timestamp", ts, "X-Signature", "sha256="+sig)
	}
	const stale = "Timestamp outside the tolerance of 300000 ms (the header must carry Unix milliseconds)"
	swHeaders := func(sig string) http.Header {
		return headers("webhook-id", swID, "webhook-timestamp", swTimestamp, "webhook-signature", sig)
	}
	return []verifyCase{
		// bearer
		{name: "bearer accepts the token", auth: bearer(bearerToken), header: headers("Authorization", "Bearer "+bearerToken)},
		{name: "bearer scheme in lower case", auth: bearer(bearerToken), header: headers("Authorization", "bearer "+bearerToken)},
		{name: "bearer scheme in upper case", auth: bearer(bearerToken), header: headers("Authorization", "BEARER "+bearerToken)},
		{name: "bearer scheme in mixed case", auth: bearer(bearerToken), header: headers("Authorization", "bEaReR "+bearerToken)},
		{name: "bearer without the header", auth: bearer(bearerToken), header: headers(), wantErr: "Missing bearer token"},
		{name: "bearer with an empty token", auth: bearer(bearerToken), header: headers("Authorization", "Bearer"), wantErr: "Missing bearer token"},
		{name: "bearer without a scheme", auth: bearer(bearerToken), header: headers("Authorization", bearerToken),
			wantErr: "Authorization header does not use the Bearer scheme"},
		{name: "bearer with another scheme", auth: bearer(bearerToken), header: headers("Authorization", "Basic "+bearerToken),
			wantErr: "Authorization header does not use the Bearer scheme"},
		{name: "bearer with a wrong token", auth: bearer(bearerToken), header: headers("Authorization", "Bearer "+flip(bearerToken)),
			wantErr: "Invalid bearer token"},
		{name: "bearer with a prefix of the token", auth: bearer(bearerToken), header: headers("Authorization", "Bearer "+bearerToken[:10]),
			wantErr: "Invalid bearer token"},
		{name: "bearer with the token and more", auth: bearer(bearerToken), header: headers("Authorization", "Bearer "+bearerToken+"x"),
			wantErr: "Invalid bearer token"},
		{name: "bearer with two Authorization headers", auth: bearer(bearerToken),
			header:  headers("Authorization", "Bearer "+bearerToken, "Authorization", "Bearer "+bearerToken),
			wantErr: "Header Authorization appears more than once"},

		// api-key
		{name: "api-key in the default header", auth: apiKeyAuth(""), header: headers("X-API-Key", apiKey)},
		{name: "api-key header name in any case", auth: apiKeyAuth(""), header: headers("x-api-key", apiKey)},
		{name: "api-key in a custom header", auth: apiKeyAuth("X-Partner-Key"), header: headers("X-Partner-Key", apiKey)},
		{name: "api-key missing", auth: apiKeyAuth(""), header: headers(), wantErr: "Missing header X-API-Key"},
		{name: "api-key in the default header when a custom one is set", auth: apiKeyAuth("X-Partner-Key"),
			header: headers("X-API-Key", apiKey), wantErr: "Missing header X-Partner-Key"},
		{name: "api-key wrong", auth: apiKeyAuth(""), header: headers("X-API-Key", flip(apiKey)), wantErr: "Invalid API key"},
		{name: "api-key as a bearer token", auth: apiKeyAuth(""), header: headers("Authorization", "Bearer "+apiKey),
			wantErr: "Missing header X-API-Key"},

		// hmac: GitHub's documented example
		{name: "github example", auth: github(nil), header: headers("X-Hub-Signature-256", githubSignature), body: githubBody},
		{name: "github example, one byte of the signature changed", auth: github(nil),
			header: headers("X-Hub-Signature-256", flip(githubSignature)), body: githubBody, wantErr: "Invalid signature"},
		{name: "github example, first digit changed", auth: github(nil),
			header: headers("X-Hub-Signature-256", "sha256="+flipAt(githubHex, 0)), body: githubBody, wantErr: "Invalid signature"},
		{name: "github example, one byte of the body changed", auth: github(nil),
			header: headers("X-Hub-Signature-256", githubSignature), body: "Hello, World?", wantErr: "Invalid signature"},
		{name: "github example, upper-case hex", auth: github(nil),
			header: headers("X-Hub-Signature-256", "sha256="+strings.ToUpper(githubHex)), body: githubBody, wantErr: "Invalid signature"},
		{name: "github example, one digit short", auth: github(nil),
			header: headers("X-Hub-Signature-256", githubSignature[:len(githubSignature)-1]), body: githubBody, wantErr: "Invalid signature"},
		{name: "github example, one digit long", auth: github(nil),
			header: headers("X-Hub-Signature-256", githubSignature+"0"), body: githubBody, wantErr: "Invalid signature"},
		{name: "github example, empty after the prefix", auth: github(nil),
			header: headers("X-Hub-Signature-256", "sha256="), body: githubBody, wantErr: "Invalid signature"},
		{name: "github example, no prefix", auth: github(nil),
			header: headers("X-Hub-Signature-256", githubHex), body: githubBody, wantErr: "Invalid signature"},
		{name: "github example, wrong prefix", auth: github(nil),
			header: headers("X-Hub-Signature-256", "sha1="+githubHex), body: githubBody, wantErr: "Invalid signature"},
		{name: "github example, prefix in upper case", auth: github(nil),
			header: headers("X-Hub-Signature-256", "SHA256="+githubHex), body: githubBody, wantErr: "Invalid signature"},
		{name: "github example, not hexadecimal", auth: github(nil),
			header: headers("X-Hub-Signature-256", "sha256="+strings.Repeat("zz", 32)), body: githubBody, wantErr: "Invalid signature"},
		{name: "github example, signature in the default header", auth: github(nil),
			header: headers("X-Signature", githubSignature), body: githubBody, wantErr: "Missing signature header X-Hub-Signature-256"},
		{name: "github example, two signature headers", auth: github(nil),
			header: headers("X-Hub-Signature-256", githubSignature, "X-Hub-Signature-256", githubSignature), body: githubBody,
			wantErr: "Header X-Hub-Signature-256 appears more than once"},
		{name: "github example, wrong secret", auth: hmacAuth("It's a Secret to Everybody!", func(h *inboundauth.HMAC) {
			h.HeaderName = "X-Hub-Signature-256"
		}), header: headers("X-Hub-Signature-256", githubSignature), body: githubBody, wantErr: "Invalid signature"},
		{name: "no prefix configured", auth: github(func(h *inboundauth.HMAC) { h.SignaturePrefix = "" }),
			header: headers("X-Hub-Signature-256", githubHex), body: githubBody},
		{name: "no prefix configured, header with the prefix", auth: github(func(h *inboundauth.HMAC) { h.SignaturePrefix = "" }),
			header: headers("X-Hub-Signature-256", githubSignature), body: githubBody, wantErr: "Invalid signature"},
		{name: "HmacSHA512", auth: github(func(h *inboundauth.HMAC) { h.Algorithm = inboundauth.HmacSHA512; h.SignaturePrefix = "sha512=" }),
			header: headers("X-Hub-Signature-256", "sha512="+githubSHA512), body: githubBody},
		{name: "HmacSHA512, one byte changed", auth: github(func(h *inboundauth.HMAC) { h.Algorithm = inboundauth.HmacSHA512; h.SignaturePrefix = "sha512=" }),
			header: headers("X-Hub-Signature-256", "sha512="+flip(githubSHA512)), body: githubBody, wantErr: "Invalid signature"},
		{name: "HmacSHA512 given a SHA-256 signature", auth: github(func(h *inboundauth.HMAC) { h.Algorithm = inboundauth.HmacSHA512 }),
			header: headers("X-Hub-Signature-256", githubSignature), body: githubBody, wantErr: "Invalid signature"},

		// hmac: timestamp-dot-body
		{name: "timestamp-dot-body, fresh", auth: billing(nil), header: billingHeaders(billingTS, billingTSDotBody), body: billingBody, now: billingNow},
		{name: "timestamp-dot-body, 299 s old", auth: billing(nil), header: billingHeaders(billingTS, billingTSDotBody), body: billingBody,
			now: billingNow.Add(299 * time.Second)},
		{name: "timestamp-dot-body, exactly at the tolerance", auth: billing(nil), header: billingHeaders(billingTS, billingTSDotBody),
			body: billingBody, now: billingNow.Add(300 * time.Second)},
		{name: "timestamp-dot-body, replayed after the tolerance", auth: billing(nil), header: billingHeaders(billingTS, billingTSDotBody),
			body: billingBody, now: billingNow.Add(300*time.Second + time.Millisecond), wantErr: stale},
		{name: "timestamp-dot-body, future beyond the tolerance", auth: billing(nil), header: billingHeaders(billingTS, billingTSDotBody),
			body: billingBody, now: billingNow.Add(-301 * time.Second), wantErr: stale},
		{name: "timestamp-dot-body, future within the tolerance", auth: billing(nil), header: billingHeaders(billingTS, billingTSDotBody),
			body: billingBody, now: billingNow.Add(-299 * time.Second)},
		{name: "timestamp-dot-body, timestamp in seconds", auth: billing(nil), header: billingHeaders(billingTS[:10], billingTSDotBody),
			body: billingBody, now: billingNow, wantErr: stale},
		{name: "timestamp-dot-body, fresh timestamp on an old signature", auth: billing(nil),
			header: billingHeaders(ms(billingNow.Add(time.Hour)), billingTSDotBody), body: billingBody, now: billingNow.Add(time.Hour),
			wantErr: "Invalid signature"},
		{name: "timestamp-dot-body, body-only signature", auth: billing(nil), header: billingHeaders(billingTS, billingBodyOnly),
			body: billingBody, now: billingNow, wantErr: "Invalid signature"},
		{name: "timestamp-dot-body, timestamp missing", auth: billing(nil), header: headers("X-Signature", "sha256="+billingTSDotBody),
			body: billingBody, now: billingNow, wantErr: "Missing timestamp header X-Timestamp"},
		{name: "timestamp-dot-body, signature missing", auth: billing(nil), header: headers("X-Timestamp", billingTS),
			body: billingBody, now: billingNow, wantErr: "Missing signature header X-Signature"},
		{name: "timestamp-dot-body, timestamp not a number", auth: billing(nil), header: billingHeaders("2023-11-14T22:13:20Z", billingTSDotBody),
			body: billingBody, now: billingNow, wantErr: "Invalid timestamp header X-Timestamp: it must carry Unix milliseconds, digits only"},
		{name: "timestamp-dot-body, signed timestamp", auth: billing(nil), header: billingHeaders("+"+billingTS, billingTSDotBody),
			body: billingBody, now: billingNow, wantErr: "Invalid timestamp header X-Timestamp: it must carry Unix milliseconds, digits only"},
		{name: "timestamp-dot-body, timestamp beyond int64", auth: billing(nil), header: billingHeaders(strings.Repeat("9", 25), billingTSDotBody),
			body: billingBody, now: billingNow, wantErr: "Invalid timestamp header X-Timestamp: it must carry Unix milliseconds, digits only"},
		{name: "timestamp-dot-body, largest int64 timestamp", auth: billing(nil), header: billingHeaders("9223372036854775807", billingTSDotBody),
			body: billingBody, now: billingNow, wantErr: stale},
		{name: "timestamp-dot-body, explicit format", auth: billing(func(h *inboundauth.HMAC) { h.SignaturePayloadFormat = inboundauth.PayloadTimestampDotBody }),
			header: billingHeaders(billingTS, billingTSDotBody), body: billingBody, now: billingNow},
		{name: "timestamp-dot-body, lower-case format name", auth: billing(func(h *inboundauth.HMAC) { h.SignaturePayloadFormat = "timestamp-dot-body" }),
			header: billingHeaders(billingTS, billingTSDotBody), body: billingBody, now: billingNow},
		{name: "timestamp tolerance of 1000 ms", auth: billing(func(h *inboundauth.HMAC) { h.TimestampToleranceMs = 1000 }),
			header: billingHeaders(billingTS, billingTSDotBody), body: billingBody, now: billingNow.Add(1001 * time.Millisecond),
			wantErr: "Timestamp outside the tolerance of 1000 ms (the header must carry Unix milliseconds)"},

		// hmac: body format with a timestamp header checks the age only
		{name: "body format with a timestamp, fresh", auth: billing(func(h *inboundauth.HMAC) { h.SignaturePayloadFormat = inboundauth.PayloadBody }),
			header: billingHeaders(billingTS, billingBodyOnly), body: billingBody, now: billingNow},
		{name: "body format with a timestamp, new timestamp passes", auth: billing(func(h *inboundauth.HMAC) { h.SignaturePayloadFormat = "body" }),
			header: billingHeaders(ms(billingNow.Add(time.Hour)), billingBodyOnly), body: billingBody, now: billingNow.Add(time.Hour)},
		{name: "body format with a timestamp, stale", auth: billing(func(h *inboundauth.HMAC) { h.SignaturePayloadFormat = inboundauth.PayloadBody }),
			header: billingHeaders(billingTS, billingBodyOnly), body: billingBody, now: billingNow.Add(time.Hour), wantErr: stale},
		{name: "body format with a timestamp, timestamp-dot-body signature", auth: billing(func(h *inboundauth.HMAC) { h.SignaturePayloadFormat = inboundauth.PayloadBody }),
			header: billingHeaders(billingTS, billingTSDotBody), body: billingBody, now: billingNow, wantErr: "Invalid signature"},

		// stripe
		{name: "stripe, one v1", auth: stripe(nil), header: headers("Stripe-Signature", "t="+stripeT+",v1="+stripeV1), body: stripeBody, now: stripeNow},
		{name: "stripe, the matching v1 among several, and a v0", auth: stripe(nil),
			header: headers("Stripe-Signature", "t="+stripeT+",v1="+flip(stripeV1)+",v1="+stripeV1+",v1="+flipAt(stripeV1, 3)+",v0="+stripeV1),
			body:   stripeBody, now: stripeNow},
		{name: "stripe, spaces around the items", auth: stripe(nil), header: headers("Stripe-Signature", "t="+stripeT+", v1="+stripeV1),
			body: stripeBody, now: stripeNow},
		{name: "stripe, upper-case hex is refused, as Stripe's libraries refuse it", auth: stripe(nil),
			header: headers("Stripe-Signature", "t="+stripeT+",v1="+strings.ToUpper(stripeV1)), body: stripeBody, now: stripeNow, wantErr: "Invalid signature"},
		{name: "stripe, no v1 matches", auth: stripe(nil),
			header: headers("Stripe-Signature", "t="+stripeT+",v1="+flip(stripeV1)+",v1="+flipAt(stripeV1, 0)), body: stripeBody, now: stripeNow,
			wantErr: "Invalid signature"},
		{name: "stripe, body changed", auth: stripe(nil), header: headers("Stripe-Signature", "t="+stripeT+",v1="+stripeV1),
			body: stripeBody + " ", now: stripeNow, wantErr: "Invalid signature"},
		{name: "stripe, v0 only", auth: stripe(nil), header: headers("Stripe-Signature", "t="+stripeT+",v0="+stripeV1),
			body: stripeBody, now: stripeNow, wantErr: "Missing v1= signature in the Stripe-Signature header"},
		{name: "stripe, no t", auth: stripe(nil), header: headers("Stripe-Signature", "v1="+stripeV1),
			body: stripeBody, now: stripeNow, wantErr: "Missing t= timestamp in the Stripe-Signature header"},
		{name: "stripe, two t", auth: stripe(nil), header: headers("Stripe-Signature", "t="+stripeT+",t=1700000001,v1="+stripeV1),
			body: stripeBody, now: stripeNow, wantErr: "More than one t= timestamp in the Stripe-Signature header"},
		{name: "stripe, t not a number", auth: stripe(nil), header: headers("Stripe-Signature", "t=soon,v1="+stripeV1),
			body: stripeBody, now: stripeNow, wantErr: "Invalid t= timestamp in the Stripe-Signature header: it must carry Unix seconds, digits only"},
		{name: "stripe, stale t", auth: stripe(nil), header: headers("Stripe-Signature", "t="+stripeT+",v1="+stripeV1),
			body: stripeBody, now: stripeNow.Add(301 * time.Second), wantErr: "Stripe-Signature timestamp outside the tolerance of 300000 ms"},
		{name: "stripe, t at the tolerance", auth: stripe(nil), header: headers("Stripe-Signature", "t="+stripeT+",v1="+stripeV1),
			body: stripeBody, now: stripeNow.Add(300 * time.Second)},
		{name: "stripe, t in the future", auth: stripe(nil), header: headers("Stripe-Signature", "t="+stripeT+",v1="+stripeV1),
			body: stripeBody, now: stripeNow.Add(-301 * time.Second), wantErr: "Stripe-Signature timestamp outside the tolerance of 300000 ms"},
		{name: "stripe, t in milliseconds", auth: stripe(nil), header: headers("Stripe-Signature", "t="+stripeT+"000,v1="+stripeV1),
			body: stripeBody, now: stripeNow, wantErr: "Stripe-Signature timestamp outside the tolerance of 300000 ms"},
		{name: "stripe, custom tolerance", auth: stripe(func(s *inboundauth.Stripe) { s.TimestampToleranceMs = 600000 }),
			header: headers("Stripe-Signature", "t="+stripeT+",v1="+stripeV1), body: stripeBody, now: stripeNow.Add(599 * time.Second)},
		{name: "stripe, header missing", auth: stripe(nil), header: headers("X-Signature", "t="+stripeT+",v1="+stripeV1),
			body: stripeBody, now: stripeNow, wantErr: "Missing header Stripe-Signature"},
		{name: "stripe, wrong secret", auth: stripe(func(s *inboundauth.Stripe) { s.Secret = inboundauth.NewSecret("test_secret") }),
			header: headers("Stripe-Signature", "t="+stripeT+",v1="+stripeV1), body: stripeBody, now: stripeNow, wantErr: "Invalid signature"},
		{name: "stripe, signature of the body alone", auth: stripe(nil),
			header: headers("Stripe-Signature", "t="+stripeT+",v1=84ab7d9961827c9beb429eedc969f01b38d6e6243cb40897b5d4fbbe0a540f0c"),
			body:   stripeBody, now: stripeNow, wantErr: "Invalid signature"},

		// Standard Webhooks: the specification's example
		{name: "standard webhooks example", auth: standardWebhooks(swSecret), header: swHeaders(swSignature), body: swBody, now: swNow},
		{name: "standard webhooks, secret without whsec_", auth: standardWebhooks(strings.TrimPrefix(swSecret, "whsec_")),
			header: swHeaders(swSignature), body: swBody, now: swNow},
		{name: "standard webhooks, the matching entry among others", auth: standardWebhooks(swSecret),
			header: swHeaders("v1a,abc v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OA= " + swSignature + " v2,xyz"), body: swBody, now: swNow},
		{name: "standard webhooks, one byte of the signature changed", auth: standardWebhooks(swSecret),
			header: swHeaders("v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OA="), body: swBody, now: swNow, wantErr: "Invalid signature"},
		{name: "standard webhooks, one byte of the body changed", auth: standardWebhooks(swSecret),
			header: swHeaders(swSignature), body: `{"test": 2432232315}`, now: swNow, wantErr: "Invalid signature"},
		{name: "standard webhooks, another id", auth: standardWebhooks(swSecret),
			header: headers("webhook-id", swID+"x", "webhook-timestamp", swTimestamp, "webhook-signature", swSignature),
			body:   swBody, now: swNow, wantErr: "Invalid signature"},
		{name: "standard webhooks, secret decoded as text", auth: standardWebhooks("whsec_" + "TWZLUTlyOEdLWXFyVHdqVVBEOElMUFpJbzJMYUxhU3c="),
			header: swHeaders(swSignature), body: swBody, now: swNow, wantErr: "Invalid signature"},
		{name: "standard webhooks, 44 characters without padding", auth: standardWebhooks(swSecret),
			header: swHeaders("v1," + strings.Repeat("A", 44)), body: swBody, now: swNow, wantErr: "Invalid signature"},
		{name: "standard webhooks, no v1 entry", auth: standardWebhooks(swSecret),
			header: swHeaders("v1a," + strings.TrimPrefix(swSignature, "v1,")), body: swBody, now: swNow,
			wantErr: "Missing v1 signature in the webhook-signature header"},
		{name: "standard webhooks, stale", auth: standardWebhooks(swSecret), header: swHeaders(swSignature), body: swBody,
			now: swNow.Add(301 * time.Second), wantErr: "Timestamp outside the tolerance of 300000 ms (webhook-timestamp carries Unix seconds)"},
		{name: "standard webhooks, future", auth: standardWebhooks(swSecret), header: swHeaders(swSignature), body: swBody,
			now: swNow.Add(-301 * time.Second), wantErr: "Timestamp outside the tolerance of 300000 ms (webhook-timestamp carries Unix seconds)"},
		{name: "standard webhooks, within the tolerance", auth: standardWebhooks(swSecret), header: swHeaders(swSignature), body: swBody,
			now: swNow.Add(-300 * time.Second)},
		{name: "standard webhooks, id missing", auth: standardWebhooks(swSecret),
			header: headers("webhook-timestamp", swTimestamp, "webhook-signature", swSignature), body: swBody, now: swNow,
			wantErr: "Missing header webhook-id"},
		{name: "standard webhooks, timestamp missing", auth: standardWebhooks(swSecret),
			header: headers("webhook-id", swID, "webhook-signature", swSignature), body: swBody, now: swNow,
			wantErr: "Missing header webhook-timestamp"},
		{name: "standard webhooks, signature missing", auth: standardWebhooks(swSecret),
			header: headers("webhook-id", swID, "webhook-timestamp", swTimestamp), body: swBody, now: swNow,
			wantErr: "Missing header webhook-signature"},
		{name: "standard webhooks, timestamp not a number", auth: standardWebhooks(swSecret),
			header: headers("webhook-id", swID, "webhook-timestamp", "1614265330.5", "webhook-signature", swSignature), body: swBody, now: swNow,
			wantErr: "Invalid header webhook-timestamp: it must carry Unix seconds, digits only"},
	}
}

func TestVerify(t *testing.T) {
	t.Parallel()
	for _, tc := range verifyCases() {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			v, err := inboundauth.New(tc.auth)
			require.NoError(t, err)
			err = v.Verify(tc.header, []byte(tc.body), tc.now)
			if tc.wantErr == "" {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Equal(t, tc.wantErr, err.Error())
			assert.ErrorIs(t, err, inboundauth.ErrUnauthorized)
			var refusal *inboundauth.Error
			require.ErrorAs(t, err, &refusal)
			assert.Equal(t, tc.wantErr, refusal.Reason)
		})
	}
}

// TestNoReasonHoldsACredential scans the reason of every refusal for every secret, token and
// signature of the tests, and for every header value that the request carried.
func TestNoReasonHoldsACredential(t *testing.T) {
	t.Parallel()
	refused := 0
	for _, tc := range verifyCases() {
		if tc.wantErr == "" {
			continue
		}
		v, err := inboundauth.New(tc.auth)
		require.NoError(t, err, tc.name)
		err = v.Verify(tc.header, []byte(tc.body), tc.now)
		require.Error(t, err, tc.name)
		refused++
		reason := err.Error()
		for _, s := range sensitive {
			assert.NotContains(t, reason, s, tc.name)
		}
		for name, values := range tc.header {
			for _, value := range values {
				for _, part := range strings.FieldsFunc(value, func(r rune) bool { return r == ' ' || r == ',' || r == '=' }) {
					if len(part) >= 10 {
						assert.NotContains(t, reason, part, "%s: the value of %s", tc.name, name)
					}
				}
			}
		}
		if tc.body != "" {
			assert.NotContains(t, reason, tc.body, tc.name)
		}
	}
	assert.Greater(t, refused, 60)
}

func TestNilAuthIsNoCheck(t *testing.T) {
	t.Parallel()
	v, err := inboundauth.New(nil)
	require.NoError(t, err)
	assert.Nil(t, v)
}

func TestCredentialHeaders(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		auth *inboundauth.Config
		want []string
	}{
		{name: "bearer", auth: bearer(bearerToken), want: []string{"Authorization"}},
		{name: "api-key default", auth: apiKeyAuth(""), want: []string{"X-Api-Key"}},
		{name: "api-key custom", auth: apiKeyAuth("x-partner-key"), want: []string{"X-Partner-Key"}},
		{name: "hmac without timestamp", auth: github(nil), want: []string{"X-Hub-Signature-256"}},
		{name: "hmac with timestamp: the timestamp is no credential", auth: billing(nil), want: []string{"X-Signature"}},
		{name: "stripe", auth: stripe(nil), want: []string{"Stripe-Signature"}},
		{name: "standard webhooks", auth: standardWebhooks(swSecret), want: []string{"Webhook-Signature"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			v, err := inboundauth.New(tc.auth)
			require.NoError(t, err)
			got := v.CredentialHeaders()
			assert.Equal(t, tc.want, got)
			for _, name := range got {
				assert.Equal(t, http.CanonicalHeaderKey(name), name, "canonical, as the keys of an http.Header")
			}
			got[0] = "changed"
			assert.Equal(t, tc.want, v.CredentialHeaders(), "the caller cannot change the list")
		})
	}
}

func TestNewRefusesABlockThatWouldNotValidate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		auth    *inboundauth.Config
		wantErr string
	}{
		{name: "empty bearer token", auth: bearer(""), wantErr: "building the bearer auth verifier: token is empty"},
		{name: "empty api key", auth: func() *inboundauth.Config { a := apiKeyAuth(""); a.APIKey.Key = inboundauth.Secret{}; return a }(),
			wantErr: "building the api-key auth verifier: key is empty"},
		{name: "blank api-key header", auth: apiKeyAuth(" "), wantErr: "building the api-key auth verifier: headerName is empty"},
		{name: "empty hmac secret", auth: hmacAuth("", nil), wantErr: "building the hmac auth verifier: secret is empty"},
		{name: "empty hmac header", auth: hmacAuth("s", func(h *inboundauth.HMAC) { h.HeaderName = "" }),
			wantErr: "building the hmac auth verifier: headerName is empty"},
		{name: "unknown algorithm", auth: hmacAuth("s", func(h *inboundauth.HMAC) { h.Algorithm = "hmacsha256" }),
			wantErr: `building the hmac auth verifier: algorithm must be HmacSHA256 or HmacSHA512, not "hmacsha256"`},
		{name: "zero tolerance", auth: hmacAuth("s", func(h *inboundauth.HMAC) { h.TimestampToleranceMs = 0 }),
			wantErr: "building the hmac auth verifier: timestampTolerance must be above 0, not 0"},
		{name: "unknown payload format", auth: hmacAuth("s", func(h *inboundauth.HMAC) { h.SignaturePayloadFormat = "Body" }),
			wantErr: `building the hmac auth verifier: signaturePayloadFormat must be BODY, TIMESTAMP_DOT_BODY, body or timestamp-dot-body, not "Body"`},
		{name: "timestamp-dot-body without a timestamp header", auth: hmacAuth("s", func(h *inboundauth.HMAC) {
			h.SignaturePayloadFormat = inboundauth.PayloadTimestampDotBody
		}), wantErr: "building the hmac auth verifier: signaturePayloadFormat TIMESTAMP_DOT_BODY needs a timestampHeader"},
		{name: "empty stripe secret", auth: stripe(func(s *inboundauth.Stripe) { s.Secret = inboundauth.Secret{} }),
			wantErr: "building the stripe auth verifier: secret is empty"},
		{name: "negative stripe tolerance", auth: stripe(func(s *inboundauth.Stripe) { s.TimestampToleranceMs = -1 }),
			wantErr: "building the stripe auth verifier: timestampTolerance must be above 0, not -1"},
		{name: "standard webhooks secret not base64", auth: standardWebhooks("whsec_not*base64"),
			wantErr: "building the standard-webhooks auth verifier: must be whsec_ followed by standard base64, or standard base64 alone: illegal base64 data at input byte 3"},
		{name: "empty standard webhooks secret", auth: standardWebhooks(""),
			wantErr: "building the standard-webhooks auth verifier: must hold a key after whsec_"},
		{name: "no kind", auth: &inboundauth.Config{Kind: "oauth"}, wantErr: `building the "oauth" auth verifier: the block sets no kind`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			v, err := inboundauth.New(tc.auth)
			assert.Nil(t, v)
			require.EqualError(t, err, tc.wantErr)
			assert.NotContains(t, err.Error(), "not*base64")
			assert.False(t, errors.Is(err, inboundauth.ErrUnauthorized))
		})
	}
}

// TestVerifyConcurrently shares one verifier of each kind between goroutines, as the inbox
// handler does; run it with -race.
func TestVerifyConcurrently(t *testing.T) {
	t.Parallel()
	gh, err := inboundauth.New(github(nil))
	require.NoError(t, err)
	sw, err := inboundauth.New(standardWebhooks(swSecret))
	require.NoError(t, err)
	st, err := inboundauth.New(stripe(nil))
	require.NoError(t, err)
	good := headers("X-Hub-Signature-256", githubSignature)
	bad := headers("X-Hub-Signature-256", flip(githubSignature))
	swh := headers("webhook-id", swID, "webhook-timestamp", swTimestamp, "webhook-signature", swSignature)
	sth := headers("Stripe-Signature", "t="+stripeT+",v1="+stripeV1)
	var wg sync.WaitGroup
	errs := make(chan error, 8*200)
	for g := range 8 {
		wg.Go(func() {
			for i := range 200 {
				switch (g + i) % 4 {
				case 0:
					if err := gh.Verify(good, []byte(githubBody), time.Time{}); err != nil {
						errs <- fmt.Errorf("good signature refused: %w", err)
					}
				case 1:
					if err := gh.Verify(bad, []byte(githubBody), time.Time{}); err == nil {
						errs <- errors.New("bad signature accepted")
					}
				case 2:
					if err := sw.Verify(swh, []byte(swBody), swNow); err != nil {
						errs <- fmt.Errorf("standard webhooks refused: %w", err)
					}
				case 3:
					if err := st.Verify(sth, []byte(stripeBody), stripeNow); err != nil {
						errs <- fmt.Errorf("stripe refused: %w", err)
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
