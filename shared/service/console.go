package service

import (
	"log/slog"

	"github.com/alternayte/queuebox/shared/console"
	"github.com/alternayte/queuebox/shared/console/operator"
	"github.com/alternayte/queuebox/shared/store"
)

// newConsole builds the web console over the store, when the admin routes are on and the
// store has the replay statements. The login takes the bearer token or the api-key key of
// admin.auth; with an hmac admin.auth no secret can be typed, so the console is not built and
// the start logs why. admin.insecure opens it without a login.
func newConsole(cfg *Config, st store.Store, states store.DestinationStateStore, m Recorder, counters func() map[string]float64, log *slog.Logger) (*console.Console, error) {
	var secret string
	if !cfg.Admin.Insecure {
		a := cfg.Admin.Auth
		switch {
		case a != nil && a.Bearer != nil:
			secret = a.Bearer.Token.Reveal()
		case a != nil && a.APIKey != nil:
			secret = a.APIKey.Key.Reveal()
		default:
			log.Info("the console at /console is off: it logs in with a bearer or api-key admin.auth secret")
			return nil, nil
		}
	}
	oc, err := operatorConfig(cfg)
	if err != nil {
		return nil, err
	}
	var login func(string) bool
	if secret != "" {
		login = console.SecretLogin(secret)
	}
	// The login counts reach the scrape (queuebox serve) or the EMF lines (the admin function).
	cm, _ := m.(console.Metrics)
	c, err := console.New(console.Options{Login: login, SessionSecret: secret, Insecure: cfg.Admin.Insecure,
		Backend: operator.New(st, states, oc), Counters: counters, Metrics: cm, Logger: log})
	if err != nil {
		return nil, startError("build the console", err)
	}
	return c, nil
}

// NewOperatorBackend returns what the console reads and changes (shared/console/operator),
// over a store opened by Connect, for the command line's `queuebox dead` (the same groups,
// rows and replays as the console).
func NewOperatorBackend(cfg *Config, st store.Store) (console.Backend, error) {
	oc, err := operatorConfig(cfg)
	if err != nil {
		return nil, err
	}
	return operator.New(st, st, oc), nil
}

// operatorConfig maps the routes and the destinations to the operator backend's Config.
func operatorConfig(cfg *Config) (operator.Config, error) {
	routes, err := Routes(cfg)
	if err != nil {
		return operator.Config{}, startError("build the routes", err)
	}
	return operator.Config{Routes: routes, Destinations: DestinationNames(cfg)}, nil
}
