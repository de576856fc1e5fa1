package inboundauth

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/sha512"
	"errors"
	"fmt"
	"hash"
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// ErrUnauthorized is matched, with errors.Is, by every refusal that Verify returns.
var ErrUnauthorized = errors.New("inboundauth: credentials refused")

// Error is the refusal of a request. Reason is the text of the 401 answer: it names the check
// that failed and holds no received value and no credential.
type Error struct {
	// Reason names the failed check, for example "Invalid signature".
	Reason string
}

// Error returns the reason.
func (e *Error) Error() string { return e.Reason }

// Is reports whether target is ErrUnauthorized.
func (e *Error) Is(target error) bool { return target == ErrUnauthorized }

// refusal returns an *Error with the reason. Callers pass only configured names, never a value
// from the request.
func refusal(format string, args ...any) *Error {
	return &Error{Reason: fmt.Sprintf(format, args...)}
}

// errInvalidSignature is the refusal of every signature that does not match, whatever the
// reason: bad prefix, wrong length, upper-case or non-hexadecimal digits, or a wrong value.
var errInvalidSignature = &Error{Reason: "Invalid signature"}

// New returns the Verifier of a source or admin auth block, or nil (no check) when a is nil.
//
// New expects a block with the defaults of the configuration filled in (the composition root,
// shared/service, maps it from the configuration tree). It returns an error for a block that
// config validation refuses (an empty secret, a blank header name, an unknown algorithm, a tolerance that is not above 0, a Standard Webhooks
// secret that is not base64), so that a block built by hand never weakens a check silently. An
// empty SignaturePayloadFormat takes the documented default. The error never holds a secret.
//
// Verify looks the headers up as net/http stores them (canonical keys), and refuses a
// credential header that appears more than once. Every refusal is an *Error that matches
// ErrUnauthorized. CredentialHeaders returns canonical names (http.CanonicalHeaderKey), so that
// they compare directly with the keys of an http.Header.
func New(a *Config) (Verifier, error) {
	if a == nil {
		return nil, nil
	}
	var (
		v   Verifier
		err error
	)
	switch {
	case a.Bearer != nil:
		v, err = newBearer(a.Bearer)
	case a.APIKey != nil:
		v, err = newAPIKey(a.APIKey)
	case a.HMAC != nil:
		v, err = newHMAC(a.HMAC)
	case a.Stripe != nil:
		v, err = newStripe(a.Stripe)
	case a.StandardWebhooks != nil:
		v, err = newStandardWebhooks(a.StandardWebhooks)
	default:
		return nil, fmt.Errorf("building the %q auth verifier: the block sets no kind", a.Kind)
	}
	if err != nil {
		return nil, fmt.Errorf("building the %s auth verifier: %w", kindOf(a), err)
	}
	return v, nil
}

// kindOf names the kind of a, from the part that is set.
func kindOf(a *Config) Kind {
	switch {
	case a.Bearer != nil:
		return KindBearer
	case a.APIKey != nil:
		return KindAPIKey
	case a.HMAC != nil:
		return KindHMAC
	case a.Stripe != nil:
		return KindStripe
	}
	return KindStandardWebhooks
}

// headerCheck reads one header that must appear exactly once with a non-empty value.
type headerCheck struct {
	name     string
	missing  *Error
	repeated *Error
}

// newHeaderCheck returns the check of the header name; missing is the refusal when it is absent.
// The reasons spell the name as configured; the look-up uses its canonical form.
func newHeaderCheck(name string, missing *Error) headerCheck {
	return headerCheck{
		name:     http.CanonicalHeaderKey(name),
		missing:  missing,
		repeated: refusal("Header %s appears more than once", name),
	}
}

// value returns the value of the header, or the refusal when it is absent, empty or repeated.
// A repeated credential header is refused rather than guessed at.
func (c headerCheck) value(h http.Header) (string, error) {
	values := h.Values(c.name)
	switch {
	case len(values) > 1:
		return "", c.repeated
	case len(values) == 0 || values[0] == "":
		return "", c.missing
	}
	return values[0], nil
}

// macPool holds keyed HMAC states for reuse: hmac.New hashes the key each time, and a
// hash.Hash is not safe for concurrent use.
type macPool struct {
	pool sync.Pool
	size int
}

// macState is one keyed HMAC with the buffers that keep a check free of allocations.
type macState struct {
	mac  hash.Hash
	text []byte
	sum  [sha512.Size]byte
}

func newMACPool(h func() hash.Hash, key []byte) *macPool {
	key = append([]byte(nil), key...)
	m := &macPool{size: h().Size()}
	m.pool.New = func() any { return &macState{mac: hmac.New(h, key)} }
	return m
}

// get returns a reset state; put it back when its sum is no longer read.
func (m *macPool) get() *macState {
	s := m.pool.Get().(*macState)
	s.mac.Reset()
	return s
}

func (m *macPool) put(s *macState) { m.pool.Put(s) }

// write adds b to the signed content.
func (s *macState) write(b []byte) { s.mac.Write(b) }

// writeString adds str to the signed content.
func (s *macState) writeString(str string) {
	s.text = append(s.text[:0], str...)
	s.mac.Write(s.text)
}

// result returns the HMAC of the content; it stays valid until the state goes back to the pool.
func (s *macState) result() []byte { return s.mac.Sum(s.sum[:0]) }

// hashOf returns the hash of an HMAC algorithm.
func hashOf(a Algorithm) (func() hash.Hash, error) {
	switch a {
	case HmacSHA256:
		return sha256.New, nil
	case HmacSHA512:
		return sha512.New, nil
	}
	return nil, fmt.Errorf("algorithm must be HmacSHA256 or HmacSHA512, not %q", a)
}

// parseDigits parses a timestamp of ASCII digits only: no sign, no space, no fraction.
func parseDigits(s string) (int64, bool) {
	if s == "" {
		return 0, false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil
}

// withinMillis reports whether a send time in Unix milliseconds lies within toleranceMs of
// now, in either direction. The bound is inclusive.
func withinMillis(now time.Time, sentMs, toleranceMs int64) bool {
	d := now.UnixMilli() - sentMs
	if d < 0 {
		d = -d
	}
	return d >= 0 && d <= toleranceMs
}

// withinSeconds is withinMillis for a send time in Unix seconds.
func withinSeconds(now time.Time, sentS, toleranceMs int64) bool {
	if sentS > math.MaxInt64/1000 {
		return false
	}
	return withinMillis(now, sentS*1000, toleranceMs)
}

// positiveTolerance checks a timestampTolerance and returns it in milliseconds.
func positiveTolerance(ms int64) (int64, error) {
	if ms <= 0 {
		return 0, fmt.Errorf("timestampTolerance must be above 0, not %d", ms)
	}
	return ms, nil
}
