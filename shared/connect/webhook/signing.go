package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/alternayte/queuebox/shared/forwarded"
)

// SigningKind is the kind of the signature of an HTTP destination (destinations.<name>.signing,
// an extension; docs/signed-deliveries.md).
type SigningKind string

// The kinds of signing.
const (
	// SigningNone signs nothing.
	SigningNone SigningKind = ""
	// SigningStandardWebhooks sends webhook-id, webhook-timestamp and webhook-signature as the
	// Standard Webhooks specification states (standardwebhooks.com).
	SigningStandardWebhooks SigningKind = "standard-webhooks"
	// SigningHMAC sends one header with the prefix and the lower-case hexadecimal HMAC of the
	// body: the mirror of the inbound hmac auth (GitHub's X-Hub-Signature-256 for example).
	SigningHMAC SigningKind = "hmac"
)

// The headers of Standard Webhooks, canonical as net/http keeps them. Header names are case
// insensitive: the specification's lower-case names are the same headers.
const (
	WebhookIDHeader        = "Webhook-Id"
	WebhookTimestampHeader = "Webhook-Timestamp"
	WebhookSignatureHeader = "Webhook-Signature"
)

// The bounds of a standard-webhooks block. shared/config checks the same numbers
// (docs/configuration-bounds.md); a test of shared/service keeps them in step.
const (
	// MaxSigningSecrets is the most secrets one destination signs with: each one adds an
	// HMAC of the whole body to every request. Two cover a rotation.
	MaxSigningSecrets = 10
	// MinSigningKeyBytes and MaxSigningKeyBytes bound the decoded key of a whsec_ secret: the
	// Standard Webhooks specification asks for at least 24 bytes (192 bits) and at most 512
	// bits.
	MinSigningKeyBytes = 24
	MaxSigningKeyBytes = 64
)

// The defaults of an hmac block, those of the inbound hmac auth (spec/23-configuration.md).
const (
	DefaultSigningHeaderName = "X-Signature"
	DefaultSigningAlgorithm  = "HmacSHA256"
	DefaultSigningPrefix     = "sha256="
)

// Signing holds the signature of every request of a destination. Only the fields of Kind are
// read. It prints its secrets as masks.
type Signing struct {
	// Kind selects the signature. Default SigningNone.
	Kind SigningKind
	// Secrets are the standard-webhooks secrets, each whsec_ followed by the standard base64
	// of a key of MinSigningKeyBytes to MaxSigningKeyBytes bytes. Each one signs every
	// request, so a receiver that knows any one of them verifies it (a rotation sends the old
	// and the new one together). From 1 to MaxSigningSecrets.
	Secrets []string
	// Secret is the hmac key, used as written. Required for hmac.
	Secret string
	// HeaderName is the hmac header. Default DefaultSigningHeaderName.
	HeaderName string
	// Algorithm is HmacSHA256 or HmacSHA512, in this letter case, as the inbound hmac auth
	// takes it. Default DefaultSigningAlgorithm.
	Algorithm string
	// Prefix is the text before the hexadecimal signature; empty for none. The default
	// DefaultSigningPrefix is filled by the configuration, not here: an empty Prefix is none.
	Prefix string
}

// String prints the block with its secrets masked.
func (s Signing) String() string {
	masks := make([]string, len(s.Secrets))
	for i, secret := range s.Secrets {
		masks[i] = mask(secret)
	}
	return fmt.Sprintf("Signing{Kind: %q, Secrets: [%s], Secret: %s, HeaderName: %q, Algorithm: %q, Prefix: %q}",
		s.Kind, strings.Join(masks, " "), mask(s.Secret), s.HeaderName, s.Algorithm, s.Prefix)
}

// GoString is String, so %#v shows no secret either.
func (s Signing) GoString() string { return s.String() }

// withDefaults fills the hmac header name and algorithm.
func (s Signing) withDefaults() Signing {
	if s.Kind == SigningHMAC {
		if s.HeaderName == "" {
			s.HeaderName = DefaultSigningHeaderName
		}
		if s.Algorithm == "" {
			s.Algorithm = DefaultSigningAlgorithm
		}
	}
	return s
}

// validate checks the block; prefix is the key of the block. The messages never hold a secret.
func (s Signing) validate(prefix string) error {
	_, err := NewSigner(s)
	if err != nil {
		return fmt.Errorf("%s.%w", prefix, err)
	}
	return nil
}

// SigningKey decodes a standard-webhooks secret, whsec_ followed by standard base64, into its
// key, and checks its length. The error never holds the secret.
func SigningKey(secret string) ([]byte, error) {
	encoded, ok := strings.CutPrefix(secret, "whsec_")
	if !ok {
		return nil, errors.New("must start with whsec_, followed by the standard base64 of the key")
	}
	key, err := base64.StdEncoding.DecodeString(encoded)
	if err != nil {
		return nil, errors.New("must be whsec_ followed by standard base64: the text after whsec_ does not decode")
	}
	if len(key) < MinSigningKeyBytes || len(key) > MaxSigningKeyBytes {
		return nil, fmt.Errorf("must hold a key of %d to %d bytes, not %d bytes", MinSigningKeyBytes, MaxSigningKeyBytes, len(key))
	}
	return key, nil
}

