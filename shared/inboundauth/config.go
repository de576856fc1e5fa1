package inboundauth

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
)

// Kind is the kind of an auth block.
type Kind string

// The kinds of auth block.
const (
	KindBearer           Kind = "bearer"
	KindAPIKey           Kind = "api-key"
	KindHMAC             Kind = "hmac"
	KindStripe           Kind = "stripe"
	KindStandardWebhooks Kind = "standard-webhooks"
)

// Algorithm is the algorithm of an hmac block: HmacSHA256 or HmacSHA512, in this letter case.
type Algorithm string

// The values of Algorithm.
const (
	HmacSHA256 Algorithm = "HmacSHA256"
	HmacSHA512 Algorithm = "HmacSHA512"
)

// PayloadFormat is what an hmac block signs. New also accepts body and timestamp-dot-body.
type PayloadFormat string

// The values of PayloadFormat.
const (
	// PayloadBody signs the raw body.
	PayloadBody PayloadFormat = "BODY"
	// PayloadTimestampDotBody signs the timestamp header value, a dot and the raw body.
	PayloadTimestampDotBody PayloadFormat = "TIMESTAMP_DOT_BODY"
)

// The headers of the stripe and standard-webhooks kinds, fixed by their senders.
const (
	StripeSignatureHeader           = "Stripe-Signature"
	StandardWebhooksIDHeader        = "webhook-id"
	StandardWebhooksTimestampHeader = "webhook-timestamp"
	StandardWebhooksSignatureHeader = "webhook-signature"
)

// Config is one auth block (sources.<name>.auth or admin.auth). Exactly one of Bearer, APIKey,
// HMAC, Stripe and StandardWebhooks is set; New refuses a block that sets none.
type Config struct {
	// Kind names the kind; it only labels the error of a block that sets no part.
	Kind Kind
	// Bearer requires Authorization: Bearer <token>.
	Bearer *Bearer
	// APIKey requires a key in a header.
	APIKey *APIKey
	// HMAC requires an HMAC signature of the request.
	HMAC *HMAC
	// Stripe requires Stripe's Stripe-Signature header.
	Stripe *Stripe
	// StandardWebhooks requires the headers of the Standard Webhooks specification.
	StandardWebhooks *StandardWebhooks
}

// NewConfig returns a block of the given kind with the defaults of spec/23-configuration.md
// (the ones config.NewInboundAuth fills in) and no secret: api-key reads X-API-Key; hmac reads
// X-Signature with HmacSHA256, the prefix sha256= and the payload format BODY; every tolerance
// is 300000 ms. It returns nil for an unknown kind.
func NewConfig(kind Kind) *Config {
	const tolerance = 300000
	c := &Config{Kind: kind}
	switch kind {
	case KindBearer:
		c.Bearer = &Bearer{}
	case KindAPIKey:
		c.APIKey = &APIKey{HeaderName: "X-API-Key"}
	case KindHMAC:
		c.HMAC = &HMAC{HeaderName: "X-Signature", Algorithm: HmacSHA256, SignaturePrefix: "sha256=",
			TimestampToleranceMs: tolerance, SignaturePayloadFormat: PayloadBody}
	case KindStripe:
		c.Stripe = &Stripe{TimestampToleranceMs: tolerance}
	case KindStandardWebhooks:
		c.StandardWebhooks = &StandardWebhooks{TimestampToleranceMs: tolerance}
	default:
		return nil
	}
	return c
}

// Bearer is a bearer block.
type Bearer struct {
	// Token is the expected token. Required.
	Token Secret
}

// APIKey is an api-key block.
type APIKey struct {
	// Key is the expected key. Required.
	Key Secret
	// HeaderName is the header that carries the key. Required (the configuration's default is
	// X-API-Key).
	HeaderName string
}

