package lambdafn

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// The environment variables of the Lambda driver. They are settings of a function, not
// QueueBox configuration keys, so they deliberately do not start with QUEUEBOX_: the
// configuration loader treats every QUEUEBOX_ variable but QUEUEBOX_CONFIG_FILE as a key
// (spec/24-environment-variables.md), would warn that these "have no effect", and would stop
// reading the packaged default when only they are set.
const (
	// ModeVariable chooses the Mode of the function: drain (the default) or continuous.
	ModeVariable = "LAMBDA_MODE"
	// MarginVariable is the deadline margin in milliseconds (default 2000): how long before
	// the invocation deadline the handler stops claiming.
	MarginVariable = "LAMBDA_MARGIN_MS"
)

// DefaultMargin is the deadline margin when MarginVariable is not set.
const DefaultMargin = 2 * time.Second

// MaxMargin is the largest margin: the longest timeout that Lambda allows a function.
const MaxMargin = 15 * time.Minute

// Mode says when an invocation returns.
type Mode string

const (
	// Drain repeats the cycle while it finds work and returns as soon as a cycle comes back
	// empty with nothing in flight, so an idle system costs nothing between wakes. The
	// default, for deployments where a capture node wakes the functions.
	Drain Mode = "drain"
	// Continuous keeps polling at outbox.pollIntervalMs until the deadline minus the margin,
	// for deployments without a capture node that want polling latency.
	Continuous Mode = "continuous"
)

// ParseMode returns the mode that s names, in any letter case; an empty s is Drain.
func ParseMode(s string) (Mode, error) {
	switch m := Mode(strings.ToLower(strings.TrimSpace(s))); m {
	case "":
		return Drain, nil
	case Drain, Continuous:
		return m, nil
	default:
		return "", fmt.Errorf("%s is %q; it must be %s or %s", ModeVariable, s, Drain, Continuous)
	}
}

// Settings are the driver's settings of one function.
type Settings struct {
	// Mode says when an invocation returns. Default Drain.
	Mode Mode
	// Margin is how long before the invocation deadline the handler stops claiming. The rows
	// in flight then have until the deadline minus a quarter of the margin to finish; what is
	// still in flight is abandoned to lease expiry, and the handler returns in the last
	// quarter. Default 2 s (DefaultMargin).
	Margin time.Duration
}

// WithDefaults returns the settings with an empty Mode and a Margin of 0 or less replaced by
// their defaults.
func (s Settings) WithDefaults() Settings {
	if s.Mode == "" {
		s.Mode = Drain
	}
	if s.Margin <= 0 {
		s.Margin = DefaultMargin
	}
	return s
}

// ParseSettings reads the settings from env (ModeVariable and MarginVariable), filling the
// defaults. env is the environment as config.LoadOptions.Env holds it.
func ParseSettings(env map[string]string) (Settings, error) {
	mode, err := ParseMode(env[ModeVariable])
	if err != nil {
		return Settings{}, err
	}
	s := Settings{Mode: mode}
	if v := strings.TrimSpace(env[MarginVariable]); v != "" {
		ms, err := strconv.ParseInt(v, 10, 64)
		if err != nil || ms <= 0 || time.Duration(ms)*time.Millisecond > MaxMargin {
			return Settings{}, fmt.Errorf("%s is %q; it must be a whole number of milliseconds from 1 to %d",
				MarginVariable, env[MarginVariable], MaxMargin.Milliseconds())
		}
		s.Margin = time.Duration(ms) * time.Millisecond
	}
	return s.WithDefaults(), nil
}
