package deploy_test

import (
	"fmt"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"
)

// repoRoot is the repository root, relative to this package.
const repoRoot = ".."

// parseCFN parses a CloudFormation template in YAML into maps, lists and scalars. A
// short-form intrinsic function (!Ref X, !Sub s, !GetAtt A.B, !If [...], ...) becomes the
// long form ({"Ref": "X"}, {"Fn::Sub": s}, {"Fn::GetAtt": ["A", "B"]}, {"Fn::If": [...]}),
// so that the checks see one form only.
func parseCFN(data []byte) (map[string]any, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("parsing YAML: %w", err)
	}
	v, err := cfnValue(&doc)
	if err != nil {
		return nil, err
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("the template is %T, not a map", v)
	}
	return m, nil
}

func cfnValue(n *yaml.Node) (any, error) {
	var v any
	switch n.Kind {
	case yaml.DocumentNode:
		if len(n.Content) == 0 {
			return nil, nil
		}
		return cfnValue(n.Content[0])
	case yaml.AliasNode:
		return cfnValue(n.Alias)
	case yaml.MappingNode:
		m := make(map[string]any, len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			key := n.Content[i].Value
			if _, dup := m[key]; dup {
				return nil, fmt.Errorf("line %d: key %s appears twice", n.Content[i].Line, key)
			}
			val, err := cfnValue(n.Content[i+1])
			if err != nil {
				return nil, err
			}
			m[key] = val
		}
		v = m
	case yaml.SequenceNode:
		l := make([]any, 0, len(n.Content))
		for _, c := range n.Content {
			val, err := cfnValue(c)
			if err != nil {
				return nil, err
			}
			l = append(l, val)
		}
		v = l
	case yaml.ScalarNode:
		if isIntrinsicTag(n.Tag) {
			v = n.Value
		} else if err := n.Decode(&v); err != nil {
			return nil, fmt.Errorf("line %d: %w", n.Line, err)
		}
	}
	if !isIntrinsicTag(n.Tag) {
		return v, nil
	}
	name := strings.TrimPrefix(n.Tag, "!")
	switch name {
	case "Ref", "Condition":
		return map[string]any{name: v}, nil
	case "GetAtt":
		if s, ok := v.(string); ok {
			res, attr, _ := strings.Cut(s, ".")
			v = []any{res, attr}
		}
	}
	return map[string]any{"Fn::" + name: v}, nil
}

// isIntrinsicTag reports whether tag is a CloudFormation short form (!Ref), not a YAML
// standard tag (!!str).
func isIntrinsicTag(tag string) bool {
	return strings.HasPrefix(tag, "!") && !strings.HasPrefix(tag, "!!")
}

// scheduleRate matches rate(N unit); scheduleCron matches cron(...) with six fields.
var (
	scheduleRate = regexp.MustCompile(`^rate\(([0-9]+) (minute|minutes|hour|hours|day|days)\)$`)
	scheduleCron = regexp.MustCompile(`^cron\(([^()]+)\)$`)
	cronField    = regexp.MustCompile(`^[0-9A-Za-z*?/,#LW-]+$`)
)

// checkSchedule reports what is wrong with an EventBridge schedule expression: rate(N unit)
// with N at least 1 and the singular unit for 1 only, or cron() with six fields.
func checkSchedule(expr string) error {
	if m := scheduleRate.FindStringSubmatch(expr); m != nil {
		n, err := strconv.Atoi(m[1])
		if err != nil || n < 1 || m[1][0] == '0' {
			return fmt.Errorf("%q: the value of a rate must be a whole number from 1", expr)
		}
		singular := !strings.HasSuffix(m[2], "s")
		if singular != (n == 1) {
			return fmt.Errorf("%q: the unit must be singular for 1 and plural otherwise", expr)
		}
		return nil
	}
	if m := scheduleCron.FindStringSubmatch(expr); m != nil {
		fields := strings.Fields(m[1])
		if len(fields) != 6 {
			return fmt.Errorf("%q: a cron expression has 6 fields (minutes hours day-of-month month day-of-week year), not %d", expr, len(fields))
		}
		for _, f := range fields {
			if !cronField.MatchString(f) {
				return fmt.Errorf("%q: field %q is not a cron field", expr, f)
			}
		}
		if fields[2] != "?" && fields[4] != "?" {
			return fmt.Errorf("%q: day-of-month or day-of-week must be ?", expr)
		}
		return nil
	}
	return fmt.Errorf("%q is neither rate(N unit) nor cron(6 fields)", expr)
}

