// Package config is the configuration of QueueBox: the model of every key of queuebox.yml, the
// loader that reads it from QUEUEBOX_ environment variables, a YAML file and the packaged
// default, and the validation that runs before anything starts.
//
// The documentation is ../shared/spec/23-configuration.md (the keys, their types, defaults and
// rules) and ../shared/spec/24-environment-variables.md (the variables and the precedence).
//
// # Loading
//
// Load reads three sources, the first that sets a key winning:
//
//  1. the QUEUEBOX_ variables of LoadOptions.Env;
//  2. the YAML file that QUEUEBOX_CONFIG_FILE names, by default /etc/queuebox/queuebox.yml;
//  3. the packaged default (queuebox.yml embedded in this package), read only when there is no
//     file and no QUEUEBOX_ variable.
//
// A variable merges with the file key by key inside a map; a variable that touches a list
// replaces the file's list whole. Key names match in any letter case. ${NAME} and
// ${NAME:-fallback} placeholders resolve from the same environment, and a secret written as
// file:/path is read once, at load, without its trailing newline.
//
// Only this package reads the environment, and only through LoadOptions, so that tests pass a
// map. OSOptions builds the options of a real process.
//
// # Kinds
//
// A destination, a source and an auth block each have several kinds. The loader selects the kind
// from the required keys that the entry sets (type is documentation only) and fills exactly one
// of the kind fields: Destination.HTTP or .Block; Source.HTTP or .Block; DestinationAuth.OAuth2,
// .Basic or .Header; InboundAuth.Bearer, .APIKey, .HMAC, .Stripe or .StandardWebhooks. HTTP is
// the built-in kind of destinations and sources; every other kind is a connector's
// (Components.Connectors, a ConnectorSpec each), whose block is the connector's own type
// (kafkaconfig.Destination, for example), decoded, normalized, checked and bounded by the rules
// that the connector's configuration package gives. The one exception to the rule: the inbound auth kinds
// stripe and standard-webhooks, which go beyond the documented product and share hmac's required
// key secret, are selected by type: stripe and type: standard-webhooks.
//
// # Components
//
// This package links no QueueBox component: no database driver, no connector, no JSONata
// engine. A rule that needs a component's knowledge is asked of the component through
// LoadOptions.Components (see Components): the values of database.type, the grammar of
// database.url and the capture mode of each dialect, and what only a destination's connector
// knows (the decoding of a standard-webhooks signing secret). The composition root,
// shared/service, fills it from the dialect table (shared/store/dialect) and the connectors,
// and every program loads through it (service.Load), so that `queuebox config check` refuses
// exactly what a start refuses.
//
// # Errors
//
// Load reports every problem at once in a *ValidationError. Each problem names the key path and
// its QUEUEBOX_ variable, for example
//
//	outbox.pollIntervalMs (QUEUEBOX_OUTBOX_POLLINTERVALMS) must be above 0
//
// Keys and variables that match no configuration key are not errors; Load returns them as
// warnings, so that `queuebox config check` can print them.
//
// # Secrets
//
// Secret and ConnectionURL values never print their credential: fmt, slog, encoding/json and
// yaml.v3 all see Secret(***), Secret(empty) or a URL whose password is masked. Reveal returns
// the value for the code that must use it.
package config
