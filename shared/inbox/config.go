package inbox

import (
	"errors"
	"fmt"
	"slices"

	"github.com/alternayte/queuebox/shared/config"
	"github.com/alternayte/queuebox/shared/inboundauth"
)

// Builders build the parts of a source that other packages own, so that this package needs
// neither the credential checks nor the JSONata engine.
type Builders struct {
	// Verifier builds the verifier of a source auth block (inboundauth.New). Required when a
	// source has an auth block.
	Verifier func(auth *config.InboundAuth) (inboundauth.Verifier, error)
	// Transformer builds the source transform of a source. Required when a source has a
	// transform block.
	Transformer func(source string, t config.Transform) (Transformer, error)
}

// SourcesFromConfig returns the HTTP sources of the configuration, sorted by name. The other
// kinds of source are left out.
func SourcesFromConfig(cfg *config.Config, b Builders) ([]Source, error) {
	names := make([]string, 0, len(cfg.Sources))
	for name, s := range cfg.Sources {
		if s != nil && s.Kind == config.SourceHTTP && s.HTTP != nil {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	out := make([]Source, 0, len(names))
	for _, name := range names {
		s := cfg.Sources[name]
		src := Source{
			Name:               name,
			Path:               s.HTTP.Path,
			IdempotencyKeyPath: s.IdempotencyKeyPath,
			EventTypePath:      s.EventTypePath,
			AggregateIDPath:    s.AggregateIDPath,
			Consumption:        string(s.Consumption),
			Filter:             s.Filter,
		}
		if s.RateLimit != nil {
			src.RequestsPerMinute = s.RateLimit.RequestsPerMinute
		}
		if s.HTTP.Auth != nil {
			if b.Verifier == nil {
				return nil, fmt.Errorf("building source %s: %w", name, errors.New("it has an auth block and no verifier builder was given"))
			}
			v, err := b.Verifier(s.HTTP.Auth)
			if err != nil {
				return nil, fmt.Errorf("building the auth of source %s: %w", name, err)
			}
			src.Verifier = v
		}
		if s.Transform != nil {
			if b.Transformer == nil {
				return nil, fmt.Errorf("building source %s: %w", name, errors.New("it has a transform and no transformer builder was given"))
			}
			t, err := b.Transformer(name, *s.Transform)
			if err != nil {
				return nil, fmt.Errorf("building the transform of source %s: %w", name, err)
			}
			src.Transform = t
			src.OnError = s.Transform.OnError
		}
		out = append(out, src)
	}
	return out, nil
}

// OptionsFromConfig returns the options of the configuration: the base path, the body cap and
// the HTTP sources. The caller adds the store, the metrics, the logger, the waker and the
// shutdown flag.
func OptionsFromConfig(cfg *config.Config, b Builders) (Options, error) {
	sources, err := SourcesFromConfig(cfg, b)
	if err != nil {
		return Options{}, err
	}
	return Options{BasePath: cfg.Inbox.BasePath, MaxBodyBytes: cfg.Inbox.MaxBodyBytes, Sources: sources}, nil
}
