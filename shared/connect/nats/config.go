//go:build !queuebox_no_nats

package nats

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/alternayte/queuebox/shared/template"
)

// Mode is how the publisher sends a message: through JetStream or on core NATS.
type Mode string

// The modes.
const (
	// ModeJetStream publishes through JetStream and waits for the stream's acknowledgement.
	ModeJetStream Mode = "jetstream"
	// ModeCore publishes on core NATS, with no acknowledgement: the publish is flushed to the
	// server.
	ModeCore Mode = "core"
)

// Defaults of Config, applied by WithDefaults.
const (
	// DefaultMode is the default of Config.Mode (destinations.<name>.jetStream: true).
	DefaultMode = ModeJetStream
	// DefaultTimeout is the default of Config.Timeout (destinations.<name>.timeoutMs).
	DefaultTimeout = 30 * time.Second
)

// Config holds the settings of one NATS destination. The caller maps them from the
// configuration (destinations.<name>); the zero value of an optional field takes the default
// that its comment names.
type Config struct {
	// Servers are the server URLs. Blank entries are left out; at least one must remain. A URL
	// may hold user information: errors never show it. Required.
	Servers []string
	// Subject is the subject or an address template (shared/template). Required unless
	// SubjectFrom is set.
	Subject string
	// SubjectFrom names the row column that holds the subject: aggregate_type, topic or key.
	// It wins over Subject. Default empty, none.
	SubjectFrom string
	// Mode is ModeJetStream or ModeCore. Default ModeJetStream.
	Mode Mode
	// Timeout bounds the connection and each publish. Default 30 s, which a value that is not
	// above 0 also takes.
	Timeout time.Duration
	// Username, with Password, authenticates the connection. Default empty, none.
	Username string
	// Password goes with Username. Errors, String and GoString never show it.
	Password string
	// Token authenticates the connection instead of a user name. Errors, String and GoString
	// never show it. Default empty, none.
	Token string
	// Headers are the static headers of every message; a row header of the same name, in any
	// letter case, wins. Default none.
	Headers map[string]string
}

// WithDefaults returns the config with every zero optional value replaced by its default.
func (c Config) WithDefaults() Config {
	if c.Mode == "" {
		c.Mode = DefaultMode
	}
	if c.Timeout <= 0 {
		c.Timeout = DefaultTimeout
	}
	return c
}

// validate checks a config that WithDefaults filled for the destination name. Its messages
// name the destination and never hold a credential.
func (c Config) validate(name string) error {
	if len(c.servers()) == 0 {
		return fmt.Errorf("destination %s: servers is empty", name)
	}
	if _, err := c.address(name); err != nil {
		return err
	}
	switch c.Mode {
	case ModeJetStream, ModeCore:
	default:
		return fmt.Errorf("destination %s: mode: %q: use jetstream or core", name, string(c.Mode))
	}
	return nil
}

// servers returns the non-blank entries of Servers, trimmed.
func (c Config) servers() []string {
	var out []string
	for _, s := range c.Servers {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// address compiles the subject: the SubjectFrom column, or else the Subject template.
func (c Config) address(name string) (*template.Address, error) {
	address, err := template.NewAddress(c.Subject, c.SubjectFrom)
	if err != nil {
		return nil, fmt.Errorf("destination %s: subject: %w", name, err)
	}
	return address, nil
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

// String prints the config with the user information of the server URLs, the password and
// the token masked, and the names of the static headers without their values.
func (c Config) String() string {
	servers := make([]string, len(c.Servers))
	for i, s := range c.Servers {
		servers[i] = stripUserInfo(s)
	}
	names := make([]string, 0, len(c.Headers))
	for k := range c.Headers {
		names = append(names, k)
	}
	sort.Strings(names)
	return fmt.Sprintf("nats.Config{Servers: %q, Subject: %q, SubjectFrom: %q, Mode: %q, Timeout: %s, Username: %q, Password: %s, Token: %s, Headers: %q}",
		servers, c.Subject, c.SubjectFrom, string(c.Mode), c.Timeout, c.Username, mask(c.Password), mask(c.Token), names)
}

// GoString is String, so %#v shows no credential either.
func (c Config) GoString() string { return c.String() }
