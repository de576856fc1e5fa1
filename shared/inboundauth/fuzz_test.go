package inboundauth_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"hash"
	"math"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/alternayte/queuebox/shared/inboundauth"
)

// The fuzz targets below build each request from header templates in which the harness
// replaces {sig} with the signature that a sender with the secret computes, and {now} with the
// clock of the check, so that the fuzzer explores the near misses of a valid request (an edited
// signature, a second item, a moved timestamp) and not only random text. Each target checks the
// verifier against a reference of the documented rules (docs/inbound-auth.md): it accepts
// exactly the requests that the rules accept. So a verifier never accepts a signature that does
// not match the MAC computed here, and never refuses one that does. A refusal is an
// *inboundauth.Error that wraps ErrUnauthorized, and its text holds neither the secret nor the
// expected signature.

// fuzzTolerance is the timestamp tolerance of the fuzzed verifiers: Stripe's 5 minutes.
const fuzzTolerance = 300000

// secretMarker starts every fuzzed secret, so that a leak into an error text is found.
const secretMarker = "fz~secret~"

// fuzzNow is the clock of a fuzzed check: a fixed instant moved by offset seconds, bounded so
// that the clock stays a real date.
func fuzzNow(offset int64) time.Time {
	const bound = int64(1) << 33 // about 272 years
	return time.Unix(1700000000+max(-1700000000, min(offset%bound, bound)), 0)
}

// fill replaces {sig} and {now} in a header template.
func fill(tmpl, sig, now string) string {
	return strings.NewReplacer("{sig}", sig, "{now}", now).Replace(tmpl)
}

// macOf is the reference MAC.
func macOf(h func() hash.Hash, key []byte, parts ...[]byte) []byte {
	m := hmac.New(h, key)
	for _, p := range parts {
		m.Write(p)
	}
	return m.Sum(nil)
}

// within is the reference clock check: digits only, and the distance to now at most the
// tolerance. unit is 1 for milliseconds and 1000 for seconds.
func within(ts string, now time.Time, unit int64) bool {
	if ts == "" || strings.Trim(ts, "0123456789") != "" {
		return false
	}
	n, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || n > math.MaxInt64/unit {
		return false
	}
	d := now.UnixMilli() - n*unit
	return d >= -fuzzTolerance && d <= fuzzTolerance
}

// checkRefusal checks the form of a refusal.
func checkRefusal(t *testing.T, err error, secret string, sigs ...string) {
	t.Helper()
	var e *inboundauth.Error
	if !errors.As(err, &e) || !errors.Is(err, inboundauth.ErrUnauthorized) {
		t.Fatalf("the refusal %v (%T) is not an *inboundauth.Error wrapping ErrUnauthorized", err, err)
	}
	text := err.Error()
	if text == "" || strings.Contains(text, secretMarker) || strings.Contains(text, secret) {
		t.Fatalf("the refusal %q is empty or holds the secret", text)
	}
	for _, s := range sigs {
		if strings.Contains(text, s) {
			t.Fatalf("the refusal %q holds the expected signature %q", text, s)
		}
	}
}

// single reports whether the header holds exactly one non-empty value of name.
func single(h http.Header, name string) (string, bool) {
	v := h.Values(name)
	if len(v) != 1 || v[0] == "" {
		return "", false
	}
	return v[0], true
}

