package webhook

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"sort"
	"strings"
	"time"

	"github.com/alternayte/queuebox/shared/forwarded"
)

// Defaults of Config, applied by WithDefaults.
const (
	// DefaultPath is the default of Config.Path.
	DefaultPath = "/"
	// DefaultTimeout is the default of Config.Timeout (destinations.<name>.timeoutMs).
	DefaultTimeout = 30 * time.Second
	// DefaultMaxErrorBodyBytes is the default of Config.MaxErrorBodyBytes
	// (http.maxErrorBodyBytes).
	DefaultMaxErrorBodyBytes = 2048
	// DefaultAuthHeaderName is the default of Header.Name.
	DefaultAuthHeaderName = "Authorization"
)

// Config holds the settings of one HTTP destination. The caller maps them from the
// configuration (destinations.<name> and http.*); the zero value of an optional field takes
// the default that its comment names.
type Config struct {
	// Name is the destination name. Errors name the destination with it. Required.
	Name string
	// BaseURL is an absolute http or https URL with a host; it must hold no user info, no query
	// and no fragment. Required.
	BaseURL string
	// Path is appended to BaseURL with exactly one slash between them. It must hold no . or ..
	// segment and no fragment; it may end in a query. Default "/".
	Path string
	// Timeout bounds a whole publish: the token fetch it waits for, the request and the read of
	// the response. The connect timeout is half of it. Default 30 s; a negative value is
	// refused.
	Timeout time.Duration
	// Headers are static headers sent on every request. A row header of the same name, in any
	// letter case, wins over them. Names must be valid header names given once (in any
	// letter case); values must hold no CR, LF or NUL.
	Headers map[string]string
	// Auth holds the credentials of every request. The zero value sends none.
	Auth Auth
	// MaxErrorBodyBytes is the largest part of a failed response body that the error of a
	// failed publish keeps. Default 2048; a negative value is refused.
	MaxErrorBodyBytes int
	// BlockPrivateAddresses is http.blockPrivateAddresses. When true, every connection of the
	// publisher, to BaseURL and to the OAuth2 TokenURL, is checked when it is dialled: a
	// connection to an address of a class that CheckPrivateAddresses refuses is not opened,
	// whatever the host resolved to at start (DNS rebinding), and the publish fails. A
	// connection to a proxy named by HTTP_PROXY, HTTPS_PROXY or ALL_PROXY is not checked (the
	// proxy resolves the host). CheckPrivateAddresses, the start-up check, stays the
	// caller's. Default false.
	BlockPrivateAddresses bool
	// Resolver resolves the hosts of the publisher's connections; nil means the default
	// resolver.
	Resolver *net.Resolver
	// TerminalStatuses are the answer statuses after which no retry is made: the publish
	// error says Terminal and the outbox moves the row to dead at once
	// (destinations.<name>.terminalStatuses, an extension). Default none.
	TerminalStatuses []int
	// Signing signs every request (destinations.<name>.signing, an extension;
	// docs/signed-deliveries.md). The zero value signs nothing.
	Signing Signing
}

// AuthKind is the kind of the credentials of an HTTP destination. Its values are the auth
// types of the configuration.
type AuthKind string

// The kinds of destination auth.
const (
	// AuthNone sends no credentials. The empty string and "none" both mean none.
	AuthNone AuthKind = ""
	// AuthOAuth2 runs the client credentials grant and sends Authorization: Bearer <token>.
	AuthOAuth2 AuthKind = "oauth2"
	// AuthBasic sends Authorization: Basic base64(username:password).
	AuthBasic AuthKind = "basic"
	// AuthHeader sends one static header, by default Authorization.
	AuthHeader AuthKind = "header"
)

// Auth holds the credentials of an HTTP destination. Only the block of Kind is read.
type Auth struct {
	// Kind selects the credentials. Default AuthNone.
	Kind AuthKind
	// OAuth2 is read when Kind is AuthOAuth2.
	OAuth2 OAuth2
	// Basic is read when Kind is AuthBasic.
	Basic Basic
	// Header is read when Kind is AuthHeader.
	Header Header
}

// OAuth2 holds the client credentials grant of a destination. It prints its secret as a mask.
type OAuth2 struct {
	// ClientID is the client identifier. Required.
	ClientID string
	// ClientSecret is the client secret, sent in the body of the token request. Required.
	ClientSecret string
	// TokenURL is the token endpoint. The rules of Config.BaseURL apply, except that it may hold
	// a query. Required.
	TokenURL string
	// Scope is the scope parameter of the token request; empty sends none.
	Scope string
	// ExtraParams are extra form parameters of the token request. They cannot replace
	// grant_type, client_id or client_secret, nor scope when Scope is set.
	ExtraParams map[string]string
}

