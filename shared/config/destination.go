package config

import (
	"fmt"
	"reflect"

	"github.com/alternayte/queuebox/shared/kind"
)

// DestinationKind is the kind of a destination, selected from its required keys: kind.HTTP,
// built in, or the kind of a connector (Components.Connectors).
type DestinationKind = kind.Kind

// Destination is one entry of destinations. Kind says which one of HTTP (the built-in kind)
// and Block (a connector's kind) is set.
type Destination struct {
	// Name is the map key of the entry. It is not a configuration key.
	Name string `yaml:"-"`
	// Kind is selected from the required keys that the entry sets: baseUrl (http), or those of
	// a connector kind (ConnectorSpec; rabbitmq: url and exchange, for example).
	Kind DestinationKind `yaml:"-"`
	// Type is the type key as written: documentation only, the loader does not check it.
	Type string `yaml:"type,omitempty"`
	// Headers are static headers on every message; a row header of the same name wins.
	// Default: empty.
	Headers map[string]string `yaml:"headers,omitempty"`
	// Transform runs before the publish, after the route transform. Default: nil, none.
	Transform *Transform `yaml:"transform,omitempty"`
	// DeliveryControls holds retry, terminalStatuses, circuitBreaker and rateLimit, the
	// delivery controls of docs/delivery-controls.md. Default: none set.
	DeliveryControls `yaml:",inline"`

	// HTTP is set when Kind is http.
	HTTP *HTTPDestination `yaml:"-"`
	// Block is the block of a connector's kind (its ConnectorSpec.Destination), the
	// connector's own type; nil when Kind is http.
	Block Block `yaml:"-"`
	// Signing signs every request of an http destination, an extension
	// (docs/signed-deliveries.md). Default: nil, none.
	Signing *Signing `yaml:"signing,omitempty"`
}

// NewDestination returns a destination of the built-in kind http with every default, as the
// loader builds it before it reads the entry's keys. Code that builds a configuration by hand,
// a test for example, starts from it; a connector's configuration package builds one of its
// kind (Destination.Block).
func NewDestination(name string, k DestinationKind) *Destination {
	d := &Destination{Name: name}
	d.selectKind(kindSpec{name: string(k)})
	return d
}

// NewDestinationAuth returns a destination auth block of the given kind with its defaults.
func NewDestinationAuth(k DestinationAuthKind) *DestinationAuth {
	a := &DestinationAuth{}
	a.selectKind(kindSpec{name: string(k)})
	return a
}

// HTTPDestination holds the keys of an HTTP destination.
type HTTPDestination struct {
	// BaseURL is an absolute http or https URL with a host and no user info. Required.
	BaseURL string `yaml:"baseUrl"`
	// Path is the path after BaseURL, with no . or .. segment. Default: /.
	Path string `yaml:"path"`
	// TimeoutMs is the request timeout. It must be above 0. Default: 30000.
	TimeoutMs Milliseconds `yaml:"timeoutMs"`
	// Auth holds the credentials of each request. Default: nil, none.
	Auth *DestinationAuth `yaml:"auth,omitempty"`
}

// DestinationAuthKind is the kind of a destination auth block.
type DestinationAuthKind string

// The kinds of destination auth.
const (
	AuthOAuth2 DestinationAuthKind = "oauth2"
	AuthBasic  DestinationAuthKind = "basic"
	AuthHeader DestinationAuthKind = "header"
)

// DestinationAuth is destinations.<name>.auth. Kind says which one of OAuth2, Basic and Header
// is set.
type DestinationAuth struct {
	// Kind is selected from the required keys: clientId, clientSecret and tokenUrl (oauth2);
	// username and password (basic); headerValue (header).
	Kind DestinationAuthKind `yaml:"-"`
	// Type is the type key as written: documentation only.
	Type string `yaml:"type,omitempty"`
	// OAuth2 is set when Kind is oauth2.
	OAuth2 *OAuth2Auth `yaml:"-"`
	// Basic is set when Kind is basic.
	Basic *BasicAuth `yaml:"-"`
	// Header is set when Kind is header.
	Header *HeaderAuth `yaml:"-"`
}