// FuzzHMACVerifier fuzzes the hmac kind: the header is signaturePrefix followed by exactly the
// lower-case hex HMAC of the body (BODY) or of timestamp, dot, body (TIMESTAMP_DOT_BODY, with
// the timestamp header in Unix milliseconds within the tolerance).
func FuzzHMACVerifier(f *testing.F) {
	f.Add("It's a Secret to Everybody", []byte("Hello, World!"), "sha256=", "sha256={sig}", "", false, false, false, int64(0), int32(0))
	f.Add("billing-secret", []byte(`{"id":"inv-1","type":"invoice.paid"}`), "", "{sig}", "{now}", true, false, false, int64(0), int32(300001))
	f.Add("k", []byte(""), "v1=", "v1={sig}", "{now}", true, true, false, int64(-5), int32(300000))
	f.Add("k", []byte("{}"), "sha512=", "sha512={sig}", "", false, true, true, int64(0), int32(0))
	f.Add("k", []byte("{}"), "sha256=", "SHA256={sig}", "{now}000", true, false, false, int64(1<<40), int32(0))
	f.Add("k", []byte("{}"), "", "{sig} ", "0{now}", true, false, false, int64(300), int32(-300001))
	f.Add("k", []byte("{}"), "", "{sig}0", "-{now}", true, false, false, int64(-301), int32(0))
	f.Fuzz(func(t *testing.T, secret string, body []byte, prefix, sigTmpl, tsTmpl string, withTS, sha512Alg, twice bool, offset int64, skew int32) {
		secret = secretMarker + secret
		a := inboundauth.NewConfig(inboundauth.KindHMAC)
		a.HMAC.Secret = inboundauth.NewSecret(secret)
		a.HMAC.HeaderName = "X-Signature"
		a.HMAC.SignaturePrefix = prefix
		a.HMAC.TimestampToleranceMs = fuzzTolerance
		alg := sha256.New
		if sha512Alg {
			a.HMAC.Algorithm, alg = inboundauth.HmacSHA512, sha512.New
		}
		a.HMAC.SignaturePayloadFormat = inboundauth.PayloadBody
		if withTS {
			a.HMAC.TimestampHeader = "X-Timestamp"
			a.HMAC.SignaturePayloadFormat = inboundauth.PayloadTimestampDotBody
		}
		v, err := inboundauth.New(a)
		if err != nil {
			t.Fatalf("building the verifier: %v", err)
		}
		now := fuzzNow(offset)
		ts := fill(tsTmpl, "", strconv.FormatInt(now.UnixMilli()+int64(skew), 10))
		var want []byte
		if withTS {
			want = macOf(alg, []byte(secret), []byte(ts), []byte("."), body)
		} else {
			want = macOf(alg, []byte(secret), body)
		}
		wantHex := hex.EncodeToString(want)
		sig := fill(sigTmpl, wantHex, "")
		h := http.Header{}
		h.Add("X-Signature", sig)
		if twice {
			h.Add("X-Signature", sig)
		}
		if withTS {
			h.Set("X-Timestamp", ts)
		}

		err = v.Verify(h, body, now)
		value, one := single(h, "X-Signature")
		accept := one && value == prefix+wantHex && (!withTS || (ts != "" && within(ts, now, 1)))
		if accept != (err == nil) {
			t.Fatalf("hmac, prefix %q, header %q, timestamp %q (with %v), now %d ms: Verify = %v, the rules say accept = %v (want %q)",
				prefix, sig, ts, withTS, now.UnixMilli(), err, accept, prefix+wantHex)
		}
		if err != nil {
			checkRefusal(t, err, secret, wantHex)
		}
	})
}

