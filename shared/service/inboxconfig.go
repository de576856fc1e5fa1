package service

import (
	"fmt"
	"slices"

	"github.com/alternayte/queuebox/shared/config"
	"github.com/alternayte/queuebox/shared/filter"
	"github.com/alternayte/queuebox/shared/inboundauth"
	"github.com/alternayte/queuebox/shared/inbox"
	"github.com/alternayte/queuebox/shared/store/dialect"
	"github.com/alternayte/queuebox/shared/transform"
)

// This file maps the inbox side of the configuration tree (sources.*, inbox.*, the auth blocks
// and the transform blocks) to the Config types of the components, which import no
// shared/config.

// InboxOptions returns the options of the HTTP inbox: inbox.basePath, inbox.maxBodyBytes, the
// key length rule of the database (KeyLength) and the HTTP sources (InboxSources). The caller adds the store, the metrics, the logger, the
// waker and the shutdown flag. The source transforms compile on engine.
func InboxOptions(cfg *config.Config, engine transform.Compiler) (inbox.Options, error) {
	sources, err := InboxSources(cfg, engine)
	if err != nil {
		return inbox.Options{}, err
	}
	return inbox.Options{BasePath: cfg.Inbox.BasePath, MaxBodyBytes: cfg.Inbox.MaxBodyBytes, Sources: sources, KeyLength: KeyLength(cfg)}, nil
}

// KeyLength is how the inbox counts an idempotency key, an aggregate id and an event type
// against their 255 characters: as the columns of database.type count them, code points in
// PostgreSQL's VARCHAR(255) and UTF-16 code units in SQL Server's NVARCHAR(255)
// (store.Dialect.UTF16Keys of the dialect table).
func KeyLength(cfg *config.Config) inbox.KeyLength {
	if d, ok := dialect.Lookup(string(cfg.Database.Type)); ok && d.UTF16Keys {
		return inbox.KeyLengthUTF16
	}
	return inbox.KeyLengthCodePoints
}

// InboxSources returns the HTTP sources of the configuration, sorted by name, each with its
// verifier (sources.<name>.auth) and its compiled source transform (sources.<name>.transform)
// built on engine. The other kinds of source are left out.
func InboxSources(cfg *config.Config, engine transform.Compiler) ([]inbox.Source, error) {
	names := make([]string, 0, len(cfg.Sources))
	for name, s := range cfg.Sources {
		if s != nil && s.HTTP != nil {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	out := make([]inbox.Source, 0, len(names))
	for _, name := range names {
		s := cfg.Sources[name]
		src := inbox.Source{
			Name:               name,
			Path:               s.HTTP.Path,
			IdempotencyKeyPath: s.IdempotencyKeyPath,
			EventTypePath:      s.EventTypePath,
			AggregateIDPath:    s.AggregateIDPath,
			Consumption:        string(s.Consumption),
			Filter:             FilterConfig(s.Filter),
		}
		if s.RateLimit != nil {
			src.RequestsPerMinute = s.RateLimit.RequestsPerMinute
		}
		if s.HTTP.Auth != nil {
			v, err := inboundauth.New(InboundAuthConfig(s.HTTP.Auth))
			if err != nil {
				return nil, fmt.Errorf("building the auth of source %s: %w", name, err)
			}
			src.Verifier = v
		}
		if s.Transform != nil {
			t, err := inbox.CompileTransform(engine, TransformConfig(s.Transform))
			if err != nil {
				return nil, fmt.Errorf("building the transform of source %s: %w", name, err)
			}
			src.Transform = t
			src.OnError = inbox.OnError(s.Transform.OnError)
		}
		out = append(out, src)
	}
	return out, nil
}

// FilterConfig maps a filter block (sources.<name>.filter) to the filter's Config.
func FilterConfig(f config.Filter) filter.Config {
	return filter.Config{Require: filterRules(f.Require), Exclude: filterRules(f.Exclude)}
}

func filterRules(rules []config.FilterRule) []filter.Rule {
	if rules == nil {
		return nil
	}
	out := make([]filter.Rule, len(rules))
	for i, r := range rules {
		out[i] = filter.Rule{Header: r.Header, Equals: r.Equals, In: r.In, Matches: r.Matches, Exists: r.Exists}
	}
	return out
}

// TransformConfig maps a transform block (sources.<name>.transform, routes[*].transform,
// destinations.<name>.transform) to the transform's Config; nil gives nil (no transform).
func TransformConfig(t *config.Transform) *transform.Config {
	if t == nil {
		return nil
	}
	return &transform.Config{
		Expression: t.Expression,
		Timeout:    t.TimeoutMs.Duration(),
		MaxDepth:   t.MaxDepth,
		OnError:    transform.OnError(t.OnError),
	}
}

// InboundAuthConfig maps an auth block (sources.<name>.auth, admin.auth) to the verifier's
// Config; nil gives nil (no check). The secrets stay masked: they move from one secret type to
// the other.
func InboundAuthConfig(a *config.InboundAuth) *inboundauth.Config {
	if a == nil {
		return nil
	}
	out := &inboundauth.Config{Kind: inboundauth.Kind(a.Kind)}
	if b := a.Bearer; b != nil {
		out.Bearer = &inboundauth.Bearer{Token: secret(b.Token)}
	}
	if k := a.APIKey; k != nil {
		out.APIKey = &inboundauth.APIKey{Key: secret(k.Key), HeaderName: k.HeaderName}
	}
	if h := a.HMAC; h != nil {
		out.HMAC = &inboundauth.HMAC{
			Secret:                 secret(h.Secret),
			HeaderName:             h.HeaderName,
			Algorithm:              inboundauth.Algorithm(h.Algorithm),
			SignaturePrefix:        h.SignaturePrefix,
			TimestampHeader:        h.TimestampHeader,
			TimestampToleranceMs:   int64(h.TimestampTolerance),
			SignaturePayloadFormat: inboundauth.PayloadFormat(h.SignaturePayloadFormat),
		}
	}
	if s := a.Stripe; s != nil {
		out.Stripe = &inboundauth.Stripe{Secret: secret(s.Secret), TimestampToleranceMs: int64(s.TimestampTolerance)}
	}
	if s := a.StandardWebhooks; s != nil {
		out.StandardWebhooks = &inboundauth.StandardWebhooks{Secret: secret(s.Secret), TimestampToleranceMs: int64(s.TimestampTolerance)}
	}
	return out
}

// secret moves a configured secret into the verifier's secret type; an empty one stays the
// zero (empty) Secret.
func secret(s config.Secret) inboundauth.Secret {
	if s.IsEmpty() {
		return inboundauth.Secret{}
	}
	return inboundauth.NewSecret(s.Reveal())
}
