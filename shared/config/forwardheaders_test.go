package config

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// forwardHeadersSource is a valid HTTP source whose forwardHeaders block is extra (YAML,
// indented under the source).
func forwardHeadersSource(extra string) string {
	return minimalDatabase + `sources:
  hooks:
    path: /hooks
    idempotencyKeyPath: $.id
    eventTypePath: $.type
` + extra
}

func TestForwardHeadersFromTheFileAndTheVariables(t *testing.T) {
	t.Parallel()
	cfg := mustLoad(t, forwardHeadersSource("    forwardHeaders: [X-Github-Event, x-github-delivery]\n"), nil)
	assert.Equal(t, []string{"X-Github-Event", "x-github-delivery"}, cfg.Sources["hooks"].ForwardHeaders)

	// A list of values takes one index per value, like sources.<name>.topics (spec/24); a
	// variable replaces the list of the file.
	cfg = mustLoad(t, forwardHeadersSource("    forwardHeaders: [X-Github-Event]\n"), map[string]string{
		"QUEUEBOX_SOURCES_HOOKS_FORWARDHEADERS_0": "X-Tenant",
		"QUEUEBOX_SOURCES_HOOKS_FORWARDHEADERS_1": "X-Region",
	})
	assert.Equal(t, []string{"X-Tenant", "X-Region"}, cfg.Sources["hooks"].ForwardHeaders)

	// Absent is nil: every received header is forwarded, as before.
	cfg = mustLoad(t, forwardHeadersSource(""), nil)
	assert.Nil(t, cfg.Sources["hooks"].ForwardHeaders)
}

func TestForwardHeadersInConfigCheck(t *testing.T) {
	t.Parallel()
	cfg := mustLoad(t, forwardHeadersSource("    forwardHeaders: [X-Github-Event]\n"), nil)
	out, err := cfg.MaskedYAML()
	require.NoError(t, err)
	assert.Contains(t, string(out), "forwardHeaders:\n      - X-Github-Event\n")

	cfg = mustLoad(t, forwardHeadersSource(""), nil)
	out, err = cfg.MaskedYAML()
	require.NoError(t, err)
	assert.NotContains(t, string(out), "forwardHeaders")
}

func TestForwardHeadersProblems(t *testing.T) {
	t.Parallel()
	many := make([]string, maxForwardHeaders+1)
	for i := range many {
		many[i] = fmt.Sprintf("X-H%d", i)
	}
	tests := []struct {
		name    string
		yaml    string
		env     map[string]string
		wantErr []string
	}{
		{name: "empty list", yaml: "    forwardHeaders: []\n",
			wantErr: []string{"sources.hooks.forwardHeaders (QUEUEBOX_SOURCES_HOOKS_FORWARDHEADERS) must list at least one header name; leave the key out to forward every received header"}},
		{name: "too many", yaml: "    forwardHeaders: [" + strings.Join(many, ", ") + "]\n",
			wantErr: []string{"sources.hooks.forwardHeaders (QUEUEBOX_SOURCES_HOOKS_FORWARDHEADERS) lists 101 header names, more than the 100 allowed"}},
		{name: "not a header name", env: map[string]string{"QUEUEBOX_SOURCES_HOOKS_FORWARDHEADERS_0": "X-Ok", "QUEUEBOX_SOURCES_HOOKS_FORWARDHEADERS_1": "X Bad:"},
			wantErr: []string{`sources.hooks.forwardHeaders[1] (QUEUEBOX_SOURCES_HOOKS_FORWARDHEADERS_1) must be a header name (letters, digits and !#$%&'*+-.^_` + "`" + `|~), not "X Bad:"`}},
		{name: "too long", yaml: "    forwardHeaders: [X-" + strings.Repeat("a", maxForwardHeaderNameLen) + "]\n",
			wantErr: []string{"sources.hooks.forwardHeaders[0] (QUEUEBOX_SOURCES_HOOKS_FORWARDHEADERS_0) is a header name longer than 256 characters"}},
		{name: "hop-by-hop", yaml: "    forwardHeaders: [X-Ok, Transfer-Encoding, proxy-authorization]\n",
			wantErr: []string{
				"sources.hooks.forwardHeaders[1] (QUEUEBOX_SOURCES_HOOKS_FORWARDHEADERS_1) names Transfer-Encoding, a hop-by-hop or framing header, which QueueBox never forwards",
				"sources.hooks.forwardHeaders[2] (QUEUEBOX_SOURCES_HOOKS_FORWARDHEADERS_2) names proxy-authorization, a hop-by-hop or framing header, which QueueBox never forwards",
			}},
		{name: "at the bound", yaml: "    forwardHeaders: [" + strings.Join(many[:maxForwardHeaders], ", ") + "]\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, _, err := loadYAML(t, forwardHeadersSource(tt.yaml), tt.env, nil)
			if tt.wantErr == nil {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Equal(t, tt.wantErr, problemStrings(t, err))
		})
	}
}
