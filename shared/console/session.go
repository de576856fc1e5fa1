package console

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/binary"
	"errors"
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

// sessions issues and checks the session cookie and the CSRF tokens. Both are MACs under a key
// derived from the admin secret, so they hold across replicas and Lambda invocations that share
// the configuration, and a new secret ends every session. Nothing is kept in memory.
type sessions struct {
	key []byte
	ttl time.Duration
	now func() time.Time
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

// check returns the session's nonce when the cookie value is a live session of this key.
func (s *sessions) check(value string) ([]byte, bool) {
	b, err := base64.RawURLEncoding.DecodeString(value)
	if err != nil || len(b) != cookieLen {
		return nil, false
	}
	want := s.mac([]byte("session"), b[:8+nonceLen])
	if !hmac.Equal(want, b[8+nonceLen:]) {
		return nil, false
	}
	if expiry := int64(binary.BigEndian.Uint64(b[:8])); s.now().Unix() >= expiry {
		return nil, false
	}
	return b[8 : 8+nonceLen], true
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
