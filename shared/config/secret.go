package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
)

// MaxSecretFileBytes is the largest file that a file: secret may name: 64 KiB, far above any
// password, token or key, so that a mistaken path (file:/dev/zero, a log file) stops the load
// instead of reading without end. docs/configuration-bounds.md documents it.
const MaxSecretFileBytes = 64 << 10

// errSecretTooLarge completes "names the secret file <name>, which ...".
var errSecretTooLarge = fmt.Errorf("is larger than %d bytes (64 KiB), the largest secret file", MaxSecretFileBytes)

// readSecretFile reads a file: secret from the file system: a regular file of at most
// MaxSecretFileBytes. A device, a pipe or a directory is refused before it is read, and no more
// than MaxSecretFileBytes+1 bytes are ever read. The error completes "names the secret file
// <name>, which ...".
func readSecretFile(name string) ([]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, fmt.Errorf("cannot be read: %w", err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("cannot be read: %w", err)
	}
	if !info.Mode().IsRegular() {
		return nil, errors.New("is not a regular file")
	}
	if info.Size() > MaxSecretFileBytes {
		return nil, errSecretTooLarge
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxSecretFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("cannot be read: %w", err)
	}
	if len(data) > MaxSecretFileBytes {
		return nil, errSecretTooLarge
	}
	return data, nil
}

// boundedSecretReader reads a file: secret through readFile, a LoadOptions.ReadFile, and refuses
// a file larger than MaxSecretFileBytes.
func boundedSecretReader(readFile func(string) ([]byte, error)) func(string) ([]byte, error) {
	return func(name string) ([]byte, error) {
		data, err := readFile(name)
		if err != nil {
			return nil, fmt.Errorf("cannot be read: %w", err)
		}
		if len(data) > MaxSecretFileBytes {
			return nil, errSecretTooLarge
		}
		return data, nil
	}
}

// The texts that a Secret prints instead of its value.
const (
	maskedSecret = "Secret(***)"
	emptySecret  = "Secret(empty)"
)

// Secret holds a credential: a password, a token, a key or a client secret. It prints as
// Secret(***), or Secret(empty) when it holds nothing, through fmt (every verb), log/slog,
// encoding/json and yaml.v3. Reveal returns the value.
//
// The value sits behind a pointer, so that even a struct that holds a Secret in an unexported
// field and is printed with %v shows an address, never the text. The zero Secret is empty.
type Secret struct {
	value *string
}

// NewSecret returns a Secret that holds value.
func NewSecret(value string) Secret {
	return Secret{value: &value}
}

// Reveal returns the credential. Call it only where the value is sent or compared, never to
// print or log it.
func (s Secret) Reveal() string {
	if s.value == nil {
		return ""
	}
	return *s.value
}

// IsEmpty reports whether the secret holds no text.
func (s Secret) IsEmpty() bool {
	return s.Reveal() == ""
}

// String returns Secret(***), or Secret(empty) for an empty secret.
func (s Secret) String() string {
	if s.IsEmpty() {
		return emptySecret
	}
	return maskedSecret
}

// GoString returns the same mask as String, so %#v shows no credential either.
func (s Secret) GoString() string {
	return s.String()
}

// Format writes the mask for every verb; %q quotes it.
func (s Secret) Format(f fmt.State, verb rune) {
	if verb == 'q' {
		_, _ = fmt.Fprint(f, strconv.Quote(s.String()))
		return
	}
	_, _ = fmt.Fprint(f, s.String())
}

// LogValue makes log/slog print the mask.
func (s Secret) LogValue() slog.Value {
	return slog.StringValue(s.String())
}

// MarshalJSON encodes the mask as a JSON string.
func (s Secret) MarshalJSON() ([]byte, error) {
	return json.Marshal(s.String())
}

// MarshalText returns the mask, for encoders that use encoding.TextMarshaler.
func (s Secret) MarshalText() ([]byte, error) {
	return []byte(s.String()), nil
}

// MarshalYAML encodes the mask for gopkg.in/yaml.v3.
func (s Secret) MarshalYAML() (any, error) {
	return s.String(), nil
}

// ConnectionURL is a URL that may carry a password: database.url, the RabbitMQ destination url
// and the RabbitMQ source connectionUrl. It prints with the password masked (see MaskURL) through
// fmt, log/slog, encoding/json and yaml.v3; Reveal returns the whole URL. Unlike a Secret, it
// takes no file: reference: a file: string is read literally.
type ConnectionURL struct {
	value *string
}

// NewConnectionURL returns a ConnectionURL that holds raw.
func NewConnectionURL(raw string) ConnectionURL {
	return ConnectionURL{value: &raw}
}

// Reveal returns the URL with its password.
func (u ConnectionURL) Reveal() string {
	if u.value == nil {
		return ""
	}
	return *u.value
}

// IsEmpty reports whether the URL is empty.
func (u ConnectionURL) IsEmpty() bool {
	return u.Reveal() == ""
}

// String returns the URL with its password masked.
func (u ConnectionURL) String() string {
	return MaskURL(u.Reveal())
}

// GoString returns the masked URL.
func (u ConnectionURL) GoString() string {
	return u.String()
}

// Format writes the masked URL for every verb; %q quotes it.
func (u ConnectionURL) Format(f fmt.State, verb rune) {
	if verb == 'q' {
		_, _ = fmt.Fprint(f, strconv.Quote(u.String()))
		return
	}
	_, _ = fmt.Fprint(f, u.String())
}

// LogValue makes log/slog print the masked URL.
func (u ConnectionURL) LogValue() slog.Value {
	return slog.StringValue(u.String())
}

// MarshalJSON encodes the masked URL.
func (u ConnectionURL) MarshalJSON() ([]byte, error) {
	return json.Marshal(u.String())
}

// MarshalText returns the masked URL.
func (u ConnectionURL) MarshalText() ([]byte, error) {
	return []byte(u.String()), nil
}

// MarshalYAML encodes the masked URL for gopkg.in/yaml.v3.
func (u ConnectionURL) MarshalYAML() (any, error) {
	return u.String(), nil
}
