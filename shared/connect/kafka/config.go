//go:build !queuebox_no_kafka

package kafka

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/alternayte/queuebox/shared/template"
)

// SecurityProtocol is the security protocol of the connections to the brokers. New compares
// it in any letter case.
type SecurityProtocol string

// The security protocols.
const (
	// SecurityPlaintext is a plain TCP connection without authentication.
	SecurityPlaintext SecurityProtocol = "PLAINTEXT"
	// SecuritySSL is TLS without SASL.
	SecuritySSL SecurityProtocol = "SSL"
	// SecuritySASLPlaintext is SASL authentication over plain TCP.
	SecuritySASLPlaintext SecurityProtocol = "SASL_PLAINTEXT"
	// SecuritySASLSSL is SASL authentication over TLS.
	SecuritySASLSSL SecurityProtocol = "SASL_SSL"
)

// The SASL mechanisms that the publisher implements. New compares them in any letter case.
const (
	SASLPlain       = "PLAIN"
	SASLScramSHA256 = "SCRAM-SHA-256"
	SASLScramSHA512 = "SCRAM-SHA-512"
)

// Defaults and bounds of Config.
const (
	// DefaultKeyTemplate is the default of Config.KeyTemplate.
	DefaultKeyTemplate = "{{ key }}"
	// DefaultTimeout is the default of Config.Timeout (destinations.<name>.timeoutMs).
	DefaultTimeout = 30 * time.Second
	// MinTimeout is the smallest Config.Timeout that New accepts.
	MinTimeout = 2 * time.Second
	// DefaultSecurityProtocol is the default of Config.SecurityProtocol.
	DefaultSecurityProtocol = SecurityPlaintext
)

// Config holds the settings of one Kafka destination. The caller maps them from the
// configuration (destinations.<name>); the zero value of an optional field takes the default
// that its comment names. Errors about it name the configuration key.
type Config struct {
	// Brokers are the bootstrap servers, host:port each. Blank entries are left out; at least
	// one must remain. Required.
	Brokers []string
	// Topic is the Kafka topic or an address template (shared/template). Required unless
	// TopicFrom is set.
	Topic string
	// TopicFrom names the row column that holds the topic: aggregate_type, topic or key. It
	// wins over Topic. Default empty, none.
	TopicFrom string
	// KeyTemplate is the record key; {{ key }} and {{ topic }} render, a blank result sends no
	// key, and a route routingKeyTemplate wins. Default "{{ key }}".
	KeyTemplate string
	// Timeout is the whole publish budget, the acknowledgement included. It must be at least
	// MinTimeout. Default 30 s.
	Timeout time.Duration
	// SecurityProtocol is PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL, in any letter case.
	// SSL uses the system's root certificates. Default SecurityPlaintext.
	SecurityProtocol SecurityProtocol
	// SASLMechanism is PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512, in any letter case. Required by
	// a SASL_ protocol, refused by the others.
	SASLMechanism string
	// SASLUsername is required by a SASL_ protocol.
	SASLUsername string
	// SASLPassword is required by a SASL_ protocol. Errors, String and GoString never show it.
	SASLPassword string
	// Headers are the static headers of every record; a row header of the same name, in any
	// letter case, wins. Default none.
	Headers map[string]string
}

