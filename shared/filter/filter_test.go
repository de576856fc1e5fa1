package filter_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/alternayte/queuebox/shared/filter"
)

func TestPass(t *testing.T) {
	t.Parallel()
	yes := true
	tests := []struct {
		name    string
		filter  filter.Config
		headers map[string]string
		want    bool
	}{
		{name: "no rule", headers: nil, want: true},
		{name: "equals", filter: req(filter.Rule{Header: "X-Env", Equals: new("prod")}), headers: map[string]string{"x-env": "prod"}, want: true},
		{name: "equals is case-sensitive on the value", filter: req(filter.Rule{Header: "X-Env", Equals: new("prod")}), headers: map[string]string{"x-env": "PROD"}},
		{name: "equals matches the name in any case", filter: req(filter.Rule{Header: "x-env", Equals: new("prod")}), headers: map[string]string{"X-ENV": "prod"}, want: true},
		{name: "equals without the header", filter: req(filter.Rule{Header: "X-Env", Equals: new("")})},
		{name: "equals an empty value", filter: req(filter.Rule{Header: "X-Env", Equals: new("")}), headers: map[string]string{"X-Env": ""}, want: true},
		{name: "in", filter: req(filter.Rule{Header: "X-Region", In: []string{"eu", "us"}}), headers: map[string]string{"X-Region": "eu"}, want: true},
		{name: "in, no entry", filter: req(filter.Rule{Header: "X-Region", In: []string{"eu", "us"}}), headers: map[string]string{"X-Region": "EU"}},
		{name: "in without the header", filter: req(filter.Rule{Header: "X-Region", In: []string{"eu"}})},
		{name: "matches one segment", filter: req(filter.Rule{Header: "X-Event", Matches: new("order.*")}), headers: map[string]string{"X-Event": "order.paid"}, want: true},
		{name: "matches, one segment only", filter: req(filter.Rule{Header: "X-Event", Matches: new("order.*")}), headers: map[string]string{"X-Event": "order.paid.v2"}},
		{name: "matches any text", filter: req(filter.Rule{Header: "X-Event", Matches: new("order.**")}), headers: map[string]string{"X-Event": "order.paid.v2"}, want: true},
		{name: "matches without the header", filter: req(filter.Rule{Header: "X-Event", Matches: new("**")})},
		{name: "exists", filter: req(filter.Rule{Header: "X-Signed", Exists: &yes}), headers: map[string]string{"x-signed": ""}, want: true},
		{name: "exists without the header", filter: req(filter.Rule{Header: "X-Signed", Exists: &yes}), headers: map[string]string{"x-other": "1"}},
		{name: "require needs every rule", filter: req(
			filter.Rule{Header: "A", Equals: new("1")}, filter.Rule{Header: "B", Equals: new("2")}),
			headers: map[string]string{"a": "1", "b": "3"}},
		{name: "require, all match", filter: req(
			filter.Rule{Header: "A", Equals: new("1")}, filter.Rule{Header: "B", Equals: new("2")}),
			headers: map[string]string{"a": "1", "b": "2"}, want: true},
		{name: "exclude, no rule matches", filter: filter.Config{Exclude: []filter.Rule{{Header: "X-Test", Exists: &yes}, {Header: "X-Env", Equals: new("dev")}}},
			headers: map[string]string{"X-Env": "prod"}, want: true},
		{name: "exclude, one rule matches", filter: filter.Config{Exclude: []filter.Rule{{Header: "X-Test", Exists: &yes}, {Header: "X-Env", Equals: new("dev")}}},
			headers: map[string]string{"X-Env": "dev"}},
		{name: "exclude with equals does not match a missing header", filter: filter.Config{Exclude: []filter.Rule{{Header: "X-Env", Equals: new("dev")}}}, want: true},
		{name: "require and exclude", filter: filter.Config{
			Require: []filter.Rule{{Header: "X-Event", Matches: new("order.**")}},
			Exclude: []filter.Rule{{Header: "X-Event", In: []string{"order.test"}}}},
			headers: map[string]string{"X-Event": "order.test"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f, err := filter.New(tt.filter)
			require.NoError(t, err)
			assert.Equal(t, tt.want, f.Pass(filter.FoldLookup(tt.headers)))
		})
	}
}

func TestNilFilterPasses(t *testing.T) {
	t.Parallel()
	var f *filter.Filter
	assert.True(t, f.Empty())
	assert.True(t, f.Pass(filter.FoldLookup(nil)))
	empty, err := filter.New(filter.Config{})
	require.NoError(t, err)
	assert.True(t, empty.Empty())
}

func TestNewRefusesBadRules(t *testing.T) {
	t.Parallel()
	no := false
	tests := []struct {
		name    string
		rule    filter.Rule
		wantErr string
	}{
		{name: "no header", rule: filter.Rule{Equals: new("x")}, wantErr: "needs a header"},
		{name: "no condition", rule: filter.Rule{Header: "a"}, wantErr: "exactly one"},
		{name: "two conditions", rule: filter.Rule{Header: "a", Equals: new("x"), Matches: new("x")}, wantErr: "exactly one"},
		{name: "empty in", rule: filter.Rule{Header: "a", In: []string{}}, wantErr: "in must not be empty"},
		{name: "exists false", rule: filter.Rule{Header: "a", Exists: &no}, wantErr: "exists must be true"},
		{name: "triple star", rule: filter.Rule{Header: "a", Matches: new("a.***")}, wantErr: "***"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := filter.New(filter.Config{Exclude: []filter.Rule{tt.rule}})
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.wantErr)
			assert.Contains(t, err.Error(), "filter.exclude[0]")
		})
	}
}

func req(rules ...filter.Rule) filter.Config { return filter.Config{Require: rules} }