// FuzzStripeVerifier fuzzes the stripe kind: Stripe-Signature holds exactly one t= item
// (Unix seconds within the tolerance) and at least one v1= item, and one v1 equals the hex
// HMAC-SHA256 of t, a dot and the body, keyed with the secret as written, in either letter
// case. Spaces around items are allowed; other items are ignored.
func FuzzStripeVerifier(f *testing.F) {
	f.Add("whsec_test_secret", []byte(`{"id":"evt_1","type":"payment_intent.succeeded"}`), "t={now},v1={sig}", false, int64(0), int32(301))
	f.Add("whsec_x", []byte(`{"id":"evt_2"}`), "t={now},v1={sig}", false, int64(0), int32(0))
	f.Add("whsec_x", []byte("{}"), "v1=00,t={now}, v1={sig} ,v0=11", false, int64(10), int32(-300))
	f.Add("whsec_x", []byte("{}"), "t={now},t={now},v1={sig}", false, int64(0), int32(300))
	f.Add("whsec_x", []byte("{}"), "t={now}0,v1={sig}", false, int64(0), int32(0))
	f.Add("whsec_x", []byte("{}"), "t = {now} , v1 = {sig}", true, int64(0), int32(-301))
	f.Add("whsec_x", []byte("{}"), "t={now},v1={sig}x", false, int64(-1<<40), int32(0))
	f.Add("whsec_x", []byte("{}"), "t=,v1={sig}", false, int64(0), int32(0))
	f.Fuzz(func(t *testing.T, secret string, body []byte, headerTmpl string, twice bool, offset int64, skew int32) {
		secret = secretMarker + secret
		a := inboundauth.NewConfig(inboundauth.KindStripe)
		a.Stripe.Secret = inboundauth.NewSecret(secret)
		a.Stripe.TimestampToleranceMs = fuzzTolerance
		v, err := inboundauth.New(a)
		if err != nil {
			t.Fatalf("building the verifier: %v", err)
		}
		now := fuzzNow(offset)
		nowS := strconv.FormatInt(now.Unix()+int64(skew), 10)
		// The signature depends on the t item as sent: fill {now} first, read t, then sign.
		header := fill(headerTmpl, "{sig}", nowS)
		var ts []string
		var v1 []string
		for item := range strings.SplitSeq(header, ",") {
			k, val, ok := strings.Cut(item, "=")
			if !ok {
				continue
			}
			switch strings.TrimSpace(k) {
			case "t":
				ts = append(ts, strings.TrimSpace(val))
			case "v1":
				v1 = append(v1, strings.TrimSpace(val))
			}
		}
		signedTS := nowS
		if len(ts) > 0 {
			signedTS = ts[0]
		}
		wantHex := hex.EncodeToString(macOf(sha256.New, []byte(secret), []byte(signedTS), []byte("."), body))
		header = fill(header, wantHex, "")
		// Read the v1 items again, now that {sig} is filled.
		v1 = v1[:0]
		ts = ts[:0]
		for item := range strings.SplitSeq(header, ",") {
			k, val, ok := strings.Cut(item, "=")
			if !ok {
				continue
			}
			switch strings.TrimSpace(k) {
			case "t":
				ts = append(ts, strings.TrimSpace(val))
			case "v1":
				v1 = append(v1, strings.TrimSpace(val))
			}
		}
		h := http.Header{}
		h.Add("Stripe-Signature", header)
		if twice {
			h.Add("Stripe-Signature", header)
		}

		err = v.Verify(h, body, now)
		_, one := single(h, "Stripe-Signature")
		matched := false
		for _, c := range v1 {
			matched = matched || strings.EqualFold(c, wantHex) && len(c) == len(wantHex)
		}
		accept := one && len(ts) == 1 && ts[0] == signedTS && within(ts[0], now, 1000) && matched
		if accept != (err == nil) {
			t.Fatalf("stripe, header %q, now %d s: Verify = %v, the rules say accept = %v (want v1=%s)", header, now.Unix(), err, accept, wantHex)
		}
		if err != nil {
			checkRefusal(t, err, secret, wantHex)
		}
	})
}

