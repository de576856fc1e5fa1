// Package inboundauth checks the credentials of a request to an HTTP inbox source or to the
// admin routes: a bearer token, an API key, an HMAC signature (spec/06-authenticate-requests.md),
// and the two signature schemes that webhook senders use most, Stripe's Stripe-Signature and
// Standard Webhooks. Every comparison runs in constant time, and no error text carries a
// credential.
package inboundauth

import (
	"net/http"
	"time"
)

// Verifier checks the credentials of one request.
//
// Verify must be safe for concurrent use. It reads the request headers and the raw body as
// received (before any parsing), and now is the clock of the timestamp checks. A nil error
// accepts the request. An error's text is the reason of the 401 answer: it names the check
// that failed (for example "Invalid signature" or "Missing header X-Signature") and never
// holds a credential, a signature or a secret.
type Verifier interface {
	Verify(h http.Header, body []byte, now time.Time) error
	// CredentialHeaders returns the names of the headers that carry a credential, which the
	// inbox never stores (Authorization, Proxy-Authorization and Cookie are always excluded
	// by the inbox itself).
	CredentialHeaders() []string
}
