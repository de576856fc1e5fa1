package inboundauth

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"net/http"
	"strings"
	"time"
)

// tokenDigest is the SHA-256 of an expected token. Comparing digests of equal length in
// constant time leaks neither the token nor its length.
type tokenDigest [sha256.Size]byte

// matches reports, in constant time, whether got is the token.
func (d *tokenDigest) matches(got string) bool {
	sum := sha256.Sum256([]byte(got))
	return subtle.ConstantTimeCompare(sum[:], d[:]) == 1
}

// bearerVerifier requires Authorization: Bearer <token>.
type bearerVerifier struct {
	token     tokenDigest
	header    headerCheck
	notBearer *Error
	invalid   *Error
}

func newBearer(b *Bearer) (*bearerVerifier, error) {
	if b.Token.IsEmpty() {
		return nil, errors.New("token is empty")
	}
	missing := refusal("Missing bearer token")
	return &bearerVerifier{
		token:     sha256.Sum256([]byte(b.Token.Reveal())),
		header:    newHeaderCheck("Authorization", missing),
		notBearer: refusal("Authorization header does not use the Bearer scheme"),
		invalid:   refusal("Invalid bearer token"),
	}, nil
}

// Verify accepts Authorization: <scheme> <token> when the scheme is Bearer in any letter case
// and the token matches. A header without a scheme fails.
func (v *bearerVerifier) Verify(h http.Header, _ []byte, _ time.Time) error {
	value, err := v.header.value(h)
	if err != nil {
		return err
	}
	scheme, token, _ := strings.Cut(value, " ")
	if !strings.EqualFold(scheme, "Bearer") {
		return v.notBearer
	}
	token = strings.TrimLeft(token, " ")
	if token == "" {
		return v.header.missing
	}
	if !v.token.matches(token) {
		return v.invalid
	}
	return nil
}

// CredentialHeaders returns Authorization.
func (v *bearerVerifier) CredentialHeaders() []string { return []string{v.header.name} }

// apiKeyVerifier requires a key in a header.
type apiKeyVerifier struct {
	key     tokenDigest
	header  headerCheck
	invalid *Error
}

func newAPIKey(k *APIKey) (*apiKeyVerifier, error) {
	if k.Key.IsEmpty() {
		return nil, errors.New("key is empty")
	}
	name := strings.TrimSpace(k.HeaderName)
	if name == "" {
		return nil, errors.New("headerName is empty")
	}
	return &apiKeyVerifier{
		key:     sha256.Sum256([]byte(k.Key.Reveal())),
		header:  newHeaderCheck(name, refusal("Missing header %s", name)),
		invalid: refusal("Invalid API key"),
	}, nil
}

// Verify accepts the request when the header carries the key, exactly.
func (v *apiKeyVerifier) Verify(h http.Header, _ []byte, _ time.Time) error {
	value, err := v.header.value(h)
	if err != nil {
		return err
	}
	if !v.key.matches(value) {
		return v.invalid
	}
	return nil
}

// CredentialHeaders returns the key header.
func (v *apiKeyVerifier) CredentialHeaders() []string { return []string{v.header.name} }