// FuzzStandardWebhooksVerifier fuzzes the standard-webhooks kind: webhook-id and
// webhook-timestamp (Unix seconds within the tolerance) are present, and one space-separated
// v1,<base64> entry of webhook-signature holds the HMAC-SHA256 of id, dot, timestamp, dot,
// body, keyed with the base64-decoded secret.
func FuzzStandardWebhooksVerifier(f *testing.F) {
	f.Add([]byte("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"), []byte(`{"test": 2432232314}`), "msg_p5jXN8AQM9LWM0D4loKWxJek", "{now}", "v1,{sig}", false, int64(0), int32(0))
	f.Add([]byte("k"), []byte("{}"), "msg_1", "{now}", "v1,AAAA v1,{sig}", false, int64(299), int32(300))
	f.Add([]byte("k"), []byte("{}"), "msg_1", "{now}", "v2,{sig}", false, int64(0), int32(0))
	f.Add([]byte("k"), []byte("{}"), "msg_2", "{now}", "v1,{sig}", false, int64(0), int32(-301))
	f.Add([]byte("k"), []byte("{}"), "", "{now}", "v1,{sig}", false, int64(0), int32(0))
	f.Add([]byte("k"), []byte("{}"), "msg_1", "{now}", "v1,{sig}", true, int64(0), int32(301))
	f.Add([]byte("k"), []byte("{}"), "msg_1", "{now}", "v1,{sig}=", false, int64(-301), int32(0))
	f.Add([]byte("k"), []byte("{}"), "msg.1", "0{now}", "\tv1,{sig}\n", false, int64(0), int32(0))
	f.Add([]byte("k"), []byte("{}"), "msg_3", "{now}", "v1,{sig42}E=", false, int64(0), int32(0))
	// The signature of msg_4 ends with "wI=": "wJ=" decodes to the same bytes and is refused.
	f.Add([]byte("k"), []byte("{}"), "msg_4", "{now}", "v1,{sig42}J=", false, int64(0), int32(0))
	f.Fuzz(func(t *testing.T, key, body []byte, id, tsTmpl, sigTmpl string, twice bool, offset int64, skew int32) {
		key = append([]byte(secretMarker), key...)
		secret := "whsec_" + base64.StdEncoding.EncodeToString(key)
		a := inboundauth.NewConfig(inboundauth.KindStandardWebhooks)
		a.StandardWebhooks.Secret = inboundauth.NewSecret(secret)
		a.StandardWebhooks.TimestampToleranceMs = fuzzTolerance
		v, err := inboundauth.New(a)
		if err != nil {
			t.Fatalf("building the verifier: %v", err)
		}
		now := fuzzNow(offset)
		ts := fill(tsTmpl, "", strconv.FormatInt(now.Unix()+int64(skew), 10))
		want := macOf(sha256.New, key, []byte(id), []byte("."), []byte(ts), []byte("."), body)
		wantB64 := base64.StdEncoding.EncodeToString(want)
		// {sig42} is the signature without its last data character and the padding, so that the
		// fuzzer tries the 64 last characters, of which 4 decode to the MAC and 1 is canonical.
		sig := strings.ReplaceAll(fill(sigTmpl, wantB64, ""), "{sig42}", wantB64[:42])
		h := http.Header{}
		h.Set("webhook-id", id)
		h.Set("webhook-timestamp", ts)
		h.Add("webhook-signature", sig)
		if twice {
			h.Add("webhook-signature", sig)
		}

		err = v.Verify(h, body, now)
		_, one := single(h, "webhook-signature")
		matched := false
		for _, entry := range strings.Fields(sig) {
			b64, ok := strings.CutPrefix(entry, "v1,")
			if !ok {
				continue
			}
			// The documented rule compares the text: only the canonical encoding matches.
			got, err := base64.StdEncoding.Strict().DecodeString(b64)
			matched = matched || err == nil && hmac.Equal(got, want)
		}
		accept := one && id != "" && within(ts, now, 1000) && matched
		if accept != (err == nil) {
			t.Fatalf("standard-webhooks, id %q, timestamp %q, signature %q, now %d s: Verify = %v, the rules say accept = %v (want v1,%s)",
				id, ts, sig, now.Unix(), err, accept, wantB64)
		}
		if err != nil {
			checkRefusal(t, err, secret, wantB64, strings.TrimPrefix(secret, "whsec_"))
		}
	})
}

// TestStandardWebhooksRefusesNonCanonicalBase64: a v1 entry must equal the standard base64 of
// the MAC (docs/inbound-auth.md), as the Standard Webhooks libraries compare it. The base64 of
// 32 bytes ends with a character whose last 2 bits are padding; a lenient decoder reads the
// spec example's "...1OE=" and "...1OF=" as the same bytes, so a signature that the verifier did
// not compute was accepted.
func TestStandardWebhooksRefusesNonCanonicalBase64(t *testing.T) {
	t.Parallel()
	v, err := inboundauth.New(standardWebhooks(swSecret))
	if err != nil {
		t.Fatal(err)
	}
	canonical := strings.TrimPrefix(swSignature, "v1,")
	for _, last := range "EFGH" {
		sig := canonical[:len(canonical)-2] + string(last) + "="
		h := headers("webhook-id", swID, "webhook-timestamp", swTimestamp, "webhook-signature", "v1,"+sig)
		err := v.Verify(h, []byte(swBody), swNow)
		if sig == canonical && err != nil {
			t.Fatalf("the canonical signature %s is refused: %v", sig, err)
		}
		if sig != canonical && err == nil {
			t.Fatalf("the non-canonical signature %s of the same MAC is accepted", sig)
		}
	}
}
