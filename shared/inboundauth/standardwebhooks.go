package inboundauth

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"strings"
	"time"
)

// strictBase64 is standard base64 that refuses padding bits that are not zero, so that only the
// canonical text of a MAC matches, as docs/inbound-auth.md says ("equals the standard base64")
// and as the Standard Webhooks libraries compare it.
var strictBase64 = base64.StdEncoding.Strict()

// standardWebhooksVerifier checks the headers of the Standard Webhooks specification
// (https://www.standardwebhooks.com):
//
//	webhook-id: msg_...
//	webhook-timestamp: <Unix seconds>
//	webhook-signature: v1,<base64> [v1,<base64> ...]
//
// The expected signature is the standard base64 of the HMAC-SHA256, keyed with the
// base64-decoded secret (after its whsec_ prefix), of the id, a dot, the timestamp, a dot and
// the raw body. Any one matching v1 entry accepts the request; other versions (v1a, an
// asymmetric signature) are ignored.
type standardWebhooksVerifier struct {
	macs         *macPool
	id           headerCheck
	timestamp    headerCheck
	signature    headerCheck
	toleranceMs  int64
	badTimestamp *Error
	noV1         *Error
	stale        *Error
}

func newStandardWebhooks(c *StandardWebhooks) (*standardWebhooksVerifier, error) {
	key, err := c.SigningKey()
	if err != nil {
		return nil, err
	}
	tolerance, err := positiveTolerance(c.TimestampToleranceMs)
	if err != nil {
		return nil, err
	}
	id, ts, sig := StandardWebhooksIDHeader, StandardWebhooksTimestampHeader, StandardWebhooksSignatureHeader
	return &standardWebhooksVerifier{
		macs:         newMACPool(sha256.New, key),
		id:           newHeaderCheck(id, refusal("Missing header %s", id)),
		timestamp:    newHeaderCheck(ts, refusal("Missing header %s", ts)),
		signature:    newHeaderCheck(sig, refusal("Missing header %s", sig)),
		toleranceMs:  tolerance,
		badTimestamp: refusal("Invalid header %s: it must carry Unix seconds, digits only", ts),
		noV1:         refusal("Missing v1 signature in the %s header", sig),
		stale:        refusal("Timestamp outside the tolerance of %d ms (%s carries Unix seconds)", tolerance, ts),
	}, nil
}

// Verify checks, in this order: webhook-signature, webhook-id and webhook-timestamp are present;
// the signature header holds a v1 entry; the timestamp is within the tolerance of now in either
// direction; one v1 entry matches.
func (v *standardWebhooksVerifier) Verify(h http.Header, body []byte, now time.Time) error {
	sig, err := v.signature.value(h)
	if err != nil {
		return err
	}
	id, err := v.id.value(h)
	if err != nil {
		return err
	}
	ts, err := v.timestamp.value(h)
	if err != nil {
		return err
	}
	var v1 []string
	for entry := range strings.FieldsSeq(sig) {
		if b64, ok := strings.CutPrefix(entry, "v1,"); ok {
			v1 = append(v1, b64)
		}
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
	st.writeString(id)
	st.write(dot)
	st.writeString(ts)
	st.write(dot)
	st.write(body)
	sum := st.result()
	// Room for what 44 characters decode to without padding (33 bytes): Decode writes that much
	// before the length check.
	var got [sha256.Size + 1]byte
	matched := false
	for _, candidate := range v1 {
		if len(candidate) != base64.StdEncoding.EncodedLen(sha256.Size) {
			continue
		}
		n, err := strictBase64.Decode(got[:], []byte(candidate))
		if err != nil || n != sha256.Size {
			continue
		}
		if hmac.Equal(sum, got[:n]) {
			matched = true
		}
	}
	v.macs.put(st)
	if !matched {
		return errInvalidSignature
	}
	return nil
}

// CredentialHeaders returns webhook-signature (canonically Webhook-Signature).
func (v *standardWebhooksVerifier) CredentialHeaders() []string { return []string{v.signature.name} }
