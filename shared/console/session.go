package console

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"
)

// CookieName is the name of the console's session cookie.
const CookieName = "queuebox_console"

// CSRFField is the form field that carries the CSRF token of every change.
const CSRFField = "csrf"

// DefaultSessionTTL is how long a login lasts.
const DefaultSessionTTL = 8 * time.Hour

const (
	nonceLen = 16
	macLen   = sha256.Size
	// cookieLen is the decoded session: the expiry (8 bytes), the nonce and the MAC.
	cookieLen = 8 + nonceLen + macLen
)

// SessionRevoker keeps the sessions that a logout ended where every replica and every Lambda
// invocation reads them: the database (queuebox_revoked_session). A Backend that implements it
// makes the logout end the session everywhere; shared/console/operator's does. A key is the hex SHA-256
// of the session's nonce (64 characters), never the cookie.
type SessionRevoker interface {
	// RevokeSession records that the session of key ended; expiresAt is the session's own
	// expiry, after which the record may go.
	RevokeSession(ctx context.Context, key string, expiresAt time.Time) error
	// SessionRevoked reports whether the session of key was revoked.
	SessionRevoked(ctx context.Context, key string) (bool, error)
}

// sessions issues and checks the session cookie and the CSRF tokens. Both are MACs under a key
// derived from the admin secret, so they hold across replicas and Lambda invocations that share
// the configuration, and a new secret ends every session. Nothing is kept in memory: a logout is
// recorded through the revoker, and a cookie whose session it records is refused.
type sessions struct {
	key []byte
	ttl time.Duration
	now func() time.Time

	revoker SessionRevoker
	log     *slog.Logger
}

// newSessions derives the key from the login secret; with an empty secret (admin.insecure) the
// key is random, so sessions last as long as the process.
func newSessions(secret string, ttl time.Duration, now func() time.Time) (*sessions, error) {
	var key []byte
	if secret == "" {
		key = make([]byte, 32)
		if _, err := rand.Read(key); err != nil {
			return nil, errors.New("console: reading random bytes for the session key: " + err.Error())
		}
	} else {
		m := hmac.New(sha256.New, []byte(secret))
		m.Write([]byte("queuebox console session key v1"))
		key = m.Sum(nil)
	}
	return &sessions{key: key, ttl: ttl, now: now}, nil
}

func (s *sessions) mac(parts ...[]byte) []byte {
	m := hmac.New(sha256.New, s.key)
	for _, p := range parts {
		var n [4]byte
		binary.BigEndian.PutUint32(n[:], uint32(len(p)))
		m.Write(n[:])
		m.Write(p)
	}
	return m.Sum(nil)
}

// issue returns a new session cookie's value.
func (s *sessions) issue() (string, error) {
	b := make([]byte, cookieLen)
	binary.BigEndian.PutUint64(b[:8], uint64(s.now().Add(s.ttl).Unix()))
	if _, err := rand.Read(b[8 : 8+nonceLen]); err != nil {
		return "", errors.New("console: reading random bytes for a session: " + err.Error())
	}
	copy(b[8+nonceLen:], s.mac([]byte("session"), b[:8+nonceLen]))
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// attach sets where the logouts are kept: the backend, when it is a SessionRevoker, and the
// logger of a failed read.
func (s *sessions) attach(backend Backend, log *slog.Logger) {
	s.revoker, _ = backend.(SessionRevoker)
	s.log = log
}

// check returns the session's nonce when the cookie value is a session of this key that has
// not expired. It does not look at the revocations; checkCookie does.
func (s *sessions) check(value string) ([]byte, bool) {
	nonce, _, ok := s.verify(value)
	return nonce, ok
}

// verify returns the nonce and the expiry of a cookie value whose MAC holds and whose expiry
// has not passed.
func (s *sessions) verify(value string) ([]byte, time.Time, bool) {
	b, err := base64.RawURLEncoding.DecodeString(value)
	if err != nil || len(b) != cookieLen {
		return nil, time.Time{}, false
	}
	want := s.mac([]byte("session"), b[:8+nonceLen])
	if !hmac.Equal(want, b[8+nonceLen:]) {
		return nil, time.Time{}, false
	}
	expiry := int64(binary.BigEndian.Uint64(b[:8]))
	if s.now().Unix() >= expiry {
		return nil, time.Time{}, false
	}
	return b[8 : 8+nonceLen], time.Unix(expiry, 0).UTC(), true
}

// checkCookie returns the nonce of the request's live session cookie: a session of this key,
// not expired and not revoked. A failure to read the revocations refuses the session (and is
// logged): a logged-out cookie must never pass because the database did not answer.
func (s *sessions) checkCookie(r *http.Request) ([]byte, bool) {
	ck, err := r.Cookie(CookieName)
	if err != nil {
		return nil, false
	}
	nonce, ok := s.check(ck.Value)
	if !ok || s.revoker == nil {
		return nonce, ok
	}
	revoked, err := s.revoker.SessionRevoked(r.Context(), revocationKey(nonce))
	if err != nil {
		if s.log != nil {
			s.log.Error("console: the session could not be checked against the logouts, so it is refused", "error", err)
		}
		return nil, false
	}
	if revoked {
		return nil, false
	}
	return nonce, true
}

// revoke ends the request's session for every replica and Lambda invocation: it records the
// session through the revoker until the session's own expiry. A request without a live
// session has nothing to end.
func (s *sessions) revoke(r *http.Request) error {
	ck, err := r.Cookie(CookieName)
	if err != nil {
		return nil
	}
	nonce, expires, ok := s.verify(ck.Value)
	if !ok {
		return nil
	}
	if s.revoker == nil {
		return errors.New("console: no store records the logouts")
	}
	if err := s.revoker.RevokeSession(r.Context(), revocationKey(nonce), expires); err != nil {
		return fmt.Errorf("console: recording the logout: %w", err)
	}
	return nil
}

// revocationKey is what the revocations record of a session: the hex SHA-256 of its nonce
// under a label of its own, so that the stored key reveals neither the nonce (from which the
// CSRF token is derived) nor the cookie.
func revocationKey(nonce []byte) string {
	h := sha256.New()
	h.Write([]byte("queuebox console revoked session v1\x00"))
	h.Write(nonce)
	return hex.EncodeToString(h.Sum(nil))
}

// csrf is the CSRF token of a session: a MAC of its nonce, so it is worth nothing without the
// cookie and the cookie nothing without it.
func (s *sessions) csrf(nonce []byte) string {
	return base64.RawURLEncoding.EncodeToString(s.mac([]byte("csrf"), nonce))
}

// checkCSRF compares a submitted token with the session's, in constant time.
func (s *sessions) checkCSRF(nonce []byte, token string) bool {
	want := s.csrf(nonce)
	return len(token) == len(want) && subtle.ConstantTimeCompare([]byte(token), []byte(want)) == 1
}

// cookie builds the session cookie: HttpOnly, Secure and SameSite=Strict, on the console's
// path. A browser keeps a Secure cookie only over HTTPS or from a loopback address, so the
// console is reached through TLS (or on the machine itself).
func (s *sessions) cookie(value string, maxAge int) *http.Cookie {
	return &http.Cookie{
		Name: CookieName, Value: value, Path: "/console",
		MaxAge: maxAge, HttpOnly: true, Secure: true, SameSite: http.SameSiteStrictMode,
	}
}
