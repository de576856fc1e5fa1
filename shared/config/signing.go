package config

import (
	"errors"
	"fmt"
	"reflect"
	"strings"

	"github.com/alternayte/queuebox/shared/forwarded"
)

// SigningKind is the kind of a destination signing block.
type SigningKind string

// The kinds of signing (an extension; docs/signed-deliveries.md). The type key selects the kind;
// without one, secrets selects standard-webhooks and secret selects hmac.
const (
	SigningStandardWebhooks SigningKind = "standard-webhooks"
	SigningHMAC             SigningKind = "hmac"
)

// Signing is destinations.<name>.signing, HTTP destinations only: the signature of every
// request. Kind says which one of StandardWebhooks and HMAC is set.
type Signing struct {
	// Kind is selected by the type key (standard-webhooks or hmac, in any letter case), or,
	// without one, from the required keys: secrets (standard-webhooks), secret (hmac).
	Kind SigningKind `yaml:"-"`
	// Type is the type key as written. A value that names no kind is refused.
	Type string `yaml:"type,omitempty"`
	// StandardWebhooks is set when Kind is standard-webhooks.
	StandardWebhooks *StandardWebhooksSigning `yaml:"-"`
	// HMAC is set when Kind is hmac.
	HMAC *HMACSigning `yaml:"-"`
}

// StandardWebhooksSigning signs every request as the Standard Webhooks specification states:
// webhook-id, webhook-timestamp and webhook-signature.
type StandardWebhooksSigning struct {
	// Secrets are whsec_ followed by the standard base64 of a key of 24 to 64 bytes; each one
	// signs every request. From 1 to 10, the most that the publisher signs with
	// (DestinationRules.MaxSigningSecrets). Required.
	Secrets []Secret `yaml:"secrets"`
}

// HMACSigning sends the HMAC of the body in one header: the mirror of the hmac auth of a source,
// with the same keys and defaults.
type HMACSigning struct {
	// Secret is the HMAC key, used as written. Required.
	Secret Secret `yaml:"secret"`
	// HeaderName is the header that carries the signature. Default: X-Signature.
	HeaderName string `yaml:"headerName"`
	// Algorithm is HmacSHA256 or HmacSHA512, in this letter case. Default: HmacSHA256.
	Algorithm HMACAlgorithm `yaml:"algorithm"`
	// SignaturePrefix is the text before the lower-case hexadecimal signature; "" for none.
	// Default: sha256=.
	SignaturePrefix string `yaml:"signaturePrefix"`
}

// NewSigning returns a signing block of the given kind with its defaults.
func NewSigning(kind SigningKind) *Signing {
	s := &Signing{}
	s.selectKind(kindSpec{name: string(kind)})
	return s
}

// The kinds of signing, in the order the loader tries them.
var signingKinds = []kindSpec{
	{name: string(SigningStandardWebhooks), required: []string{"secrets"}, typ: reflect.TypeFor[StandardWebhooksSigning]()},
	{name: string(SigningHMAC), required: []string{"secret"}, typ: reflect.TypeFor[HMACSigning]()},
}

func (s *Signing) kinds(*Components) ([]kindSpec, string) { return signingKinds, "signing" }

// typedKinds makes the type key select the kind before the required keys do.
func (s *Signing) typedKinds() []kindSpec { return signingKinds }

func (s *Signing) selectKind(spec kindSpec) any {
	s.Kind = SigningKind(spec.name)
	switch s.Kind {
	case SigningStandardWebhooks:
		s.StandardWebhooks = &StandardWebhooksSigning{}
		return s.StandardWebhooks
	case SigningHMAC:
		s.HMAC = &HMACSigning{HeaderName: "X-Signature", Algorithm: HmacSHA256, SignaturePrefix: "sha256="}
		return s.HMAC
	}
	panic(fmt.Sprintf("config: unknown signing kind %q", spec.name))
}

func (s *Signing) kindPart() (string, any) {
	switch s.Kind {
	case SigningStandardWebhooks:
		return string(s.Kind), s.StandardWebhooks
	case SigningHMAC:
		return string(s.Kind), s.HMAC
	}
	return "", nil
}

func (s *Signing) typeKey() string { return s.Type }

// signing checks destinations.<name>.signing; kind is the kind of the destination.
func (v *validator) signing(p keyPath, kind DestinationKind, s *Signing) {
	if s == nil {
		return
	}
	rules := v.comps.Destinations[kind]
	if rules.SigningKey == nil {
		v.add(p, "is set on a %s destination: only an http destination signs its requests", kind)
		return
	}
	if t := strings.TrimSpace(s.Type); t != "" && !strings.EqualFold(t, string(SigningStandardWebhooks)) && !strings.EqualFold(t, string(SigningHMAC)) {
		v.add(p.child("type"), "must be standard-webhooks or hmac, not %q", s.Type)
		return
	}
	switch {
	case s.StandardWebhooks != nil:
		secrets := s.StandardWebhooks.Secrets
		sp := p.child("secrets")
		switch {
		case len(secrets) == 0:
			v.add(sp, "is required: at least one whsec_ secret")
		case len(secrets) > rules.MaxSigningSecrets:
			v.add(sp, "must hold at most %d secrets, not %d", rules.MaxSigningSecrets, len(secrets))
		}
		for i, secret := range secrets {
			if err := checkSigningSecret(rules, secret.Reveal()); err != nil {
				v.add(sp.index(i), "%v", err)
			}
		}
	case s.HMAC != nil:
		h := s.HMAC
		v.requiredSecret(p.child("secret"), h.Secret)
		if v.required(p.child("headerName"), h.HeaderName) && !forwarded.ValidName(h.HeaderName) {
			v.add(p.child("headerName"), "must be a valid header name, not %q", h.HeaderName)
		}
		if h.Algorithm != HmacSHA256 && h.Algorithm != HmacSHA512 {
			v.add(p.child("algorithm"), "must be HmacSHA256 or HmacSHA512, in this letter case, not %q", h.Algorithm)
		}
		if strings.ContainsFunc(h.SignaturePrefix, func(r rune) bool { return (r < 0x20 && r != '\t') || r == 0x7f }) {
			v.add(p.child("signaturePrefix"), "must not hold a control character")
		}
	}
}

// checkSigningSecret checks a standard-webhooks secret with the publisher's own decoding
// (rules.SigningKey, which the connector owns: whsec_, then the standard base64 of a key of
// the length it takes), so that config check refuses exactly what serve refuses. The error
// never holds the secret.
func checkSigningSecret(rules DestinationRules, secret string) error {
	if secret == "" {
		return errors.New("is empty")
	}
	_, err := rules.SigningKey(secret)
	return err
}
