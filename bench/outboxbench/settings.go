package outboxbench

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/alternayte/queuebox/shared/outbox"
)

// Settings are the outbox settings a run uses.
type Settings struct {
	BatchSize    int           `json:"batchSize"`
	Concurrency  int           `json:"concurrency"`
	PollInterval time.Duration `json:"-"`
	// ClaimMode is outbox.claimMode: empty is the lease mode (the default), outbox.ClaimModeLock
	// the lock mode.
	ClaimMode string `json:"-"`
}

// MarshalJSON writes the poll interval in milliseconds, as the configuration names it, and the
// claim mode by its name ("lease" when empty).
func (s Settings) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		BatchSize      int    `json:"batchSize"`
		Concurrency    int    `json:"concurrency"`
		PollIntervalMs int64  `json:"pollIntervalMs"`
		ClaimMode      string `json:"claimMode"`
	}{s.BatchSize, s.Concurrency, s.PollInterval.Milliseconds(), s.claimMode()})
}

// String prints the settings with their configuration names; the claim mode only when it is
// lock.
func (s Settings) String() string {
	out := fmt.Sprintf("batchSize %d, concurrency %d, pollIntervalMs %d", s.BatchSize, s.Concurrency, s.PollInterval.Milliseconds())
	if s.Lock() {
		out += ", claimMode " + outbox.ClaimModeLock
	}
	return out
}

// Lock reports whether the settings claim in the lock mode.
func (s Settings) Lock() bool { return s.ClaimMode == outbox.ClaimModeLock }

// claimMode is the claim mode's name, lease when ClaimMode is empty.
func (s Settings) claimMode() string {
	if s.ClaimMode == "" {
		return outbox.ClaimModeLease
	}
	return s.ClaimMode
}

// DefaultSettings are the documented defaults of outbox.*.
func DefaultSettings() Settings {
	d := outbox.Config{}.WithDefaults()
	return Settings{BatchSize: d.BatchSize, Concurrency: d.Concurrency, PollInterval: d.PollInterval}
}

// ParseSettings reads "BATCHxCONCURRENCY" (for example 500x64) with the default poll interval,
// optionally followed by the claim mode, ":lease" or ":lock" (500x64:lock). The lease mode is
// the empty ClaimMode, whether named or not.
func ParseSettings(s string) (Settings, error) {
	sizes, mode, hasMode := strings.Cut(strings.TrimSpace(s), ":")
	b, c, ok := strings.Cut(sizes, "x")
	bs, err1 := strconv.Atoi(b)
	cs, err2 := strconv.Atoi(c)
	if !ok || err1 != nil || err2 != nil || bs <= 0 || cs <= 0 {
		return Settings{}, fmt.Errorf("settings %q: want BATCHxCONCURRENCY, for example 500x64, or 500x64:lock", s)
	}
	st := Settings{BatchSize: bs, Concurrency: cs, PollInterval: DefaultSettings().PollInterval}
	if hasMode {
		switch mode {
		case outbox.ClaimModeLease:
		case outbox.ClaimModeLock:
			st.ClaimMode = outbox.ClaimModeLock
		default:
			return Settings{}, fmt.Errorf("settings %q: unknown claim mode %q (want lease or lock)", s, mode)
		}
	}
	return st, nil
}
