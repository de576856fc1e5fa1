package inboundauth

import (
	"crypto/hmac"
	"crypto/sha512"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// dot separates the timestamp and the body in a signed payload.
var dot = []byte{'.'}

// hmacVerifier requires a hexadecimal HMAC signature of the body, or of the timestamp, a dot and
// the body, in one header.
type hmacVerifier struct {
	macs          *macPool
	signature     headerCheck
	prefix        string
	timestamp     *headerCheck // nil without a timestampHeader
	toleranceMs   int64
	signTimestamp bool
	badTimestamp  *Error
	stale         *Error
}

func newHMAC(c *HMAC) (*hmacVerifier, error) {
	if c.Secret.IsEmpty() {
		return nil, errors.New("secret is empty")
	}
	name := strings.TrimSpace(c.HeaderName)
	if name == "" {
		return nil, errors.New("headerName is empty")
	}
	h, err := hashOf(c.Algorithm)
	if err != nil {
		return nil, err
	}
	tolerance, err := positiveTolerance(c.TimestampToleranceMs)
	if err != nil {
		return nil, err
	}
	tsName := strings.TrimSpace(c.TimestampHeader)
	format := c.SignaturePayloadFormat
	switch format {
	case "":
		format = PayloadBody
		if tsName != "" {
			format = PayloadTimestampDotBody
		}
	case PayloadBody, "body":
		format = PayloadBody
	case PayloadTimestampDotBody, "timestamp-dot-body":
		format = PayloadTimestampDotBody
	default:
		return nil, fmt.Errorf("signaturePayloadFormat must be BODY, TIMESTAMP_DOT_BODY, body or timestamp-dot-body, not %q", format)
	}
	if format == PayloadTimestampDotBody && tsName == "" {
		return nil, errors.New("signaturePayloadFormat TIMESTAMP_DOT_BODY needs a timestampHeader")
	}
	v := &hmacVerifier{
		macs:          newMACPool(h, []byte(c.Secret.Reveal())),
		signature:     newHeaderCheck(name, refusal("Missing signature header %s", name)),
		prefix:        c.SignaturePrefix,
		toleranceMs:   tolerance,
		signTimestamp: format == PayloadTimestampDotBody,
	}
	if tsName != "" {
		ts := newHeaderCheck(tsName, refusal("Missing timestamp header %s", tsName))
		v.timestamp = &ts
		v.badTimestamp = refusal("Invalid timestamp header %s: it must carry Unix milliseconds, digits only", tsName)
		v.stale = refusal("Timestamp outside the tolerance of %d ms (the header must carry Unix milliseconds)", tolerance)
	}
	return v, nil
}

// Verify checks, in this order: the signature header is present; the timestamp header, when
// configured, is present and within the tolerance of now in either direction; the header is the
// prefix followed by the lower-case hexadecimal HMAC of the payload. The comparison of the
// signature runs in constant time.
func (v *hmacVerifier) Verify(h http.Header, body []byte, now time.Time) error {
	sig, err := v.signature.value(h)
	if err != nil {
		return err
	}
	var ts string
	if v.timestamp != nil {
		if ts, err = v.timestamp.value(h); err != nil {
			return err
		}
		ms, ok := parseDigits(ts)
		if !ok {
			return v.badTimestamp
		}
		if !withinMillis(now, ms, v.toleranceMs) {
			return v.stale
		}
	}
	hexSig, ok := strings.CutPrefix(sig, v.prefix)
	if !ok {
		return errInvalidSignature
	}
	var got [sha512.Size]byte
	if !decodeHex(got[:v.macs.size], hexSig) {
		return errInvalidSignature
	}
	st := v.macs.get()
	if v.signTimestamp {
		st.writeString(ts)
		st.write(dot)
	}
	st.write(body)
	ok = hmac.Equal(st.result(), got[:v.macs.size])
	v.macs.put(st)
	if !ok {
		return errInvalidSignature
	}
	return nil
}

// CredentialHeaders returns the signature header. The timestamp header is not a credential.
func (v *hmacVerifier) CredentialHeaders() []string { return []string{v.signature.name} }

// decodeHex decodes s into dst when s is exactly 2*len(dst) lower-case hexadecimal digits, as
// the HMAC check of spec/06 and Stripe's libraries compare them. Its time depends on s only,
// never on the expected signature.
func decodeHex(dst []byte, s string) bool {
	if len(s) != 2*len(dst) {
		return false
	}
	for i := range dst {
		hi, ok1 := hexDigit(s[2*i])
		lo, ok2 := hexDigit(s[2*i+1])
		if !ok1 || !ok2 {
			return false
		}
		dst[i] = hi<<4 | lo
	}
	return true
}

func hexDigit(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	}
	return 0, false
}
