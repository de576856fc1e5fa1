package config

import (
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"
)

// Milliseconds is a whole number of milliseconds: every key whose name ends in Ms.
type Milliseconds int64

// Duration returns the value as a time.Duration.
func (m Milliseconds) Duration() time.Duration {
	return time.Duration(m) * time.Millisecond
}

// RetentionDuration is a retention duration: a whole number and one suffix, s, m, h or d, for
// example 7d. The zero value is unset.
type RetentionDuration struct {
	text string
	d    time.Duration
}

var retentionDurationPattern = lazyRegexp(`^([0-9]+)([smhd])$`)

// maxRetentionDuration bounds a retention duration: a longer one is a typo.
const maxRetentionDuration = 100 * 365 * 24 * time.Hour

// ParseRetentionDuration parses a retention duration such as 30s, 15m, 1h or 7d.
func ParseRetentionDuration(s string) (RetentionDuration, error) {
	m := retentionDurationPattern().FindStringSubmatch(strings.TrimSpace(s))
	if m == nil {
		return RetentionDuration{}, fmt.Errorf("%q is not a whole number followed by s, m, h or d", s)
	}
	unit := map[string]time.Duration{"s": time.Second, "m": time.Minute, "h": time.Hour, "d": 24 * time.Hour}[m[2]]
	n, err := strconv.ParseInt(m[1], 10, 64)
	if err != nil || n > int64(maxRetentionDuration/unit) {
		return RetentionDuration{}, fmt.Errorf("%q is longer than a century", s)
	}
	return RetentionDuration{text: m[1] + m[2], d: time.Duration(n) * unit}, nil
}

// MustRetentionDuration is ParseRetentionDuration for constants; it panics on a bad value.
func MustRetentionDuration(s string) RetentionDuration {
	r, err := ParseRetentionDuration(s)
	if err != nil {
		panic(err)
	}
	return r
}

// Duration returns the length of the duration.
func (r RetentionDuration) Duration() time.Duration { return r.d }

// IsZero reports whether the duration is unset.
func (r RetentionDuration) IsZero() bool { return r.text == "" }

// String returns the duration as written, for example 7d.
func (r RetentionDuration) String() string { return r.text }

// MarshalYAML writes the duration as written, for example 7d.
func (r RetentionDuration) MarshalYAML() (any, error) { return r.text, nil }

// decodeScalar implements scalarDecoder.
func (r *RetentionDuration) decodeScalar(s string) error {
	v, err := ParseRetentionDuration(s)
	if err != nil {
		return fmt.Errorf("must be a whole number and one suffix s, m, h or d, for example 7d, not %q", s)
	}
	*r = v
	return nil
}

// DatabaseType is database.type.
type DatabaseType string

// The values of database.type of the bundled dialects. The validation takes the list from the
// dialect table (Components.Dialects); these names serve the default (PostgreSQL) and the code
// that builds a configuration by hand.
const (
	PostgreSQL DatabaseType = "postgresql"
	SQLServer  DatabaseType = "sqlserver"
)

// LogLevel is logging.level.
type LogLevel string

// The values of logging.level.
const (
	LogDebug LogLevel = "debug"
	LogInfo  LogLevel = "info"
	LogWarn  LogLevel = "warn"
	LogError LogLevel = "error"
)

// Slog returns the level as a slog.Level; an unknown level is info (validation refuses it).
func (l LogLevel) Slog() slog.Level {
	switch l {
	case LogDebug:
		return slog.LevelDebug
	case LogWarn:
		return slog.LevelWarn
	case LogError:
		return slog.LevelError
	}
	return slog.LevelInfo
}

// CaptureMode is outbox.capture.mode.
type CaptureMode string

// The values of outbox.capture.mode: polling, which this package owns, and the capture modes
// of the bundled dialects (the validation takes the list from Components.Dialects).
const (
	CapturePolling         CaptureMode = "polling"
	CapturePostgresLogical CaptureMode = "postgres-logical"
	CaptureSQLServerCDC    CaptureMode = "sqlserver-cdc"
)

// ClaimMode is outbox.claimMode, an extension (docs/claim-modes.md).
type ClaimMode string

// The values of outbox.claimMode.
const (
	// ClaimModeLease is the documented claim: a claimed row moves to processing under a lease.
	ClaimModeLease ClaimMode = "lease"
	// ClaimModeLock holds the claimed rows under row locks in an open transaction while they
	// are delivered and writes each row once, with its outcome. Only a dialect that offers it
	// (Dialect.ClaimLock) takes it.
	ClaimModeLock ClaimMode = "lock"
)

// OnError is the error strategy of a transform: Fail, Skip or Dead, in this letter case.
type OnError string

// The values of transform.onError.
const (
	OnErrorFail OnError = "Fail"
	OnErrorSkip OnError = "Skip"
	OnErrorDead OnError = "Dead"
)

// RetentionPolicy is retention.outbox.policy or retention.inbox.policy, in upper case.
type RetentionPolicy string

// The values of a retention policy. The inbox accepts AGE and DISABLED.
const (
	RetentionAge      RetentionPolicy = "AGE"
	RetentionCount    RetentionPolicy = "COUNT"
	RetentionDisabled RetentionPolicy = "DISABLED"
)

// Consumption is sources.<name>.consumption: who takes a stored inbox row.
type Consumption string

// The values of a source's consumption, as stored in the consumption column.
const (
	ConsumptionPush Consumption = "push"
	ConsumptionPull Consumption = "pull"
)

// HMACAlgorithm is the algorithm of an hmac auth block: HmacSHA256 or HmacSHA512.
type HMACAlgorithm string

// The values of an HMAC algorithm.
const (
	HmacSHA256 HMACAlgorithm = "HmacSHA256"
	HmacSHA512 HMACAlgorithm = "HmacSHA512"
)

// SignaturePayloadFormat is what an hmac auth block signs. The loader accepts body and
// timestamp-dot-body as well and stores the upper-case names.
type SignaturePayloadFormat string

// The values of signaturePayloadFormat.
const (
	PayloadBody             SignaturePayloadFormat = "BODY"
	PayloadTimestampDotBody SignaturePayloadFormat = "TIMESTAMP_DOT_BODY"
)

// AddressColumn is exchangeFrom, topicFrom or subjectFrom: the outbox column whose value is the
// address of a message.
type AddressColumn string

// The permitted address columns, spelled with the underscore.
const (
	ColumnAggregateType AddressColumn = "aggregate_type"
	ColumnTopic         AddressColumn = "topic"
	ColumnKey           AddressColumn = "key"
)

// splitList splits a comma-separated list (bootstrapServers, servers), trimming each entry and
// dropping empty ones.
func splitList(s string) []string {
	var out []string
	for _, part := range strings.Split(s, ",") {
		if p := strings.TrimSpace(part); p != "" {
			out = append(out, p)
		}
	}
	return out
}