// WithDefaults returns the config with every zero optional value replaced by its default.
func (c Config) WithDefaults() Config {
	if c.KeyTemplate == "" {
		c.KeyTemplate = DefaultKeyTemplate
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	if c.SecurityProtocol == "" {
		c.SecurityProtocol = DefaultSecurityProtocol
	}
	return c
}

// validate checks a config that WithDefaults filled for the destination name. Its messages
// name the bad key (destinations.<name>.<key>) and never hold the SASL password. A
// securityProtocol or saslMechanism that the publisher does not implement wraps
// ErrUnsupportedSecurity.
func (c Config) validate(name string) error {
	prefix := "destinations." + name
	if len(c.brokers()) == 0 {
		return fmt.Errorf("%s.bootstrapServers: no broker is given", prefix)
	}
	if _, err := c.topic(prefix); err != nil {
		return err
	}
	if c.Timeout < MinTimeout {
		return fmt.Errorf("%s.timeoutMs: %d is below the least value, 2000", prefix, c.Timeout.Milliseconds())
	}
	useSASL, err := c.security(prefix)
	if err != nil {
		return err
	}
	if useSASL {
		if _, err := c.saslMechanism(prefix); err != nil {
			return err
		}
	} else if c.SASLMechanism != "" {
		return fmt.Errorf("%s.saslMechanism: %w: it needs securityProtocol SASL_PLAINTEXT or SASL_SSL, not %s",
			prefix, ErrUnsupportedSecurity, c.protocol())
	}
	return nil
}

// brokers returns the non-blank entries of Brokers, trimmed.
func (c Config) brokers() []string {
	var out []string
	for _, b := range c.Brokers {
		if b = strings.TrimSpace(b); b != "" {
			out = append(out, b)
		}
	}
	return out
}

// topic compiles the topic address: the TopicFrom column, or else the Topic template.
func (c Config) topic(prefix string) (*template.Address, error) {
	topic, err := template.NewAddress(c.Topic, c.TopicFrom)
	if err != nil {
		if c.TopicFrom != "" {
			return nil, fmt.Errorf("%s.topicFrom: %w", prefix, err)
		}
		return nil, fmt.Errorf("%s.topic: %w", prefix, err)
	}
	return topic, nil
}

// protocol returns SecurityProtocol in upper case.
func (c Config) protocol() SecurityProtocol {
	return SecurityProtocol(strings.ToUpper(string(c.SecurityProtocol)))
}

// security reports whether the protocol uses SASL, or refuses an unknown protocol.
func (c Config) security(prefix string) (useSASL bool, err error) {
	switch c.protocol() {
	case SecurityPlaintext, SecuritySSL:
		return false, nil
	case SecuritySASLPlaintext, SecuritySASLSSL:
		return true, nil
	}
	return false, fmt.Errorf("%s.securityProtocol: %w: %q: use PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL",
		prefix, ErrUnsupportedSecurity, string(c.SecurityProtocol))
}

// usesTLS reports whether the protocol is SSL or SASL_SSL.
func (c Config) usesTLS() bool {
	p := c.protocol()
	return p == SecuritySSL || p == SecuritySASLSSL
}

// saslMechanism returns the franz-go mechanism of the SASL settings, or an error naming the
// key.
func (c Config) saslMechanism(prefix string) (sasl.Mechanism, error) {
	if c.SASLUsername == "" {
		return nil, fmt.Errorf("%s.saslUsername: required by securityProtocol %s", prefix, c.SecurityProtocol)
	}
	if c.SASLPassword == "" {
		return nil, fmt.Errorf("%s.saslPassword: required by securityProtocol %s", prefix, c.SecurityProtocol)
	}
	user, pass := c.SASLUsername, c.SASLPassword
	switch strings.ToUpper(c.SASLMechanism) {
	case SASLPlain:
		return plain.Auth{User: user, Pass: pass}.AsMechanism(), nil
	case SASLScramSHA256:
		return scram.Auth{User: user, Pass: pass}.AsSha256Mechanism(), nil
	case SASLScramSHA512:
		return scram.Auth{User: user, Pass: pass}.AsSha512Mechanism(), nil
	case "":
		return nil, fmt.Errorf("%s.saslMechanism: required by securityProtocol %s: use PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512",
			prefix, c.SecurityProtocol)
	}
	return nil, fmt.Errorf("%s.saslMechanism: %w: %q: use PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512",
		prefix, ErrUnsupportedSecurity, c.SASLMechanism)
}

// The texts printed instead of a secret, as the configuration package prints them.
const (
	maskedSecret = "Secret(***)"
	emptySecret  = "Secret(empty)"
)

// String prints the config with the SASL password masked and the names of the static headers
// without their values.
func (c Config) String() string {
	password := maskedSecret
	if c.SASLPassword == "" {
		password = emptySecret
	}
	names := make([]string, 0, len(c.Headers))
	for k := range c.Headers {
		names = append(names, k)
	}
	sort.Strings(names)
	return fmt.Sprintf("kafka.Config{Brokers: %q, Topic: %q, TopicFrom: %q, KeyTemplate: %q, Timeout: %s, SecurityProtocol: %q, SASLMechanism: %q, SASLUsername: %q, SASLPassword: %s, Headers: %q}",
		c.Brokers, c.Topic, c.TopicFrom, c.KeyTemplate, c.Timeout, string(c.SecurityProtocol), c.SASLMechanism, c.SASLUsername, password, names)
}

// GoString is String, so %#v shows no password either.
func (c Config) GoString() string { return c.String() }