// HMAC is an hmac block. New takes its fields as given: the configuration fills the defaults
// (X-Signature, HmacSHA256, sha256=, 300000 ms).
type HMAC struct {
	// Secret is the HMAC key. Required.
	Secret Secret
	// HeaderName is the header that carries the signature. Required.
	HeaderName string
	// Algorithm is HmacSHA256 or HmacSHA512. Required.
	Algorithm Algorithm
	// SignaturePrefix is the text before the hexadecimal signature; "" for none.
	SignaturePrefix string
	// TimestampHeader carries the request time in Unix milliseconds. Empty: none.
	TimestampHeader string
	// TimestampToleranceMs is the largest difference, in milliseconds, between the request
	// time and the clock. It must be above 0.
	TimestampToleranceMs int64
	// SignaturePayloadFormat is BODY or TIMESTAMP_DOT_BODY (body and timestamp-dot-body as
	// well); TIMESTAMP_DOT_BODY needs TimestampHeader. Empty: TIMESTAMP_DOT_BODY when
	// TimestampHeader is set, BODY otherwise.
	SignaturePayloadFormat PayloadFormat
}

// Stripe is a stripe block: t=<Unix seconds>,v1=<hex HMAC-SHA256 of t.body> in Stripe-Signature.
type Stripe struct {
	// Secret is the endpoint's signing secret, used as written as the HMAC key. Required.
	Secret Secret
	// TimestampToleranceMs is the largest difference, in milliseconds, between t and the
	// clock. It must be above 0.
	TimestampToleranceMs int64
}

// StandardWebhooks is a standard-webhooks block (standardwebhooks.com).
type StandardWebhooks struct {
	// Secret is whsec_ followed by the base64 of the key, or the base64 alone. Required.
	Secret Secret
	// TimestampToleranceMs is the largest difference, in milliseconds, between
	// webhook-timestamp and the clock. It must be above 0.
	TimestampToleranceMs int64
}

// SigningKey returns the HMAC key: the secret without its whsec_ prefix, base64-decoded. The
// error says why the secret does not decode, without its text.
func (s *StandardWebhooks) SigningKey() ([]byte, error) {
	return StandardWebhooksKey(s.Secret.Reveal())
}

// StandardWebhooksKey decodes a Standard Webhooks secret, whsec_<base64> or <base64>, into the
// HMAC key. The error never holds the secret.
func StandardWebhooksKey(secret string) ([]byte, error) {
	encoded := strings.TrimPrefix(secret, "whsec_")
	key, err := base64.StdEncoding.DecodeString(encoded)
	if err != nil {
		return nil, errors.New("must be whsec_ followed by standard base64, or standard base64 alone: " + err.Error())
	}
	if len(key) == 0 {
		return nil, errors.New("must hold a key after whsec_")
	}
	return key, nil
}

// The masks that a Secret prints.
const (
	maskedSecret = "Secret(***)"
	emptySecret  = "Secret(empty)"
)

// Secret holds a credential of an auth block. It prints as Secret(***), or Secret(empty) when
// it holds nothing, through fmt (every verb), log/slog and encoding/json. Reveal returns the
// value. The zero Secret is empty.
type Secret struct {
	value *string
}

// NewSecret returns a Secret that holds value.
func NewSecret(value string) Secret { return Secret{value: &value} }

// Reveal returns the credential. Call it only where the value is compared or keys a MAC.
func (s Secret) Reveal() string {
	if s.value == nil {
		return ""
	}
	return *s.value
}

// IsEmpty reports whether the secret holds no text.
func (s Secret) IsEmpty() bool { return s.Reveal() == "" }

// String returns Secret(***), or Secret(empty) for an empty secret.
func (s Secret) String() string {
	if s.IsEmpty() {
		return emptySecret
	}
	return maskedSecret
}

// GoString returns the same mask as String.
func (s Secret) GoString() string { return s.String() }

// Format writes the mask for every verb; %q quotes it.
func (s Secret) Format(f fmt.State, verb rune) {
	if verb == 'q' {
		_, _ = fmt.Fprint(f, strconv.Quote(s.String()))
		return
	}
	_, _ = fmt.Fprint(f, s.String())
}

// LogValue makes log/slog print the mask.
func (s Secret) LogValue() slog.Value { return slog.StringValue(s.String()) }

// MarshalJSON encodes the mask as a JSON string.
func (s Secret) MarshalJSON() ([]byte, error) { return json.Marshal(s.String()) }