func TestCheckSchedule(t *testing.T) {
	t.Parallel()
	tests := []struct {
		expr    string
		wantErr bool
	}{
		{"rate(1 minute)", false},
		{"rate(5 minutes)", false},
		{"rate(1 hour)", false},
		{"rate(12 hours)", false},
		{"rate(1 day)", false},
		{"rate(7 days)", false},
		{"cron(0/5 * * * ? *)", false},
		{"cron(15 10 ? * MON-FRI *)", false},
		{"rate(1 minutes)", true},
		{"rate(2 minute)", true},
		{"rate(0 minutes)", true},
		{"rate(01 minute)", true},
		{"rate(1 second)", true},
		{"rate(1minute)", true},
		{"cron(0 * * * *)", true},
		{"cron(0 * * * * *)", true},
		{"cron(0 * * * ? * *)", true},
		{"every minute", true},
		{"", true},
	}
	for _, tt := range tests {
		t.Run(tt.expr, func(t *testing.T) {
			t.Parallel()
			err := checkSchedule(tt.expr)
			if tt.wantErr {
				assert.Error(t, err)
			} else {
				assert.NoError(t, err)
			}
		})
	}
}

var (
	routeMethods = []string{"ANY", "GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"}
	routeSegment = regexp.MustCompile(`^([A-Za-z0-9._~-]+|\{[A-Za-z0-9_]+\}|\{proxy\+\})$`)
)

// checkRoute reports what is wrong with an HTTP API route: a method and a path of segments,
// where {proxy+} (a greedy path variable) may only be the last segment.
func checkRoute(method, path string) error {
	if !slices.Contains(routeMethods, method) {
		return fmt.Errorf("method %q is not one of %v", method, routeMethods)
	}
	if path == "/" {
		return nil
	}
	if !strings.HasPrefix(path, "/") || strings.HasSuffix(path, "/") {
		return fmt.Errorf("path %q must start with / and not end with /", path)
	}
	segs := strings.Split(path[1:], "/")
	for i, s := range segs {
		if !routeSegment.MatchString(s) {
			return fmt.Errorf("path %q: segment %q is not a name or a {variable}", path, s)
		}
		if s == "{proxy+}" && i != len(segs)-1 {
			return fmt.Errorf("path %q: {proxy+} must be the last segment", path)
		}
	}
	return nil
}

func TestCheckRoute(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, method, path string
		wantErr            bool
	}{
		{"greedy last", "POST", "/inbox/{proxy+}", false},
		{"root", "GET", "/", false},
		{"variable", "GET", "/admin/outbox/{id}", false},
		{"any", "ANY", "/health/{proxy+}", false},
		{"greedy in the middle", "POST", "/inbox/{proxy+}/x", true},
		{"bad method", "FETCH", "/inbox", true},
		{"lower case method", "post", "/inbox", true},
		{"relative", "POST", "inbox/{proxy+}", true},
		{"trailing slash", "POST", "/inbox/", true},
		{"empty segment", "POST", "/inbox//x", true},
		{"broken variable", "POST", "/inbox/{proxy", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := checkRoute(tt.method, tt.path)
			if tt.wantErr {
				assert.Error(t, err)
			} else {
				assert.NoError(t, err)
			}
		})
	}
}

func TestParseCFNShortForms(t *testing.T) {
	t.Parallel()
	src := `
A: !Ref Param
B: !Sub "x-${AWS::Region}"
C: !GetAtt Fn.Arn
D: !If [Cond, !Ref X, !Ref AWS::NoValue]
E: !Join ["", [a, !Ref Y]]
F: [1, "2", true]
`
	got, err := parseCFN([]byte(src))
	require.NoError(t, err)
	assert.Equal(t, map[string]any{
		"A": map[string]any{"Ref": "Param"},
		"B": map[string]any{"Fn::Sub": "x-${AWS::Region}"},
		"C": map[string]any{"Fn::GetAtt": []any{"Fn", "Arn"}},
		"D": map[string]any{"Fn::If": []any{"Cond", map[string]any{"Ref": "X"}, map[string]any{"Ref": "AWS::NoValue"}}},
		"E": map[string]any{"Fn::Join": []any{"", []any{"a", map[string]any{"Ref": "Y"}}}},
		"F": []any{1, "2", true},
	}, got)

	_, err = parseCFN([]byte("A: 1\nA: 2\n"))
	assert.Error(t, err, "a repeated key is an error")
}

// readRepoFile reads a file of the repository.
func readRepoFile(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(repoRoot + "/" + path)
	require.NoError(t, err)
	return data
}

// mapAt returns m[key] as a map, or nil.
func mapAt(m map[string]any, key string) map[string]any {
	v, _ := m[key].(map[string]any)
	return v
}
