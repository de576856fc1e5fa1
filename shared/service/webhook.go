package service

import (
	"context"
	"fmt"
	"net"

	"github.com/alternayte/queuebox/shared/config"
	"github.com/alternayte/queuebox/shared/connect"
	"github.com/alternayte/queuebox/shared/connect/webhook"
	"github.com/alternayte/queuebox/shared/kind"
	"github.com/alternayte/queuebox/shared/outbox"
)

// httpConnector returns the built-in connector of HTTP destinations (shared/connect/webhook).
// It is a function, not a variable that the package's initialization would set, so that only
// a program that builds publishers (Publishers) links the publisher.
func httpConnector() connect.Connector {
	return connect.Connector{Kind: kind.HTTP, Publisher: newWebhookPublisher, Rules: httpRules}
}

// httpRules are the rules of HTTP destinations: they give the validation the publisher's
// decoding of a standard-webhooks signing secret and the most secrets of one block.
// Components reads them from here, not through httpConnector, so that a program that builds
// no publisher (the admin Lambda function) does not link the publisher through the validation.
var httpRules = config.DestinationRules{SigningKey: webhook.SigningKey, MaxSigningSecrets: webhook.MaxSigningSecrets}

// newWebhookPublisher builds the publisher of one HTTP destination. With
// http.blockPrivateAddresses it first refuses a baseUrl or tokenUrl on a private address.
func newWebhookPublisher(ctx context.Context, p connect.PublisherParams) (outbox.Publisher, func(), error) {
	wc := webhookConfig(p.Config, p.Destination)
	if p.Config.HTTP.BlockPrivateAddresses {
		for _, u := range []string{wc.BaseURL, wc.Auth.OAuth2.TokenURL} {
			if u == "" {
				continue
			}
			if err := webhook.CheckPrivateAddresses(ctx, u, net.DefaultResolver); err != nil {
				return nil, nil, fmt.Errorf("destinations.%s: %w", p.Name, err)
			}
		}
	}
	wp, err := webhook.New(wc, p.Metrics)
	if err != nil {
		return nil, nil, fmt.Errorf("destinations.%s: %w", p.Name, err)
	}
	return wp, func() { _ = wp.Close() }, nil
}

// webhookConfig maps an HTTP destination and http.* to the publisher's settings.
func webhookConfig(cfg *config.Config, d *config.Destination) webhook.Config {
	h := d.HTTP
	wc := webhook.Config{
		Name:              d.Name,
		BaseURL:           h.BaseURL,
		Path:              h.Path,
		Timeout:           h.TimeoutMs.Duration(),
		Headers:           d.Headers,
		MaxErrorBodyBytes: cfg.HTTP.MaxErrorBodyBytes,
		TerminalStatuses:  d.TerminalStatuses,
		// With blockPrivateAddresses, each connection is checked again when it is dialled.
		BlockPrivateAddresses: cfg.HTTP.BlockPrivateAddresses,
	}
	if a := h.Auth; a != nil {
		switch a.Kind {
		case config.AuthOAuth2:
			wc.Auth = webhook.Auth{Kind: webhook.AuthOAuth2, OAuth2: webhook.OAuth2{
				ClientID: a.OAuth2.ClientID, ClientSecret: a.OAuth2.ClientSecret.Reveal(),
				TokenURL: a.OAuth2.TokenURL, Scope: a.OAuth2.Scope, ExtraParams: a.OAuth2.ExtraParams,
			}}
		case config.AuthBasic:
			wc.Auth = webhook.Auth{Kind: webhook.AuthBasic, Basic: webhook.Basic{
				Username: a.Basic.Username, Password: a.Basic.Password.Reveal(),
			}}
		case config.AuthHeader:
			wc.Auth = webhook.Auth{Kind: webhook.AuthHeader, Header: webhook.Header{
				Name: a.Header.HeaderName, Value: a.Header.HeaderValue.Reveal(),
			}}
		}
	}
	wc.Signing = webhookSigning(d.Signing)
	return wc
}

// webhookSigning maps destinations.<name>.signing to the publisher's signing block.
func webhookSigning(s *config.Signing) webhook.Signing {
	switch {
	case s == nil:
		return webhook.Signing{}
	case s.StandardWebhooks != nil:
		secrets := make([]string, len(s.StandardWebhooks.Secrets))
		for i, secret := range s.StandardWebhooks.Secrets {
			secrets[i] = secret.Reveal()
		}
		return webhook.Signing{Kind: webhook.SigningStandardWebhooks, Secrets: secrets}
	case s.HMAC != nil:
		h := s.HMAC
		return webhook.Signing{Kind: webhook.SigningHMAC, Secret: h.Secret.Reveal(), HeaderName: h.HeaderName,
			Algorithm: string(h.Algorithm), Prefix: h.SignaturePrefix}
	}
	return webhook.Signing{}
}

// builtinConnectors are the connectors that this package holds: HTTP.
func builtinConnectors() []connect.Connector { return []connect.Connector{httpConnector()} }

// builtinRules are the Rules of builtinConnectors by kind, read without the connectors, so
// that the validation of a configuration links no publisher constructor.
func builtinRules() map[config.DestinationKind]config.DestinationRules {
	return map[config.DestinationKind]config.DestinationRules{kind.HTTP: httpRules}
}