// Signer signs the requests of one destination. It is safe for concurrent use. Its keyed HMAC
// states are built once and reused, so a signature costs the HMACs, the header values and no
// key setup.
type Signer struct {
	kind SigningKind
	// states holds *signState values, each with one keyed HMAC per secret.
	states sync.Pool
	// header and prefix are the hmac header (canonical) and the text before the signature.
	header string
	prefix string
}

// signState is one set of keyed HMACs with the buffers of a signature.
type signState struct {
	macs []hash.Hash
	buf  []byte
	sum  [sha512.Size]byte
}

// NewSigner returns the signer of s, or nil for SigningNone. The error names the bad key
// below the signing block (secrets[1]: ..., headerName: ...) and never holds a secret.
func NewSigner(s Signing) (*Signer, error) {
	s = s.withDefaults()
	var keys [][]byte
	newHash := sha256.New
	sg := &Signer{kind: s.Kind}
	switch s.Kind {
	case SigningNone:
		return nil, nil
	case SigningStandardWebhooks:
		if len(s.Secrets) == 0 {
			return nil, errors.New("secrets: at least one secret is required")
		}
		if len(s.Secrets) > MaxSigningSecrets {
			return nil, fmt.Errorf("secrets: at most %d secrets, not %d", MaxSigningSecrets, len(s.Secrets))
		}
		for i, secret := range s.Secrets {
			key, err := SigningKey(secret)
			if err != nil {
				return nil, fmt.Errorf("secrets[%d]: %w", i, err)
			}
			keys = append(keys, key)
		}
	case SigningHMAC:
		if s.Secret == "" {
			return nil, errors.New("secret: required")
		}
		if !forwarded.ValidName(s.HeaderName) {
			return nil, fmt.Errorf("headerName: %q is not a valid header name", s.HeaderName)
		}
		switch s.Algorithm {
		case "HmacSHA256":
		case "HmacSHA512":
			newHash = sha512.New
		default:
			return nil, fmt.Errorf("algorithm: must be HmacSHA256 or HmacSHA512, in this letter case, not %q", s.Algorithm)
		}
		if !validHeaderValue(s.Prefix) {
			return nil, errors.New("signaturePrefix: holds a control character")
		}
		keys = [][]byte{[]byte(s.Secret)}
		sg.header = http.CanonicalHeaderKey(s.HeaderName)
		sg.prefix = s.Prefix
	default:
		return nil, fmt.Errorf("type: unknown kind %q (want standard-webhooks or hmac)", s.Kind)
	}
	sg.states.New = func() any {
		st := &signState{macs: make([]hash.Hash, len(keys))}
		for i, key := range keys {
			st.macs[i] = hmac.New(newHash, key)
		}
		return st
	}
	return sg, nil
}

// Headers returns the canonical names of the headers that Sign sets.
func (s *Signer) Headers() []string {
	if s.kind == SigningStandardWebhooks {
		return []string{WebhookIDHeader, WebhookTimestampHeader, WebhookSignatureHeader}
	}
	return []string{s.header}
}

// ErrUnsignable is the cause of a publish that cannot be signed: the row id, the webhook-id of
// Standard Webhooks, is empty or holds a dot, which the specification forbids. An outbox id is
// a UUID, which never does.
var ErrUnsignable = errors.New("webhook: the message id cannot be signed")

// Sign sets the signature headers of a request whose body is body, replacing any value they
// had. For standard-webhooks, id is the webhook-id and now gives webhook-timestamp (Unix
// seconds); webhook-signature holds v1,<base64 HMAC-SHA256 of id.timestamp.body> for each
// secret, in the order of the secrets, separated by one space. For hmac, the header holds the
// prefix and the lower-case hexadecimal HMAC of the body; id and now are not used.
func (s *Signer) Sign(h http.Header, id string, body []byte, now time.Time) error {
	st := s.states.Get().(*signState)
	defer s.states.Put(st)
	if s.kind == SigningHMAC {
		mac := st.macs[0]
		mac.Reset()
		mac.Write(body)
		st.buf = append(st.buf[:0], s.prefix...)
		st.buf = hex.AppendEncode(st.buf, mac.Sum(st.sum[:0]))
		h[s.header] = []string{string(st.buf)}
		return nil
	}
	if id == "" || strings.IndexByte(id, '.') >= 0 {
		return fmt.Errorf("%w: a webhook-id must not be empty or hold a dot", ErrUnsignable)
	}
	// The signed prefix id.timestamp. is written once into buf, then each signature after it.
	st.buf = append(st.buf[:0], id...)
	st.buf = append(st.buf, '.')
	st.buf = strconv.AppendInt(st.buf, now.Unix(), 10)
	tsEnd := len(st.buf)
	st.buf = append(st.buf, '.')
	signed := len(st.buf)
	for i, mac := range st.macs {
		mac.Reset()
		mac.Write(st.buf[:signed])
		mac.Write(body)
		if i > 0 {
			st.buf = append(st.buf, ' ')
		}
		st.buf = append(st.buf, "v1,"...)
		st.buf = base64.StdEncoding.AppendEncode(st.buf, mac.Sum(st.sum[:0]))
	}
	// One allocation for both texts, one for the three header values.
	text := string(st.buf[len(id)+1:])
	values := make([]string, 3)
	values[0], values[1], values[2] = id, text[:tsEnd-len(id)-1], text[signed-len(id)-1:]
	h[WebhookIDHeader] = values[0:1:1]
	h[WebhookTimestampHeader] = values[1:2:2]
	h[WebhookSignatureHeader] = values[2:3:3]
	return nil
}
