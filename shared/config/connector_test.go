package config

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/alternayte/queuebox/shared/kind"
)

// testBlock is a connector block for the refusals of Components, which need a block of each
// shape.
type testBlock struct {
	TimeoutMs Milliseconds `yaml:"timeoutMs"`
}

func (*testBlock) Check(Check) {}

// A Components whose connectors clash is refused before anything loads: a kind twice, the
// built-in kind, a block that is not a pointer to a struct, a bound that contradicts the
// table's.
func TestComponentsRefuseClashingConnectors(t *testing.T) {
	t.Parallel()
	block := &BlockSpec{Required: []string{"x"}, New: func() Block { return &testBlock{} }}
	for _, tc := range []struct {
		name  string
		specs []ConnectorSpec
		want  string
	}{
		{"twice", []ConnectorSpec{{Kind: "foo", Destination: block}, {Kind: "foo", Destination: block}}, `the connector kind "foo" is registered twice or is built in`},
		{"built in", []ConnectorSpec{{Kind: kind.HTTP, Destination: block}}, `the connector kind "http" is registered twice or is built in`},
		{"bound", []ConnectorSpec{{Kind: "foo", Destination: &BlockSpec{Required: []string{"x"}, New: block.New,
			Bounds: []Bound{{Key: "timeoutMs", Max: 5, Why: "w"}}}}}, "bounds destinations.*.timeoutMs at 5, which is bounded at 2147483647 already"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := testComponents()
			c.Connectors = tc.specs
			_, _, err := Load(LoadOptions{Components: c, ReadFile: memFiles{DefaultConfigFile: minimalDatabase}.read})
			require.Error(t, err)
			assert.True(t, strings.Contains(err.Error(), tc.want), "%v", err)
			assert.ErrorContains(t, (&Config{}).Validate(c), tc.want)
		})
	}
	c := testComponents()
	_, _, err := Load(LoadOptions{Components: c, ReadFile: memFiles{DefaultConfigFile: minimalDatabase}.read})
	assert.NoError(t, err, "the real connectors do not clash")
}

// fooBlock is the destination block of a connector kind that only this test registers.
type fooBlock struct {
	Endpoint  string       `yaml:"endpoint"`
	Mode      string       `yaml:"mode"`
	TimeoutMs Milliseconds `yaml:"timeoutMs"`
}

func (b *fooBlock) Check(c Check) {
	c.Key("endpoint").Required(b.Endpoint)
	c.Key("mode").OneOf(b.Mode, "fast", "safe")
}

func (b *fooBlock) Normalize() { b.Mode = strings.ToLower(b.Mode) }

// A kind that a connector registers, and that this package names nowhere, loads through its
// ConnectorSpec alone: the loader selects it by its required keys, fills the defaults of its
// New, takes its keys from the file and the environment, normalizes it, reports its problems
// under their key paths and enforces its bounds.
func TestANewConnectorKindLoadsThroughItsSpec(t *testing.T) {
	t.Parallel()
	c := testComponents()
	c.Connectors = append(append([]ConnectorSpec(nil), c.Connectors...), ConnectorSpec{Kind: "foo", Destination: &BlockSpec{
		Required: []string{"endpoint"},
		New:      func() Block { return &fooBlock{Mode: "safe", TimeoutMs: 1000} },
		Bounds:   []Bound{{Key: "timeoutMs", Max: MaxMillis, Why: WhyMillis}},
	}})
	body := minimalDatabase + "destinations:\n  f:\n    endpoint: e1\n    mode: FAST\n"
	cfg, _, err := Load(LoadOptions{Components: c, ReadFile: memFiles{DefaultConfigFile: body}.read,
		Env: map[string]string{"QUEUEBOX_DESTINATIONS_F_TIMEOUTMS": "2500"}})
	require.NoError(t, err)
	d := cfg.Destinations["f"]
	assert.Equal(t, DestinationKind("foo"), d.Kind)
	assert.Equal(t, &fooBlock{Endpoint: "e1", Mode: "fast", TimeoutMs: 2500}, d.Block)

	body = minimalDatabase + "destinations:\n  f:\n    endpoint: ' '\n    mode: slow\n    timeoutMs: 2147483648\n"
	_, _, err = Load(LoadOptions{Components: c, ReadFile: memFiles{DefaultConfigFile: body}.read})
	require.Error(t, err)
	assert.ElementsMatch(t, []string{
		"destinations.f.endpoint (QUEUEBOX_DESTINATIONS_F_ENDPOINT) is required",
		`destinations.f.mode (QUEUEBOX_DESTINATIONS_F_MODE) must be fast or safe, not "slow"`,
		"destinations.f.timeoutMs (QUEUEBOX_DESTINATIONS_F_TIMEOUTMS) must be at most 2147483647, not 2147483648",
	}, problemStrings(t, err))
}
