package inbox

import (
	"bytes"
	"encoding/json"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

// This file proves the body scanner (parseJSON and selectValues) against the implementation
// that it replaced, kept here as the reference: decoding the whole body with encoding/json
// (UseNumber) into an any, then selecting each path with github.com/theory/jsonpath.

// referenceParseJSON is the former parseJSON: it decodes one JSON document, keeping numbers
// as their text, and refuses text that is not UTF-8, an empty body, a second document after
// the first, and nesting deeper than MaxNestingDepth.
func referenceParseJSON(body []byte) (any, bool) {
	if !utf8.Valid(body) || tooDeep(body, MaxNestingDepth) {
		return nil, false
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var doc any
	if err := dec.Decode(&doc); err != nil {
		return nil, false
	}
	if len(bytes.TrimLeft(body[dec.InputOffset():], " \t\r\n")) != 0 {
		return nil, false
	}
	return doc, true
}

// referenceLookup is the former valuePath.lookup: the value that the path raw (which
// compiles) selects in a decoded document, as text, and whether there is one.
func referenceLookup(t testing.TB, raw string, doc any) (string, bool) {
	t.Helper()
	p, err := parsePath(raw)
	if err != nil {
		t.Fatalf("parsePath(%q): %v", raw, err)
	}
	nodes := p.Select(doc)
	if len(nodes) != 1 {
		return "", false
	}
	switch v := nodes[0].(type) {
	case nil:
		return "", false
	case string:
		return v, true
	case json.Number:
		return v.String(), true
	case bool:
		return strconv.FormatBool(v), true
	default:
		text, err := compactJSON(v)
		if err != nil {
			return "", false
		}
		return text, true
	}
}

// lookup returns what the path selects in body, one valid JSON document: selectValues for
// this path alone.
func (p *valuePath) lookup(body []byte) (string, bool) {
	var texts [1]string
	var found [1]bool
	selectValues(body, []*valuePath{p}, texts[:], found[:])
	return texts[0], found[0]
}

// scanCase is a body, three paths (empty: none) and what each selects: the text, or
// notFound (an empty path selects nothing, whatever want says).
type scanCase struct {
	body  string
	paths [3]string
	want  [3]string
}

// notFound is the wanted text of a path that selects nothing.
const notFound = "\x00none"

// scanCases cover what the scanner must do as the decoding did: the last of duplicate
// members (with its whole value), strings unescaped as encoding/json unescapes them,
// numbers as written, true and false, null as nothing, objects and arrays as compact JSON
// sorted by name, member names compared after unescaping, negative indices, whitespace, and
// paths that meet a value of another type.
var scanCases = []scanCase{
	// duplicate member names: the last counts, and replaces the whole value
	{`{"a":{"b":1},"a":{"c":2}}`, [3]string{"$.a.b", "$.a.c", "$.a"}, [3]string{notFound, "2", `{"c":2}`}},
	{`{"id":"x","id":"y"}`, [3]string{"$.id"}, [3]string{"y"}},
	{`{"id":"x","id":null}`, [3]string{"$.id"}, [3]string{notFound}},
	{`{"id":null,"id":"x"}`, [3]string{"$.id"}, [3]string{"x"}},
	{`{"a":[1,2],"a":{"0":1}}`, [3]string{"$.a[0]", "$.a['0']", "$.a"}, [3]string{notFound, "1", `{"0":1}`}},
	{`{"a":{"0":1},"a":[5,6]}`, [3]string{"$.a[0]", "$.a['0']", "$.a[-1]"}, [3]string{"5", notFound, "6"}},
	{`[{"a":1,"a":2},{"a":{"a":3,"b":4},"a":{"b":5}}]`, [3]string{"$[0].a", "$[1].a.a", "$[1].a"}, [3]string{"2", notFound, `{"b":5}`}},
	{`{"a":{"b":{"c":1}},"x":0,"a":{"b":{"d":2}}}`, [3]string{"$.a.b.c", "$.a.b.d", "$"}, [3]string{notFound, "2", `{"a":{"b":{"d":2}},"x":0}`}},
	{`{"\u0069d":"escaped","id":"plain"}`, [3]string{"$.id"}, [3]string{"plain"}},
	{`{"id":"plain","\u0069d":"escaped"}`, [3]string{"$.id"}, [3]string{"escaped"}},
	// strings
	{`{"id":"a\u0062c","t":"\ud83d\ude00","g":"\ud800"}`, [3]string{"$.id", "$.t", "$.g"}, [3]string{"abc", "😀", "\uFFFD"}},
	{`{"a":"\ud800\u0041","b":"\udc00\ud800","c":"\ud800\ud800\udc00"}`, [3]string{"$.a", "$.b", "$.c"}, [3]string{"\uFFFDA", "\uFFFD\uFFFD", "\uFFFD\U00010000"}},
	{`{"a":"\"\\\/\b\f\n\r\t","b":"\u0000\u001F\u00e9\u00E9","c":"é😀\u2028"}`, [3]string{"$.a", "$.b", "$.c"}, [3]string{"\"\\/\b\f\n\r\t", "\x00\x1f\u00e9\u00e9", "é😀\u2028"}},
	{`{"a":"","b":"\\","c":"x\\\"y"}`, [3]string{"$.a", "$.b", "$.c"}, [3]string{"", `\`, `x\"y`}},
	{`{"a":"\ud83d","b":"\ude00\ud83d","c":"\ud83d\u0020\ude00"}`, [3]string{"$.a", "$.b", "$.c"}, [3]string{"\uFFFD", "\uFFFD\uFFFD", "\uFFFD \uFFFD"}},
	{`"\ud83d\ude00x"`, [3]string{"$"}, [3]string{"😀x"}},
	// numbers, true, false, null
	{`{"a":12345678901234567890,"b":-0.0e+10,"c":1E400}`, [3]string{"$.a", "$.b", "$.c"}, [3]string{"12345678901234567890", "-0.0e+10", "1E400"}},
	{`{"a":true,"b":false,"c":null}`, [3]string{"$.a", "$.b", "$.c"}, [3]string{"true", "false", notFound}},
	{`null`, [3]string{"$", "$.a", "$[0]"}, [3]string{notFound, notFound, notFound}},
	{` 0 `, [3]string{"$"}, [3]string{"0"}},
	// objects and arrays: compact JSON, members sorted by name, no HTML escapes
	{`{"x":{ "b" : 2 , "a" : [ 1 , { "y" : 1 , "x" : "<&>" } ] },"y":[],"z":{}}`, [3]string{"$.x", "$.y", "$.z"}, [3]string{`{"a":[1,{"x":"<&>","y":1}],"b":2}`, "[]", "{}"}},
	{`{"x":{"\u0062":1,"a":"\ud800","c":1.50}}`, [3]string{"$.x"}, [3]string{`{"a":"` + "\uFFFD" + `","b":1,"c":1.50}`}},
	// member names compared after unescaping
	{`{"\u0069d":1,"a\"b":2,"\ud800":3}`, [3]string{"$.id", `$['a"b']`, "$['\uFFFD']"}, [3]string{"1", "2", "3"}},
	{`{"\/":1,"a\\b":2,"\u00e9":3}`, [3]string{"$['/']", `$.a\b`, "$.é"}, [3]string{"1", "2", "3"}},
	{`{"` + strings.Repeat(`\u0061`, 100) + `":"long"}`, [3]string{"$." + strings.Repeat("a", 100), "$." + strings.Repeat("a", 99)}, [3]string{"long", notFound}},
	{`{"` + strings.Repeat(`\u00e9`, 30) + `":"short"}`, [3]string{"$." + strings.Repeat("é", 30)}, [3]string{"short"}},
	// indices
	{`[1,2,3]`, [3]string{"$[-1]", "$[-3]", "$[-4]"}, [3]string{"3", "1", notFound}},
	{`[1,2,3]`, [3]string{"$[0]", "$[2]", "$[3]"}, [3]string{"1", "3", notFound}},
	{`[]`, [3]string{"$[0]", "$[-1]", "$"}, [3]string{notFound, notFound, "[]"}},
	{`{"a":[[0,[1,2]],"x"]}`, [3]string{"$.a[0][1][-1]", "$.a[-1]", "$.a[-2][-2]"}, [3]string{"2", "x", "0"}},
	// whitespace
	{" \t\r\n{ \"id\" : \"x\" , \"a\" :\n[ 1 , 2 ] } \n", [3]string{"$.id", "$.a[1]", "$.a"}, [3]string{"x", "2", "[1,2]"}},
	// a step that meets a value of another type
	{`{"a":{"0":1},"b":[1],"id":"s"}`, [3]string{"$.a[0]", "$.b.x", "$.id.deeper"}, [3]string{notFound, notFound, notFound}},
	{`{"a":"[{\"b\":1}]","b":"}"}`, [3]string{"$.a[0].b", "$.b"}, [3]string{notFound, "}"}},
	// one path only, and the same path twice
	{`{"id":"k","type":"t"}`, [3]string{"", "$.type", ""}, [3]string{notFound, "t", notFound}},
	{`{"id":"k","id":"l"}`, [3]string{"$.id", "$.id", "$['id']"}, [3]string{"l", "l", "l"}},
}

// TestSelectValues runs the table: every path selects what is wanted, what the reference
// selects, and what the path selects alone.
func TestSelectValues(t *testing.T) {
	t.Parallel()
	for _, c := range scanCases {
		body := []byte(c.body)
		if !parseJSON(body) {
			t.Fatalf("parseJSON(%s) = false", body)
		}
		doc, _ := referenceParseJSON(body)
		paths, texts, found := compileScanPaths(t, c.paths)
		selectValues(body, paths[:], texts[:], found[:])
		for k, raw := range c.paths {
			got := texts[k]
			if !found[k] {
				got = notFound
			}
			if raw == "" {
				c.want[k] = notFound
			}
			if got != c.want[k] {
				t.Errorf("%s in %s = %q, want %q", raw, body, got, c.want[k])
			}
			if raw == "" {
				continue
			}
			want, wantFound := referenceLookup(t, raw, doc)
			if texts[k] != want || found[k] != wantFound {
				t.Errorf("%s in %s = %q/%v, the reference says %q/%v", raw, body, texts[k], found[k], want, wantFound)
			}
			if alone, aloneFound := paths[k].lookup(body); alone != texts[k] || aloneFound != found[k] {
				t.Errorf("%s in %s alone = %q/%v, with the others %q/%v", raw, body, alone, aloneFound, texts[k], found[k])
			}
		}
	}
}

// compileScanPaths compiles up to three paths (empty: none, and so is a path that does not
// compile) and returns them with room for their results.
func compileScanPaths(t testing.TB, raws [3]string) ([3]*valuePath, [3]string, [3]bool) {
	t.Helper()
	var paths [3]*valuePath
	for k, raw := range raws {
		if raw == "" {
			continue
		}
		if p, err := compilePath(raw); err == nil {
			paths[k] = &p
		}
	}
	return paths, [3]string{"stale"}, [3]bool{true, true, true}
}

// FuzzSelectValues compares the scanner with the reference on any body and any three paths:
// parseJSON accepts what the decoding accepted, and on such a body each path that compiles
// selects what decoding and selecting gives, digit for digit and byte for byte, whether it
// is scanned with the others or alone. So that the paths meet the body's members, a fourth
// run takes each path's bytes as the choices of a route through the decoded document
// (docPath) instead.
func FuzzSelectValues(f *testing.F) {
	for _, c := range scanCases {
		f.Add([]byte(c.body), c.paths[0], c.paths[1], c.paths[2])
	}
	for i, d := range docSeeds {
		f.Add([]byte(d), pathSeeds[i%len(pathSeeds)], pathSeeds[(i+7)%len(pathSeeds)], "$")
	}
	f.Add([]byte(benchBody), "$.id", "$.meta.type", "$.customer")
	f.Add([]byte(`{"a":[{"b":[1,{"c":"\u00e9"}]}],"a":[{"b":[2,{"c":"x"}]},3]}`), "$.a[0].b[-1].c", "$.a[-1]", "$.a[0].b")
	f.Fuzz(func(t *testing.T, body []byte, p0, p1, p2 string) {
		raws := [3]string{p0, p1, p2}
		for _, raw := range raws {
			if len(raw) > 1<<10 {
				return // the configuration holds short paths
			}
		}
		doc, refOK := referenceParseJSON(body)
		if ok := parseJSON(body); ok != refOK {
			t.Fatalf("parseJSON(%q) = %v, decoding says %v", body, ok, refOK)
		}
		if !refOK {
			return
		}
		checkScan(t, body, doc, raws)
		routes := [3]string{docPath(doc, p0), docPath(doc, p1), docPath(doc, p2)}
		for _, raw := range routes {
			if _, err := compilePath(raw); err != nil {
				t.Fatalf("the route %q does not compile: %v", raw, err)
			}
		}
		checkScan(t, body, doc, routes)
	})
}

// checkScan compares selectValues and lookup with the reference for three paths.
func checkScan(t *testing.T, body []byte, doc any, raws [3]string) {
	t.Helper()
	paths, texts, found := compileScanPaths(t, raws)
	selectValues(body, paths[:], texts[:], found[:])
	for k, raw := range raws {
		if paths[k] == nil {
			if texts[k] != "" || found[k] {
				t.Fatalf("no path %d, but %q/%v", k, texts[k], found[k])
			}
			continue
		}
		want, wantFound := referenceLookup(t, raw, doc)
		if texts[k] != want || found[k] != wantFound {
			t.Fatalf("%s in %q = %q/%v, the reference says %q/%v", raw, body, texts[k], found[k], want, wantFound)
		}
		if alone, aloneFound := paths[k].lookup(body); alone != want || aloneFound != wantFound {
			t.Fatalf("%s alone in %q = %q/%v, the reference says %q/%v", raw, body, alone, aloneFound, want, wantFound)
		}
	}
}

// docPath returns a path through a decoded document: each byte of choices picks a member of
// an object (of its names in order) or an element of an array (from the end when the byte
// is 0x80 or more), until the choices or the document end. An empty object or array gets a
// name or index that is not there.
func docPath(doc any, choices string) string {
	var b strings.Builder
	b.WriteByte('$')
	for i := 0; i < len(choices); i++ {
		c := int(choices[i])
		switch v := doc.(type) {
		case map[string]any:
			names := slices.Sorted(maps.Keys(v))
			if len(names) == 0 {
				b.WriteString("['none']")
				return b.String()
			}
			name := names[c%len(names)]
			b.WriteString("['" + escapeName(name) + "']")
			doc = v[name]
		case []any:
			if len(v) == 0 {
				b.WriteString("[0]")
				return b.String()
			}
			n := c % 0x80 % len(v)
			if c >= 0x80 {
				b.WriteString("[" + strconv.Itoa(-n-1) + "]")
				doc = v[len(v)-1-n]
			} else {
				b.WriteString("[" + strconv.Itoa(n) + "]")
				doc = v[n]
			}
		default:
			return b.String()
		}
	}
	return b.String()
}

// FuzzUnquote compares the string unescaping with encoding/json's on any valid JSON string
// of UTF-8 text, and a member name with any name.
func FuzzUnquote(f *testing.F) {
	for _, s := range []string{`""`, `"abc"`, `"\ud83d\ude00"`, `"\ud800"`, `"\ud800\u0041"`, `"\udc00\ud800\udc00"`,
		`"\"\\\/\b\f\n\r\t"`, `"é\u00e9"`, `"\uD83D\uDE00"`, `"\ud83d\\ude00"`} {
		f.Add(s, "é")
	}
	f.Fuzz(func(t *testing.T, quoted, name string) {
		b := []byte(quoted)
		if !utf8.Valid(b) || !json.Valid(b) || b[0] != '"' {
			return
		}
		var want string
		if err := json.Unmarshal(b, &want); err != nil {
			t.Fatalf("json.Unmarshal(%q): %v", b, err)
		}
		if end := stringEnd(b, 0); end != len(b) {
			t.Fatalf("stringEnd(%q) = %d, want %d", b, end, len(b))
		}
		if got := unquote(b[1 : len(b)-1]); got != want {
			t.Fatalf("unquote(%q) = %q, encoding/json says %q", b, got, want)
		}
		if !nameIs(b[1:len(b)-1], want) {
			t.Fatalf("nameIs(%q, %q) = false", b, want)
		}
		if got := nameIs(b[1:len(b)-1], name); got != (name == want) {
			t.Fatalf("nameIs(%q, %q) = %v, the name unescapes to %q", b, name, got, want)
		}
	})
}

// TestScanDoesNotAllocate: the check of a body allocates nothing, and the scan allocates only
// the texts of the values that it selects.
// It does not run in parallel, because AllocsPerRun may not, and not under the race
// detector, which makes sync.Pool (json.Valid's scanners) drop what it holds at random.
func TestScanDoesNotAllocate(t *testing.T) {
	if raceEnabled {
		t.Skip("sync.Pool drops its items at random under the race detector")
	}
	body := []byte(benchBody)
	if n := testing.AllocsPerRun(20, func() { parseJSON(body) }); n != 0 {
		t.Fatalf("parseJSON allocated %v times, want 0", n)
	}
	paths, texts, found := compileScanPaths(t, [3]string{"$.id", "$.meta.type", "$.customer"})
	if n := testing.AllocsPerRun(20, func() { selectValues(body, paths[:], texts[:], found[:]) }); n != 3 {
		t.Fatalf("selectValues allocated %v times, want 3 (the three texts)", n)
	}
	paths, texts, found = compileScanPaths(t, [3]string{"$.none", "$.items[-1].price", "$.x"})
	if n := testing.AllocsPerRun(20, func() { selectValues(body, paths[:], texts[:], found[:]) }); n != 1 {
		t.Fatalf("selectValues allocated %v times, want 1 (one number)", n)
	}
}
