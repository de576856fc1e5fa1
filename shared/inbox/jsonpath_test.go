package inbox

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCompilePathAcceptsWhatTheConfigAccepts runs the paths of the configuration's own
// definiteness test (shared/config) through the compiler, so a path that loads also runs.
func TestCompilePathAcceptsWhatTheConfigAccepts(t *testing.T) {
	t.Parallel()
	doc := []byte(`{"id":"a","data":{"object":{"customer":"c"}},"a b":1,"x":2,"a":[0,1,{"b":"deep"}],"it's":3,"x-id":"hy","1st":"digit","a\\b":"slash"}`)
	require.True(t, parseJSON(doc))
	tests := []struct {
		path string
		want string
		ok   bool
	}{
		{path: "$", want: `{"1st":"digit","a":[0,1,{"b":"deep"}],"a b":1,"a\\b":"slash","data":{"object":{"customer":"c"}},"id":"a","it's":3,"x":2,"x-id":"hy"}`, ok: true},
		{path: "$.id", want: "a", ok: true},
		{path: "$.data.object.customer", want: "c", ok: true},
		{path: "$['a b']", want: "1", ok: true},
		{path: `$["x"]`, want: "2", ok: true},
		{path: "$[0]"},
		{path: "$[-1]"},
		{path: "$.a[2].b", want: "deep", ok: true},
		{path: "$.a[-1].b", want: "deep", ok: true},
		{path: "$.a[ 2 ].b", want: "deep", ok: true},
		{path: `$['it\'s']`, want: "3", ok: true},
		{path: "$.x-id", want: "hy", ok: true},
		{path: "$.1st", want: "digit", ok: true},
		{path: `$.a\b`, want: "slash", ok: true},
		{path: "$.missing.deeper"},
		{path: "$.id.deeper"},
	}
	for _, tt := range tests {
		p, err := compilePath(tt.path)
		require.NoError(t, err, tt.path)
		got, ok := p.lookup(doc)
		assert.Equal(t, tt.ok, ok, tt.path)
		assert.Equal(t, tt.want, got, tt.path)
	}
}

func TestCompilePathRefusesIndefinitePaths(t *testing.T) {
	t.Parallel()
	for _, p := range []string{"", "id", "$..id", "$.*", "$[*]", "$.a[*]", "$[?(@.a)]", "$[?@.a]", "$[0,1]", "$[0:2]",
		"$['a','b']", "$.", "$[", "$['a'", "$.a()", "$ .a", "$.a..b"} {
		_, err := compilePath(p)
		assert.Error(t, err, p)
	}
}

func TestTooDeep(t *testing.T) {
	t.Parallel()
	assert.False(t, tooDeep([]byte(strings.Repeat("[", 3)+strings.Repeat("]", 3)), 3))
	assert.True(t, tooDeep([]byte(strings.Repeat("[", 4)), 3))
	assert.False(t, tooDeep([]byte(`{"a":"[[[[[[\"[[[[[["}`), 3))
	assert.True(t, tooDeep([]byte(`{"a":"\\",  "b":[[[[]]]]}`), 3))
}

func TestCleanCorrelationID(t *testing.T) {
	t.Parallel()
	assert.Equal(t, "ab", CleanCorrelationID("a\r\nb"))
	assert.Equal(t, strings.Repeat("é", 128), CleanCorrelationID(strings.Repeat("é", 200)))
	assert.Equal(t, strings.Repeat("😀", 64), CleanCorrelationID(strings.Repeat("😀", 100)))
	assert.Equal(t, "", CleanCorrelationID("\x00\x1f\x7f\u0080\u009f"))
}