// OAuth2Auth is the client credentials grant: QueueBox sends Authorization: Bearer <token>.
type OAuth2Auth struct {
	// ClientID is the client identifier. Required.
	ClientID string `yaml:"clientId"`
	// ClientSecret is the client secret. Required.
	ClientSecret Secret `yaml:"clientSecret"`
	// TokenURL is the token endpoint; the rules of baseUrl apply. Required.
	TokenURL string `yaml:"tokenUrl"`
	// Scope is the scope parameter of the token request. Default: empty, none.
	Scope string `yaml:"scope,omitempty"`
	// ExtraParams are extra form parameters of the token request. Default: empty.
	ExtraParams map[string]string `yaml:"extraParams,omitempty"`
}

// BasicAuth is HTTP Basic authentication.
type BasicAuth struct {
	// Username is the user name. Required.
	Username string `yaml:"username"`
	// Password is the password. Required.
	Password Secret `yaml:"password"`
}

// HeaderAuth sends a static credential header.
type HeaderAuth struct {
	// HeaderName is the header that carries the credential. Default: Authorization.
	HeaderName string `yaml:"headerName"`
	// HeaderValue is the value of that header. Required.
	HeaderValue Secret `yaml:"headerValue"`
}

// httpDestination is the built-in kind of destination, which the loader tries first.
var httpDestination = kindSpec{name: string(kind.HTTP), required: []string{"baseUrl"}, typ: reflect.TypeFor[HTTPDestination]()}

func (d *Destination) kinds(comps *Components) ([]kindSpec, string) {
	return connectorKinds(httpDestination, comps, func(c ConnectorSpec) *BlockSpec { return c.Destination }), "destination"
}

func (d *Destination) selectKind(spec kindSpec) any {
	d.Kind = DestinationKind(spec.name)
	switch {
	case spec.block != nil:
		d.Block = spec.block.New()
		return d.Block
	case d.Kind == kind.HTTP:
		d.HTTP = &HTTPDestination{Path: "/", TimeoutMs: 30000}
		return d.HTTP
	}
	panic(fmt.Sprintf("config: unknown destination kind %q", spec.name))
}

func (d *Destination) kindPart() (string, any) {
	switch {
	case d.HTTP != nil:
		return string(d.Kind), d.HTTP
	case d.Block != nil:
		return string(d.Kind), d.Block
	}
	return "", nil
}

func (d *Destination) typeKey() string { return d.Type }

func (d *Destination) setName(name string) { d.Name = name }

// The kinds of destination auth, in the order the loader tries them.
var destinationAuthKinds = []kindSpec{
	{name: string(AuthOAuth2), required: []string{"clientId", "clientSecret", "tokenUrl"}, typ: reflect.TypeFor[OAuth2Auth]()},
	{name: string(AuthBasic), required: []string{"username", "password"}, typ: reflect.TypeFor[BasicAuth]()},
	{name: string(AuthHeader), required: []string{"headerValue"}, typ: reflect.TypeFor[HeaderAuth]()},
}

func (a *DestinationAuth) kinds(*Components) ([]kindSpec, string) {
	return destinationAuthKinds, "auth"
}

func (a *DestinationAuth) selectKind(spec kindSpec) any {
	a.Kind = DestinationAuthKind(spec.name)
	switch a.Kind {
	case AuthOAuth2:
		a.OAuth2 = &OAuth2Auth{}
		return a.OAuth2
	case AuthBasic:
		a.Basic = &BasicAuth{}
		return a.Basic
	case AuthHeader:
		a.Header = &HeaderAuth{HeaderName: "Authorization"}
		return a.Header
	}
	panic(fmt.Sprintf("config: unknown destination auth kind %q", spec.name))
}

func (a *DestinationAuth) kindPart() (string, any) {
	switch a.Kind {
	case AuthOAuth2:
		return string(a.Kind), a.OAuth2
	case AuthBasic:
		return string(a.Kind), a.Basic
	case AuthHeader:
		return string(a.Kind), a.Header
	}
	return "", nil
}

func (a *DestinationAuth) typeKey() string { return a.Type }

// DestinationKinds returns the kinds of destination that the configuration knows with comps,
// in the order that the loader tries them: http, then the connector kinds.
func DestinationKinds(comps *Components) []DestinationKind {
	specs, _ := (&Destination{}).kinds(comps)
	out := make([]DestinationKind, len(specs))
	for i, k := range specs {
		out[i] = DestinationKind(k.name)
	}
	return out
}
