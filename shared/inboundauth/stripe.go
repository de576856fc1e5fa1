package inboundauth

import (
	"crypto/hmac"
	"crypto/sha256"
	"errors"
	"net/http"
	"strings"
	"time"
)

// stripeVerifier checks Stripe's Stripe-Signature header:
//
//	Stripe-Signature: t=<Unix seconds>,v1=<hex>[,v1=<hex>...][,v0=<hex>]
//
// The expected v1 is the hexadecimal HMAC-SHA256, keyed with the signing secret as written
// (whsec_... included), of t, a dot and the raw body. Any one matching v1 accepts the request;
// v0 and other schemes are ignored.
type stripeVerifier struct {
	macs         *macPool
	header       headerCheck
	toleranceMs  int64
	noTimestamp  *Error
	twoTimestamp *Error
	badTimestamp *Error
	noV1         *Error
	stale        *Error
}

func newStripe(c *Stripe) (*stripeVerifier, error) {
	if c.Secret.IsEmpty() {
		return nil, errors.New("secret is empty")
	}
	tolerance, err := positiveTolerance(c.TimestampToleranceMs)
	if err != nil {
		return nil, err
	}
	h := StripeSignatureHeader
	return &stripeVerifier{
		macs:         newMACPool(sha256.New, []byte(c.Secret.Reveal())),
		header:       newHeaderCheck(h, refusal("Missing header %s", h)),
		toleranceMs:  tolerance,
		noTimestamp:  refusal("Missing t= timestamp in the %s header", h),
		twoTimestamp: refusal("More than one t= timestamp in the %s header", h),
		badTimestamp: refusal("Invalid t= timestamp in the %s header: it must carry Unix seconds, digits only", h),
		noV1:         refusal("Missing v1= signature in the %s header", h),
		stale:        refusal("%s timestamp outside the tolerance of %d ms", h, tolerance),
	}, nil
}

// Verify checks, in this order: the header is present; it holds exactly one t= and at least one
// v1=; t is within the tolerance of now in either direction; one v1 matches. A v1 is
// lower-case hexadecimal, as Stripe sends it and as its libraries compare it (stripe-node
// refuses upper case).
func (v *stripeVerifier) Verify(h http.Header, body []byte, now time.Time) error {
	value, err := v.header.value(h)
	if err != nil {
		return err
	}
	var (
		ts     string
		haveTS bool
		v1     []string
	)
	for item := range strings.SplitSeq(value, ",") {
		key, val, ok := strings.Cut(item, "=")
		if !ok {
			continue
		}
		switch strings.TrimSpace(key) {
		case "t":
			if haveTS {
				return v.twoTimestamp
			}
			ts, haveTS = strings.TrimSpace(val), true
		case "v1":
			v1 = append(v1, strings.TrimSpace(val))
		}
	}
	if !haveTS {
		return v.noTimestamp
	}
	if len(v1) == 0 {
		return v.noV1
	}
	seconds, ok := parseDigits(ts)
	if !ok {
		return v.badTimestamp
	}
	if !withinSeconds(now, seconds, v.toleranceMs) {
		return v.stale
	}
	st := v.macs.get()
	st.writeString(ts)
	st.write(dot)
	st.write(body)
	sum := st.result()
	matched := false
	var got [sha256.Size]byte
	for _, candidate := range v1 {
		if decodeHex(got[:], candidate) && hmac.Equal(sum, got[:]) {
			matched = true
		}
	}
	v.macs.put(st)
	if !matched {
		return errInvalidSignature
	}
	return nil
}

// CredentialHeaders returns Stripe-Signature.
func (v *stripeVerifier) CredentialHeaders() []string { return []string{v.header.name} }