// Basic holds the credentials of HTTP Basic authentication. It prints its password as a mask.
type Basic struct {
	// Username is the user name. Required; it must not hold a colon.
	Username string
	// Password is the password. Required.
	Password string
}

// Header holds a static credential header. It prints its value as a mask.
type Header struct {
	// Name is the header name. Default "Authorization".
	Name string
	// Value is the header value. Required; it must hold no CR, LF or NUL.
	Value string
}

// The texts printed instead of a secret, as the configuration package prints them.
const (
	maskedSecret = "Secret(***)"
	emptySecret  = "Secret(empty)"
)

func mask(secret string) string {
	if secret == "" {
		return emptySecret
	}
	return maskedSecret
}

// String prints the grant with its client secret masked.
func (o OAuth2) String() string {
	keys := make([]string, 0, len(o.ExtraParams))
	for k := range o.ExtraParams {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return fmt.Sprintf("OAuth2{ClientID: %q, ClientSecret: %s, TokenURL: %q, Scope: %q, ExtraParams: %q}",
		o.ClientID, mask(o.ClientSecret), o.TokenURL, o.Scope, keys)
}

// GoString is String, so %#v shows no secret either.
func (o OAuth2) GoString() string { return o.String() }

// String prints the credentials with the password masked.
func (b Basic) String() string {
	return fmt.Sprintf("Basic{Username: %q, Password: %s}", b.Username, mask(b.Password))
}

// GoString is String, so %#v shows no secret either.
func (b Basic) GoString() string { return b.String() }

// String prints the header with its value masked.
func (h Header) String() string {
	return fmt.Sprintf("Header{Name: %q, Value: %s}", h.Name, mask(h.Value))
}

// GoString is String, so %#v shows no secret either.
func (h Header) GoString() string { return h.String() }

// WithDefaults returns the config with every zero optional value replaced by its default.
func (c Config) WithDefaults() Config {
	if c.Path == "" {
		c.Path = DefaultPath
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	if c.MaxErrorBodyBytes == 0 {
		c.MaxErrorBodyBytes = DefaultMaxErrorBodyBytes
	}
	if c.Auth.Kind == "none" {
		c.Auth.Kind = AuthNone
	}
	c.Signing = c.Signing.withDefaults()
	if c.Auth.Kind == AuthHeader && c.Auth.Header.Name == "" {
		c.Auth.Header.Name = DefaultAuthHeaderName
	}
	return c
}

// validate checks a config that WithDefaults filled. Its messages name the bad key; they never
// hold a secret.
func (c Config) validate() error {
	if c.Name == "" {
		return errors.New("webhook destination: name is required")
	}
	prefix := "destinations." + c.Name
	if err := ValidateBaseURL(c.BaseURL); err != nil {
		return fmt.Errorf("%s.baseUrl: %w", prefix, err)
	}
	if err := ValidatePath(c.Path); err != nil {
		return fmt.Errorf("%s.path: %w", prefix, err)
	}
	if c.Timeout <= 0 {
		return fmt.Errorf("%s.timeoutMs: must be above 0, got %s", prefix, c.Timeout)
	}
	if c.MaxErrorBodyBytes < 0 {
		return fmt.Errorf("http.maxErrorBodyBytes: must not be negative, got %d", c.MaxErrorBodyBytes)
	}
	seen := make(map[string]string, len(c.Headers))
	for name, value := range c.Headers {
		if !forwarded.ValidName(name) {
			return fmt.Errorf("%s.headers: %q is not a valid header name", prefix, name)
		}
		if !validHeaderValue(value) {
			return fmt.Errorf("%s.headers.%s: the value holds a CR, LF or NUL character", prefix, name)
		}
		canonical := strings.ToLower(name)
		if other, ok := seen[canonical]; ok {
			return fmt.Errorf("%s.headers: %q and %q name the same header", prefix, other, name)
		}
		seen[canonical] = name
	}
	if err := c.Signing.validate(prefix + ".signing"); err != nil {
		return err
	}
	return c.Auth.validate(prefix + ".auth")
}

func (a Auth) validate(prefix string) error {
	switch a.Kind {
	case AuthNone:
		return nil
	case AuthOAuth2:
		o := a.OAuth2
		if o.ClientID == "" {
			return fmt.Errorf("%s.clientId: required", prefix)
		}
		if o.ClientSecret == "" {
			return fmt.Errorf("%s.clientSecret: required", prefix)
		}
		if err := validateTokenURL(o.TokenURL); err != nil {
			return fmt.Errorf("%s.tokenUrl: %w", prefix, err)
		}
		return nil
	case AuthBasic:
		if a.Basic.Username == "" {
			return fmt.Errorf("%s.username: required", prefix)
		}
		if strings.Contains(a.Basic.Username, ":") {
			return fmt.Errorf("%s.username: must not hold a colon", prefix)
		}
		if a.Basic.Password == "" {
			return fmt.Errorf("%s.password: required", prefix)
		}
		return nil
	case AuthHeader:
		if !forwarded.ValidName(a.Header.Name) {
			return fmt.Errorf("%s.headerName: %q is not a valid header name", prefix, a.Header.Name)
		}
		if a.Header.Value == "" {
			return fmt.Errorf("%s.headerValue: required", prefix)
		}
		if !validHeaderValue(a.Header.Value) {
			return fmt.Errorf("%s.headerValue: holds a CR, LF or NUL character", prefix)
		}
		return nil
	default:
		return fmt.Errorf("%s.type: unknown kind %q (want oauth2, basic or header)", prefix, a.Kind)
	}
}

// ValidateBaseURL checks the rules of a destination baseUrl: an absolute http or https URL
// with a host, and no user info, query or fragment. The error never repeats user info.
func ValidateBaseURL(raw string) error {
	u, err := checkAbsoluteURL(raw)
	if err != nil {
		return err
	}
	if u.RawQuery != "" || u.ForceQuery {
		return errors.New("must not hold a query (put it in path)")
	}
	return nil
}

// validateTokenURL checks an OAuth2 tokenUrl: the rules of ValidateBaseURL, except that a
// query is allowed.
func validateTokenURL(raw string) error {
	_, err := checkAbsoluteURL(raw)
	return err
}

func checkAbsoluteURL(raw string) (*url.URL, error) {
	if raw == "" {
		return nil, errors.New("required")
	}
	u, err := url.Parse(raw)
	if err != nil {
		// url.Error repeats the input, which may hold a password: keep only the reason.
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err
		}
		return nil, fmt.Errorf("parsing URL: %w", err)
	}
	if u.User != nil {
		return nil, errors.New("must not hold a user name or a password")
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, errors.New("must be an absolute http or https URL")
	}
	if u.Opaque != "" || u.Hostname() == "" {
		return nil, errors.New("must be an absolute http or https URL with a host")
	}
	if u.Fragment != "" || strings.Contains(raw, "#") {
		return nil, errors.New("must not hold a fragment")
	}
	return u, nil
}

// ValidatePath checks the rules of a destination path: a relative reference with no scheme,
// host, fragment, or . or .. segment (percent-encoded ones included). A query is allowed.
// The empty path is valid (it means the default, "/").
func ValidatePath(p string) error {
	if p == "" {
		return nil
	}
	if strings.Contains(p, "#") {
		return errors.New("must not hold a fragment")
	}
	u, err := url.Parse(p)
	if err != nil {
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err
		}
		return fmt.Errorf("parsing path: %w", err)
	}
	if u.Scheme != "" || u.Host != "" || u.User != nil || u.Opaque != "" {
		return errors.New("must be a path, not a URL")
	}
	for seg := range strings.SplitSeq(u.Path, "/") {
		if seg == "." || seg == ".." {
			return errors.New("must not hold a . or .. segment")
		}
	}
	return nil
}

// joinURL appends path to base with exactly one slash between them.
func joinURL(base, path string) string {
	switch {
	case path == "":
		return base
	case strings.HasPrefix(path, "?"):
		return base + path
	case strings.HasSuffix(base, "/") && strings.HasPrefix(path, "/"):
		return base + path[1:]
	case strings.HasSuffix(base, "/") || strings.HasPrefix(path, "/"):
		return base + path
	default:
		return base + "/" + path
	}
}

// validHeaderValue reports whether value can travel as a header value: no CR, LF or NUL and
// no other control character except tab (forwarded.ValidHTTPValue).
func validHeaderValue(value string) bool { return forwarded.ValidHTTPValue(value) }
